"""SQL shapes of the metadata tables: DDL, select lists, and row loading.

TIMESTAMPTZ travels as epoch microseconds (``epoch_us`` out,
``make_timestamptz`` in) so no Python time-zone package is needed and values
are exact. UUIDs travel as text. Registry tables load through a temporary CSV
file (Python's C writer, DuckDB's parallel reader: ~5x the JSON route end to
end); inlined-data tables, small by definition and typed by the user, load
with executemany.
"""

from __future__ import annotations

import csv
import json
import os
import tempfile
import uuid
from collections.abc import Sequence
from typing import Any

import duckdb

from slatelake.catalog import registry
from slatelake.catalog.registry import TIMESTAMPTZ, TableSpec
from slatelake.catalog.rows import Row
from slatelake.ducklake.sql import ident, literal
from slatelake.errors import CorruptionError

# DuckLake's own constraints on the five tables that have them.
PRIMARY_KEYS = {
    "ducklake_data_file": "data_file_id",
    "ducklake_delete_file": "delete_file_id",
    "ducklake_schema": "schema_id",
    "ducklake_snapshot": "snapshot_id",
    "ducklake_snapshot_changes": "snapshot_id",
}
NOT_NULL = {"ducklake_metadata": ("key", "value")}
LOAD_CHUNK = 50_000
NULL_MARK = "\u2400NULL\u2400"  # the CSV spelling of NULL (a value equal to it goes by JSON)
# The one identifier quoting (ducklake/sql.py), under the name older callers use.
quote = ident


def create_sql(db: str, spec: TableSpec) -> str:
    cols = []
    for name, typ in spec.columns:
        extra = " NOT NULL" if name in NOT_NULL.get(spec.name, ()) else ""
        cols.append(f"{ident(name)} {typ}{extra}")
    if spec.name in PRIMARY_KEYS:
        cols.append(f"PRIMARY KEY ({ident(PRIMARY_KEYS[spec.name])})")
    return f"CREATE TABLE {ident(db)}.{ident(spec.name)} ({', '.join(cols)})"


def select_list(columns: Sequence[tuple[str, str]]) -> str:
    """Columns as Python can fetch them exactly (TIMESTAMPTZ as epoch µs)."""
    out = []
    for name, typ in columns:
        q = ident(name)
        out.append(f"epoch_us({q})" if typ.upper() == TIMESTAMPTZ else q)
    return ", ".join(out)


def _json_value(value: Any) -> Any:
    return str(value) if isinstance(value, uuid.UUID) else value


def load_registry_table(
    con: duckdb.DuckDBPyConnection, db: str, spec: TableSpec, rows: list[Row]
) -> None:
    """Bulk-load rows: through a CSV file (DuckDB parses it ~20x faster than JSON),
    or JSON when a value collides with the CSV NULL marker."""
    if any(NULL_MARK in row for row in rows):
        _load_json(con, db, spec, rows)
    else:
        _load_csv(con, db, spec, rows)


def _load_csv(con: duckdb.DuckDBPyConnection, db: str, spec: TableSpec, rows: list[Row]) -> None:
    types = ", ".join(
        f"{literal(n)}: {literal('BIGINT' if t == TIMESTAMPTZ else t)}" for n, t in spec.columns
    )
    exprs = ", ".join(
        f"make_timestamptz({ident(n)})" if t == TIMESTAMPTZ else ident(n) for n, t in spec.columns
    )
    mark = NULL_MARK
    with tempfile.TemporaryDirectory(prefix="slatelake-load-") as tmp:
        path = os.path.join(tmp, "rows.csv")
        with open(path, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f, quoting=csv.QUOTE_ALL, lineterminator="\n")
            writer.writerows(tuple(mark if v is None else v for v in row) for row in rows)
        con.execute(
            f"INSERT INTO {ident(db)}.{ident(spec.name)} SELECT {exprs} FROM read_csv(?, "
            f"columns = {{{types}}}, header = false, auto_detect = false, delim = ',', "
            "quote = '\"', escape = '\"', new_line = '\\n', allow_quoted_nulls = true, "
            f"nullstr = {literal(mark)})",
            [path],
        )


