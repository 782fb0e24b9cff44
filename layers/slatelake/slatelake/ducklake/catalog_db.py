"""The catalog as DuckDB tables: load, copy, and apply change sets by key.

A session keeps the catalog in DuckDB, never as one Python object per row:
``base`` is the committed catalog at the session's head, ``meta`` is the copy
DuckLake works on. Both advance by applying change sets (the log's unit) in
SQL: a change set says "the rows under key K are now V" or "are gone", so
applying one means finding the rows a key names (its key columns, plus
``end_snapshot`` for versioned tables: NULL for a live key, the value for a
history key), deleting them and inserting the new ones. A tail of change sets
is first reduced to its net effect per key, then applied with a few
statements per table however long the tail.

Digested key columns (metadata keys, tag keys, scheduled paths) cannot be
matched in SQL; their tables are small and are matched in Python.
"""

from __future__ import annotations

import contextlib
import uuid
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb

from slatelake.catalog import registry
from slatelake.catalog.registry import TIMESTAMPTZ, InlineTable, TableSpec
from slatelake.catalog.rows import (
    NULL_COMPONENT,
    Row,
    decode_entry,
    group_key,
    inline_row_key,
    inline_rows_prefix,
    row_key,
    table_of_key,
)
from slatelake.catalog.state import CatalogState
from slatelake.ducklake.sql import ident, literal
from slatelake.ducklake.tables import (
    create_sql,
    insert_inline_rows,
    load_inline_table,
    load_registry_table,
    meta_tables,
    select_list,
    table_columns,
)
from slatelake.errors import CorruptionError
from slatelake.log.changeset import ChangeSet, KeyRange, prefix_range
from slatelake.store.keys import Subspace, decode_key

# Above this many rows an insert goes through the CSV loader, below through
# parameter lists (no temporary file).
CSV_THRESHOLD = 2_000
_CATALOG = (Subspace.SNAPSHOT, Subspace.CURRENT, Subspace.HISTORY, Subspace.INLINE)


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
        values = _values_sql(spec, rows)
        if values is None:
            load_registry_table(con, db, spec, rows)
        else:
            spelled.append(f"INSERT INTO {ident(db)}.{ident(spec.name)} VALUES {values}")
    if spelled:
        con.execute(";\n".join(spelled))
    for name, columns in state.inline_ddl().items():
        load_inline_table(con, db, name, columns, tables.get(name, []))


def catalog_tables(con: duckdb.DuckDBPyConnection, db: str) -> list[str]:
    """The metadata tables (registry and inlined) a database holds."""
    return sorted(t for t in meta_tables(con, db) if _known(t))


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
@dataclass(frozen=True)
class _Shape:
    """How the rows under one kind of key are found: a table and match columns."""

    table: str
    columns: tuple[str, ...]  # matched against the key's components, in order
    spec: TableSpec | None = None  # None for an inlined table
    ended: bool = False  # versioned: also match end_snapshot

    @property
    def digested(self) -> bool:
        return self.spec is not None and any(c in self.spec.digest for c in self.columns)


def _shape(
    con: duckdb.DuckDBPyConnection, db: str, key: bytes, columns: ColumnCache
) -> tuple[_Shape, tuple[Any, ...]]:
    """The table a catalog key belongs to and the values its match columns take."""
    sub, kind, comps = decode_key(key)
    if sub == Subspace.INLINE:
        name = table_of_key(key)
        inline = registry.inline_table(name)
        assert inline is not None
        names = [c for c, _ in columns.get(con, db, name)]
        cols = tuple(names[i] for i in inline.identity)
        return _Shape(name, cols), _values(comps[len(inline.ids) :])
    spec = registry.BY_KIND.get(kind)
    if spec is None:
        raise CorruptionError(f"key {key.hex()}: unknown table kind 0x{kind:02x}")
    if spec.grouped:
        return _Shape(spec.name, spec.group, spec), _values(comps)
    if spec.versioned:
        end = comps[-1] if sub == Subspace.HISTORY else None
        ids = comps[:-1] if sub == Subspace.HISTORY else comps
        return _Shape(spec.name, (*spec.key, "end_snapshot"), spec, True), (*_values(ids), end)
    return _Shape(spec.name, spec.key, spec), _values(comps)


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


