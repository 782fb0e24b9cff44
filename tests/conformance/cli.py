"""``bash scripts/conformance``: DuckLake's own test files against slatelake or stock.

Files run in ``--jobs`` worker processes (``workers.py``), each in its own
scratch directory under one temporary root removed at the end; a file still
running after ``--timeout`` seconds has its worker killed and fails. One line
is printed per failing file as it finishes (every file with ``--verbose``,
failures with their SQL and mismatch), then a table of counts. The JSON report
holds each file's status, error and seconds, the totals, the backend and the
ducklake extension's version. Exit status: 0 when no file failed, 1 when one
did, 2 when the selection is wrong or the suite is missing.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

from tests.conformance.interpreter import FAIL, STATUSES, FileResult
from tests.conformance.suite import REPO, SelectionError, Suite
from tests.conformance.workers import run_all, serve


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bash scripts/conformance",
        description="Run DuckLake's own sqllogictest files against slatelake or stock DuckLake.",
    )
    parser.add_argument("--backend", choices=("slatelake", "stock"), default="slatelake")
    parser.add_argument(
        "--files",
        default="",
        help="comma-separated suite paths or directory prefixes, e.g. transaction,compaction "
        "(default: every file of the list)",
    )
    parser.add_argument("--list", type=Path, help="file list (default: the suite's selected.txt)")
    parser.add_argument(
        "--json", type=Path, help="report path (default: bench-results/conformance-BACKEND.json)"
    )
    parser.add_argument(
        "--txn",
        choices=("api", "raw"),
        default="api",
        help="slatelake: BEGIN/COMMIT/ROLLBACK through session.transaction() (api) "
        "or as SQL through session.sql (raw)",
    )
    parser.add_argument("--jobs", type=int, default=2, help="files run at once (default 2)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per file")
    parser.add_argument("--verbose", action="store_true", help="print every file, and details")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    if args.serve:  # a worker process of run_all
        serve(args.backend, args.txn, sys.stdin, sys.stdout)
        return 0
    suite = Suite.locate()
    try:
        names = suite.listed(args.list.resolve() if args.list else None)
        if args.files:
            names = suite.select(names, args.files.split(","))
    except SelectionError as exc:
        print(f"conformance: {exc}", file=sys.stderr)
        return 2
    from tests.conformance.backends import ducklake_version

    version = ducklake_version()
    print(
        f"== conformance: {len(names)} files, backend {args.backend} (txn {args.txn}), "
        f"{args.jobs} jobs, ducklake {version}",
        flush=True,
    )
    started = time.perf_counter()
    results = run_all(
        [(suite.path(n), n) for n in names],
        args.backend,
        args.txn,
        args.jobs,
        args.timeout,
        lambda r: _report_file(r, args.verbose),
    )
    wall = time.perf_counter() - started
    totals = Counter(r.status for r in results)
    _print_table(args.backend, totals, len(results), wall)
    out = args.json or REPO / "bench-results" / _default_name(args.backend, args.txn)
    _write(out, suite, args, version, results, totals, wall)
    return 1 if totals[FAIL] else 0


def _default_name(backend: str, txn: str) -> str:
    suffix = "-raw" if backend == "slatelake" and txn == "raw" else ""
    return f"conformance-{backend}{suffix}.json"


def _report_file(result: FileResult, verbose: bool) -> None:
    if result.status != FAIL and not verbose:
        return
    where = f"line {result.line}: " if result.line else ""
    head = f"{result.status.upper():11s} {result.file}  ({result.seconds:.1f} s)"
    print(f"{head}  {where}{result.error}", flush=True)
    if verbose and result.status == FAIL and (result.sql or result.detail):
        body = (f"SQL:\n{result.sql}\n" if result.sql else "") + result.detail
        print("\n".join("    " + ln for ln in body.rstrip().splitlines()), flush=True)


def _print_table(backend: str, totals: Counter[str], files: int, wall: float) -> None:
    print(f"\n{'backend':12s} {backend}")
    for status in STATUSES:
        print(f"{status:12s} {totals[status]:5d}")
    print(f"{'files':12s} {files:5d}")
    print(f"{'wall':12s} {wall:7.1f} s")


def _write(
    out: Path,
    suite: Suite,
    args: argparse.Namespace,
    version: str,
    results: list[FileResult],
    totals: Counter[str],
    wall: float,
) -> None:
    from tests.bench.common import run_header, write_result

    report = {
        **run_header(version),
        "backend": args.backend,
        "txn": args.txn,
        "jobs": args.jobs,
        "ducklake_extension": version,
        "suite": {"root": str(suite.root), "list": str(args.list or "selected.txt")},
        "selection": args.files or "all",
        "wall_s": round(wall, 1),
        "totals": {**{s: totals[s] for s in STATUSES}, "files": len(results)},
        "results": [r.to_json() for r in results],
    }
    write_result(report, out)
