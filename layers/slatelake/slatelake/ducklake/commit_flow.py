"""How a session's change lands in the log: under the commit lock, on the head.

Every write runs in a DuckDB transaction. At its COMMIT the session takes
the lake's commit lock, brings DuckLake's copy to the log's head, and lets
DuckLake's own commit rebase the transaction onto what it missed (or refuse
it, in DuckLake's words, as ConflictError); the captured change is then
committed through the log, and that slot gives the lock back, so nothing can
land in between. DuckLake's maintenance calls take the lock before they
run. An autocommit write on a lake no one else is writing commits without
it, in one slot that loses to any commit or lock take since (``_alone``),
and right after another such write it looks at the log while it runs.
A write DuckDB ran behind the session's back is committed before the
next statement, or refused. See docs/architecture.md, "Concurrent writers".
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from contextlib import suppress
from dataclasses import replace
from typing import TYPE_CHECKING

import duckdb

from slatelake.catalog.commit_lock import LOCK_KEY, CommitLock
from slatelake.catalog.holds import HOLDS_KEY, held_snapshots
from slatelake.catalog.lake import Lake
from slatelake.ducklake import indexes
from slatelake.ducklake import statements as stmt
from slatelake.ducklake.attach_options import stored_data_path
from slatelake.ducklake.capture import Capture, Captured
from slatelake.ducklake.catalog_db import CATALOG_SUBSPACES
from slatelake.ducklake.read_ahead import ReadAhead
from slatelake.ducklake.refused_commit import remove_new_files, unsafe_rebase
from slatelake.ducklake.sql import ident, run
from slatelake.ducklake.write_log import WriteLog
from slatelake.errors import ConflictError, HeldSnapshotError, ReadOnlyError
from slatelake.log.changeset import ChangeSet
from slatelake.log.committer import Committed

if TYPE_CHECKING:
    from slatelake.ducklake.duck_state import DuckState
    from slatelake.log.changeset import Head

log = logging.getLogger("slatelake.session")
# The session's two DuckDB databases: DuckLake's working copy of the catalog,
# and the committed catalog at the session's head.
META_DB = "__slatelake_meta"
BASE_DB = "__slatelake_base"
# After a commit made without the lock was overtaken, writes take it for this long.
CONTENDED_S = 30.0
# The newest snapshot in DuckLake's copy: past the session's, DuckDB committed
# a write behind the session's back.
NEWEST_IN_COPY = f"SELECT max(snapshot_id) FROM {ident(META_DB)}.ducklake_snapshot"


class CommitFlow:
    """The commit half of a session (``Session`` is the whole)."""

    lake: Lake
    state: DuckState
    con: duckdb.DuckDBPyConnection
    _aux: duckdb.DuckDBPyConnection
    alias: str
    read_only: bool
    capture: Capture
    _ahead: ReadAhead
    log: WriteLog
    verify: bool
    _lock: CommitLock
    _in_txn: bool
    _txn_maintains: bool
    _rebased: list[ChangeSet]
    _stale: bool
    _synced: tuple[Head, int] | None
    _copy_snapshot: int | None
    _overtaken_at: float  # monotonic; when a commit made without the lock was refused
    _refreshed_at: float  # monotonic; when the session last saw the log's end

    def _sync(self, reset_log: bool = True) -> None:
        raise NotImplementedError  # Session: apply others' commits to DuckLake's copy

    def _commit_outside_writes(self) -> None:
        """Commit a write DuckDB ran outside the session's statements (a
        relation's ``insert_into``, ``create`` or ``update``; ``session.con``):
        DuckLake committed it to the session's copy, so it is committed now,
        before anything else, when nothing has landed since; otherwise it
        cannot be rebased and is refused, never dropped without a word."""
        if self.read_only or self._in_txn or self._stale or self._synced is None:
            return
        (newest,) = self._aux.execute(NEWEST_IN_COPY).fetchone()
        if newest == self._copy_snapshot:
            return
        # A busy lock changes nothing: the write waits in the copy, and the
        # next statement (or the close) tries again.
        self._lock.acquire(self.state)
        try:
            pending = self.state.pending
            if pending is None or any(cs.mints_snapshot or cs.puts_snapshot_rows for cs in pending):
                raise ConflictError(
                    "a write made outside session.sql (a relation's insert_into, create or "
                    "update, or session.con) reached only this session's copy of the catalog, "
                    "and another writer has committed since; it was discarded: run it through "
                    "session.sql or session.execute"
                )
            self._rebased = []
            if pending:
                self._sync(reset_log=False)
        except BaseException:
            self._stale = True
            self._lock.release(self.state)
            raise
        log.info("committing a write made outside session.sql (snapshot %s)", newest)
        self._commit_captured()

    def _outside_write_beside(self) -> Callable[[], bool]:
        """Ask the worker, while a statement runs, what ``_commit_outside_writes``
        asks before one: whether DuckDB committed a write to DuckLake's copy
        behind the session's back. The call returned takes the answer (True:
        one is there; its errors raised there). The statement's own writes
        reach DuckLake's copy only at its COMMIT, after the answer is in."""
        self._ahead.submit(self._aux, "ducklake_snapshot", NEWEST_IN_COPY)
        copy = self._copy_snapshot

        def outside() -> bool:
            rows = self._ahead.take(NEWEST_IN_COPY)
            return rows is None or rows[0][0] != copy

        return outside

    def _lock_at_head(self, fresh: bool = False) -> None:
        """Take the commit lock and bring DuckLake's copy to the head before
        the statement runs, so its commit needs no rebase (``fresh``: the
        session was refreshed just before; see ``CommitLock.acquire``)."""
        self._lock.acquire(self.state, fresh)
        try:
            if (self.state.head, self.state.last_seq) != self._synced:
                self._sync()
        except BaseException:
            self._lock.release(self.state)
            raise

    def _rollback(self) -> None:
        """Roll back DuckDB's open transaction, if there is one."""
        with suppress(duckdb.TransactionException):  # none open: DuckDB already ended it
            self.con.execute("ROLLBACK")

    def commit_change_set(self, cs: ChangeSet) -> Committed:
        """Commit a head-preserving change set built outside DuckLake (status records)."""
        if self.read_only:
            raise ReadOnlyError("this session is read-only; it writes no commit-log slot")
        return self._commit(lambda: self.lake.commit_change_set(self.state, cs), in_duckdb=False)

    def _commit_transaction(self, fresh: bool = False, may_go_alone: bool = False) -> None:
        """COMMIT DuckDB's open transaction and the change it made to the log.

        Under the lake's commit lock, DuckLake's copy is first brought to the
        log's head; DuckLake's own commit then finds the snapshots it missed
        and rebases onto them by its rules (fresh ids, its conflict check and
        wording), as it does on a catalog shared by processes. Nothing can
        land between that refresh and the slot write, so what DuckLake
        committed in its copy is what the log gets, on the base it was made on.
        ``fresh``: the session was refreshed just before the statement.
        ``may_go_alone``: an autocommit write that can run again, which
        commits without the lock when ``_alone`` says it may.
        """
        if self.read_only:
            self._commit_read_only()
            return
        if may_go_alone and self._alone(fresh):
            self._commit_alone()
            return
        try:
            self._lock.acquire(self.state, fresh)
            self._catch_up_in_transaction()
        except BaseException:
            self._abandon_transaction()
            raise
        try:
            self.con.execute("COMMIT")
        except duckdb.Error as exc:
            # DuckLake rolled its copy back (and removed the files it wrote)
            self._lock.release(self.state)
            raise stmt.refused(exc) from exc
        except BaseException:
            self._stale = True  # an interrupt: what DuckDB kept is unknown
            self._lock.release(self.state)
            raise
        self._commit_captured()

    def _alone(self, fresh: bool) -> bool:
        """Whether an autocommit write may commit without taking the lock: the
        session saw the log's end a moment ago (a refresh, or its own lone
        slot landing), DuckLake's copy is at that head, the lock was free
        there, and no commit of this session was overtaken in the last
        ``CONTENDED_S`` (a lake with one writer saves a slot per write; one
        with several keeps the lock, which rebases instead of re-running)."""
        if not fresh or self._stale or self._in_txn:
            return False
        if time.monotonic() - self._overtaken_at < CONTENDED_S:
            return False
        if (self.state.head, self.state.last_seq) != self._synced:
            return False
        return self.lake.read_sys(self.state, LOCK_KEY) is None

    def _commit_alone(self) -> None:
        """COMMIT in DuckDB, then the slot, with no lock taken. DuckLake's copy
        was at the head the session last saw, so its commit rebased over
        nothing. The slot deletes the lock's key: a commit that landed since
        either minted a snapshot (the log refuses ours over it) or took or
        gave back the lock (the same key: refused); nothing can land under a
        lock another committer holds. A refused write is re-run under the
        lock by ``_autocommit_write``."""
        try:
            self.con.execute("COMMIT")
        except duckdb.Error as exc:
            raise stmt.refused(exc) from exc
        except BaseException:
            self._stale = True  # an interrupt: what DuckDB kept is unknown
            raise
        self._rebased = []
        looked = time.monotonic()
        try:
            self._commit_captured(fence_lock=True)
        except ConflictError:
            self._overtaken_at = time.monotonic()
            raise
        if (self.state.head, self.state.last_seq) == self._synced:
            # the slot was free when written: a look at the log's end, as a refresh's
            self._refreshed_at = looked

    def _commit_read_only(self) -> None:
        try:
            self.con.execute("COMMIT")
        except BaseException:
            self._stale = True  # what DuckDB kept is unknown: reload from the log
            raise
        if self._captured() is not None:
            self._stale = True
            raise ReadOnlyError(
                "this session is read-only but the transaction changed the catalog; nothing was "
                "committed, reconnect without read_only to write"
            )

    def _catch_up_in_transaction(self) -> None:
        """Apply others' commits to DuckLake's copy while a transaction is
        open (the lock is held, the state at the head). The query log is not
        reset: DuckLake may have written its copy before COMMIT."""
        if self._stale or self.state.pending is None:
            self._stale = True
            raise ConflictError(
                "this session's copy of the catalog had to be rebuilt while a transaction was "
                "open; nothing was committed, re-run the transaction"
            )
        if any(cs.puts_snapshot_rows and not cs.mints_snapshot for cs in self.state.pending):
            raise ConflictError(
                "another writer changed the head snapshot's row without a DuckLake snapshot "
                "(an index took a catalog id), which DuckLake's commit cannot rebase onto; "
                "nothing was committed, re-run the transaction"
            )
        self._rebased = list(self.state.pending)  # what DuckLake's commit rebases over
        maintained, self._txn_maintains = self._txn_maintains, False
        if maintained and any(cs.mints_snapshot for cs in self._rebased):
            raise ConflictError(
                "a DuckLake maintenance function ran in this transaction and another "
                "transaction has committed since it began; DuckLake 1.5.5 does not redo a "
                "flush or compaction correctly when it retries, so nothing was committed: "
                "run it again (in autocommit it never needs a retry)"
            )
        if (self.state.head, self.state.last_seq) != self._synced:
            self._sync(reset_log=False)

    def _abandon_transaction(self) -> None:
        """Roll back DuckDB's transaction and give the lock back (best effort)."""
        try:
            self._rollback()
        except BaseException:
            self._stale = True
        self._lock.release(self.state)

    def _captured(self, logged: bool = True) -> Captured | None:
        """What DuckLake changed since the write window opened: the tables its
        query log names, or every table when the log cannot say."""
        return self.capture.capture(self.state, self.log.written() if logged else None)

    def _commit_captured(self, logged: bool = True, fence_lock: bool = False) -> None:
        """Commit what DuckLake changed; with the commit lock held, the slot
        also releases it (so it lands only while the lock is still ours).
        ``fence_lock``: the lock was free at the base; the slot deletes its
        key all the same, so it overlaps (and loses to) any take since."""
        captured = None
        try:
            captured = self._captured(logged)
            if captured is None:
                self._lock.release(self.state)
                return
            if self._lock.held and (why := unsafe_rebase(captured.changes_made, self._rebased)):
                raise ConflictError(why)
            self._refuse_expiring_held(captured)
            # the data's change set, plus its index entries and cascaded ends
            cs = indexes.index_writes(self, captured)
            if self._lock.held or fence_lock:
                cs = replace(cs, deletes=(*cs.deletes, LOCK_KEY))
            self._commit(lambda: self.lake.commit_change_set(self.state, cs), in_duckdb=True)
        except BaseException as exc:  # uncapturable, refused, unreadable index entries
            self._stale = True  # DuckDB holds changes the log does not: never carry them
            if isinstance(exc, ConflictError) and captured is not None:  # definitively refused
                data_path = stored_data_path(self.state)
                remove_new_files(self._aux, META_DB, self.alias, data_path, captured.changes)
            if self._lock.held:  # the slot carrying the release never landed: give it back
                self._lock.release(self.state)
            raise
        self._lock.released()
        self.capture.landed(captured, self.state)
        pending = self.state.pending
        # others' catalog rows read with ours are not in DuckLake's copy yet:
        # the next statement applies them, and only then do the two agree
        if self.verify and pending is not None and not _catalog_rows(pending):
            self.capture.verify(self.state)

    def _refuse_expiring_held(self, captured: Captured) -> None:
        """A commit that ends a snapshot a retention hold protects is refused,
        whoever runs it (a pass, or a direct DuckLake call). Holds change only
        under the commit lock, which this commit holds (or, with the lock
        free, the slot's base check refuses a commit racing one)."""
        changes = captured.changes
        gone = {row[0] for row in changes.deleted.get("ducklake_snapshot", ())} - {
            row[0] for row in changes.inserted.get("ducklake_snapshot", ())
        }
        if not gone:
            return
        held = held_snapshots(self.lake.read_sys(self.state, HOLDS_KEY))
        hit = sorted(gone & held.keys())
        if hit:
            names = "; ".join(f"snapshot {s} by {', '.join(map(repr, held[s]))}" for s in hit)
            raise HeldSnapshotError(
                f"this commit would expire snapshots that retention holds protect ({names}); "
                "nothing was committed: leave them out, or remove the holds first "
                "(slatelake unprotect LAKE NAME)"
            )

    def commit_under_lock(self, build: Callable[[], ChangeSet | None]) -> Committed | None:
        """Commit a head-preserving change set built at the head with the
        commit lock held (``build`` reads what it needs there; None commits
        nothing); the slot gives the lock back. Retention holds change this
        way, so no DuckLake commit can land between a hold's check and its write."""
        if self.read_only:
            raise ReadOnlyError("this session is read-only; it writes no commit-log slot")
        self._lock_at_head()
        try:
            cs = build()
            if cs is None:
                self._lock.release(self.state)
                return None
            cs = replace(cs, deletes=(*cs.deletes, LOCK_KEY))
            committed = self._commit(
                lambda: self.lake.commit_change_set(self.state, cs), in_duckdb=False
            )
        except BaseException:
            if self._lock.held:
                self._lock.release(self.state)
            raise
        self._lock.released()
        return committed

    def snapshots_present(self, ids: Iterable[int]) -> set[int]:
        """Which of ``ids`` are snapshots in DuckLake's copy of the catalog (at
        the head inside ``commit_under_lock``'s build)."""
        wanted = sorted({int(i) for i in ids})
        if not wanted:
            return set()
        rows = run(
            self._aux,
            f"SELECT snapshot_id FROM {ident(META_DB)}.ducklake_snapshot "
            "WHERE list_contains(?, snapshot_id)",
            [wanted],
        ).fetchall()
        return {int(r[0]) for r in rows}

    def catalog_has(self, schema: str, table: str | None = None) -> bool:
        """Whether the live catalog (DuckLake's copy) has the schema, or the
        table in it."""
        if table is None:
            sql = (
                f"SELECT count(*) FROM {ident(META_DB)}.ducklake_schema "
                "WHERE schema_name = ? AND end_snapshot IS NULL"
            )
            params: list[str] = [schema]
        else:
            sql = (
                f"SELECT count(*) FROM {ident(META_DB)}.ducklake_table t "
                f"JOIN {ident(META_DB)}.ducklake_schema s USING (schema_id) "
                "WHERE s.schema_name = ? AND t.table_name = ? "
                "AND t.end_snapshot IS NULL AND s.end_snapshot IS NULL"
            )
            params = [schema, table]
        return bool(run(self._aux, sql, params).fetchone()[0])

    def live_tables(self) -> list[tuple[str, str]]:
        """(schema, table) of every live table, from DuckLake's copy of the
        catalog (no per-table work, unlike ``duckdb_tables()``)."""
        rows = self._aux.execute(
            f"SELECT s.schema_name, t.table_name FROM {ident(META_DB)}.ducklake_table t "
            f"JOIN {ident(META_DB)}.ducklake_schema s USING (schema_id) "
            "WHERE t.end_snapshot IS NULL AND s.end_snapshot IS NULL ORDER BY 1, 2"
        ).fetchall()
        return [(str(a), str(b)) for a, b in rows]

    def catalog_file_bytes(self) -> int:
        """Bytes of every data and delete file the catalog lists (live or kept
        by history); files scheduled for deletion are no longer counted, as
        DuckLake drops their sizes when it schedules them."""
        return int(
            self._aux.execute(
                f"SELECT (SELECT coalesce(sum(file_size_bytes), 0) "
                f"FROM {ident(META_DB)}.ducklake_data_file) + "
                f"(SELECT coalesce(sum(file_size_bytes), 0) "
                f"FROM {ident(META_DB)}.ducklake_delete_file)"
            ).fetchone()[0]
        )

    def held_files_scheduled(self, snapshot_ids: Iterable[int]) -> list[str]:
        """Paths of files scheduled for deletion that one of ``snapshot_ids``
        still references (a data or delete file live at that snapshot): none
        in a sound catalog; the cleanup fail-safe asks before deleting."""
        held = sorted({int(i) for i in snapshot_ids})
        if not held:
            return []
        rows = run(
            self._aux,
            f"""
            WITH files AS (
                SELECT data_file_id AS id, begin_snapshot, end_snapshot
                FROM {ident(META_DB)}.ducklake_data_file
                UNION ALL
                SELECT delete_file_id, begin_snapshot, end_snapshot
                FROM {ident(META_DB)}.ducklake_delete_file
            )
            SELECT DISTINCT s.path FROM {ident(META_DB)}.ducklake_files_scheduled_for_deletion s
            JOIN files f ON f.id = s.data_file_id, unnest(?::BIGINT[]) h(snapshot_id)
            WHERE f.begin_snapshot <= h.snapshot_id
              AND (f.end_snapshot IS NULL OR f.end_snapshot > h.snapshot_id)
            ORDER BY 1
            """,
            [held],
        ).fetchall()
        return [str(r[0]) for r in rows]

    def catalog_changed(self) -> None:
        """The state moved in a way DuckDB's copy must see (an index took a
        catalog id): reload before the next statement."""
        self._synced = None

    def _commit(self, commit: Callable[[], Committed], in_duckdb: bool) -> Committed:
        """Commit, then say whether DuckLake's copy is at the new head: it is
        when the change came from DuckLake (captured) and landed on the base
        it was made on; otherwise the next statement applies what it lacks."""
        committed = commit()
        pending = self.state.pending
        if in_duckdb:
            # DuckLake's copy made our snapshot; a rebased commit's re-read of
            # the log may have taken the state past it (pending, not in the copy)
            self._copy_snapshot = committed.change_set.result.snapshot_id
        if in_duckdb and pending is not None:
            # rebased past head-preserving commits: DuckLake's copy lacks only those
            mine = committed.change_set.txn_id
            self.state.pending = [cs for cs in pending if cs.txn_id != mine]
            if not self.state.pending:
                self._synced = (self.state.head, self.state.last_seq)
        return committed


def _catalog_rows(change_sets: list[ChangeSet]) -> bool:
    """Whether any of ``change_sets`` writes catalog rows (not only the
    lock's or a status record's)."""
    return any(
        cs.ranges or any(k[0] in CATALOG_SUBSPACES for k in (*(k for k, _ in cs.puts), *cs.deletes))
        for cs in change_sets
    )
