"""``lease show`` and ``lease break``: the maintenance pass lease from a shell.

A pass holds ``maintenance/lease-*`` in the bucket and renews it by heartbeat;
a killed owner's lease lapses on its own within its TTL (60 s by default).
``lease break`` ends it sooner, once the owner has stopped beating, and is
refused while the heartbeat is fresh: it never lets two passes overlap with a
live one. Neither command opens the lake's store or catalog.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from slatelake.cli import output
from slatelake.cli.arguments import add_json, add_lake, open_lake
from slatelake.cli.common import EXIT_ERROR, EXIT_USAGE

EXIT_LEASE_LIVE = 5
EXIT_STATUSES = (
    f"exit status: 0 the lease was broken, or there was nothing to break; {EXIT_ERROR} an "
    f"error (no lake there, the store refused); {EXIT_USAGE} usage; {EXIT_LEASE_LIVE} "
    "refused: the owner's heartbeat is fresh (it is alive; stop that process instead)"
)


def _cmd_show(args: argparse.Namespace) -> int:
    lake = open_lake(args)
    lake.require()
    output.emit(output.LEASE, output.AtLake(args.lake, lake.maintenance.lease()), args.json)
    return 0


def _cmd_break(args: argparse.Namespace) -> int:
    from slatelake import LeaseLiveError

    try:
        result = open_lake(args).maintenance.break_lease()
    except LeaseLiveError as exc:
        if args.json:
            output.print_json({"lake": args.lake, "broken": False, "refused": str(exc)})
        print(f"slatelake lease break: {exc}", file=sys.stderr)
        return EXIT_LEASE_LIVE
    output.emit(output.LEASE_BROKEN, output.AtLake(args.lake, result), args.json)
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser(
        "lease",
        help="Show or break the maintenance pass lease.",
        description="The maintenance pass lease: who holds it, and breaking one whose "
        "owner stopped beating (a killed process) so the next pass need not wait for it to "
        "expire.",
    )
    verbs = p.add_subparsers(dest="lease_command", required=True, metavar="VERB")
    show = verbs.add_parser(
        "show",
        help="Print the newest lease record.",
        description="Print the newest lease record: owner, pid and host, last heartbeat, expiry.",
    )
    show.set_defaults(func=_cmd_show)
    add_lake(show)
    add_json(show, "print the record as JSON")
    brk = verbs.add_parser(
        "break",
        help="Break a lease whose owner's heartbeat is stale.",
        description="Break the maintenance lease of LAKE when its owner has missed three "
        "heartbeats (it died or hangs): writes a 'broken' record as the next generation and "
        "prints what it broke. Refused while the owner's heartbeat is fresh. An owner that "
        "revives finds its lease gone and stops its pass at the next boundary.",
        epilog=EXIT_STATUSES,
    )
    brk.set_defaults(func=_cmd_break)
    add_lake(brk)
    add_json(brk, "print what was broken as JSON")
