"""``protect``, ``unprotect`` and ``protected``: retention holds from a
shell; ``pins``: the snapshots live readers pin.

A hold keeps one snapshot through every expiry, whoever runs it, until it
is removed; ``hold`` is another verb (the folding process), so these are
named apart from it. Each is one call on ``lake.holds``. A pin is a
reader's (``session.pin()``) and ends with it; ``pins`` only lists them.
"""

from __future__ import annotations

import argparse
from typing import Any

from slatelake.cli import output
from slatelake.cli.arguments import add_json, catalog_text, lake_verb, open_lake, snapshot_id
from slatelake.cli.common import caller
from slatelake.cli.text import age, print_table, when


def _pins_text(shown: output.AtLake) -> None:
    if not shown.report:
        print("no reader pins")
        return
    rows = [
        (
            f"{p.snapshot_id} onward" if p.onward else p.snapshot_id,
            p.owner,
            age(p.age_s()),
            when(p.lease_expires_at_us, zone=True),
            p.reader_id,
        )
        for p in shown.report
    ]
    print_table(("snapshot", "owner", "age", "lease until", "reader"), rows)


PINS = output.View(
    _pins_text, lambda shown: {"lake": shown.lake, "pins": [p.to_dict() for p in shown.report]}
)


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


def _cmd_pins(args: argparse.Namespace) -> int:
    found = open_lake(args).maintenance.pins()
    output.emit(PINS, output.AtLake(args.lake, found), args.json)
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
    p = lake_verb(sub, "pins", _cmd_pins, "List the snapshots live readers pin.")
    p.description = (
        "List reader pins: snapshots a live session pinned (slatelake.connect(..., pin=True), "
        "session.pin()), which expiry leaves and cleanup keeps while the reader's lease lives; "
        "with owner, age and when the lease lapses if the reader stops renewing it. Reads "
        "the readers' leases only; writes nothing."
    )
    add_json(p, "print the pins as JSON")
