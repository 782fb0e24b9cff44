"""What a DuckLake transaction changed in the metadata tables, as RowChanges.

Capture costs in proportion to the change, not the catalog. One query reads
a signature per table (count, plus the largest ids and snapshots for the
big tables, a hash of all rows for the small ones); a table whose signature
did not move is not read. For a table that moved, with S the head snapshot
before the transaction and F the next file id at S:
- data and delete files: ids >= F are new (ids are never reused; a
  rewritten delete file can keep an old begin_snapshot); rows with
  ``end_snapshot > S`` and an older id were ended (their live key goes);
- snapshot and snapshot_changes: ``snapshot_id > S`` is new;
- a data file's children (column stats, partition values, variant stats):
  ``data_file_id >= F`` is new;
- every other table (schema objects, stats, mappings, inlined data) is small
  and diffed whole.
Every proportional answer is checked against the table's row count; a count
the predicates do not explain (DuckLake deleted rows outright: expiry,
merge, cleanup, a replaced delete file) falls back to a whole-table diff for
that table only.
``verify`` compares every table with the state a change set produces; tests
run it after every capture (SLATELAKE_VERIFY_CAPTURE=1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import duckdb

from slatelake.catalog import registry
from slatelake.catalog.changes import RowChanges
from slatelake.catalog.rows import Row, row_key
from slatelake.ducklake.catalog_db import ColumnCache
from slatelake.ducklake.duck_state import DuckState
from slatelake.ducklake.sql import ident
from slatelake.ducklake.tables import (
    is_metadata_table,
    meta_tables,
    select_list,
)
from slatelake.errors import CorruptionError, UnsupportedError

SNAPSHOT_TABLES = ("ducklake_snapshot", "ducklake_snapshot_changes")
FILE_TABLES = {"ducklake_data_file": "data_file_id", "ducklake_delete_file": "delete_file_id"}
FILE_CHILDREN = (
    "ducklake_file_column_stats",
    "ducklake_file_partition_value",
    "ducklake_file_variant_stats",
)


@dataclass
class Captured:
    changes: RowChanges
    mints_snapshot: bool
    changes_made: str
    signatures: dict[str, tuple[Any, ...]]


class Capture:
    def __init__(self, con: duckdb.DuckDBPyConnection, db: str, base: str) -> None:
        """``db`` is DuckLake's working copy, ``base`` the committed catalog it
        started from (whole-table diffs run against it in SQL)."""
        self.con = con
        self.db = db
        self.base = base
        # the session's cache of inlined tables' columns (the state's, set per capture)
        self.columns = ColumnCache()
        # Per-table signatures (row count first) as of the last committed state:
        # a table whose signature is unchanged is not read at all, and the count
        # is "before" for the proportional predicates.
        self.signatures: dict[str, tuple[Any, ...]] = {}

    @property
    def counts(self) -> dict[str, int]:
        return {t: sig[0] for t, sig in self.signatures.items()}

    def reset(self) -> None:
        """Re-read the signatures (after a load, which equals the state)."""
        self.signatures = self._signatures(self._present())

    def forget(self) -> None:
        self.signatures = {}

    def committed(self, captured: Captured) -> None:
        """The captured change set landed: its signatures are the new baseline."""
        self.signatures = captured.signatures

    def _present(self) -> list[str]:
        tables = meta_tables(self.con, self.db)
        unknown = sorted(t for t in tables if not is_metadata_table(t))
        if unknown:
            raise UnsupportedError(
                f"DuckLake created metadata tables slatelake does not know: {', '.join(unknown)}; "
                "refusing to commit a catalog it cannot store whole"
            )
        return sorted(tables)

    # -- reading DuckDB ------------------------------------------------------
    def _fetch(
        self, table: str, columns: list[tuple[str, str]], where: str = "", db: str | None = None
    ) -> list[Row]:
        source = ident(self.db if db is None else db)
        sql = f"SELECT {select_list(columns)} FROM {source}.{ident(table)} {where}"
        try:
            return [tuple(r) for r in self.con.execute(sql).fetchall()]
        except duckdb.InvalidInputException as exc:
            raise UnsupportedError(f"{table}: a column type cannot be captured ({exc})") from exc

    def _columns(self, table: str) -> list[tuple[str, str]]:
        return self.columns.get(self.con, self.db, table)

    def _signature_sql(self, i: int, table: str) -> str:
        """count plus what moves when rows change. The big tables only gain rows
        with new ids (ids are never reused) or end rows, so the largest id and
        snapshots suffice; every other table is small and hashed whole."""
        if table in FILE_TABLES:
            key = FILE_TABLES[table]
            parts = (
                f"max({ident(key)})::HUGEINT, max(begin_snapshot)::HUGEINT, "
                "max(end_snapshot)::HUGEINT"
            )
        elif table in SNAPSHOT_TABLES:
            parts = "max(snapshot_id)::HUGEINT, 0::HUGEINT, 0::HUGEINT"
        elif table in FILE_CHILDREN:
            parts = "max(data_file_id)::HUGEINT, 0::HUGEINT, 0::HUGEINT"
        else:
            parts = "sum(hash(t))::HUGEINT, 0::HUGEINT, 0::HUGEINT"
        return f"SELECT {int(i)}, count(*), {parts} FROM {ident(self.db)}.{ident(table)} t"

    def _signatures(self, tables: list[str]) -> dict[str, tuple[Any, ...]]:
        if not tables:
            return {}
        sql = " UNION ALL ".join(self._signature_sql(i, t) for i, t in enumerate(tables))
        return {tables[r[0]]: tuple(r[1:]) for r in self.con.execute(sql).fetchall()}

    # -- the capture -----------------------------------------------------------
    def capture(self, state: DuckState) -> Captured | None:
        """The transaction's changes against ``state``; None when nothing changed."""
        self.columns = state.columns
        snap = state.head.snapshot_id
        present = self._present()
        signatures = self._signatures(present)
        counts = {t: sig[0] for t, sig in signatures.items()}
        max_snap = self.con.execute(
            f"SELECT max(snapshot_id) FROM {ident(self.db)}.ducklake_snapshot"
        ).fetchone()[0]
        mints = max_snap is not None and max_snap > snap
        known_inline = state.inline_names()
        created = [t for t in present if registry.inline_table(t) and t not in known_inline]
        dropped = sorted(known_inline - set(present))
        if not (mints or created or dropped) and signatures == self.signatures:
            return None

        changes = RowChanges()
        for name in created:
            changes.created_inline[name] = self._columns(name)
        changes.dropped_inline.extend(dropped)
        next_file = _next_file_id(state, snap)
        for table in present:
            if table not in created and signatures[table] == self.signatures.get(table):
                continue  # untouched: not read
            self._table(state, table, counts[table], snap, next_file, changes, table in created)
        if changes.empty():
            self.signatures = signatures
            return None
        changes_made = ""
        if mints:
            row = self.con.execute(
                f"SELECT changes_made FROM {ident(self.db)}.ducklake_snapshot_changes "
                "WHERE snapshot_id = ?",
                [max_snap],
            ).fetchone()
            changes_made = (row[0] or "") if row else ""
        return Captured(changes, mints, changes_made, signatures)

    def _table(
        self,
        state: DuckState,
        table: str,
        count: int,
        snap: int,
        next_file: int | None,
        changes: RowChanges,
        created: bool,
    ) -> None:
        columns = self._columns(table)
        if created:
            changes.insert(table, *self._fetch(table, columns))
            return
        before = self.counts.get(table, 0)
        if snap >= 0 and next_file is not None and table in FILE_TABLES:
            key = FILE_TABLES[table]
            _, e = _begin_end(columns)
            # New files carry new ids (a rewritten delete file may keep an old
            # begin_snapshot, so begin > S is not enough); ended files keep theirs.
            new = self._fetch(table, columns, f"WHERE {ident(key)} >= {int(next_file)}")
            ended = self._fetch(
                table,
                columns,
                f"WHERE end_snapshot > {int(snap)} AND {ident(key)} < {int(next_file)}",
            )
            if count == before + len(new) and e is not None:
                changes.insert(table, *new, *ended)
                changes.delete(table, *(r[:e] + (None,) + r[e + 1 :] for r in ended))
                return
        elif snap >= 0 and table in SNAPSHOT_TABLES:
            rows = self._fetch(table, columns, f"WHERE snapshot_id > {int(snap)}")
            if count == before + len(rows):
                changes.insert(table, *rows)
                return
        elif snap >= 0 and table in FILE_CHILDREN and next_file is not None:
            rows = self._fetch(table, columns, f"WHERE data_file_id >= {int(next_file)}")
            if count == before + len(rows):
                changes.insert(table, *rows)
                return
        self._diff(state, table, columns, changes)

    def _diff(
        self, state: DuckState, table: str, columns: list[tuple[str, str]], changes: RowChanges
    ) -> None:
        """Whole-table diff: what DuckDB holds against the committed base."""
        inline = registry.inline_table(table)
        if inline is not None:  # small; rows keep their identity across an UPDATE
            old_by_id = {_ident(inline, r): r for r in self._fetch(table, columns, db=self.base)}
            new_by_id = {_ident(inline, r): r for r in self._fetch(table, columns)}
            changes.insert(table, *(r for i, r in new_by_id.items() if old_by_id.get(i) != r))
            changes.delete(table, *(r for i, r in old_by_id.items() if i not in new_by_id))
            return
        added, removed = self._except_all(table, columns)
        changes.insert(table, *added)
        changes.delete(table, *removed)

    def _except_all(
        self, table: str, columns: list[tuple[str, str]]
    ) -> tuple[list[Row], list[Row]]:
        """Rows only in DuckLake's copy, and rows only in the base (multisets)."""
        cols = select_list(columns)
        a = f"{ident(self.db)}.{ident(table)}"
        b = f"{ident(self.base)}.{ident(table)}"
        try:
            added = self.con.execute(
                f"SELECT {cols} FROM {a} EXCEPT ALL SELECT {cols} FROM {b}"
            ).fetchall()
            removed = self.con.execute(
                f"SELECT {cols} FROM {b} EXCEPT ALL SELECT {cols} FROM {a}"
            ).fetchall()
        except duckdb.InvalidInputException as exc:
            raise UnsupportedError(f"{table}: a column type cannot be captured ({exc})") from exc
        return [tuple(r) for r in added], [tuple(r) for r in removed]

    def verify(self, state: DuckState) -> None:
        """Every metadata table DuckLake holds equals the committed base (which
        advanced only by applying the change sets); raise naming the first that
        differs."""
        self.columns = state.columns
        present = {t for t in meta_tables(self.con, self.db) if is_metadata_table(t)}
        based = {t for t in meta_tables(self.con, self.base) if is_metadata_table(t)}
        based -= {s.name for s in registry.OWN_TABLES}
        for table in sorted(present | based):
            if (table in present) != (table in based):
                if registry.inline_table(table) is not None or self._fetch_any(table, present):
                    raise CorruptionError(
                        f"capture check: {table} exists on one side only "
                        f"({'DuckLake' if table in present else 'the committed state'})"
                    )
                continue
            columns = self._columns(table)
            inline = registry.inline_table(table)
            if inline is not None:
                a = {_ident(inline, r): r for r in self._fetch(table, columns)}
                b = {_ident(inline, r): r for r in self._fetch(table, columns, db=self.base)}
                same = a == b
            else:
                added, removed = self._except_all(table, columns)
                same = not added and not removed
            if not same:
                raise CorruptionError(
                    f"capture check: {table} in DuckDB differs from the committed state"
                )

    def _fetch_any(self, table: str, present: set[str]) -> bool:
        db = self.db if table in present else self.base
        sql = f"SELECT count(*) FROM {ident(db)}.{ident(table)}"
        return bool(self.con.execute(sql).fetchone()[0])


def _begin_end(columns: list[tuple[str, str]]) -> tuple[int | None, int | None]:
    names = [c for c, _ in columns]
    begin = names.index("begin_snapshot") if "begin_snapshot" in names else None
    end = names.index("end_snapshot") if "end_snapshot" in names else None
    return begin, end


def _ident(table: registry.InlineTable, row: Row) -> tuple[Any, ...]:
    return tuple(row[i] for i in table.identity)


def _next_file_id(state: DuckState, snap: int) -> int | None:
    if snap < 0:
        return None
    spec = registry.BY_NAME["ducklake_snapshot"]
    row: Any = state.get(row_key(spec, (snap, None, None, None, None)))
    return None if row is None else row[spec.index("next_file_id")]
