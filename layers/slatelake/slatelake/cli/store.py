"""``census`` and ``compact-store``: the store's weight, and its merge.

``census`` writes nothing and opens no writer, so it runs on read-only
credentials; a refused listing drops only the object totals. ``compact-store``
submits full-tree merges that the holder (``slatelake hold``) executes; with
``--require-completed`` a pending or failed merge is a non-zero exit, so a
script cannot mistake a submission for a completed merge. Both are calls on
``lake.store``; ``--json`` prints the report's ``to_dict()`` (census: the
subspace rows and the object totals, whichever view the text shows).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from slatelake.cli import output
from slatelake.cli.arguments import DURATION_WORDS, add_json, lake_verb, open_lake, timeout_seconds
from slatelake.cli.common import EXIT_ERROR, EXIT_USAGE


def _cmd_census(args: argparse.Namespace) -> int:
    census = open_lake(args).store.census(live=args.live)
    output.emit(output.CENSUS_OBJECTS if args.objects else output.CENSUS, census, args.json)
    return 0


def _cmd_compact_store(args: argparse.Namespace) -> int:
    from slatelake import MergeIncompleteError, MisconfigurationError

    if args.require_completed and args.timeout is None:
        print(
            "slatelake compact-store: --require-completed needs --timeout DURATION "
            "(without a wait every merge is still pending)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    incomplete = None
    try:
        report = open_lake(args).store.compact(
            subspace=args.subspace, wait_s=args.timeout, require_completed=args.require_completed
        )
    except MergeIncompleteError as exc:
        report, incomplete = exc.report, exc
    except MisconfigurationError as exc:  # a subspace that does not exist
        print(f"slatelake compact-store: --subspace: {exc}", file=sys.stderr)
        return EXIT_USAGE
    output.emit(output.COMPACT_STORE, report, args.json)
    if incomplete is not None:
        print(f"slatelake compact-store: {incomplete}", file=sys.stderr)
        return EXIT_ERROR
    return 0


def register(sub: Any) -> None:
    p = lake_verb(
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
    add_json(
        p,
        "print the census as one JSON object: manifest_id, subspaces (a row each), "
        "objects, objects_error, ...",
    )
    p.add_argument(
        "--objects",
        action="store_true",
        help="print the object totals by kind (log, manifest, sst, wal, other) instead",
    )
    p = lake_verb(
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
        help="wait up to DURATION for the merges to commit (default: submit and return); "
        + DURATION_WORDS,
    )
    p.add_argument(
        "--require-completed",
        action="store_true",
        help="exit 1 unless every merge completed or had nothing to merge (needs --timeout)",
    )
    add_json(p)
