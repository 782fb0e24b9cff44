"""``policy set``, ``policy unset``, ``policy show``: the lake's maintenance policy.

A policy kept on the lake tells every runner (``maintain``, the holder's
scheduler, the Lambda's schedule) what to do without options; options given
to a run override it. Nothing destructive happens until the lake's policy is
enabled (``policy set LAKE --enabled``). ``--cron '0 3 * * *'`` sets the
lake's cadence: the schedule's ticks run a pass only when it is due
(``slatelake.maintenance.cadence`` says when; a schema or table takes no
cron). A schema's or table's policy is
kept under DuckLake's id for it: it follows the table through a rename, ends
when the table is dropped, and is shown under the table's current name.
Each verb is one call on ``lake.policy``; the values are checked there (a
DURATION in the one duration grammar, as every time flag), not here, since
the stored row keeps them as the library reads them.
"""

from __future__ import annotations

import argparse
from typing import Any

from slatelake.cli import output
from slatelake.cli.arguments import DURATION_WORDS, add_json, add_lake, catalog_text, open_lake
from slatelake.cli.common import caller

# flag -> (field, help); booleans take --X / --no-X
_BOOLEANS = {
    "enabled": "the master switch (false by default; the lake's value gates every scope)",
    "compaction": "merge small files and rewrite files with many deletes (true)",
    "flush_inlined": "flush inlined rows to Parquet (true)",
    "orphan_age_floor_override": "allow an --orphan-min-age under the one-hour floor: only when "
    "no write can be in flight, whose new files the orphan step would delete (false)",
}
_VALUES = {
    "retention": ("DURATION", "expire snapshots older than this (7 days)"),
    "target_file_size": ("SIZE", "merge target, e.g. 128MB, or auto (DuckLake's own)"),
    "small_file_min_count": ("N", "files under the target before a threshold run (12)"),
    "rewrite_delete_threshold": ("FRACTION", "deleted-row fraction that rewrites a file (0.2)"),
    "cleanup_grace": ("DURATION", "delete expired files this long after expiry (1 day)"),
    "orphan_min_age": (
        "DURATION",
        "delete orphaned files older than this (1 day; at least 1h without the override)",
    ),
    "keep": (
        "RULES",
        "lake only: thinning beside retention, the newest snapshot kept per hour, day, week, "
        "month or year, e.g. hourly:24,daily:30,monthly:12 (holds and pins still win); none: off",
    ),
    "cron": (
        "CRON",
        "lake only: scheduled passes run only at these times, five cron fields in UTC "
        "(*, numbers, lists 1,2, ranges 1-5, steps */15 or 1-30/5; day of week 0-7, 0 and 7 "
        "Sunday; day of month and day of week both restricted: either matches), each "
        "lake's times moved 0-10 minutes later by a delay of its own; none: every tick runs",
    ),
}


def _given(args: argparse.Namespace) -> dict[str, object]:
    names = [*_BOOLEANS, *_VALUES]
    return {name: getattr(args, name) for name in names if getattr(args, name) is not None}


def _cmd_set(args: argparse.Namespace) -> int:
    row = open_lake(args).policy.set(
        _given(args), schema=args.schema, table=args.table, by=caller()
    )
    output.emit(output.POLICY_SET, row, args.json)
    return 0


def _cmd_unset(args: argparse.Namespace) -> int:
    from slatelake import MisconfigurationError

    if args.all == bool(args.fields):
        raise MisconfigurationError(
            "policy unset: name the fields to unset (e.g. retention), or give --all, not both"
        )
    names = None if args.all else args.fields
    row = open_lake(args).policy.unset(names, schema=args.schema, table=args.table, by=caller())
    output.emit(output.POLICY_UNSET, row, args.json)
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    output.emit(output.POLICY, open_lake(args).policy.show(), args.json)
    return 0


def _scope_flags(p: argparse.ArgumentParser) -> None:
    add_lake(p)
    p.add_argument("--schema", type=catalog_text, help="a schema's policy")
    p.add_argument(
        "--table",
        type=catalog_text,
        metavar="[SCHEMA.]TABLE",
        help="a table's policy (a bare name means schema main; with --schema, taken as spelled)",
    )
    add_json(p, "print the stored row as JSON")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "policy",
        help="Set, unset or show the lake's maintenance policy.",
        description="The maintenance policy kept on the lake: lake > schema > table, field "
        "by field, unset fields falling through to the defaults. Every runner reads it; "
        "options given to a run override it option by option. Nothing runs from it until "
        "the lake's policy is enabled.",
    )
    verbs = p.add_subparsers(dest="policy_command", required=True, metavar="VERB")
    set_ = verbs.add_parser("set", help="Set policy fields at one scope.")
    set_.set_defaults(func=_cmd_set)
    _scope_flags(set_)
    for name, help_ in _BOOLEANS.items():
        set_.add_argument(
            f"--{name.replace('_', '-')}",
            dest=name,
            action=argparse.BooleanOptionalAction,
            default=None,
            help=help_,
        )
    for name, (metavar, help_) in _VALUES.items():
        set_.add_argument(
            f"--{name.replace('_', '-')}",
            dest=name,
            metavar=metavar,
            default=None,
            help=f"{help_}; {DURATION_WORDS}" if metavar == "DURATION" else help_,
        )
    unset = verbs.add_parser(
        "unset", help="Unset policy fields at one scope (they fall through again)."
    )
    unset.set_defaults(func=_cmd_unset)
    _scope_flags(unset)
    unset.add_argument(
        "fields", metavar="FIELD", nargs="*", help="fields to unset (e.g. retention compaction)"
    )
    unset.add_argument("--all", action="store_true", help="unset every field at the scope")
    show = verbs.add_parser("show", help="The stored rows and every table's resolved policy.")
    show.set_defaults(func=_cmd_show)
    add_lake(show)
    add_json(show, "print rows and resolution as JSON")
