"""``maintain`` and ``status``: the maintenance pass from a shell."""

from __future__ import annotations

import argparse
import json
from typing import Any

from slatelake.cli.common import add_lake_command, parse_kv, print_report


def _cmd_maintain(args: argparse.Namespace) -> int:
    import slatelake

    with slatelake.connect(
        args.lake, data_path=args.data_path, options=parse_kv(args.option)
    ) as session:
        print_report(session.maintenance(wait_s=args.wait), args.json)
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    import slatelake

    with slatelake.connect(args.lake, read_only=True) as session:
        window = session.maintenance_status()
    if args.json:
        print(json.dumps([p.to_dict() for p in window]))
    elif not window:
        print("no maintenance pass recorded")
    for report in window if not args.json else []:
        print_report(report, False)
    return 0


def register(sub: Any) -> None:
    p = add_lake_command(
        sub,
        "maintain",
        _cmd_maintain,
        "Run one maintenance pass now (RFC 0021 steps in "
        "order) with the given MAINTENANCE_* options, and print its report.",
    )
    p.add_argument("--data-path", metavar="PATH", help="data path (for a new lake)")
    p.add_argument(
        "--option",
        action="append",
        metavar="KEY=VALUE",
        help="a MAINTENANCE_* option, e.g. MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN="
        "'7 days'; repeat for several. Nothing configured, nothing moves.",
    )
    p.add_argument(
        "--wait",
        type=float,
        default=60.0,
        metavar="SEC",
        help="wait this long for a pass already running (default 60)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p = add_lake_command(
        sub,
        "status",
        _cmd_status,
        "Show the last 16 maintenance passes, newest first (read-only).",
    )
    p.add_argument("--json", action="store_true", help="print a JSON array of pass reports")
