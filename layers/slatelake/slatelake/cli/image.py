"""``slatelake image``: write a catalog image now, or print how stock DuckDB
attaches the newest one (``lake.images``). The holder's own image cadence is
driven by ``slatelake hold`` (``cli/hold.py``).

An image is the catalog as of one folded slot (its seq), a DuckDB file under
``images/`` in the lake root that stock DuckLake attaches read-only. It is as
fresh as its seq: commits after it are in the log, not in the image.
"""

from __future__ import annotations

import argparse
from typing import Any

from slatelake.cli import output
from slatelake.cli.arguments import add_json, lake_verb, open_lake


def _cmd_image(args: argparse.Namespace) -> int:
    images = open_lake(args).images
    if args.print_attach:
        output.emit(output.ATTACH, images.newest(), args.json)
    else:
        output.emit(output.IMAGE_WRITTEN, images.write(), args.json)
    return 0


def register(sub: Any) -> None:
    p = lake_verb(
        sub,
        "image",
        _cmd_image,
        "Write a catalog image now: the catalog as of the store's fold cursor, as a DuckDB "
        "file under LAKE/images/ that stock DuckLake attaches read-only. An image is as fresh "
        "as its seq (the last folded slot): commits not yet folded are not in it, so run "
        "`slatelake fold` first for a fresher one. Writes nothing (exit 0) when the newest "
        "image is already at the fold cursor. `slatelake hold` writes images on its own.",
    )
    add_json(
        p,
        "print one JSON object: written, seq, head {snapshot_id, batch_seq}, bytes, "
        "path (local path or s3:// URL), seconds",
    )
    p.add_argument(
        "--print-attach",
        action="store_true",
        help="write nothing; print the ATTACH statement that opens the newest valid image "
        "read-only in stock DuckDB, as of its seq (not the lake's head). Stock DuckDB needs "
        "only its ducklake extension, and for an s3:// lake httpfs and an S3 secret",
    )
