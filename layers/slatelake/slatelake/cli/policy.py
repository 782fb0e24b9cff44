"""``policy set``, ``policy unset``, ``policy show``: the lake's maintenance policy.

A policy kept on the lake tells every runner (``maintain``, the holder's
scheduler, the Lambda's schedule) what to do without options; options given
to a run override it. Nothing destructive happens until the lake's policy is
enabled (``policy set LAKE --enabled``). A schema's or table's policy is
kept under DuckLake's id for it: it follows the table through a rename, ends
when the table is dropped, and is shown under the table's current name.
"""

from __future__ import annotations

import argparse
from typing import Any

from slatelake.cli.arguments import catalog_text, lake_url
from slatelake.cli.common import caller, print_json, print_table

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
}


def _shown(fields: dict[str, Any]) -> str:
    from slatelake.maintenance import POLICY_FIELDS

    return ", ".join(f"{k}={POLICY_FIELDS[k].show(v)}" for k, v in fields.items())


def _given(args: argparse.Namespace) -> dict[str, object]:
    names = [*_BOOLEANS, *_VALUES]
    return {name: getattr(args, name) for name in names if getattr(args, name) is not None}


def _cmd_set(args: argparse.Namespace) -> int:
    from slatelake import maintenance

    row = maintenance.set_policy(
        args.lake, _given(args), schema=args.schema, table=args.table, by=caller()
    )
    if args.json:
        print_json({"lake": args.lake, "row": row.to_dict()})
    else:
        print(f"policy for the {row.scope.label}: {_shown(row.fields)}")
    return 0


def _cmd_unset(args: argparse.Namespace) -> int:
    from slatelake import MisconfigurationError, maintenance

    if args.all == bool(args.fields):
        raise MisconfigurationError(
            "policy unset: name the fields to unset (e.g. retention), or give --all, not both"
        )
    names = None if args.all else args.fields
    row = maintenance.unset_policy(
        args.lake, names, schema=args.schema, table=args.table, by=caller()
    )
    if args.json:
        print_json({"lake": args.lake, "row": row.to_dict()})
    elif row.fields:
        print(f"policy for the {row.scope.label} now: {_shown(row.fields)}")
    else:
        print(f"no policy left for the {row.scope.label}")
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    from slatelake import maintenance

    view = maintenance.policies(args.lake)
    if args.json:
        print_json({"lake": args.lake, **view.to_dict()})
        return 0
    state = "enabled" if view.lake["enabled"] else "disabled (nothing runs from the policy)"
    print(f"lake policy {state}")
    stored = [(r.scope.label, _shown(r.fields)) for r in view.rows]
    print_table(("scope", "fields set"), stored or [("(none)", "")])
    print()
    fields = list(view.lake.values)
    rows = [("(lake)", *(view.lake.to_dict()[f]["shown"] for f in fields))]
    for (schema, table), resolved in sorted(view.tables.items()):
        shown = resolved.to_dict()
        rows.append((f"{schema}.{table}", *(shown[f]["shown"] for f in fields)))
    print_table(("resolved", *fields), rows)
    return 0


def _scope_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("lake", metavar="LAKE", type=lake_url, help="lake URL")
    p.add_argument("--schema", type=catalog_text, help="a schema's policy")
    p.add_argument(
        "--table",
        type=catalog_text,
        metavar="[SCHEMA.]TABLE",
        help="a table's policy (a bare name means schema main; with --schema, taken as spelled)",
    )
    p.add_argument("--json", action="store_true", help="print the stored row as JSON")


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
            f"--{name.replace('_', '-')}", dest=name, metavar=metavar, default=None, help=help_
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
    show.add_argument("lake", metavar="LAKE", type=lake_url, help="lake URL")
    show.add_argument("--json", action="store_true", help="print rows and resolution as JSON")
