"""Turning row changes into one change set against a materialized state.

Callers (the DuckLake bridge, tests, the folder's own bookkeeping) describe a
transaction as rows inserted and rows deleted per table. This module maps them
to stored keys: an updated row is a delete plus an insert of the same key (the
put wins); ending a versioned row deletes its live key and puts its history
key; a grouped table rewrites its parent's whole value from the base state.
Two different rows mapping to one key is refused: it would lose a row.

An inlined table whose every row goes (DuckLake's flush empties the current
one, and drops an older schema version's) loses them through one range
delete over its rows' prefix: one operation against the change-set cap, so a
flush never outgrows it, however many rows the table held.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from slatelake.catalog import registry
from slatelake.catalog.rows import (
    Row,
    encode_group,
    encode_inline_ddl,
    encode_inline_row,
    encode_row,
    group_key,
    inline_ddl_key,
    inline_row_key,
    inline_rows_prefix,
    row_key,
)
from slatelake.errors import UnsupportedError
from slatelake.log.changeset import ChangeSet, Head, KeyRange, prefix_range


@dataclass
class RowChanges:
    inserted: dict[str, list[Row]] = field(default_factory=lambda: defaultdict(list))
    deleted: dict[str, list[Row]] = field(default_factory=lambda: defaultdict(list))
    # new inlined-data tables: name -> [(column, type), ...], every column
    # (row_id, begin_snapshot, end_snapshot and the user columns)
    created_inline: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    dropped_inline: list[str] = field(default_factory=list)
    # inlined tables that lost every row (a flush), their rows all in ``deleted``
    emptied: set[str] = field(default_factory=set)
    # grouped tables whose inserted rows all belong to groups the base has
    # no row of (a new data file's statistics): their values need no read
    new_groups: set[str] = field(default_factory=set)

    def insert(self, table: str, *rows: Row) -> RowChanges:
        self.inserted[table].extend(rows)
        return self

    def delete(self, table: str, *rows: Row) -> RowChanges:
        self.deleted[table].extend(rows)
        return self

    @property
    def tables(self) -> tuple[str, ...]:
        names = {t for t, r in self.inserted.items() if r} | {
            t for t, r in self.deleted.items() if r
        }
        return tuple(sorted(names | set(self.created_inline) | set(self.dropped_inline)))

    def empty(self) -> bool:
        return not self.tables


class CatalogBase(Protocol):
    """What building a change set reads of the catalog it applies to: its head,
    one grouped value, one inlined table's keys. A Python CatalogState or a
    session's DuckDB-resident base both answer it."""

    @property
    def head(self) -> Head: ...

    def group(self, key: bytes) -> list[Row]: ...

    def groups(self, keys: Iterable[bytes]) -> dict[bytes, list[Row]]: ...

    def inline_row_keys(self, inline: registry.InlineTable) -> set[bytes]: ...


def build_change_set(
    base: CatalogBase,
    changes: RowChanges,
    mints_snapshot: bool,
    changes_made: str = "",
) -> ChangeSet:
    puts: dict[bytes, bytes] = {}
    deletes: set[bytes] = set()
    ranges: list[KeyRange] = []
    put_rows: dict[bytes, Row] = {}

    def put(key: bytes, value: bytes, row: Row | None, table: str) -> None:
        if row is not None and key in put_rows and put_rows[key] != row:
            raise UnsupportedError(
                f"{table}: two different rows map to stored key {key.hex()} "
                f"({put_rows[key]!r} and {row!r}); refusing to lose one"
            )
        if row is not None:
            put_rows[key] = row
        puts[key] = value

    for table in changes.tables:
        if table in changes.created_inline or table in changes.dropped_inline:
            continue
        ins, dels = changes.inserted.get(table, []), changes.deleted.get(table, [])
        inline = registry.inline_table(table)
        if inline is not None:
            doomed = {inline_row_key(inline, row) for row in dels}
            if doomed and (table in changes.emptied or doomed == _inline_keys(base, inline)):
                ranges.append(prefix_range(inline_rows_prefix(inline)))  # cleared (a flush)
            else:
                deletes.update(doomed)
            for row in ins:
                put(inline_row_key(inline, row), encode_inline_row(inline, row), row, table)
            continue
        spec = registry.spec(table)
        if spec.grouped:
            _grouped(base, spec, ins, dels, puts, deletes, table in changes.new_groups)
            continue
        for row in dels:
            deletes.add(row_key(spec, row))
        for row in ins:
            put(row_key(spec, row), encode_row(spec, row), row, table)

    for name, columns in changes.created_inline.items():
        inline = _inline(name)
        puts[inline_ddl_key(inline)] = encode_inline_ddl(inline, columns)
        for row in changes.inserted.get(name, []):
            put(inline_row_key(inline, row), encode_inline_row(inline, row), row, name)
    for name in changes.dropped_inline:
        inline = _inline(name)
        deletes.add(inline_ddl_key(inline))
        if _inline_keys(base, inline):
            ranges.append(prefix_range(inline_rows_prefix(inline)))

    deletes -= puts.keys()
    return ChangeSet(
        base=base.head,
        puts=tuple(sorted(puts.items())),
        deletes=tuple(sorted(deletes)),
        mints_snapshot=mints_snapshot,
        tables=changes.tables,
        changes_made=changes_made,
        ranges=tuple(sorted(ranges)),
    )


def _inline_keys(base: CatalogBase, inline: registry.InlineTable) -> set[bytes]:
    return base.inline_row_keys(inline)


def _grouped(
    base: CatalogBase,
    spec: registry.TableSpec,
    ins: list[Row],
    dels: list[Row],
    puts: dict[bytes, bytes],
    deletes: set[bytes],
    new: bool = False,
) -> None:
    keys = {group_key(spec, row) for row in (*dels, *ins)}
    # every group's stored rows in one read (a merge ends dozens of files' at once)
    touched = {k: [] for k in keys} if new else base.groups(keys)
    for row in dels:
        rows = touched[group_key(spec, row)]
        if row in rows:
            rows.remove(row)
    for row in ins:
        touched[group_key(spec, row)].append(row)
    for key, rows in touched.items():
        if rows:
            puts[key] = encode_group(spec, rows)
        else:
            deletes.add(key)


def _inline(name: str) -> registry.InlineTable:
    inline = registry.inline_table(name)
    if inline is None:
        raise UnsupportedError(f"{name!r} is not an inlined-data or inlined-delete table name")
    return inline
