"""SQL shapes of the metadata tables: DDL, select lists, and row loading.

Registry tables: TIMESTAMPTZ travels as epoch microseconds (``epoch_us`` out,
``make_timestamptz`` in) so no Python time-zone package is needed and values
are exact. UUIDs travel as text. Registry tables load through a temporary CSV
file (Python's C writer, DuckDB's parallel reader: ~5x the JSON route end to
end); inlined-data tables, small by definition and typed by the user, load
as ``VALUES`` lists of literals (``sql.value_sql``), 256 rows a statement.

Inlined-data tables hold the user's values, of every type DuckLake inlines,
and each travels in a form DuckDB gives back exactly (``inline_form``):
- Python values where Python holds the type exactly: integers up to 64 bits,
  BOOLEAN, FLOAT/DOUBLE, DECIMAL, VARCHAR, BLOB, UUID, JSON; and VARIANT,
  whose text would lose its value's type, and nested types holding JSON or
  VARIANT (DuckDB's text of a JSON inside a LIST does not parse back);
- DuckDB's own text (``CAST(c AS VARCHAR)`` out, ``CAST(? AS type)`` in) for
  every other type: HUGEINT/UHUGEINT past 64 bits, DATE/TIMESTAMP infinities
  and years Python lacks, nanoseconds, TIME '24:00:00', TIMETZ, INTERVAL
  months, NaN inside a LIST or STRUCT;
- TIMESTAMPTZ as UTC text (``'2024-11-03 05:30:00+00'``, ``'infinity'``), not
  the session zone's (a historical offset with seconds prints without them).
Still lossy (no DuckDB text gives them back): a VARIANT is what Python holds
of it, so its inner types can narrow (DECIMAL(5,2) -> DECIMAL(3,2)) and what
Python lacks is lost as before (a DATE infinity, an INTERVAL's months); a
TIMESTAMPTZ inside a LIST, STRUCT or MAP is in the session zone's text, whose
offsets before ~1900 (LMT) lose their seconds.
Rows stored before these forms (typed Python values; TIMESTAMPTZ as epoch
microseconds) load through the same expressions: ``CAST(? AS type)`` casts a
typed parameter as well as text, and a TIMESTAMPTZ takes either form.
"""

from __future__ import annotations

import csv
import datetime as dt
import decimal
import json
import os
import re
import tempfile
import threading
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb

from slatelake.catalog import registry
from slatelake.catalog.registry import TIMESTAMPTZ, TableSpec
from slatelake.catalog.rows import Row
from slatelake.ducklake.sql import ident, literal, run, value_sql
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
# Rows per JSON document: DuckDB's unnest of one document grows with its square
# (22 us a row at 500 rows, 92 at 4,000; a 50,000-row document took minutes).
JSON_CHUNK = 500
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


def select_list(columns: Sequence[tuple[str, str]], inline: bool = False) -> str:
    """Columns as Python can fetch them exactly: a registry table's with
    TIMESTAMPTZ as epoch µs, an inlined table's in ``inline_form``."""
    out = []
    for name, typ in columns:
        q = ident(name)
        if inline:
            out.append(inline_value_sql(q, typ))
        else:
            out.append(f"epoch_us({q})" if typ.upper() == TIMESTAMPTZ else q)
    return ", ".join(out)


