"""``slatelake index create|drop|list|lookup``: equality indexes from a shell.

Each verb is one call on a session from ``lake.connect()``. ``lookup`` takes
the value as text; DuckDB casts it to the column's type, exactly as the index
rendered it, and a value the column cannot hold exits 2 naming it. The lake
URL and every name are checked at argument parsing (exit 2), before the lake
is opened.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from slatelake.cli import output
from slatelake.cli.arguments import add_json, add_lake, catalog_text, open_lake
from slatelake.cli.common import EXIT_USAGE


def _connect(args: argparse.Namespace, read_only: bool = False) -> Any:
    return open_lake(args).connect(read_only=read_only)


def _cmd_create(args: argparse.Namespace) -> int:
    with _connect(args) as session:
        info = session.create_index(args.table, args.column, args.name)
    output.emit(output.INDEX_CREATED, info, args.json)
    return 0


def _cmd_drop(args: argparse.Namespace) -> int:
    with _connect(args) as session:
        info = session.drop_index(args.name)
    output.emit(output.INDEX_DROPPED, info, args.json)
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    with _connect(args, read_only=True) as session:
        infos = session.list_indexes()
    output.emit(output.INDEXES, infos, args.json)
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
    output.emit(output.ROWS, output.Rows(names, rows), args.json)
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
        add_lake(p)
        return p

    p = verb("create", _cmd_create, "Index a column; builds entries for its rows now.")
    p.add_argument("table", type=catalog_text, help="table name, or schema.table")
    p.add_argument("column", type=catalog_text)
    p.add_argument("--name", type=catalog_text, help="index name (default <table>_<column>_idx)")
    add_json(p, "print the index as JSON")
    p = verb("drop", _cmd_drop, "Drop an index by name; its entries stop being visible at once.")
    p.add_argument("name", type=catalog_text)
    add_json(p, "print the dropped index as JSON")
    p = verb("list", _cmd_list, "List the live indexes (read-only).")
    add_json(p, "print the indexes as JSON")
    p = verb("lookup", _cmd_lookup, "The live rows whose column equals VALUE (read-only).")
    p.add_argument("table", type=catalog_text, help="table name, or schema.table")
    p.add_argument("column", type=catalog_text)
    p.add_argument("value", type=catalog_text)
    add_json(p, "print the rows as a JSON array of objects")
