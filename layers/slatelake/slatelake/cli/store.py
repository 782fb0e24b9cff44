"""``census`` and ``compact-store``: the store's weight, and its merge.

``census`` writes nothing and opens no writer, so it runs on read-only
credentials; a refused listing drops only the object totals. ``compact-store``
submits full-tree merges that the holder (``slatelake hold``) executes; with
``--require-completed`` a pending or failed merge is a non-zero exit, so a
script cannot mistake a submission for a completed merge.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from slatelake.cli.arguments import timeout_seconds
from slatelake.cli.common import EXIT_ERROR, EXIT_USAGE, add_lake_command, print_json, print_table

CENSUS_COLUMNS = (
    "subspace",
    "bytes",
    "l0_ssts",
    "sorted_runs",
    "sorted_run_ssts",
    "manifest_id",
    "live_keys",
    "live_bytes",
)


def _cmd_census(args: argparse.Namespace) -> int:
    from slatelake import maintenance

    census = maintenance.census(args.lake, live=args.live)
    kinds = [k for k in census.objects or () if k != "total"]
    if args.objects:
        if args.json:
            print_json({"objects": census.objects, "error": census.objects_error})
        elif census.objects is None:
            print(f"object totals absent: {census.objects_error}")
        else:
            print_table(
                ("kind", "objects", "bytes"),
                [
                    (k, census.objects[k]["objects"], census.objects[k]["bytes"])
                    for k in (*kinds, "total")
                ],
            )
        return 0
    rows = census.to_json()
    if args.json:
        print_json(rows)
        return 0
    print_table(CENSUS_COLUMNS, [[row[c] for c in CENSUS_COLUMNS] for row in rows])
    current = census.row("current").live
    if current is not None and current.split is not None:
        parts = ", ".join(
            f"{k} {v['keys']} keys / {v['bytes']} bytes" for k, v in current.split.items()
        )
        print(f"current live: {parts}")
    if census.objects is None:
        print(f"objects: totals absent ({census.objects_error})")
    else:
        total = census.objects["total"]
        parts = ", ".join(
            f"{k} {census.objects[k]['objects']}/{census.objects[k]['bytes']}" for k in kinds
        )
        print(
            f"objects: {total['objects']} objects, {total['bytes']} bytes "
            f"(objects/bytes by kind: {parts}); SSTs in the manifest: {census.sst_bytes} bytes"
        )
    return 0


def _cmd_compact_store(args: argparse.Namespace) -> int:
    from slatelake import MergeIncompleteError, MisconfigurationError, maintenance

    if args.require_completed and args.timeout is None:
        print(
            "slatelake compact-store: --require-completed needs --timeout DURATION "
            "(without a wait every merge is still pending)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    incomplete = None
    try:
        report = maintenance.compact_store(
            args.lake,
            subspace=args.subspace,
            wait_s=args.timeout,
            require_completed=args.require_completed,
        )
    except MergeIncompleteError as exc:
        report, incomplete = exc.report, exc
    except MisconfigurationError as exc:  # a subspace that does not exist
        print(f"slatelake compact-store: --subspace: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        print_json(report.to_json())
    else:
        print_table(
            (
                "subspace",
                "outcome",
                "bytes_before",
                "bytes_after",
                "runs_before",
                "runs_after",
                "reason",
            ),
            [
                (
                    m.subspace,
                    m.outcome + (" (adopted)" if m.adopted else ""),
                    m.bytes_before,
                    m.bytes_after,
                    m.sorted_runs_before,
                    m.sorted_runs_after,
                    m.reason,
                )
                for m in report.merges
            ],
        )
        print(f"outcome: {report.outcome}")
    if incomplete is not None:
        print(f"slatelake compact-store: {incomplete}", file=sys.stderr)
        return EXIT_ERROR
    return 0


def register(sub: Any) -> None:
    p = add_lake_command(
        sub,
        "census",
        _cmd_census,
        "What the store weighs, subspace by subspace, from the manifest alone "
        "(a constant number of object reads), plus object totals by kind from one listing. "
        "Writes nothing: works with read-only credentials.",
    )
    p.add_argument(
        "--live",
        action="store_true",
        help="also scan every subspace for live keys and bytes (reads the whole store)",
    )
    p.add_argument("--json", action="store_true", help="print a JSON array of subspace rows")
    p.add_argument(
        "--objects",
        action="store_true",
        help="print the object totals by kind (log, manifest, sst, wal, other) instead",
    )
    p = add_lake_command(
        sub,
        "compact-store",
        _cmd_compact_store,
        "Merge each subspace's sorted runs fully (superseded versions and tombstones drop). "
        "Submits through the admin API; the holder (`slatelake hold`) executes. "
        "Without a holder a merge stays pending.",
    )
    p.add_argument(
        "--subspace",
        metavar="S",
        help="merge only this subspace (sys, snapshot, current, history, inline, index)",
    )
    p.add_argument(
        "--timeout",
        type=timeout_seconds,
        metavar="DURATION",
        help="wait up to DURATION (e.g. 30s, 2m) for the merges to commit (default: submit "
        "and return)",
    )
    p.add_argument(
        "--require-completed",
        action="store_true",
        help="exit 1 unless every merge completed or had nothing to merge (needs --timeout)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