def _load_json(con: duckdb.DuckDBPyConnection, db: str, spec: TableSpec, rows: list[Row]) -> None:
    names = spec.column_names
    json_types = {n: ("BIGINT" if t == TIMESTAMPTZ else t) for n, t in spec.columns}
    struct = "[" + json.dumps(json_types) + "]"
    exprs = ", ".join(
        f"make_timestamptz({ident(n)})" if t == TIMESTAMPTZ else ident(n) for n, t in spec.columns
    )
    sql = (
        f"INSERT INTO {ident(db)}.{ident(spec.name)} SELECT {exprs} FROM "
        f"(SELECT unnest(from_json(?::JSON, {literal(struct)}), recursive := true))"
    )
    for start in range(0, len(rows), LOAD_CHUNK):
        chunk = rows[start : start + LOAD_CHUNK]
        doc = json.dumps(
            [{n: _json_value(v) for n, v in zip(names, row, strict=True)} for row in chunk]
        )
        con.execute(sql, [doc])


def load_inline_table(
    con: duckdb.DuckDBPyConnection,
    db: str,
    name: str,
    columns: list[tuple[str, str]],
    rows: list[Row],
) -> None:
    cols = ", ".join(f"{ident(c)} {type_sql(con, name, c, t)}" for c, t in columns)
    con.execute(f"CREATE TABLE {ident(db)}.{ident(name)} ({cols})")
    insert_inline_rows(con, db, name, columns, rows)


def insert_inline_rows(
    con: duckdb.DuckDBPyConnection,
    db: str,
    name: str,
    columns: Sequence[tuple[str, str]],
    rows: list[Row],
) -> None:
    """Rows into an inlined-data table (TIMESTAMPTZ values as epoch microseconds)."""
    if not rows:
        return
    marks = ", ".join(
        "make_timestamptz(?)" if t.upper() == TIMESTAMPTZ else "?" for _, t in columns
    )
    con.executemany(f"INSERT INTO {ident(db)}.{ident(name)} VALUES ({marks})", rows)


def type_sql(con: duckdb.DuckDBPyConnection, table: str, column: str, type_name: str) -> str:
    """A stored column type as DuckDB renders it after parsing it as a type: the
    catalog's text reaches DDL only if it is a type, never as statement text."""
    try:
        return str(con.sqltype(type_name))
    except duckdb.Error as exc:
        raise CorruptionError(
            f"{table}.{column}: stored column type {type_name!r} is not a DuckDB type ({exc})"
        ) from None


def table_columns(con: duckdb.DuckDBPyConnection, db: str, table: str) -> list[tuple[str, str]]:
    """A table's columns and types; none for an absent table. ``DESCRIBE`` reads
    one table, where ``duckdb_columns()`` lists every attached one (the lake's
    too: ~10 ms on a 100-table lake)."""
    try:
        rows = con.execute(f"DESCRIBE {ident(db)}.{ident(table)}").fetchall()
    except duckdb.CatalogException:
        return []
    return [(str(r[0]), str(r[1])) for r in rows]


def meta_tables(con: duckdb.DuckDBPyConnection, db: str) -> set[str]:
    """The tables of the (in-memory, view-free) metadata database. Listed from
    ``duckdb_columns()``: ``duckdb_tables()`` computes every attached table's
    size, which makes DuckLake load and cache the statistics of every lake
    table at each new snapshot, a cost per commit that grows with the lake."""
    return {
        name
        for (name,) in con.execute(
            "SELECT DISTINCT table_name FROM duckdb_columns() WHERE database_name = ?", [db]
        ).fetchall()
    }


def is_metadata_table(name: str) -> bool:
    return name in registry.BY_NAME or registry.inline_table(name) is not None
