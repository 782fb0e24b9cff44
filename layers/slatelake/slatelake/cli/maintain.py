"""``maintain``, ``backup`` and ``status``: the maintenance pass from a shell.

``maintain`` exits 4 when the pass did not finish cleanly (a step failed, or
the pass lost its lease to another process), so a cron job or CI step sees
it. SIGTERM or SIGINT ends the pass at its next step or table boundary: it
records its status, releases its lease and exits 143 (SIGTERM) or 130
(SIGINT); a second signal exits at once with that status (cli/stopping.py).
``status`` never fails on a damaged status record: it prints what could
be read and a warning on stderr, and the next pass rewrites the record.

``maintain --operations flush,merge --table s.t`` limits a pass to some
steps and one table (only flush, merge and rewrite take a table);
``maintain --dry-run`` prints the plan a pass would carry out and writes
nothing (text: up to 20 entries a step; ``--json``: the report with its
``plan``, up to 1000 entries a step and their totals), each step priced:
object-store requests by kind, bytes, files to delete and USD, at list
prices or a ``--prices`` file's (maintenance/pricing.py).

Each is a call on the lake handle (``lake.maintenance``), as the Lambda's
are, and ``maintain`` builds its ``PassRequest`` with ``from_mapping``, the
Lambda's parser. Everything given is checked before the lake is touched: the
lake URL, data path and wait at argument parsing, the scope when the request
is made, the options bound on a bare DuckDB before the pass opens the lake,
so a refused ``maintain`` (exit 2) never creates, opens or writes a lake.
(``backup`` binds its options in the pass it runs, after opening the lake.)

While ``SLATELAKE_MAINTENANCE_ENABLED`` is false, ``maintain`` (but
``--dry-run``), ``maintain --threshold`` and ``backup --option`` are refused
with exit 2 and a message naming the variable, before the lake is touched.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from slatelake.cli import output
from slatelake.cli.arguments import (
    DURATION_WORDS,
    add_deadline,
    add_json,
    catalog_text,
    deadline_of,
    lake_data_path,
    lake_verb,
    open_lake,
    wait_seconds,
)
from slatelake.cli.common import caller, parse_kv
from slatelake.cli.stopping import SignalStop, stop_on_signals

EXIT_STEP_FAILED = 4
EXIT_STATUSES = (
    "exit status: 0 the pass ran (every step ran or was skipped); 1 an error (e.g. "
    "another pass is running and --wait ran out, or no such --table); 2 a misconfigured "
    "option, --operations or --table; 3 fenced; "
    "4 a step failed or the pass lost its lease (the report says which); 130 (SIGINT) or "
    "143 (SIGTERM): stopped by the signal at a step boundary, status recorded and lease "
    "released (a second signal exits at once, the lease then lapses within its TTL)"
)


def _cmd_maintain(args: argparse.Namespace) -> int:
    with stop_on_signals("maintain") as signalled:
        try:
            code = _maintain(args, signalled)
        except Exception as exc:
            if signalled.exit_status is None:
                raise
            # stopped before the pass began (waiting for the lease): the signal's status
            why = f"{type(exc).__name__}: {exc}"
            print(f"slatelake maintain: stopped ({signalled.name}): {why}", file=sys.stderr)
            return signalled.exit_status
    return code if signalled.exit_status is None else signalled.exit_status


def _maintain(args: argparse.Namespace, signalled: SignalStop) -> int:
    from slatelake import MaintenanceConfigError, PassRequest

    if args.threshold:
        if args.parallel is not None:
            raise MaintenanceConfigError("--parallel fans out one pass; --threshold runs many")
        return _threshold(args, signalled)
    if args.prices is not None and not args.dry_run:
        raise MaintenanceConfigError("--prices prices a dry run's plan; add --dry-run")
    # the Lambda's parser: a value one surface refuses, the other refuses alike
    request = PassRequest.from_mapping(
        {
            "options": parse_kv(args.option) or None,
            "operations": args.operations,
            "table": args.table,
            "schema": args.schema,
            "wait_s": args.wait,
            "dry_run": args.dry_run,
            "by": caller(),
            "prices": args.prices,
        }
    )
    lake = open_lake(args, args.data_path)
    report = lake.maintenance.run(request, stop=signalled.event, parallel=args.parallel)
    output.emit(output.PASS, report, args.json)
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


def _workers(text: str) -> int:
    """``--parallel``: a count of worker processes, 1 to 64."""
    try:
        count = int(text)
    except ValueError:
        count = 0
    if not 1 <= count <= 64:
        raise argparse.ArgumentTypeError(f"{text!r}: expected 1 to 64 worker processes")
    return count


def _threshold(args: argparse.Namespace, signalled: SignalStop) -> int:
    """The threshold trigger: a run per table whose small files call for one."""
    from slatelake import MaintenanceConfigError

    given = [
        flag
        for flag, value in (
            ("--option", args.option),
            ("--operations", args.operations),
            ("--table", args.table),
            ("--schema", args.schema),
            ("--dry-run", args.dry_run),
            ("--prices", args.prices),
        )
        if value
    ]
    if given:
        raise MaintenanceConfigError(
            "--threshold takes its steps and tables from the lake's policy; "
            f"drop {', '.join(given)}"
        )
    found = open_lake(args).maintenance.threshold(
        wait_s=args.wait, stop=signalled.event, by=caller()
    )
    output.emit(output.THRESHOLD, found, args.json)
    return EXIT_STEP_FAILED if found.failed else 0


def _cmd_backup(args: argparse.Namespace) -> int:
    """Before a backup: a pass (with --option), fold, image, and the manifest;
    exit 4 when the pass or the fold failed. With --option while
    SLATELAKE_MAINTENANCE_ENABLED is false: refused (exit 2) before the lake
    is touched."""
    import slatelake

    if args.option:
        slatelake.maintenance_switch().require("backup --option (a maintenance pass first)")
    report = open_lake(args).maintenance.backup(
        options=parse_kv(args.option) or None,
        wait_s=args.wait,
        deadline=deadline_of(args.deadline),
        by=caller(),
    )
    output.emit(output.BACKUP, report, args.json, manifest=args.manifest)
    if report.failed:
        print(f"slatelake backup: {report.reason}", file=sys.stderr)
        return EXIT_STEP_FAILED
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    window = open_lake(args).maintenance.status()
    if window.warning is not None:
        print(
            f"slatelake status: warning: {window.warning}; the next pass rewrites it",
            file=sys.stderr,
        )
    output.emit(output.STATUS, window, args.json)
    return 0


def register(sub: Any) -> None:
    p = lake_verb(
        sub,
        "maintain",
        _cmd_maintain,
        "Run one maintenance pass now (RFC 0021 steps in "
        "order) with the lake's policy, when enabled, and the given MAINTENANCE_* options "
        "over it, and print its report.",
    )
    p.epilog = EXIT_STATUSES
    p.add_argument(
        "--data-path", metavar="PATH", type=lake_data_path, help="data path (for a new lake)"
    )
    p.add_argument(
        "--option",
        action="append",
        metavar="KEY=VALUE",
        help="a MAINTENANCE_* option, e.g. MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN="
        "'7 days'; repeat for several; each overrides the lake's policy. Nothing "
        "configured (no option, no enabled policy), nothing moves.",
    )
    p.add_argument(
        "--wait",
        type=wait_seconds,
        default=60.0,
        metavar="DURATION",
        help="wait this long for a pass already running (default 60s; with --threshold, "
        f"each table's run waits as long); {DURATION_WORDS}",
    )
    p.add_argument(
        "--operations",
        metavar="OPS",
        type=catalog_text,
        help="run only these steps of the configured pass, comma-separated: flush, expire, "
        "merge, rewrite, cleanup, orphans (each at most once); the sweeps and the store "
        "merge are then skipped",
    )
    p.add_argument(
        "--table",
        metavar="[SCHEMA.]TABLE",
        type=catalog_text,
        help="scope the pass to one table (a bare name means schema main); only flush, merge "
        "and rewrite run, the lake-wide steps are skipped",
    )
    p.add_argument(
        "--schema",
        type=catalog_text,
        help="the --table's schema; --table is then taken as spelled (a name with a dot)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the plan the pass would carry out (snapshots to expire and those kept by "
        "holds, files to merge, rewrite and delete, orphans), each step's estimated "
        "object-store requests, bytes and cost, and write nothing",
    )
    p.add_argument(
        "--prices",
        metavar="FILE",
        help="with --dry-run: price the plan at this JSON file's prices instead of the "
        "list prices (any of list_per_1000, get_per_1000, put_per_1000, delete_per_1000, "
        "lambda_gb_second, lambda_memory_mb, as_of); a bad key or value is refused (exit 2)",
    )
    p.add_argument(
        "--threshold",
        action="store_true",
        help="the threshold trigger: give each table with at least its policy's "
        "small_file_min_count small files a run of flush, merge and rewrite on that table "
        "only (needs an enabled lake policy; takes no other step or scope flags; --wait "
        "applies to each run)",
    )
    p.add_argument(
        "--parallel",
        type=_workers,
        metavar="N",
        help="fan the pass out: expiry first, then flush, merge and rewrite in table batches "
        "over N worker processes (1 to 64) under one pass lease, then cleanup once every "
        "batch finished with nothing deferred; one report and one run-history entry, as a "
        "pass in one process leaves. It is the stack's pass state machine on one machine. "
        "DuckLake's maintenance calls hold the lake's commit lock while they run, so the "
        "batches take turns: N does not make a pass faster here (BENCHMARKS.md)",
    )
    add_json(p)
    p = lake_verb(
        sub,
        "backup",
        _cmd_backup,
        "Prepare the lake for a copy: optionally one maintenance pass (--option), then fold "
        "every slot and write a fresh catalog image, and list every object a copy must take "
        "(the lake root's store, log and newest image; every object under the data path). A "
        "copy of them opens as the same lake with the same rows. While a resident `slatelake "
        "hold` holds the lake, waits for it to fold past the log's end. Exit 4 when the pass "
        "or the fold failed.",
    )
    p.add_argument(
        "--option",
        action="append",
        metavar="KEY=VALUE",
        help="a MAINTENANCE_* option for a pass before the backup (none: no pass)",
    )
    add_deadline(p, "give up folding or waiting for the holder by then (default: no limit)")
    p.add_argument(
        "--wait",
        type=wait_seconds,
        default=60.0,
        metavar="DURATION",
        help="with --option: wait this long for a pass already running (default 60s); "
        + DURATION_WORDS,
    )
    p.add_argument("--manifest", action="store_true", help="print every object, tab-separated")
    add_json(p, "print the report and manifest as JSON")
    p = lake_verb(
        sub,
        "status",
        _cmd_status,
        "Show the last 16 maintenance passes, newest first (read-only). A damaged "
        "status record prints a warning on stderr, never an error.",
    )
    add_json(p, "print a JSON array of pass reports")
