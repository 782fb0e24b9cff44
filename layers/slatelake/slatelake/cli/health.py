"""``health``: what maintenance would find in a lake, from its catalog alone.

One call, ``lake.maintenance.health()``, on a read-only session: no data
file is read or listed and nothing is written, so read-only credentials do.
The text form is a summary and one row per live table (``text_store``);
``--json`` prints ``LakeHealth.to_dict()``. The estimate uses the seed's
default policy (retention 7 days, cleanup grace 1 day, 12 small files,
rewrite at 20% deleted rows, DuckLake's own target file size).
"""

from __future__ import annotations

import argparse
from typing import Any

from slatelake.cli import output
from slatelake.cli.arguments import add_json, lake_verb, open_lake


def _cmd_health(args: argparse.Namespace) -> int:
    output.emit(output.HEALTH, open_lake(args).maintenance.health(), args.json)
    return 0


def register(sub: Any) -> None:
    p = lake_verb(
        sub,
        "health",
        _cmd_health,
        "Show a lake's health from its catalog alone (read-only; no data file is "
        "listed): per table files, bytes, small files, deletes and inlined rows; "
        "lake-wide snapshots, history and scheduled bytes, and what a pass with the "
        "default policy would reclaim.",
    )
    add_json(p)