class _Fresh:
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

    def __call__(self, shape: _Shape, values: tuple[Any, ...]) -> bool:
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
            row = self.con.execute(
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


def _column_types(con: Any, db: str, table: str, columns: ColumnCache) -> dict[str, str]:
    cols = columns.get(con, db, table)
    return {c: ("BIGINT" if t == TIMESTAMPTZ else t) for c, t in cols}


def rows_at(
    con: duckdb.DuckDBPyConnection, db: str, key: bytes, columns: ColumnCache | None = None
) -> list[Row]:
    """The rows stored under one key (a group's members, or one row), as Python reads them."""
    columns = columns or ColumnCache()
    shape, values = _shape(con, db, key, columns)
    if shape.spec is None and not table_exists(con, db, shape.table):
        return []  # registry tables always exist in a base; inlined ones come and go
    select = select_list(columns.get(con, db, shape.table), inline=shape.spec is None)
    source = f"{ident(db)}.{ident(shape.table)}"
    if shape.digested:
        rows = [tuple(r) for r in con.execute(f"SELECT {select} FROM {source}").fetchall()]
        return [r for r in rows if _key_of(shape, r) == key]
    where = " AND ".join(f"{ident(c)} IS NOT DISTINCT FROM ?" for c in shape.columns)
    sql = f"SELECT {select} FROM {source} WHERE {where}"
    return [tuple(r) for r in con.execute(sql, list(values)).fetchall()]


def _key_of(shape: _Shape, row: Row) -> bytes:
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


# -- applying change sets ---------------------------------------------------------
@dataclass
class NetEffect:
    """A run of change sets reduced to what each key ends as (None: gone), plus
    the ranges whose earlier rows go."""

    keys: dict[bytes, bytes | None] = field(default_factory=dict)
    ranges: list[KeyRange] = field(default_factory=list)

    def add(self, cs: ChangeSet) -> None:
        for start, end in cs.ranges:
            for key in [k for k in self.keys if start <= k < end]:
                del self.keys[key]
            self.ranges.append((start, end))
        for key, value in cs.puts:
            if key[0] in _CATALOG:
                self.keys[key] = value
        for key in cs.deletes:
            if key[0] in _CATALOG:
                self.keys[key] = None


def apply_change_sets(
    con: duckdb.DuckDBPyConnection,
    db: str,
    change_sets: Iterable[ChangeSet],
    own: bool,
    columns: ColumnCache | None = None,
) -> set[str]:
    """Apply change sets in order to the tables of ``db``; returns the tables touched.

    ``own`` keeps slatelake's own records (a base copy); DuckLake's copy skips them.
    """
    net = NetEffect()
    for cs in change_sets:
        net.add(cs)
    return apply_net(con, db, net, own, columns)


def apply_net(
    con: duckdb.DuckDBPyConnection,
    db: str,
    net: NetEffect,
    own: bool,
    columns: ColumnCache | None = None,
    head_snapshot: int | None = None,
    next_file: int | None | bool = False,
    inline_names: set[str] | None = None,
) -> set[str]:
    """Apply a net effect as one DuckDB transaction: all of it or none (and one
    WAL flush, not one per statement, when ``db`` is a file).

    ``head_snapshot``, when given, is the newest snapshot ``db`` holds: a key
    naming a later snapshot (a new snapshot's rows, a row ended or an inlined
    row added after it) or a file id from that snapshot's next file id on
    (``next_file``, if the caller knows it) cannot have rows there yet, so
    nothing is deleted for it. ``inline_names``, when given, are the inlined
    tables ``db`` holds (none is then looked up)."""
    if not net.keys and not net.ranges:
        return set()  # a lock or status slot: no catalog rows, no transaction
    fresh = None if head_snapshot is None else _Fresh(con, db, head_snapshot, next_file)
    con.execute("BEGIN TRANSACTION")
    try:
        touched = _apply_net(con, db, net, own, columns or ColumnCache(), fresh, inline_names)
    except BaseException:
        with contextlib.suppress(duckdb.Error):
            con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")
    return touched


def _apply_net(
    con: duckdb.DuckDBPyConnection,
    db: str,
    net: NetEffect,
    own: bool,
    columns: ColumnCache,
    fresh: _Fresh | None,
    inline_names: set[str] | None,
) -> set[str]:
    own_kinds = {s.kind for s in registry.OWN_TABLES}
    touched: set[str] = set()
    ddl_puts: dict[str, list[tuple[str, str]]] = {}
    ddl_drops: list[str] = []
    doomed: dict[_Shape, list[tuple[Any, ...]]] = defaultdict(list)
    digest_doomed: dict[str, set[bytes]] = defaultdict(set)
    puts: dict[str, list[Row]] = defaultdict(list)
    for key, value in net.keys.items():
        if key[1] in own_kinds and not own:
            continue
        if key[0] == Subspace.INLINE and key[1] in registry.INLINE_DDL_KINDS:
            name = table_of_key(key)
            if value is None:
                ddl_drops.append(name)
            else:
                ddl_puts[name] = decode_entry(key, value)
            touched.add(name)
            continue
        if value is not None:
            entry = decode_entry(key, value)
            name = table_of_key(key)
            spec = registry.BY_KIND.get(key[1]) if key[0] != Subspace.INLINE else None
            if spec is not None and spec.grouped:
                puts[name].extend(entry)
            else:
                puts[name].append(entry)
    present = _Present(con, db, inline_names)
    for name, ddl in ddl_puts.items():
        # created if absent: looking a missing table up costs DuckDB a search
        # of every attached catalog for a name to suggest
        load_inline_table(con, db, name, [tuple(c) for c in ddl], [], if_absent=True)
        present.add(name)
    for key in net.keys:
        if key[1] in own_kinds and not own:
            continue
        if key[0] == Subspace.INLINE and key[1] in registry.INLINE_DDL_KINDS:
            continue
        name = table_of_key(key)
        if name not in present:
            continue  # an inlined table dropped in the same run
        shape, values = _shape(con, db, key, columns)
        touched.add(name)
        if fresh is not None and fresh(shape, values):
            continue  # a row of a later snapshot or a new file: none there to delete
        if shape.digested:
            digest_doomed[name].add(key)
        else:
            doomed[shape].append(values)
    for start, end in net.ranges:
        touched |= _delete_range(con, db, start, end, own, own_kinds, columns, present)
    for shape, rows in doomed.items():
        _delete_matching(con, db, shape, rows, columns)
    for name, keys in digest_doomed.items():
        _delete_digested(con, db, name, keys)
    for name, rows in puts.items():
        if name in present:
            _insert(con, db, name, rows, columns)
    for name in ddl_drops:
        if name not in ddl_puts:
            con.execute(f"DROP TABLE IF EXISTS {ident(db)}.{ident(name)}")
    return touched


class _Present:
    """Which tables a database holds: every registry table (a base or DuckLake's
    copy always has them), and each inlined table a change set names, from
    the caller's list or else looked up one by one (listing the database's
    tables scans every attached catalog, the lake's too)."""

    def __init__(
        self, con: duckdb.DuckDBPyConnection, db: str, known: set[str] | None = None
    ) -> None:
        self.con, self.db = con, db
        self._known = known  # every inlined table db holds, when the caller knows
        self._inline: dict[str, bool] = {}

    def __contains__(self, name: str) -> bool:
        if name in registry.BY_NAME:
            return True
        found = self._inline.get(name)
        if found is None:
            if self._known is not None:
                found = name in self._known
            else:
                found = table_exists(self.con, self.db, name)
            self._inline[name] = found
        return found

    def add(self, name: str) -> None:
        self._inline[name] = True


# Up to this many ids delete through an IN list of constants, which DuckDB
# answers from a table's primary-key index instead of scanning the table.
IN_LIST_MAX = 512


def _delete_matching(
    con: duckdb.DuckDBPyConnection,
    db: str,
    shape: _Shape,
    rows: list[tuple[Any, ...]],
    columns: ColumnCache,
) -> None:
    if _delete_by_id(con, db, shape, rows):
        return
    types = _column_types(con, db, shape.table, columns)
    lists = ", ".join(
        f"unnest(?::{types.get(c, 'BIGINT')}[]) AS k{int(i)}" for i, c in enumerate(shape.columns)
    )
    match = " AND ".join(
        f"t.{ident(c)} IS NOT DISTINCT FROM v.k{int(i)}" for i, c in enumerate(shape.columns)
    )
    params = [list(col) for col in zip(*rows, strict=True)]
    con.execute(
        f"DELETE FROM {ident(db)}.{ident(shape.table)} t USING (SELECT {lists}) v WHERE {match}",
        params,
    )


def _delete_by_id(
    con: duckdb.DuckDBPyConnection, db: str, shape: _Shape, rows: list[tuple[Any, ...]]
) -> bool:
    """Rows keyed by one integer id (plus ``end_snapshot`` for a versioned
    table), a few of them: one ``IN`` list per end value, so a commit's apply
    costs its keys, not a scan of a 100k-row table. False when the shape is
    not one of those."""
    ids = shape.columns[:-1] if shape.ended else shape.columns
    if len(ids) != 1 or len(rows) > IN_LIST_MAX or any(r[0] is None for r in rows):
        return False
    by_end: dict[Any, list[int]] = defaultdict(list)
    for row in rows:
        by_end[row[-1] if shape.ended else None].append(int(row[0]))
    table = f"{ident(db)}.{ident(shape.table)}"
    for end, values in by_end.items():
        listed = ", ".join(str(int(v)) for v in sorted(set(values)))
        where = f"{ident(ids[0])} IN ({listed})"
        if shape.ended:
            where += (
                " AND end_snapshot IS NULL" if end is None else f" AND end_snapshot = {int(end)}"
            )
        con.execute(f"DELETE FROM {table} WHERE {where}")
    return True


def _delete_digested(con: duckdb.DuckDBPyConnection, db: str, table: str, keys: set[bytes]) -> None:
    spec = registry.BY_NAME[table]
    shape = _Shape(table, spec.key, spec)
    sql = f"SELECT rowid, {select_list(spec.columns)} FROM {ident(db)}.{ident(table)}"
    doomed = [r[0] for r in con.execute(sql).fetchall() if _key_of(shape, tuple(r[1:])) in keys]
    if doomed:
        con.execute(
            f"DELETE FROM {ident(db)}.{ident(table)} WHERE rowid IN (SELECT unnest(?::BIGINT[]))",
            [doomed],
        )


def _delete_range(
    con: duckdb.DuckDBPyConnection,
    db: str,
    start: bytes,
    end: bytes,
    own: bool,
    own_kinds: set[int],
    columns: ColumnCache,
    present: _Present,
) -> set[str]:
    """Delete every row whose key falls in [start, end): the tables of that kind,
    rows keyed in Python (ranges clear inlined tables, which are small)."""
    if start[1] in own_kinds and not own:
        return set()
    whole = _whole_inline_table(start, end)
    if whole is not None:  # a flush emptying one inlined table: no key to compute
        if whole not in present:
            return set()
        con.execute(f"DELETE FROM {ident(db)}.{ident(whole)}")
        return {whole}
    if start[0] == Subspace.INLINE:
        names = [t for t in catalog_tables(con, db) if _inline_kind(t) == start[1]]
    else:
        spec = registry.BY_KIND.get(start[1])
        names = [spec.name] if spec is not None and table_exists(con, db, spec.name) else []
    touched = set()
    for name in names:
        inline = registry.inline_table(name)
        spec = registry.BY_NAME.get(name)
        select = select_list(columns.get(con, db, name), inline=inline is not None)
        sql = f"SELECT rowid, {select} FROM {ident(db)}.{ident(name)}"
        doomed = []
        for rowid, *rest in con.execute(sql).fetchall():
            row = tuple(rest)
            if inline is not None:
                key = inline_row_key(inline, row)
            else:
                assert spec is not None
                key = group_key(spec, row) if spec.grouped else row_key(spec, row)
            if start <= key < end:
                doomed.append(rowid)
        if doomed:
            touched.add(name)
            con.execute(
                f"DELETE FROM {ident(db)}.{ident(name)} WHERE rowid IN "
                "(SELECT unnest(?::BIGINT[]))",
                [doomed],
            )
    return touched


def _whole_inline_table(start: bytes, end: bytes) -> str | None:
    """The inlined table a range covers every row of, if it is exactly that."""
    if start[:1] != bytes((Subspace.INLINE,)) or start[1] not in registry.INLINE_ROW_KINDS:
        return None
    try:
        name = table_of_key(start)
    except (CorruptionError, ValueError):
        return None
    inline = registry.inline_table(name)
    if inline is None or (start, end) != prefix_range(inline_rows_prefix(inline)):
        return None
    return name


def _inline_kind(name: str) -> int | None:
    inline = registry.inline_table(name)
    return None if inline is None else inline.row_kind


def _insert(
    con: duckdb.DuckDBPyConnection, db: str, table: str, rows: list[Row], columns: ColumnCache
) -> None:
    spec = registry.BY_NAME.get(table)
    if spec is None:
        insert_inline_rows(con, db, table, columns.get(con, db, table), rows)
        return
    if len(rows) > CSV_THRESHOLD:
        load_registry_table(con, db, spec, rows)
        return
    values = _values_sql(spec, rows)
    if values is not None:
        con.execute(f"INSERT INTO {ident(db)}.{ident(table)} VALUES {values}")
        return
    lists = ", ".join(
        f"unnest(?::{'BIGINT' if t == TIMESTAMPTZ else t}[]) AS {ident(c)}" for c, t in spec.columns
    )
    exprs = ", ".join(
        f"make_timestamptz({ident(c)})" if t == TIMESTAMPTZ else ident(c) for c, t in spec.columns
    )
    params = [list(col) for col in zip(*rows, strict=True)]
    con.execute(
        f"INSERT INTO {ident(db)}.{ident(table)} SELECT {exprs} FROM (SELECT {lists})", params
    )


# Up to this many rows an insert spells its values out (a parameter list costs
# DuckDB ~0.5 ms more per statement, several statements per commit).
VALUES_MAX = 64


def _values_sql(spec: TableSpec, rows: list[Row]) -> str | None:
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
