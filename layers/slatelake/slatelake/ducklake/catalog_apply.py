"""Applying change sets to the catalog's DuckDB tables, by key.

A tail of change sets is reduced to its net effect per key (``NetEffect``),
then applied in one DuckDB transaction with a few statements per table: the
rows a key names are deleted (an ``IN`` list of ids when the key is one
integer, a join on unnested key columns otherwise, in Python for digested
keys) and the new rows inserted (literal ``VALUES`` for a few, the loader
for many). How keys map to rows is ``catalog_db``'s.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import duckdb

from slatelake.catalog import registry
from slatelake.catalog.registry import TIMESTAMPTZ
from slatelake.catalog.rows import (
    Row,
    decode_entry,
    group_key,
    inline_row_key,
    inline_rows_prefix,
    row_key,
    table_of_key,
)
from slatelake.ducklake.catalog_db import (
    CATALOG_SUBSPACES,
    CSV_THRESHOLD,
    ColumnCache,
    Fresh,
    Shape,
    catalog_tables,
    column_types,
    key_of,
    key_shape,
    table_exists,
    values_sql,
)
from slatelake.ducklake.sql import ident, run
from slatelake.ducklake.tables import (
    insert_inline_rows,
    load_inline_table,
    load_registry_table,
    select_list,
)
from slatelake.errors import CorruptionError
from slatelake.log.changeset import ChangeSet, KeyRange, prefix_range
from slatelake.store.keys import Subspace


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
            if key[0] in CATALOG_SUBSPACES:
                self.keys[key] = value
        for key in cs.deletes:
            if key[0] in CATALOG_SUBSPACES:
                self.keys[key] = None

    def merge(self, later: NetEffect) -> None:
        """Follow this run with ``later``'s: its ranges clear what came before
        them, then its keys end as it says (each of them was set after its
        own ranges, or it would not be there)."""
        for start, end in later.ranges:
            for key in [k for k in self.keys if start <= k < end]:
                del self.keys[key]
            self.ranges.append((start, end))
        self.keys.update(later.keys)


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


@dataclass
class Part:
    """One net effect to apply, with what the database holds where it applies
    (``apply_net``'s ``head_snapshot``, ``next_file`` and ``inline_names``)."""

    net: NetEffect
    head_snapshot: int | None = None
    next_file: int | None | bool = False
    inline_names: set[str] | None = None


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
    return apply_parts(con, db, [Part(net, head_snapshot, next_file, inline_names)], own, columns)


def apply_parts(
    con: duckdb.DuckDBPyConnection,
    db: str,
    parts: list[Part],
    own: bool,
    columns: ColumnCache | None = None,
) -> set[str]:
    """Apply net effects on disjoint tables, each judged by what ``db`` holds
    there (``Part``), as one DuckDB transaction."""
    parts = [p for p in parts if p.net.keys or p.net.ranges]
    if not parts:
        return set()  # a lock or status slot: no catalog rows, no transaction
    cache = columns or ColumnCache()
    touched: set[str] = set()
    con.execute("BEGIN TRANSACTION")
    try:
        for part in parts:
            fresh = (
                None
                if part.head_snapshot is None
                else Fresh(con, db, part.head_snapshot, part.next_file)
            )
            touched |= _apply_net(con, db, part.net, own, cache, fresh, part.inline_names)
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
    fresh: Fresh | None,
    inline_names: set[str] | None,
) -> set[str]:
    own_kinds = {s.kind for s in registry.OWN_TABLES}
    touched: set[str] = set()
    ddl_puts: dict[str, list[tuple[str, str]]] = {}
    ddl_drops: list[str] = []
    doomed: dict[Shape, list[tuple[Any, ...]]] = defaultdict(list)
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
        shape, values = key_shape(con, db, key, columns)
        touched.add(name)
        if fresh is not None and net.keys[key] is not None and fresh(shape, values):
            # a row put for a later snapshot or a new file: none there to replace
            # (a delete is always made: a damaged catalog holds rows past the head's
            # ids, and the sweep deletes exactly those)
            continue
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
    tables costs a schema copy: the database is hidden from DuckDB's listings)."""

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

    @property
    def known(self) -> set[str] | None:
        """The inlined tables the caller said db holds (None: it did not say)."""
        return None if self._known is None else set(self._known)


# Up to this many ids delete through an IN list of constants, which DuckDB
# answers from a table's primary-key index instead of scanning the table.
IN_LIST_MAX = 512


def _delete_matching(
    con: duckdb.DuckDBPyConnection,
    db: str,
    shape: Shape,
    rows: list[tuple[Any, ...]],
    columns: ColumnCache,
) -> None:
    if _delete_by_id(con, db, shape, rows):
        return
    types = column_types(con, db, shape.table, columns)
    lists = ", ".join(
        f"unnest(?::{types.get(c, 'BIGINT')}[]) AS k{int(i)}" for i, c in enumerate(shape.columns)
    )
    match = " AND ".join(
        f"t.{ident(c)} IS NOT DISTINCT FROM v.k{int(i)}" for i, c in enumerate(shape.columns)
    )
    params = [list(col) for col in zip(*rows, strict=True)]
    run(
        con,
        f"DELETE FROM {ident(db)}.{ident(shape.table)} t USING (SELECT {lists}) v WHERE {match}",
        params,
    )


def _delete_by_id(
    con: duckdb.DuckDBPyConnection, db: str, shape: Shape, rows: list[tuple[Any, ...]]
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
    shape = Shape(table, spec.key, spec)
    sql = f"SELECT rowid, {select_list(spec.columns)} FROM {ident(db)}.{ident(table)}"
    doomed = [r[0] for r in con.execute(sql).fetchall() if key_of(shape, tuple(r[1:])) in keys]
    if doomed:
        run(
            con,
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
        names = [t for t in catalog_tables(con, db, present.known) if _inline_kind(t) == start[1]]
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
            run(
                con,
                f"DELETE FROM {ident(db)}.{ident(name)} WHERE rowid IN "
                "(SELECT unnest(?::BIGINT[]))",
                [doomed],
            )
    return touched


def range_table(start: bytes, end: bytes) -> str | None:
    """The one table a range's keys can belong to (an inlined table it
    empties, or a registry table's kind); None when it may span several."""
    whole = _whole_inline_table(start, end)
    if whole is not None:
        return whole
    if start[0] == Subspace.INLINE or start[:2] != end[:2]:
        return None
    spec = registry.BY_KIND.get(start[1])
    return None if spec is None else spec.name


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
    values = values_sql(spec, rows)
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
    run(con, f"INSERT INTO {ident(db)}.{ident(table)} SELECT {exprs} FROM (SELECT {lists})", params)
