"""``protect``, ``unprotect`` and ``protected``: retention holds from a shell.

A hold keeps one snapshot through every expiry, whoever runs it, until it
is removed; ``hold`` is another verb (the folding process), so these are
named apart from it.
"""

from __future__ import annotations

import argparse
import datetime as dt
from typing import Any

from slatelake.cli.arguments import catalog_text, lake_verb
from slatelake.cli.common import caller, print_json, print_table


def snapshot_id(text: str) -> int:
    """A snapshot id: digits only (``42``), refused at parse otherwise."""
    from slatelake import MisconfigurationError, maintenance

    try:
        return maintenance.check_snapshot_id(text)
    except MisconfigurationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _when(us: int) -> str:
    return dt.datetime.fromtimestamp(us / 1e6, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _cmd_protect(args: argparse.Namespace) -> int:
    from slatelake import maintenance

    change = maintenance.protect(args.lake, args.snapshot, args.name, note=args.note, by=caller())
    hold = change.hold
    if args.json:
        print_json({"lake": args.lake, "changed": change.changed, "hold": hold.to_dict()})
    elif change.changed:
        print(f"snapshot {hold.snapshot_id} is held as {hold.name!r}")
    else:
        print(f"snapshot {hold.snapshot_id} was already held as {hold.name!r}; nothing changed")
    return 0


def _cmd_unprotect(args: argparse.Namespace) -> int:
    from slatelake import maintenance

    change = maintenance.unprotect(args.lake, args.name, by=caller())
    if args.json:
        print_json({"lake": args.lake, "changed": True, "hold": change.hold.to_dict()})
    else:
        print(f"removed hold {change.hold.name!r} (snapshot {change.hold.snapshot_id})")
    return 0


def _cmd_protected(args: argparse.Namespace) -> int:
    from slatelake import maintenance

    found = maintenance.retention_holds(args.lake)
    if args.json:
        print_json({"lake": args.lake, "holds": [h.to_dict() for h in found]})
        return 0
    if not found:
        print("no retention holds")
        return 0
    rows = [(h.name, h.snapshot_id, _when(h.created_at), h.created_by, h.note) for h in found]
    print_table(("name", "snapshot", "created", "by", "note"), rows)
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
    p.add_argument("--json", action="store_true", help="print the hold as JSON")
    p = lake_verb(sub, "unprotect", _cmd_unprotect, "Remove a retention hold by name.")
    p.add_argument("name", metavar="NAME", type=catalog_text, help="the hold's name")
    p.add_argument("--json", action="store_true", help="print the removed hold as JSON")
    p = lake_verb(sub, "protected", _cmd_protected, "List the retention holds.")
    p.add_argument("--json", action="store_true", help="print the holds as JSON")
