"""The catalog as DuckDB tables: load, copy, and which rows a key names.

A session keeps the catalog in DuckDB, never as one Python object per row:
``base`` is the committed catalog at the session's head, ``meta`` is the copy
DuckLake works on. Both advance by applying change sets (the log's unit) in
SQL: a change set says "the rows under key K are now V" or "are gone", so
applying one means finding the rows a key names (its key columns, plus
``end_snapshot`` for versioned tables: NULL for a live key, the value for a
history key), deleting them and inserting the new ones (``catalog_apply``,
a few statements per table however long the tail).

Digested key columns (metadata keys, tag keys, scheduled paths) cannot be
matched in SQL; their tables are small and are matched in Python.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb

from slatelake.catalog import registry
from slatelake.catalog.registry import TIMESTAMPTZ, InlineTable, TableSpec
from slatelake.catalog.rows import (
    NULL_COMPONENT,
    Row,
    group_key,
    inline_row_key,
    row_key,
    table_of_key,
)
from slatelake.catalog.state import CatalogState
from slatelake.ducklake.sql import ident, literal, run
from slatelake.ducklake.tables import (
    create_sql,
    load_inline_table,
    load_registry_table,
    meta_tables,
    select_list,
    table_columns,
)
from slatelake.errors import CorruptionError
from slatelake.store.keys import Subspace, decode_key

# Above this many rows an insert goes through the CSV loader, below through
# parameter lists (no temporary file).
CSV_THRESHOLD = 2_000
CATALOG_SUBSPACES = (Subspace.SNAPSHOT, Subspace.CURRENT, Subspace.HISTORY, Subspace.INLINE)


class ColumnCache:
    """Column lists of the tables of a catalog, read from DuckDB at most once
    per inlined table: an inlined table's name fixes its columns (a table id,
    never reused, and a schema version), so one session reads them once, not
    at every commit (each read is a catalog scan). One cache per lake."""

    def __init__(self) -> None:
        self._known: dict[str, list[tuple[str, str]]] = {}

    def get(self, con: duckdb.DuckDBPyConnection, db: str, table: str) -> list[tuple[str, str]]:
        spec = registry.BY_NAME.get(table)
        if spec is not None:
            return list(spec.columns)
        known = self._known.get(table)
        if known is None:
            known = table_columns(con, db, table)
            if known:  # an absent table caches nothing
                self._known[table] = known
        return list(known)


def registry_specs(own: bool) -> tuple[TableSpec, ...]:
    """DuckLake's tables, plus slatelake's own records for a base copy."""
    return (*registry.TABLES, *registry.OWN_TABLES) if own else registry.TABLES


def create_tables(con: duckdb.DuckDBPyConnection, db: str, own: bool) -> None:
    """Every registry table, in one call (a call per table costs DuckDB's
    per-statement overhead ~30 times)."""
    con.execute(
        ";\n".join(
            create_sql(db, spec).replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS", 1)
            for spec in registry_specs(own)
        )
    )


def load_state(con: duckdb.DuckDBPyConnection, db: str, state: CatalogState, own: bool) -> None:
    """Lay a materialized state into an empty database (the store path of an open).

    Small tables (most of a catalog's, all of a young lake's) are spelled out
    as ``VALUES`` and sent together in one call; a large table, or one holding
    a value ``VALUES`` cannot spell, goes through its bulk load."""
    tables = state.tables()
    create_tables(con, db, own)
    spelled: list[str] = []
    for spec in registry_specs(own):
        rows = tables.get(spec.name)
        if not rows:
            continue
        values = values_sql(spec, rows)
        if values is None:
            load_registry_table(con, db, spec, rows)
        else:
            spelled.append(f"INSERT INTO {ident(db)}.{ident(spec.name)} VALUES {values}")
    if spelled:
        con.execute(";\n".join(spelled))
    for name, columns in state.inline_ddl().items():
        load_inline_table(con, db, name, columns, tables.get(name, []))


def catalog_tables(
    con: duckdb.DuckDBPyConnection, db: str, known: Iterable[str] | None = None
) -> list[str]:
    """The metadata tables (registry and inlined) a database holds: by name
    when ``known`` names the inlined ones it holds, else listed whole
    (``tables.meta_tables``: the session's databases are hidden from
    DuckDB's listings)."""
    return sorted(t for t in meta_tables(con, db, known) if _known(t))


def _known(name: str) -> bool:
    return name in registry.BY_NAME or registry.inline_table(name) is not None


def copy_database(con: duckdb.DuckDBPyConnection, src: str, dst: str, own: bool) -> None:
    """Copy every metadata table of ``src`` into the empty ``dst``.

    One ``COPY FROM DATABASE`` (a third of the time of a statement pair per
    table): registry tables keep DuckLake's DDL, inlined tables their column
    types. ``own`` keeps slatelake's own records too (a base copy has them,
    DuckLake's copy does not). ``src`` holds metadata tables only, so the copy
    holds nothing else."""
    con.execute(f"COPY FROM DATABASE {ident(src)} TO {ident(dst)}")
    if not own:
        for spec in registry.OWN_TABLES:
            con.execute(f"DROP TABLE IF EXISTS {ident(dst)}.{ident(spec.name)}")


# -- keys to rows -----------------------------------------------------------------
GROUPS_PER_QUERY = 1000  # keys matched by one query of ``groups_at``


@dataclass(frozen=True)
class Shape:
    """How the rows under one kind of key are found: a table and match columns."""

    table: str
    columns: tuple[str, ...]  # matched against the key's components, in order
    spec: TableSpec | None = None  # None for an inlined table
    ended: bool = False  # versioned: also match end_snapshot

    @property
    def digested(self) -> bool:
        return self.spec is not None and any(c in self.spec.digest for c in self.columns)


def key_shape(
    con: duckdb.DuckDBPyConnection, db: str, key: bytes, columns: ColumnCache
) -> tuple[Shape, tuple[Any, ...]]:
    """The table a catalog key belongs to and the values its match columns take."""
    sub, kind, comps = decode_key(key)
    if sub == Subspace.INLINE:
        name = table_of_key(key)
        inline = registry.inline_table(name)
        assert inline is not None
        names = [c for c, _ in columns.get(con, db, name)]
        cols = tuple(names[i] for i in inline.identity)
        return Shape(name, cols), _values(comps[len(inline.ids) :])
    spec = registry.BY_KIND.get(kind)
    if spec is None:
        raise CorruptionError(f"key {key.hex()}: unknown table kind 0x{kind:02x}")
    if spec.grouped:
        return Shape(spec.name, spec.group, spec), _values(comps)
    if spec.versioned:
        end = comps[-1] if sub == Subspace.HISTORY else None
        ids = comps[:-1] if sub == Subspace.HISTORY else comps
        return Shape(spec.name, (*spec.key, "end_snapshot"), spec, True), (*_values(ids), end)
    return Shape(spec.name, spec.key, spec), _values(comps)


_SNAPSHOT_COLUMNS = frozenset({"snapshot_id", "begin_snapshot", "end_snapshot"})
# Tables keyed first by a file id, which DuckLake takes from next_file_id.
_FILE_KEYED = frozenset(
    {
        "ducklake_data_file",
        "ducklake_delete_file",
        "ducklake_file_column_stats",
        "ducklake_file_partition_value",
        "ducklake_file_variant_stats",
    }
)


class Fresh:
    """Which keys cannot have rows yet in a database at ``head_snapshot``: those
    naming a later snapshot, and files with ids from the head's next file id
    on (``next_file``, when the caller knows it; else read once, only when a
    file key comes up)."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        db: str,
        head_snapshot: int,
        next_file: int | None | bool = False,  # False: not known, read it if needed
    ) -> None:
        self.con, self.db, self.head = con, db, head_snapshot
        self._next_file = next_file

    def __call__(self, shape: Shape, values: tuple[Any, ...]) -> bool:
        if any(
            c in _SNAPSHOT_COLUMNS and v is not None and v > self.head
            for c, v in zip(shape.columns, values, strict=True)
        ):
            return True
        if shape.table not in _FILE_KEYED or values[0] is None:
            return False
        next_file = self._next_file_id()
        return next_file is not None and values[0] >= next_file

    def _next_file_id(self) -> int | None:
        if self._next_file is False:
            row = run(
                self.con,
                f"SELECT next_file_id FROM {ident(self.db)}.ducklake_snapshot "
                "WHERE snapshot_id = ?",
                [self.head],
            ).fetchone()
            self._next_file = None if row is None or row[0] is None else int(row[0])
        return self._next_file  # type: ignore[return-value]


def _values(comps: Sequence[int]) -> tuple[Any, ...]:
    return tuple(None if c == NULL_COMPONENT else c for c in comps)


def table_exists(con: duckdb.DuckDBPyConnection, db: str, table: str) -> bool:
    """One table looked up by name (``duckdb_columns()`` would list every
    attached catalog's, the lake's too)."""
    try:
        con.execute(f"SELECT 1 FROM {ident(db)}.{ident(table)} LIMIT 0")
    except duckdb.CatalogException:
        return False
    return True


def column_types(con: Any, db: str, table: str, columns: ColumnCache) -> dict[str, str]:
    cols = columns.get(con, db, table)
    return {c: ("BIGINT" if t == TIMESTAMPTZ else t) for c, t in cols}


def rows_at(
    con: duckdb.DuckDBPyConnection, db: str, key: bytes, columns: ColumnCache | None = None
) -> list[Row]:
    """The rows stored under one key (a group's members, or one row), as Python reads them."""
    columns = columns or ColumnCache()
    shape, values = key_shape(con, db, key, columns)
    if shape.spec is None and not table_exists(con, db, shape.table):
        return []  # registry tables always exist in a base; inlined ones come and go
    select = select_list(columns.get(con, db, shape.table), inline=shape.spec is None)
    source = f"{ident(db)}.{ident(shape.table)}"
    if shape.digested:
        rows = [tuple(r) for r in con.execute(f"SELECT {select} FROM {source}").fetchall()]
        return [r for r in rows if key_of(shape, r) == key]
    where = " AND ".join(f"{ident(c)} IS NOT DISTINCT FROM ?" for c in shape.columns)
    sql = f"SELECT {select} FROM {source} WHERE {where}"
    return [tuple(r) for r in run(con, sql, list(values)).fetchall()]


def groups_at(
    con: duckdb.DuckDBPyConnection,
    db: str,
    keys: Iterable[bytes],
    columns: ColumnCache | None = None,
) -> dict[bytes, list[Row]]:
    """The rows stored under each of ``keys``: one query per table for the
    registry's plain keys (a merge ends dozens of files' statistics at
    once), ``rows_at`` for the others."""
    columns = columns or ColumnCache()
    out: dict[bytes, list[Row]] = {}
    wanted: dict[Shape, list[tuple[Any, ...]]] = {}
    for key in keys:
        shape, values = key_shape(con, db, key, columns)
        if shape.spec is None or shape.digested or any(v is None for v in values):
            out[key] = rows_at(con, db, key, columns)
        else:
            out[key] = []
            wanted.setdefault(shape, []).append(values)
    for shape, found in wanted.items():
        select = select_list(columns.get(con, db, shape.table), inline=False)
        for start in range(0, len(found), GROUPS_PER_QUERY):
            chunk = found[start : start + GROUPS_PER_QUERY]
            if len(shape.columns) == 1:
                where = f"{ident(shape.columns[0])} IN ({', '.join('?' for _ in chunk)})"
            else:
                one = "(" + " AND ".join(f"{ident(c)} = ?" for c in shape.columns) + ")"
                where = " OR ".join(one for _ in chunk)
            sql = f"SELECT {select} FROM {ident(db)}.{ident(shape.table)} WHERE {where}"
            params = [v for values in chunk for v in values]
            for r in run(con, sql, params).fetchall():
                row = tuple(r)
                key = key_of(shape, row)
                if key in out:
                    out[key].append(row)
    return out


def key_of(shape: Shape, row: Row) -> bytes:
    spec = shape.spec
    assert spec is not None
    return group_key(spec, row) if spec.grouped else row_key(spec, row)


def table_rows(
    con: duckdb.DuckDBPyConnection,
    db: str,
    table: str,
    columns: ColumnCache | None = None,
    exists: bool | None = None,
) -> list[Row]:
    """Every row of one table of a base (whose registry tables always exist;
    an inlined table is looked up unless ``exists`` says)."""
    spec = registry.BY_NAME.get(table)
    if exists is None:
        exists = spec is not None or table_exists(con, db, table)
    if not exists:
        return []
    listed = (columns or ColumnCache()).get(con, db, table)
    select = select_list(listed, inline=spec is None)
    sql = f"SELECT {select} FROM {ident(db)}.{ident(table)}"
    return [tuple(r) for r in con.execute(sql).fetchall()]


def inline_keys(
    con: duckdb.DuckDBPyConnection,
    db: str,
    inline: InlineTable,
    columns: ColumnCache | None = None,
    exists: bool | None = None,
) -> set[bytes]:
    rows = table_rows(con, db, inline.name, columns, exists)
    return {inline_row_key(inline, r) for r in rows}


# Up to this many rows an insert spells its values out (a parameter list costs
# DuckDB ~0.5 ms more per statement, several statements per commit).
VALUES_MAX = 64


def values_sql(spec: TableSpec, rows: list[Row]) -> str | None:
    """``(v, ...), ...`` for a few rows of a registry table, every value through
    ``literal``/``int``; None when a value cannot be spelled (then parameters)."""
    if len(rows) > VALUES_MAX:
        return None
    out = []
    for row in rows:
        parts = []
        for (_, typ), value in zip(spec.columns, row, strict=True):
            part = _value_sql(typ, value)
            if part is None:
                return None
            parts.append(part)
        out.append(f"({', '.join(parts)})")
    return ", ".join(out)


def _value_sql(typ: str, value: Any) -> str | None:
    if value is None:
        return "NULL"
    if typ == "BOOLEAN" and isinstance(value, bool):
        return "true" if value else "false"
    if typ == "BIGINT" and isinstance(value, int) and not isinstance(value, bool):
        return f"{int(value)}"
    if typ == TIMESTAMPTZ and isinstance(value, int) and not isinstance(value, bool):
        return f"make_timestamptz({int(value)})"
    if typ == "VARCHAR" and isinstance(value, str) and "\x00" not in value:
        return f"{literal(value)}"
    if typ == "UUID" and isinstance(value, uuid.UUID):
        return f"{literal(str(value))}::UUID"
    return None
