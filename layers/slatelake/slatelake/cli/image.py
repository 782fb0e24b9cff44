"""``slatelake image``: write a catalog image now, or print how stock DuckDB
attaches the newest one. (The holder's own image cadence is
``maintenance/holder.py``'s ``ImageCadence``, driven by ``slatelake hold``.)

An image is the catalog as of one folded slot (its seq), a DuckDB file under
``images/`` in the lake root that stock DuckLake attaches read-only. It is as
fresh as its seq: commits after it are in the log, not in the image.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from slatelake.cli.arguments import lake_verb


def _cmd_image(args: argparse.Namespace) -> int:
    from slatelake import admin

    if args.print_attach:
        return _print_attach(args.lake, args.json)
    result = admin.write_image(args.lake)
    info = result.info
    doc = {
        "written": result.written,
        "seq": info.seq if info is not None else result.seq,
        "head": {"snapshot_id": result.head.snapshot_id, "batch_seq": result.head.batch_seq},
        "bytes": info.size if info is not None else 0,
        "path": info.url if info is not None else None,
        "seconds": round(result.seconds, 3),
    }
    if not result.written:
        doc["reason"] = result.reason
    if args.json:
        print(json.dumps(doc), flush=True)
    elif result.written and info is not None:
        print(
            f"image of slot {info.seq} (head {result.head.snapshot_id}/{result.head.batch_seq}), "
            f"{info.size} bytes, written in {result.seconds:.2f}s: {info.url}"
        )
    else:
        where = f" ({info.url})" if info is not None else ""
        print(f"no image written: {result.reason}{where}")
    return 0


def _print_attach(lake: str, as_json: bool) -> int:
    from slatelake import admin

    newest = admin.newest_image(lake)
    if as_json:
        head = newest.record.head
        doc = {
            "attach": newest.attach,
            "seq": newest.info.seq,
            "head": {"snapshot_id": head.snapshot_id, "batch_seq": head.batch_seq},
            "path": newest.info.url,
        }
        print(json.dumps(doc), flush=True)
    else:
        print(newest.attach, flush=True)
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
    p.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object: written, seq, head {snapshot_id, batch_seq}, bytes, "
        "path (local path or s3:// URL), seconds",
    )
    p.add_argument(
        "--print-attach",
        action="store_true",
        help="write nothing; print the ATTACH statement that opens the newest valid image "
        "read-only in stock DuckDB, as of its seq (not the lake's head). Stock DuckDB needs "
        "only its ducklake extension, and for an s3:// lake httpfs and an S3 secret",
    )
