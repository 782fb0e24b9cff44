"""``runs`` and ``audit``: what maintenance did and who changed what, from a shell.

Both read a few sys records at the log's head (no catalog is loaded) and
page newest first by keyset: ``--before`` takes the ``next_before`` a
previous page printed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from typing import Any

from slatelake.cli.arguments import lake_verb
from slatelake.cli.common import print_json, print_table


def _limit(text: str) -> int:
    from slatelake import MisconfigurationError, maintenance

    try:
        return maintenance.check_limit(text)
    except MisconfigurationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _before(text: str) -> int:
    from slatelake import MisconfigurationError, maintenance

    try:
        before = maintenance.check_before(text)
    except MisconfigurationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    assert before is not None
    return before


def _when(us: int) -> str:
    return dt.datetime.fromtimestamp(us / 1e6, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _counts(report: Any) -> str:
    totals: dict[str, int] = {}
    for step in report.steps:
        for name, value in step.counts.items():
            totals[name] = totals.get(name, 0) + value
    return ", ".join(f"{k}={v}" for k, v in totals.items() if v) or "-"


def _cmd_runs(args: argparse.Namespace) -> int:
    from slatelake import maintenance

    page = maintenance.runs(args.lake, limit=args.limit, before=args.before)
    if args.json:
        print_json({"runs": [r.to_dict() for r in page.items], "next_before": page.next_before})
        return 0
    rows = [
        (r.run_id, _when(r.started_at), r.trigger, r.status, f"{r.seconds:g}s", _counts(r))
        for r in page.items
    ]
    print_table(("id", "started (UTC)", "trigger", "status", "took", "counts"), rows)
    if page.next_before is not None:
        print(f"more: --before {page.next_before}")
    return 0


def _cmd_audit(args: argparse.Namespace) -> int:
    from slatelake import maintenance

    page = maintenance.audit_log(args.lake, limit=args.limit, before=args.before)
    if args.json:
        print_json({"entries": [e.to_dict() for e in page.items], "next_before": page.next_before})
        return 0
    rows = [(e.id, _when(e.id), e.kind, e.who, json.dumps(e.what)) for e in page.items]
    print_table(("id", "at (UTC)", "kind", "who", "what"), rows)
    if page.next_before is not None:
        print(f"more: --before {page.next_before}")
    return 0


def _paging(p: argparse.ArgumentParser, default: int) -> None:
    p.add_argument(
        "--limit",
        type=_limit,
        default=default,
        metavar="N",
        help=f"at most N (default {default}, up to 1000)",
    )
    p.add_argument(
        "--before", type=_before, metavar="ID", help="only entries older than ID (the next page)"
    )
    p.add_argument("--json", action="store_true", help="print the page as JSON")


def register(sub: Any) -> None:
    p = lake_verb(
        sub,
        "runs",
        _cmd_runs,
        "The run history: the last 1000 maintenance passes, newest first, with their status "
        "and counters.",
    )
    _paging(p, 20)
    p = lake_verb(
        sub,
        "audit",
        _cmd_audit,
        "The audit log: policy changes, retention holds and manual runs (who, what, when), "
        "newest first; the last 1000 are kept.",
    )
    _paging(p, 50)
