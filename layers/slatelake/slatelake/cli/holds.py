"""``protect``, ``unprotect`` and ``protected``: retention holds from a shell.

A hold keeps one snapshot through every expiry, whoever runs it, until it
is removed; ``hold`` is another verb (the folding process), so these are
named apart from it. Each is one call on ``lake.holds``.
"""

from __future__ import annotations

import argparse
from typing import Any

from slatelake.cli import output
from slatelake.cli.arguments import add_json, catalog_text, lake_verb, open_lake, snapshot_id
from slatelake.cli.common import caller


def _cmd_protect(args: argparse.Namespace) -> int:
    change = open_lake(args).holds.protect(args.snapshot, args.name, note=args.note, by=caller())
    output.emit(output.HOLD_PLACED, output.AtLake(args.lake, change), args.json)
    return 0


def _cmd_unprotect(args: argparse.Namespace) -> int:
    change = open_lake(args).holds.unprotect(args.name, by=caller())
    output.emit(output.HOLD_REMOVED, output.AtLake(args.lake, change), args.json)
    return 0


def _cmd_protected(args: argparse.Namespace) -> int:
    found = open_lake(args).holds.list()
    output.emit(output.HOLDS, output.AtLake(args.lake, found), args.json)
    return 0


def register(sub: Any) -> None:
    p = lake_verb(
        sub,
        "protect",
        _cmd_protect,
        "Hold a snapshot: every expiry keeps it until the hold is removed.",
    )
    p.description = (
        "Place a retention hold named NAME on SNAPSHOT_ID: every expiry (a pass, the Lambda, "
        "a direct ducklake_expire_snapshots call through slatelake) keeps it, and a pass "
        "deletes no file while a held snapshot's file is scheduled for deletion. The "
        "snapshot must be in the catalog. The same NAME on the same snapshot again changes "
        "nothing; NAME on another snapshot is refused."
    )
    p.add_argument("snapshot", metavar="SNAPSHOT_ID", type=snapshot_id, help="snapshot id")
    p.add_argument("--name", required=True, type=catalog_text, help="the hold's name")
    p.add_argument("--note", type=catalog_text, help="why it is held (shown by protected)")
    add_json(p, "print the hold as JSON")
    p = lake_verb(sub, "unprotect", _cmd_unprotect, "Remove a retention hold by name.")
    p.add_argument("name", metavar="NAME", type=catalog_text, help="the hold's name")
    add_json(p, "print the removed hold as JSON")
    p = lake_verb(sub, "protected", _cmd_protected, "List the retention holds.")
    add_json(p, "print the holds as JSON")
