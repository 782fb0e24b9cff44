"""What a DuckLake transaction changed in the metadata tables, as RowChanges.

Capture costs in proportion to the change, not the catalog. Which tables to
read comes from DuckLake itself: DuckDB's query log names every metadata
table DuckLake wrote (``write_log.py``), so a one-row INSERT reads the
snapshot tables, the table's statistics and its inlined table whatever the
lake holds. When the log cannot say, every table's signature (count plus
what moves when rows change) is compared with the committed base's in one
query, and only tables that differ are read.

A table that was written is read by what DuckLake can have done to it. With
S the head snapshot before the transaction and F the next file id at S:
- data and delete files: ids >= F are new (ids are never reused; a
  rewritten delete file can keep an old begin_snapshot); rows with
  ``end_snapshot > S`` and an older id were ended (their live key goes);
- other versioned rows, inlined rows included: ``begin_snapshot > S`` is
  new, ``end_snapshot > S`` was ended (DuckLake only ever sets an end);
- snapshots, their changes and schema versions: ``> S`` is new;
- a data file's children (column stats, partition values, variant stats):
  ``data_file_id >= F`` is new;
- the statistics DuckLake updates in place are diffed for the tables the new
  snapshot names, against the base's rows as the last capture left them
  (kept in Python while only this session's commits move the base, which
  then need not be brought up to date for a run of writes; see DuckState);
- scheduled deletions and the inlined tables' registry, when DuckLake only
  inserted there: the new rows are those of the file ids this capture
  found gone from the file tables, and of the new table ids
  (``_appended_rows``), checked against the counts;
- every other table (mappings, options) is diffed whole against the base
  in SQL.
Every proportional answer is checked against both sides' row counts; a count
the predicates do not explain (DuckLake deleted rows outright: expiry,
merge, flush, cleanup, a replaced delete file) falls back to a whole-table
diff for that table only (``table_diff.py``), unless the deleted rows are
the files and statistics whose ids vanished (``_vanished``), or the table
was only deleted from and its count stands (``Written.removed``). A table
the log shows DuckLake only inserted into (``Written.appended``: a plain
``INSERT INTO`` in DuckLake's spelling, and no statement of the session's
user named the metadata database) lost and changed no row, and every row
DuckLake inserts carries a new snapshot or file id its predicate finds: it
is not counted (a 1-row INSERT then runs no count query at all). That
holds for a new file's statistics too: DuckLake inserts them only for the
files it writes (ids >= F), and the base holds none of those ids, so
``new_groups`` skips the base's groups; a child table DuckLake did more than
insert into is counted, and the count says the same.
A statement of the user's that names the metadata database may change a
row in place, where no predicate looks: each table written in its window is
diffed whole (``Written.by_hand``).
``verify`` compares every table with the state a change set produces; tests
run it after every capture (SLATELAKE_VERIFY_CAPTURE=1).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import duckdb

from slatelake.catalog import registry
from slatelake.catalog.changes import RowChanges
from slatelake.catalog.rows import Row
from slatelake.ducklake import capture_check, table_diff
from slatelake.ducklake.capture_reads import (
    AHEAD,
    CHILDREN,
    DIFF,
    EMPTIED,
    FILE_CHILDREN,
    FILE_TABLES,
    FILES,
    INLINE_DELETES,
    PER_TABLE,
    PER_TABLE_READ,
    SNAPSHOT_TABLES,
    SNAPSHOTS,
    VERSIONED,
    FirstRead,
    first_read,
)
from slatelake.ducklake.catalog_db import ColumnCache, table_exists
from slatelake.ducklake.change_scope import Scope, named_tables
from slatelake.ducklake.duck_state import DuckState, Version
from slatelake.ducklake.kept_rows import KeptRows
from slatelake.ducklake.read_ahead import ReadAhead, rows_of
from slatelake.ducklake.signatures import present_tables, signatures_sql
from slatelake.ducklake.sql import ident
from slatelake.ducklake.tables import (
    select_list,
)
from slatelake.ducklake.write_log import Written


@dataclass
class Captured:
    changes: RowChanges
    mints_snapshot: bool
    changes_made: str


class Capture:
    def __init__(
        self, con: duckdb.DuckDBPyConnection, db: str, base: str, ahead: ReadAhead
    ) -> None:
        """``db`` is DuckLake's working copy, ``base`` the committed catalog it
        started from (diffs and counts run against it in SQL); ``ahead`` the
        session's worker, which reads every other first read."""
        self.con = con
        self.db = db
        self.base = base
        # the session's cache of inlined tables' columns (the state's, set per capture)
        self.columns = ColumnCache()
        # the base's row counts as of one version (DuckState.version: a commit
        # lock's or a status record's slot leaves it), and what this capture saw in
        # DuckLake's copy (the base's counts once it lands): not counted again
        self._base_counts: dict[str, int] = {}
        self._base_version: Version | None = None
        self._seen: tuple[Version, set[str], dict[str, int]] | None = None
        # the state being captured against: its base database lags, and is
        # brought up to it (``settle``) before anything here reads it
        self._state: DuckState | None = None
        # the base's rows of the PER_TABLE tables as of one version (what the
        # base's counts are to ``_base_counts``)
        self._kept = KeptRows()
        self._captured_at: Version | None = None
        # the user's statement wrote the metadata database by hand (``Written.by_hand``)
        self._by_hand = False
        # tables the log says DuckLake only inserted into, and the file ids
        # this capture found gone from the catalog (``_appended_rows``)
        self._appended: frozenset[str] = frozenset()
        self._gone_files: list[int] = []
        self._ahead = ahead
        self._asked: list[str] = []  # what this capture asked the worker to read

    # -- reading DuckDB ------------------------------------------------------
    def _settle(self, *tables: str) -> None:
        """Bring the base database up to the state before reading ``tables`` of it."""
        if self._state is not None:
            self._state.settle(tables)

    def _fetch(
        self,
        table: str,
        columns: list[tuple[str, str]],
        where: str = "",
        db: str | None = None,
        also: str | None = None,
    ) -> list[Row]:
        """Rows of ``table`` matching ``where`` (and, with ``also``, the rows
        matching that: the two must not overlap)."""
        if db == self.base:
            self._settle(table)
        sql = self._fetch_sql(table, columns, where, db, also)
        ahead = self._ahead.take(sql) if db is None else None
        return rows_of(self.con, table, sql) if ahead is None else ahead

    def _fetch_sql(
        self,
        table: str,
        columns: list[tuple[str, str]],
        where: str = "",
        db: str | None = None,
        also: str | None = None,
    ) -> str:
        source = ident(self.db if db is None else db)
        cols = select_list(columns, inline=registry.inline_table(table) is not None)
        sql = f"SELECT {cols} FROM {source}.{ident(table)} {where}"
        if also is not None:
            sql += f" UNION ALL SELECT {cols} FROM {source}.{ident(table)} {also}"
        return sql

    def _first_read(self, table: str, count: int | None, scope: Scope) -> FirstRead:
        return first_read(table, self._columns(table), count, scope, self._by_hand)

    def _read_ahead(
        self, tables: list[str], counts: dict[tuple[str, str], int], scope: Scope
    ) -> None:
        """Start every other one of ``tables``' first reads that are known now
        (in the order the loop makes them) on the worker (``read_ahead.py``)."""
        reads = [(t, self._first_read(t, counts.get((self.db, t)), scope)) for t in tables]
        ahead = [(t, r) for t, r in reads if r.kind in AHEAD or r.kind == PER_TABLE_READ]
        for table, read in ahead[1::2]:
            sql = self._fetch_sql(table, self._columns(table), read.where, also=read.also)
            self._ahead.submit(self.con, table, sql)
            self._asked.append(sql)

    def _vanished(self, table: str, columns: list[tuple[str, str]], key: str) -> list[Row]:
        """The base's rows of ``table`` whose ``key`` (a file id) DuckLake's
        copy no longer holds at all: one anti-join in DuckDB, not a diff of
        the whole table in Python (a batched merge's capture once grew with
        the catalog). The caller's count check says whether that is all."""
        where = (
            f"WHERE {ident(key)} NOT IN (SELECT {ident(key)} "
            f"FROM {ident(self.db)}.{ident(table)} WHERE {ident(key)} IS NOT NULL)"
        )
        return self._fetch(table, columns, where, db=self.base)

    def _columns(self, table: str) -> list[tuple[str, str]]:
        return self.columns.get(self.con, self.db, table)

    def _signatures(
        self, parts: list[tuple[str, str]], counts_only: bool = False
    ) -> dict[tuple[str, str], tuple[Any, ...]]:
        """One query: per (database, table), its signature (or just its count)."""
        if not parts:
            return {}
        self._settle(*(table for db, table in parts if db == self.base))
        sql = signatures_sql(parts, counts_only)
        return {parts[r[0]]: tuple(r[1:]) for r in self.con.execute(sql).fetchall()}

    # -- the capture -----------------------------------------------------------
    def capture(self, state: DuckState, written: Written | None = None) -> Captured | None:
        """The transaction's changes against ``state``; None when nothing changed.

        ``written`` names the tables DuckLake wrote (from the query log); without
        it every table is compared with the base."""
        self.columns = state.columns
        self._state = state
        self._captured_at = state.version
        known_inline = state.inline_names()
        self._seen = None
        self._by_hand = written is not None and written.by_hand
        self._appended = frozenset() if written is None else written.appended
        self._gone_files = []
        scope = self._scope(state)
        if written is None:
            moved, in_meta, counts = self._compare_all(known_inline)
        else:
            moved, in_meta, counts = self._written(written, known_inline, state.version, scope)
        if not moved:
            return None
        self._asked = []
        try:
            changes = self._read_changes(moved, in_meta, counts, known_inline, scope)
        finally:
            self._ahead.drain(self._asked)  # its own reads only
        if changes.empty():
            return None
        return _captured(changes, scope.snap)

    def _read_changes(
        self,
        moved: list[str],
        in_meta: set[str],
        counts: dict[tuple[str, str], int],
        known_inline: set[str],
        scope: Scope,
    ) -> RowChanges:
        # the snapshot's changes first; the files before their schedule (``_appended_rows``)
        ordered = sorted(moved, key=lambda t: (t not in SNAPSHOT_TABLES, t == SCHEDULED))
        read = [t for t in ordered if t in in_meta and (_registry(t) or t in known_inline)]
        self._read_ahead(read, counts, scope)
        changes = RowChanges()
        for table in ordered:
            in_base = _registry(table) or table in known_inline
            if table not in in_meta:
                if in_base and registry.inline_table(table) is not None:
                    changes.dropped_inline.append(table)
                continue
            if not in_base:  # a new inlined table: all of it
                columns = self._columns(table)
                changes.created_inline[table] = columns
                changes.insert(table, *self._fetch(table, columns))
                continue
            count = counts.get((self.db, table))
            before = counts.get((self.base, table), 0)
            self._table(table, count, before, scope, changes)
            if table == "ducklake_snapshot_changes":
                scope.tables = named_tables(changes.inserted.get(table, []), scope.snap)
                self._read_ahead([t for t in read if t in PER_TABLE], counts, scope)
        return changes

    def landed(self, captured: Captured, state: DuckState) -> None:
        """The captured change set was committed and applied to the base
        (``state``): its new snapshot's counters are the next capture's scope
        while nothing else changes the base (an index takes a catalog id by
        bumping the head snapshot in place)."""
        # others' change sets that rode along with ours (a rebase past them)
        # moved the base too: nothing counted or kept of it stands
        alone = state.pending == []
        self._note_base_counts(state.version, alone)
        self._kept.advance(captured.changes, self._captured_at, state.version, alone)
        spec = registry.BY_NAME["ducklake_snapshot"]
        i, f, c = (spec.index(n) for n in ("snapshot_id", "next_file_id", "next_catalog_id"))
        rows = captured.changes.inserted.get("ducklake_snapshot", [])
        newest = max(rows, key=lambda r: r[i], default=None)
        if newest is not None and newest[f] is not None and newest[c] is not None:
            state.note_head_ids(newest[i], int(newest[f]), int(newest[c]))

    def _compare_all(
        self, known_inline: set[str]
    ) -> tuple[list[str], set[str], dict[tuple[str, str], int]]:
        """Every table's signature against the base's, in one query: the tables
        that differ, the tables DuckLake's copy holds, and both sides' counts."""
        present = present_tables(self.con, self.db)
        registry_tables = [t for t in present if _registry(t)]
        sigs = self._signatures(
            [(self.db, t) for t in present]
            + [(self.base, t) for t in registry_tables]
            + [(self.base, t) for t in sorted(known_inline)]
        )
        moved = [
            t
            for t in sorted(set(present) | known_inline)
            if sigs.get((self.db, t)) != sigs.get((self.base, t))
        ]
        return moved, set(present), {k: v[0] for k, v in sigs.items()}

    def _written(
        self, written: Written, known_inline: set[str], version: Version, scope: Scope
    ) -> tuple[list[str], set[str], dict[tuple[str, str], int]]:
        """The tables the log says DuckLake wrote, which of them DuckLake's copy
        holds (an inlined table it created or dropped is looked up), and the
        counts the proportional reads are checked against."""
        in_meta = set()
        for t in written.tables:
            unchanged_inline = t in known_inline and t not in written.ddl
            if _registry(t) or unchanged_inline or table_exists(self.con, self.db, t):
                in_meta.add(t)
        moved = sorted(written.tables)
        cached = self._base_counts if self._base_version == version else {}
        # The per-table statistics are diffed, never checked by count; a table
        # DuckLake only inserted into kept every base row, and its new rows are
        # the ones its predicate finds (new snapshots, new file ids): no count.
        counted = [
            t
            for t in moved
            if t not in PER_TABLE
            and not (
                t in written.appended
                and t in in_meta
                and (_registry(t) or t in known_inline)
                and self._predicate_finds_inserts(t, scope)
            )
        ]
        sigs = self._signatures(
            [(self.db, t) for t in counted if t in in_meta]
            + [
                (self.base, t)
                for t in counted
                if (_registry(t) or t in known_inline) and t not in cached
            ],
            counts_only=True,
        )
        counts = {k: v[0] for k, v in sigs.items()}
        for t in counted:
            if t in cached:
                counts[(self.base, t)] = cached[t]
        seen = {t: counts[(self.db, t)] for t in counted if (self.db, t) in counts}
        self._seen = (version, set(moved), seen)
        # only deleted from, and as many rows as the base: none went (an
        # expiry names every table that could hold a row it ends)
        untouched = {
            t
            for t in written.removed
            if t in seen and counts.get((self.base, t)) == seen[t] and t not in written.ddl
        }
        return [t for t in moved if t not in untouched], in_meta, counts

    def _predicate_finds_inserts(self, table: str, scope: Scope) -> bool:
        """Whether ``_table`` reads ``table`` by a predicate every row DuckLake
        can insert matches (not a whole-table diff, which needs the counts)."""
        if scope.snap < 0:
            return False
        if table in FILE_TABLES or table in FILE_CHILDREN:
            return scope.next_file is not None
        if table in SNAPSHOT_TABLES:
            return True
        b, e = _begin_end(self._columns(table))
        return b is not None and (e is not None or registry.inline_table(table) is not None)

    def _note_base_counts(self, version: Version, alone: bool) -> None:
        """The base now holds what DuckLake's copy held at capture, if nothing
        but this commit changed it in between: keep its counts for the next
        capture."""
        seen, self._seen = self._seen, None
        if seen is None or not alone or version != (seen[0][0], seen[0][1] + 1):
            self._base_counts, self._base_version = {}, None
            return
        start, moved, counted = seen
        base = dict(self._base_counts) if self._base_version == start else {}
        for t in moved:
            base.pop(t, None)
        base.update(counted)
        self._base_counts, self._base_version = base, version

    def _per_table(
        self, table: str, columns: list[tuple[str, str]], scope: Scope, changes: RowChanges
    ) -> None:
        """Diff a PER_TABLE table for the tables the change names (and new
        ones): DuckLake's rows read, the base's taken from what is kept."""
        k = [name for name, _ in columns].index("table_id")
        named, first_new = scope.tables or set(), scope.next_catalog or 0
        kept = self._kept.rows(
            table, self._captured_at, lambda: self._fetch(table, columns, db=self.base)
        )
        old = Counter({r: n for r, n in kept.items() if r[k] in named or r[k] >= first_new})
        new = Counter(self._fetch(table, columns, scope.table_filter()))
        changes.insert(table, *(new - old).elements())
        changes.delete(table, *(old - new).elements())

    def _scope(self, state: DuckState) -> Scope:
        snap = state.head.snapshot_id
        if snap < 0:
            return Scope(snap, None, None)
        return Scope(snap, *state.head_ids())

    def _table(
        self, table: str, count: int | None, before: int, scope: Scope, changes: RowChanges
    ) -> None:
        """Read what changed in ``table``: by predicate where one exists, each
        answer checked against the counts (``count`` None: DuckLake only
        inserted, so the predicate's rows are all there is to check), else a
        whole-table diff."""
        columns = self._columns(table)
        read = self._first_read(table, count, scope)

        def explained(added: int) -> bool:
            return count is None or count == before + added

        if read.kind == EMPTIED:
            # DuckLake emptied it (a flush): every row of the base goes, read once
            rows = self._fetch(table, columns, db=self.base)
            changes.delete(table, *rows)
            if rows:
                changes.emptied.add(table)
            return
        if read.kind == PER_TABLE_READ:
            self._per_table(table, columns, scope, changes)
            return
        rows = [] if read.kind == DIFF else self._fetch(table, columns, read.where, also=read.also)
        snap, next_file = scope.snap, scope.next_file
        b, e = _begin_end(columns)
        if read.kind == FILES and next_file is not None and e is not None:
            key = FILE_TABLES[table]
            k = [name for name, _ in columns].index(key)
            new = [r for r in rows if r[k] >= next_file]
            ended = [r for r in rows if r[k] < next_file]
            # a merge or cleanup deletes files no snapshot needs: their ids vanish
            gone = [] if explained(len(new)) else self._vanished(table, columns, key)
            if explained(len(new) - len(gone)):
                changes.insert(table, *new, *ended)
                changes.delete(table, *(_reopened(r, e) for r in ended), *gone)
                self._gone_files.extend(int(r[k]) for r in gone)
                return
        elif read.kind in (SNAPSHOTS, INLINE_DELETES):  # (inlined deletes: only ever added)
            if explained(len(rows)):
                changes.insert(table, *rows)
                return
        elif read.kind == CHILDREN:
            if explained(len(rows)):
                # no row of the base is of a new file (grouped by file id):
                # nothing of theirs to read there
                changes.insert(table, *rows)
                changes.new_groups.add(table)
                return
            # the statistics of the files a merge or cleanup deleted: whole
            # groups, so every group the change touches is new or goes whole
            gone = self._vanished(table, columns, "data_file_id")
            if explained(len(rows) - len(gone)):
                changes.insert(table, *rows)
                changes.delete(table, *gone)
                changes.new_groups.add(table)
                return
        elif read.kind == VERSIONED and b is not None and e is not None:
            ended = [r for r in rows if r[b] is not None and r[b] <= snap]
            if explained(len(rows) - len(ended)):
                changes.insert(table, *rows)
                if registry.inline_table(table) is None:  # an inlined row keeps its key
                    changes.delete(table, *(_reopened(r, e) for r in ended))
                return
        elif read.kind == DIFF and self._appended_rows(table, count, before, scope, changes):
            return
        # no predicate, a row changed in place by hand, or the counts do not
        # agree with what the predicate found
        self._settle(table)
        table_diff.diff(
            self.con, self.db, self.base, table, columns, changes, max(count or 0, before)
        )

    def _appended_rows(
        self, table: str, count: int | None, before: int, scope: Scope, changes: RowChanges
    ) -> bool:
        """Rows DuckLake only inserted into a table read whole otherwise, found
        by the ids they must carry; True when the count agrees (else the
        table is diffed whole):
        - scheduled deletions: DuckLake schedules the files it deletes from
          the catalog, which this capture found gone from the file tables;
        - the inlined tables' registry: a created table's inlined table, by
          its new table id (an ALTER's new schema version of an older table
          is not found so, and the count sends it to the diff)."""
        if count is None or self._by_hand or table not in self._appended:
            return False
        if table == SCHEDULED:
            if not self._gone_files:
                return count == before
            listed = ", ".join(str(int(i)) for i in sorted(set(self._gone_files)))
            where = f"WHERE data_file_id IN ({listed})"
        elif table == INLINED_TABLES and scope.next_catalog is not None:
            where = f"WHERE table_id >= {int(scope.next_catalog)}"
        else:
            return False
        rows = self._fetch(table, self._columns(table), where)
        if count != before + len(rows):
            return False
        changes.insert(table, *rows)
        return True

    def verify(self, state: DuckState) -> None:
        """Every metadata table DuckLake holds equals the committed base
        (``capture_check``); raise naming the first that differs."""
        self.columns = state.columns
        capture_check.verify(self.con, self.db, self.base, state)


SCHEDULED = "ducklake_files_scheduled_for_deletion"
INLINED_TABLES = "ducklake_inlined_data_tables"


def _begin_end(columns: list[tuple[str, str]]) -> tuple[int | None, int | None]:
    names = [c for c, _ in columns]
    begin = names.index("begin_snapshot") if "begin_snapshot" in names else None
    end = names.index("end_snapshot") if "end_snapshot" in names else None
    return begin, end


def _reopened(row: Row, end: int) -> Row:
    """An ended row as it was while live (end_snapshot NULL): the key it leaves."""
    return row[:end] + (None,) + row[end + 1 :]


def _registry(table: str) -> bool:
    return table in registry.BY_NAME


def _captured(changes: RowChanges, snap: int) -> Captured:
    """Whether the changes mint a snapshot (a new snapshot row past the head),
    and DuckLake's description of it."""
    new = [r for r in changes.inserted.get("ducklake_snapshot", []) if r[0] > snap]
    if not new:
        return Captured(changes, False, "")
    minted = max(r[0] for r in new)
    described = [r for r in changes.inserted.get("ducklake_snapshot_changes", []) if r[0] == minted]
    return Captured(changes, True, (described[0][1] or "") if described else "")
