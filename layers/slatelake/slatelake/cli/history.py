"""``runs`` and ``audit``: what maintenance did and who changed what, from a shell.

Both read a few sys records at the log's head (no catalog is loaded) and
page newest first by keyset: ``--before`` takes the ``next_before`` a
previous page printed. ``--limit`` and ``--before`` are read as
``PageRequest`` reads them for the Lambda.
"""

from __future__ import annotations

import argparse
from typing import Any

from slatelake.cli import output
from slatelake.cli.arguments import add_json, lake_verb, open_lake, page_before, page_limit


def _cmd_runs(args: argparse.Namespace) -> int:
    page = open_lake(args).maintenance.runs(limit=args.limit, before=args.before)
    output.emit(output.RUNS, page, args.json)
    return 0


def _cmd_audit(args: argparse.Namespace) -> int:
    page = open_lake(args).maintenance.audit(limit=args.limit, before=args.before)
    output.emit(output.AUDIT, page, args.json)
    return 0


def _paging(p: argparse.ArgumentParser, default: int) -> None:
    p.add_argument(
        "--limit",
        type=page_limit,
        default=default,
        metavar="N",
        help=f"at most N (default {default}, up to 1000)",
    )
    p.add_argument(
        "--before",
        type=page_before,
        metavar="ID",
        help="only entries older than ID (the next page)",
    )
    add_json(p, "print the page as JSON")


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
