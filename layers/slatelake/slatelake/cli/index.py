"""``slatelake index create|drop|list|lookup``: equality indexes from a shell.

Each verb is one session call. ``lookup`` takes the value as text; DuckDB
casts it to the column's type, exactly as the index rendered it, and a value
the column cannot hold exits 2 naming it. The lake URL and every name are
checked at argument parsing (exit 2), before the lake is opened.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from typing import Any

from slatelake.cli.arguments import catalog_text, lake_url
from slatelake.cli.common import EXIT_USAGE, print_json, print_table

COLUMNS = ("name", "index_id", "schema", "table", "column", "kind")


def _connect(args: argparse.Namespace, read_only: bool = False) -> Any:
    import slatelake

    return slatelake.connect(args.lake, read_only=read_only)


def _cmd_create(args: argparse.Namespace) -> int:
    with _connect(args) as session:
        info = session.create_index(args.table, args.column, args.name)
    if args.json:
        print_json(asdict(info))
    else:
        print(f"created index {info.name} ({info.kind})")
    return 0


def _cmd_drop(args: argparse.Namespace) -> int:
    with _connect(args) as session:
        info = session.drop_index(args.name)
    if args.json:
        print_json(asdict(info))
    else:
        print(f"dropped index {info.name}; the sweep reclaims its entries")
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    with _connect(args, read_only=True) as session:
        infos = session.list_indexes()
    if args.json:
        print_json([asdict(i) for i in infos])
    else:
        print_table(COLUMNS, [[getattr(i, c) for c in COLUMNS] for i in infos])
    return 0


def _cmd_lookup(args: argparse.Namespace) -> int:
    from slatelake import MisconfigurationError, admin

    with _connect(args, read_only=True) as session:
        try:
            rows = session.lookup(args.table, args.column, args.value)
        except MisconfigurationError as exc:  # e.g. the value does not cast to the column
            print(f"slatelake index lookup: {exc}", file=sys.stderr)
            return EXIT_USAGE
        names = admin.column_names(session, args.table)  # the table as the lake names it, quoted
    if args.json:
        print_json([dict(zip(names, r, strict=True)) for r in rows])
    else:
        print_table(names, rows)
    return 0


def register(sub: Any) -> None:
    index = sub.add_parser(
        "index",
        help="Equality indexes: create, drop, list, lookup.",
        description="Equality indexes kept in the lake's index subspace. A dropped index's "
        "entries are reclaimed by the maintenance sweep.",
    )
    verbs = index.add_subparsers(dest="verb", required=True, metavar="VERB")

    def verb(name: str, func: Any, help_: str) -> argparse.ArgumentParser:
        p = verbs.add_parser(name, help=help_, description=help_)
        p.set_defaults(func=func)
        p.add_argument("lake", metavar="LAKE", type=lake_url, help="lake URL")
        return p

    p = verb("create", _cmd_create, "Index a column; builds entries for its rows now.")
    p.add_argument("table", type=catalog_text, help="table name, or schema.table")
    p.add_argument("column", type=catalog_text)
    p.add_argument("--name", type=catalog_text, help="index name (default <table>_<column>_idx)")
    p.add_argument("--json", action="store_true")
    p = verb("drop", _cmd_drop, "Drop an index by name; its entries stop being visible at once.")
    p.add_argument("name", type=catalog_text)
    p.add_argument("--json", action="store_true")
    p = verb("list", _cmd_list, "List the live indexes (read-only).")
    p.add_argument("--json", action="store_true")
    p = verb("lookup", _cmd_lookup, "The live rows whose column equals VALUE (read-only).")
    p.add_argument("table", type=catalog_text, help="table name, or schema.table")
    p.add_argument("column", type=catalog_text)
    p.add_argument("value", type=catalog_text)
    p.add_argument("--json", action="store_true")
