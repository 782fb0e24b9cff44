"""``checkpoint create|list|delete`` and ``restore``: restore points from a shell.

A restore point is the lake as it was at one moment (every snapshot, every
row) kept with every data file it reads, so no pass deletes them until the
point is deleted or its TTL lapses; ``restore`` lays one down as a new lake.
Each verb is one call on ``lake.restore_points``; the text views live here
(``output.View``), the ``--json`` documents are the reports' ``to_dict()``.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from slatelake.cli import output
from slatelake.cli.arguments import (
    DURATION_WORDS,
    add_json,
    add_lake,
    data_path,
    lake_url,
    open_lake,
    wait_seconds,
)
from slatelake.cli.common import caller
from slatelake.cli.text import age, name, print_table, size, when

POINT_COLUMNS = ("name", "snapshot", "files", "created", "expires", "state")
# Names are checked by the library without a lake; this one is never read.
_NO_LAKE = "memory://slatelake-cli-argument-check"


def _created(change: Any) -> None:
    point = change.point
    lapses = (
        "never lapses"
        if point.expires_at_us is None
        else f"lapses {when(point.expires_at_us, True)}"
    )
    print(
        f"restore point {name(point.name)} of {point.lake} at snapshot {point.snapshot_id}: "
        f"{len(point.files)} files kept, catalog {size(point.catalog_size)}, {lapses} "
        f"({change.seconds:.2f}s)"
    )
    print(f"SlateDB checkpoint: {point.checkpoint_id or 'none'}")


def _deleted(change: Any) -> None:
    point = change.point
    what = "a damaged record" if point is None else f"{len(point.files)} files"
    print(
        f"deleted restore point {name(change.name)} ({what}): the files it kept are kept no "
        f"longer (the next passes may reclaim them); SlateDB checkpoint {change.checkpoint}"
    )
    for url in change.objects:
        print(f"  deleted {url}")


def _listed(points: Any) -> None:
    if not points:
        print("no restore points")
        return
    now_us = time.time_ns() // 1000
    rows = []
    for p in points:
        expires = "-" if p.expires_at_us is None else when(p.expires_at_us)
        state = "lapsed" if p.lapsed(now_us) else "live"
        if state == "live" and p.expires_at_us is not None:
            state = f"live ({age((p.expires_at_us - now_us) / 1e6)} left)"
        rows.append(
            (name(p.name), p.snapshot_id, len(p.files), when(p.created_at_us), expires, state)
        )
    print_table(POINT_COLUMNS, rows)


def _restored(report: Any) -> None:
    print(
        f"restored {name(report.point)} of {report.lake} to {report.to} at snapshot "
        f"{report.snapshot_id} ({len(report.tables)} tables, {report.rows} rows, "
        f"{report.seconds:.2f}s); "
        f"data path {report.data_path}"
    )
    if report.copied_files:
        print(f"copied {report.copied_files} files ({size(report.copied_bytes)}); they are its own")
    if report.warning:
        print(f"note: {report.warning}")


CREATED = output.View(_created)
DELETED = output.View(_deleted)
LISTED = output.View(_listed, lambda points: [p.to_dict() for p in points])
RESTORED = output.View(_restored)


def _cmd_create(args: argparse.Namespace) -> int:
    change = open_lake(args).restore_points.create(
        args.name, ttl=args.ttl, by=caller(), wait_s=args.wait
    )
    output.emit(CREATED, change, args.json)
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    output.emit(LISTED, open_lake(args).restore_points.list(), args.json)
    return 0


def _cmd_delete(args: argparse.Namespace) -> int:
    output.emit(DELETED, open_lake(args).restore_points.delete(args.name), args.json)
    return 0


def _cmd_restore(args: argparse.Namespace) -> int:
    report = open_lake(args).restore_points.restore(
        args.checkpoint, args.to, copy_data=args.copy_data, share_data=args.share_data
    )
    output.emit(RESTORED, report, args.json)
    return 0


def _point_name(text: str) -> str:
    """A restore point's name as the library takes it (exit 2 otherwise)."""
    import slatelake

    try:
        slatelake.open(_NO_LAKE).restore_points.check_name(text)
    except slatelake.MisconfigurationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _ttl(text: str) -> str:
    """A TTL in the duration grammar, as the library takes it (exit 2 otherwise)."""
    import slatelake

    try:
        slatelake.open(_NO_LAKE).restore_points.check_ttl(text)
    except slatelake.MisconfigurationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def register(sub: Any) -> None:
    checkpoint = sub.add_parser(
        "checkpoint",
        help="Restore points: create, list, delete.",
        description="Restore points: the lake as it is now (every snapshot, every row), kept "
        "with every data file it reads: no cleanup or orphan step deletes one until the "
        "point is deleted or its TTL lapses. `slatelake restore` lays one down as a new lake.",
    )
    verbs = checkpoint.add_subparsers(dest="verb", required=True, metavar="VERB")

    def verb(verb_name: str, func: Any, help_: str) -> argparse.ArgumentParser:
        p = verbs.add_parser(verb_name, help=help_, description=help_)
        p.set_defaults(func=func)
        add_lake(p)
        return p

    p = verb(
        "create",
        _cmd_create,
        "Make a restore point of the lake's head (waits for a running pass to end).",
    )
    p.add_argument(
        "--name", type=_point_name, help="its name (default rp-<UTC time>): letters, digits, . _ -"
    )
    p.add_argument(
        "--ttl",
        type=_ttl,
        metavar="DURATION",
        help=f"lapse after this long (default: kept until deleted); {DURATION_WORDS}",
    )
    p.add_argument(
        "--wait",
        type=wait_seconds,
        default=None,
        metavar="DURATION",
        help=f"wait this long for a running pass to end (default 60s); {DURATION_WORDS}",
    )
    add_json(p, "print the point as JSON")
    p = verb("list", _cmd_list, "List the restore points, lapsed ones included.")
    add_json(p, "print the points as a JSON array")
    p = verb(
        "delete",
        _cmd_delete,
        "Delete a restore point: the next passes may reclaim the files only it kept.",
    )
    p.add_argument("name", metavar="NAME", type=_point_name, help="the restore point's name")
    add_json(p, "print the deleted point as JSON")

    p = sub.add_parser(
        "restore",
        help="Lay down a restore point as a new lake.",
        description="Lay down restore point NAME of LAKE as a new lake at NEW_LAKE (which must "
        "be empty): it opens with the point's snapshots and rows. Give --copy-data PATH (the "
        "new lake gets copies of its own) or --share-data (the files are borrowed where they "
        "are, never deleted by the new lake's passes; safe only while one of the two lakes "
        "writes, since each lake's orphan step would delete the other's new files).",
    )
    p.set_defaults(func=_cmd_restore)
    add_lake(p)
    p.add_argument(
        "--checkpoint", required=True, metavar="NAME", type=_point_name, help="the restore point"
    )
    p.add_argument("--to", required=True, metavar="NEW_LAKE", type=lake_url, help="new lake URL")
    p.add_argument(
        "--copy-data",
        type=data_path,
        metavar="PATH",
        help="copy the data files to this empty data path, which becomes the new lake's",
    )
    p.add_argument(
        "--share-data",
        action="store_true",
        help="borrow the data files where they are (no copy); only while one lake writes",
    )
    add_json(p, "print the report as JSON")
