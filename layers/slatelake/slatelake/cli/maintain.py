"""``maintain`` and ``status``: the maintenance pass from a shell.

``maintain`` exits 4 when the pass did not finish cleanly (a step failed, or
the pass lost its lease to another process), so a cron job or CI step sees
it. ``status`` never fails on a damaged status record: it prints what could
be read and a warning on stderr, and the next pass rewrites the record.

Both call the maintenance API (``slatelake.maintenance``), as the Lambda
does. Everything given is checked before the lake is touched: the lake URL,
data path and wait at argument parsing, the options bound on a bare DuckDB,
so a refused ``maintain`` (exit 2) never creates, opens or writes a lake.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from slatelake.cli.arguments import data_path, lake_verb, wait_seconds
from slatelake.cli.common import parse_kv, print_report

EXIT_STEP_FAILED = 4
EXIT_STATUSES = (
    "exit status: 0 the pass ran (every step ran or was skipped); 1 an error (e.g. "
    "another pass is running and --wait ran out); 2 a misconfigured option; 3 fenced; "
    "4 a step failed or the pass lost its lease (the report says which)"
)


def _cmd_maintain(args: argparse.Namespace) -> int:
    from slatelake import maintenance

    options = parse_kv(args.option)
    report = maintenance.run(args.lake, options, data_path=args.data_path, wait_s=args.wait)
    print_report(report, args.json)
    if not report.failed:
        return 0
    failed = [s.step for s in report.steps if s.status == "failed"]
    why = []
    if failed:
        why.append(f"{len(failed)} step(s) failed: {', '.join(failed)}")
    if report.lease_lost is not None:
        why.append(f"the pass stopped, it lost its lease: {report.lease_lost}")
    print(f"slatelake maintain: {'; '.join(why)}", file=sys.stderr)
    return EXIT_STEP_FAILED


def _cmd_status(args: argparse.Namespace) -> int:
    from slatelake import maintenance

    window = maintenance.status(args.lake)
    if window.warning is not None:
        print(
            f"slatelake status: warning: {window.warning}; the next pass rewrites it",
            file=sys.stderr,
        )
    if args.json:
        print(json.dumps([p.to_dict() for p in window]))
    elif not window:
        print("no maintenance pass recorded")
    for report in window if not args.json else []:
        print_report(report, False)
    return 0


def register(sub: Any) -> None:
    p = lake_verb(
        sub,
        "maintain",
        _cmd_maintain,
        "Run one maintenance pass now (RFC 0021 steps in "
        "order) with the given MAINTENANCE_* options, and print its report.",
    )
    p.epilog = EXIT_STATUSES
    p.add_argument("--data-path", metavar="PATH", type=data_path, help="data path (for a new lake)")
    p.add_argument(
        "--option",
        action="append",
        metavar="KEY=VALUE",
        help="a MAINTENANCE_* option, e.g. MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN="
        "'7 days'; repeat for several. Nothing configured, nothing moves.",
    )
    p.add_argument(
        "--wait",
        type=wait_seconds,
        default=60.0,
        metavar="DURATION",
        help="wait this long for a pass already running, e.g. 90s or 2m (default 60s)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p = lake_verb(
        sub,
        "status",
        _cmd_status,
        "Show the last 16 maintenance passes, newest first (read-only). A damaged "
        "status record prints a warning on stderr, never an error.",
    )
    p.add_argument("--json", action="store_true", help="print a JSON array of pass reports")