# -- inlined tables' values ---------------------------------------------------------
PYTHON, TEXT, UTC_TEXT = "python", "text", "utc-text"
# Types whose values Python holds exactly, fetched and bound as they are.
_PYTHON_EXACT = frozenset(
    {
        "BOOLEAN",
        "TINYINT",
        "SMALLINT",
        "INTEGER",
        "BIGINT",
        "UTINYINT",
        "USMALLINT",
        "UINTEGER",
        "UBIGINT",
        "FLOAT",
        "DOUBLE",
        "VARCHAR",
        "BLOB",
        "UUID",
        "JSON",
        "VARIANT",
    }
)
_DECIMAL = re.compile(r"DECIMAL\(\d+,\s*\d+\)")
_INTEGER_TYPES = frozenset(
    {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT"}
    | {"UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT", "UHUGEINT"}
)
_QUOTED_NAME = re.compile(r'"(?:[^"]|"")*"')  # a STRUCT field name in a type's text
_NO_TEXT_INSIDE = re.compile(r"\b(JSON|VARIANT)\b")  # their text inside a LIST is lossy


def inline_form(typ: str) -> str:
    """How an inlined table's column of DuckDB type ``typ`` travels (module doc)."""
    upper = typ.upper()
    if upper == TIMESTAMPTZ:
        return UTC_TEXT
    if upper in _PYTHON_EXACT or _DECIMAL.fullmatch(upper):
        return PYTHON
    if _NO_TEXT_INSIDE.search(_QUOTED_NAME.sub('""', upper)):
        return PYTHON
    return TEXT


def inline_value_sql(expr: str, typ: str) -> str:
    """``expr`` (SQL of type ``typ``) in its ``inline_form``."""
    form = inline_form(typ)
    if form == TEXT:
        return f"CAST({expr} AS VARCHAR)"
    if form == UTC_TEXT:
        return (
            f"CASE WHEN isfinite({expr}) THEN CAST(timezone('UTC', {expr}) AS VARCHAR) || '+00' "
            f"ELSE CAST({expr} AS VARCHAR) END"
        )
    return expr


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
        run(
            con,
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
    for start in range(0, len(rows), JSON_CHUNK):
        chunk = rows[start : start + JSON_CHUNK]
        doc = json.dumps(
            [{n: _json_value(v) for n, v in zip(names, row, strict=True)} for row in chunk]
        )
        run(con, sql, [doc])


def load_inline_table(
    con: duckdb.DuckDBPyConnection,
    db: str,
    name: str,
    columns: list[tuple[str, str]],
    rows: list[Row],
    if_absent: bool = False,
) -> None:
    """Create an inlined-data table and load its rows; ``if_absent`` leaves an
    existing one as it is."""
    cols = ", ".join(f"{ident(c)} {type_sql(con, name, c, t)}" for c, t in columns)
    con.execute(
        f"CREATE TABLE {'IF NOT EXISTS ' if if_absent else ''}{ident(db)}.{ident(name)} ({cols})"
    )
    insert_inline_rows(con, db, name, columns, rows)


def insert_inline_rows(
    con: duckdb.DuckDBPyConnection,
    db: str,
    name: str,
    columns: Sequence[tuple[str, str]],
    rows: list[Row],
) -> None:
    """Rows into an inlined-data table, each value in its ``inline_form`` or as
    stored before it (typed Python values, TIMESTAMPTZ as epoch µs), spelled
    as literals (``sql.value_sql``); a chunk holding a value with no spelling
    binds its values instead."""
    if not rows:
        return
    cols = [_InlineColumn.of(type_sql(con, name, c, t)) for c, t in columns]
    values = [_params(cols, row, name) for row in rows]
    row_marks = f"({', '.join(col.sql(['?'] * col.width) for col in cols)})"
    # many rows per statement: one statement's cost, not one per row
    for i in range(0, len(values), ROWS_PER_INSERT):
        chunk = values[i : i + ROWS_PER_INSERT]
        spelled = _spelled(cols, chunk)
        if spelled is not None:
            con.execute(f"INSERT INTO {ident(db)}.{ident(name)} VALUES {spelled}")
            continue
        marks = ", ".join([row_marks] * len(chunk))
        con.execute(
            f"INSERT INTO {ident(db)}.{ident(name)} VALUES {marks}",
            [value for row in chunk for value in row],
        )


# Rows of an inlined table per INSERT.
ROWS_PER_INSERT = 256


@dataclass(frozen=True)
class _InlineColumn:
    """How one inlined column's values load: ``CAST(v AS type)``, or for a
    TIMESTAMPTZ either of its stored forms (epoch µs, UTC text)."""

    typ: str
    form: str
    exact_text: bool  # a DECIMAL or integer column: text casts to it exactly

    @classmethod
    def of(cls, typ: str) -> _InlineColumn:
        upper = typ.upper()
        exact = bool(_DECIMAL.fullmatch(upper)) or upper in _INTEGER_TYPES
        return cls(typ, inline_form(typ), exact)

    @property
    def width(self) -> int:
        return 2 if self.form == UTC_TEXT else 1

    def convert(self, value: Any) -> tuple[Any, ...]:
        if self.form == UTC_TEXT:
            return _timestamptz_params(value)
        if self.form == TEXT:
            return _text_param(value)
        return (value,)

    def spell(self, value: Any) -> str | None:
        # a DECIMAL below 1 or an integer past 64 bits has no literal of the
        # type a bound one gets, but cast to its own column its text is exact
        if self.exact_text and (
            (isinstance(value, int) and not isinstance(value, bool))
            or (isinstance(value, decimal.Decimal) and value.is_finite())
        ):
            return literal(str(value))
        return value_sql(value)

    def sql(self, parts: list[str]) -> str:
        if self.form == UTC_TEXT:
            epoch, text = parts
            return (
                f"COALESCE(make_timestamptz(CAST({epoch} AS BIGINT)), "
                f"CAST(CAST({text} AS VARCHAR) AS TIMESTAMPTZ))"
            )
        return f"CAST({parts[0]} AS {self.typ})"


def _spelled(cols: list[_InlineColumn], chunk: list[list[Any]]) -> str | None:
    """``(v, ...), ...`` for a chunk of rows; None when a value has no spelling."""
    out: list[str] = []
    for row in chunk:
        parts: list[str] = []
        at = 0
        for col in cols:
            spelled = [col.spell(v) for v in row[at : at + col.width]]
            at += col.width
            if any(p is None for p in spelled):
                return None
            parts.append(col.sql([p for p in spelled if p is not None]))
        out.append(f"({', '.join(parts)})")
    return ", ".join(out)


def _params(cols: list[_InlineColumn], row: Row, table: str) -> list[Any]:
    if len(row) != len(cols):
        raise CorruptionError(f"{table}: a row has {len(row)} values for {len(cols)} columns")
    out: list[Any] = []
    for col, value in zip(cols, row, strict=True):
        out.extend(col.convert(value))
    return out


def _timestamptz_params(value: Any) -> tuple[Any, ...]:
    if value is None:
        return (None, None)
    if isinstance(value, str):
        return (None, value)
    if isinstance(value, int) and not isinstance(value, bool):
        return (value, None)
    raise CorruptionError(
        f"an inlined TIMESTAMPTZ value is {type(value).__name__}, neither text nor epoch µs"
    )


def _text_param(value: Any) -> tuple[Any, ...]:
    """Text as captured, or a typed value stored before the text form. DuckDB
    cannot cast a TIME to TIME_NS, so a stored time goes as its text."""
    if isinstance(value, dt.time) and value.tzinfo is None:
        return (value.isoformat(),)
    return (value,)


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


def meta_tables(
    con: duckdb.DuckDBPyConnection, db: str, known: Iterable[str] | None = None
) -> set[str]:
    """The tables of ``db``, a session's metadata database (or base).

    A session attaches its own databases ``HIDDEN``, as stock DuckLake hides
    its metadata catalog, so DuckDB's listings (``duckdb_tables()``,
    ``duckdb_columns()``, ``information_schema``) never name them; and those
    listings cost a lookup of every lake table's statistics at each new
    snapshot anyway. ``known`` given (the inlined tables the caller knows
    ``db`` holds, as a session's state does): found by name, three queries
    whatever the lake holds (``named_tables``). Otherwise every table, ones
    slatelake does not know included, listed whole (``listed_tables``)."""
    if known is None:
        return listed_tables(con, db)
    return named_tables(con, db, known)


def named_tables(con: duckdb.DuckDBPyConnection, db: str, known: Iterable[str]) -> set[str]:
    """DuckLake's tables in ``db``, looked up by name: the registry's, the
    inlined-data tables ``ducklake_inlined_data_tables`` names, and the
    inlined tables of ``known`` (an inlined-deletion table,
    ``ducklake_inlined_delete_<table id>``, is named nowhere else). One query
    names the inlined-data tables, one looks each candidate up (binding it
    scans nothing); a name it cannot find is looked up alone (an absent
    table costs ~1 ms there: DuckDB searches every catalog for a hint)."""
    names = set(present_of(con, db, [spec.name for spec in registry.TABLES]))
    inlined: set[str] = set()
    if "ducklake_inlined_data_tables" in names:
        rows = con.execute(
            f"SELECT table_name FROM {ident(db)}.ducklake_inlined_data_tables"
        ).fetchall()
        inlined = {str(n) for (n,) in rows if registry.inline_table(str(n)) is not None}
    inlined |= {n for n in known if registry.inline_table(n) is not None}
    names.update(present_of(con, db, sorted(inlined)))
    return names


def present_of(con: duckdb.DuckDBPyConnection, db: str, names: Sequence[str]) -> list[str]:
    """Which of ``names`` ``db`` holds: one query naming them all, then one
    lookup per name only when some is absent."""
    if not names:
        return []
    probe = " UNION ALL ".join(
        f"SELECT 1 FROM {ident(db)}.{ident(name)} WHERE false" for name in names
    )
    try:
        con.execute(probe)
    except duckdb.CatalogException:
        return [name for name in names if _exists(con, db, name)]
    return list(names)


def _exists(con: duckdb.DuckDBPyConnection, db: str, name: str) -> bool:
    try:
        con.execute(f"SELECT 1 FROM {ident(db)}.{ident(name)} WHERE false")
    except duckdb.CatalogException:
        return False
    return True


# A DuckDB of slatelake's own, never the user's: it lists the schema copies
# ``listed_tables`` makes (a fresh DuckDB costs ~7 ms; one per process, by
# pid: a forked child makes its own).
_lister: tuple[int, duckdb.DuckDBPyConnection] | None = None
_lister_lock = threading.Lock()


def listed_tables(con: duckdb.DuckDBPyConnection, db: str) -> set[str]:
    """Every table in ``db``'s ``main``, ones slatelake does not know included.

    No DuckDB lists a hidden database's tables, so its schema (no rows) is
    copied into a hidden scratch file, on a cursor of its own (outside any
    transaction of ``con``'s), and a DuckDB of slatelake's own attaches and
    lists that file: nothing the user can see, ~8 ms whatever the catalog
    holds. For the paths that cannot name every table: a capture the query
    log cannot vouch for, the capture check, an open from an image."""
    with tempfile.TemporaryDirectory(prefix="slatelake-list-") as tmp:
        path = os.path.join(tmp, "schema.duckdb")
        scratch = f"__slatelake_list_{uuid.uuid4().hex[:12]}"
        cur = con.cursor()
        try:
            # the newest storage: an inlined table may hold a VARIANT column
            cur.execute(
                f"ATTACH {literal(path)} AS {ident(scratch)} (HIDDEN, STORAGE_VERSION 'latest')"
            )
            try:
                cur.execute(f"COPY FROM DATABASE {ident(db)} TO {ident(scratch)} (SCHEMA)")
            finally:
                cur.execute(f"DETACH DATABASE {ident(scratch)}")  # checkpoints the file
        finally:
            cur.close()
        with _lister_lock:
            lister = _own_duckdb()
            lister.execute(f"ATTACH {literal(path)} AS listed (READ_ONLY)")
            try:
                rows = lister.execute(
                    "SELECT table_name FROM duckdb_tables() "
                    "WHERE database_name = 'listed' AND schema_name = 'main'"
                ).fetchall()
            finally:
                lister.execute("DETACH listed")
    return {str(n) for (n,) in rows}


def _own_duckdb() -> duckdb.DuckDBPyConnection:
    """The process's lister (under ``_lister_lock``): offline, nothing loaded."""
    global _lister
    if _lister is None or _lister[0] != os.getpid():
        config = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}
        _lister = (os.getpid(), duckdb.connect(config=config))
    return _lister[1]


def is_metadata_table(name: str) -> bool:
    return name in registry.BY_NAME or registry.inline_table(name) is not None
