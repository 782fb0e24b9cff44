"""How a session's change lands in the log: under the commit lock, on the head.

Every write runs in a DuckDB transaction. At its COMMIT the session takes
the lake's commit lock, brings DuckLake's copy to the log's head, and lets
DuckLake's own commit rebase the transaction onto what it missed (or refuse
it, in DuckLake's words, as ConflictError); the captured change is then
committed through the log, and that slot gives the lock back, so nothing can
land in between. DuckLake's maintenance calls take the lock before they
run. An autocommit write on a lake no one else is writing commits without
it, in one slot that loses to any commit or lock take since (``alone``),
and right after another such write it looks at the log while it runs.
A write DuckDB ran behind the session's back is committed before the
next statement, or refused. See docs/decisions/0006-concurrent-writers.md.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

import duckdb

from slatelake.catalog.commit_lock import LOCK_KEY, CommitLock
from slatelake.catalog.holds import HOLDS_KEY, held_snapshots
from slatelake.catalog.lake import Lake
from slatelake.ducklake import indexes
from slatelake.ducklake import statements as stmt
from slatelake.ducklake.attach_options import stored_data_path
from slatelake.ducklake.capture import Capture, Captured
from slatelake.ducklake.catalog_db import CATALOG_SUBSPACES
from slatelake.ducklake.copy_view import CopyView
from slatelake.ducklake.read_ahead import ReadAhead
from slatelake.ducklake.refused_commit import remove_new_files, unsafe_rebase
from slatelake.ducklake.sql import ident
from slatelake.ducklake.txn_state import Ended, Txn
from slatelake.ducklake.write_log import WriteLog
from slatelake.errors import (
    ConflictError,
    HeldSnapshotError,
    PinnedSnapshotError,
    ReadOnlyError,
)
from slatelake.log.changeset import ChangeSet
from slatelake.log.committer import Committed
from slatelake.log.leases import pinned

if TYPE_CHECKING:
    from slatelake.ducklake.duck_state import DuckState

log = logging.getLogger("slatelake.session")
# The session's two DuckDB databases: DuckLake's working copy of the catalog,
# and the committed catalog at the session's head.
META_DB = "__slatelake_meta"
BASE_DB = "__slatelake_base"
# The newest snapshot in DuckLake's copy: past the session's, DuckDB committed
# a write behind the session's back.


class CommitHost(Protocol):
    """What the committer reads of the session it commits for: its parts,
    among them the two a reload or a connection of its own replaces
    (``state``, ``con``). ``Session`` is one; it also has what
    ``indexes.index_writes`` asks of a session."""

    lake: Lake
    state: DuckState
    con: duckdb.DuckDBPyConnection
    alias: str
    meta_db: str  # DuckLake's copy of the catalog, an attached database
    read_only: bool
    capture: Capture
    log: WriteLog
    verify: bool

    @property
    def in_transaction(self) -> bool: ...

    def refresh(self) -> None: ...

    def commit_change_set(self, cs: ChangeSet) -> Committed: ...

    def catalog_changed(self) -> None: ...


class Front(Protocol):
    """The connection a statement came in on, and its transaction: the
    session's own, or a cursor sharing its copy (``session_cursor.py``)."""

    @property
    def con(self) -> duckdb.DuckDBPyConnection: ...

    @property
    def txn(self) -> Txn: ...


class Committer:
    """The commit half of a session: lands what DuckLake changed in the log
    under the commit lock. It keeps no flag of its own beyond the commit under
    way (``_rebased``): the transaction's state is the ``front``'s ``txn``,
    the copy's ``view``. ``front`` is the connection being served (the
    session sets it, under its lock, for each call of a cursor's)."""

    def __init__(
        self,
        host: CommitHost,
        aux: duckdb.DuckDBPyConnection,
        ahead: ReadAhead,
        lock: CommitLock,
        front: Front,
        view: CopyView,
        sync: Callable[[bool], None],
    ) -> None:
        self._host = host
        self.front = front
        # the session's own: apply others' commits to DuckLake's copy (or reload
        # it); ``False`` keeps DuckLake's query log (it may have written the copy)
        self._sync = sync
        self._aux = aux  # the session's helper cursor
        self._ahead = ahead
        self.lock = lock
        self._view = view
        self._rebased: list[ChangeSet] = []  # commits the open COMMIT rebases over
        # the newest snapshot in DuckLake's copy (a write DuckDB made behind our back moves it)
        self._newest_in_copy = (
            f"SELECT max(snapshot_id) FROM {ident(host.meta_db)}.ducklake_snapshot"
        )

    def commit_outside_writes(self) -> None:
        """Commit a write DuckDB ran outside the session's statements (a
        relation's ``insert_into``, ``create`` or ``update``; ``session.con``):
        DuckLake committed it to the session's copy, so it is committed now,
        before anything else, when nothing has landed since; otherwise it
        cannot be rebased and is refused, never dropped without a word."""
        if (
            self._host.read_only
            or self.front.txn.open
            or self._view.stale
            or self._view.synced is None
        ):
            return
        (newest,) = self._aux.execute(self._newest_in_copy).fetchone()
        if newest == self._view.copy_snapshot:
            return
        # A busy lock changes nothing: the write waits in the copy, and the
        # next statement (or the close) tries again.
        self.lock.acquire(self._host.state)
        try:
            pending = self._host.state.pending
            if pending is None or any(cs.mints_snapshot or cs.puts_snapshot_rows for cs in pending):
                raise ConflictError(
                    "a write made outside session.sql (a relation's insert_into, create or "
                    "update, or session.con) reached only this session's copy of the catalog, "
                    "and another writer has committed since; it was discarded: run it through "
                    "session.sql or session.execute"
                )
            self._rebased = []
            if pending:
                self._sync(False)
        except BaseException:
            self._view.stale = True
            self.lock.release(self._host.state)
            raise
        log.info("committing a write made outside session.sql (snapshot %s)", newest)
        self.commit_captured()

    def commit_written_beside(self) -> None:
        """Commit what a statement run on another session's connection (the
        host this lake is attached to) wrote to DuckLake's copy; the lock was
        taken at the head before it ran (``lock_at_head``), so nothing landed
        since and it lands as DuckLake made it. Nothing written: the lock
        goes back. Captured, not judged by the newest snapshot: DuckLake's
        ``set_option`` writes its catalog without minting one."""
        self._rebased = []
        self.commit_captured()

    def refuse_written_beside(self) -> None:
        """A read-only lake attached to another session: a statement there
        that changed DuckLake's copy commits nothing (the copy is rebuilt)."""
        (newest,) = self._aux.execute(self._newest_in_copy).fetchone()
        if newest != self._view.copy_snapshot:
            self._view.stale = True
            raise ReadOnlyError(
                f"{self._host.alias} is attached read-only but the statement changed it; "
                "nothing was committed to it: attach it without READ_ONLY to write"
            )

    def outside_write_beside(self) -> Callable[[], bool]:
        """Ask the worker, while a statement runs, what ``commit_outside_writes``
        asks before one: whether DuckDB committed a write to DuckLake's copy
        behind the session's back. The call returned takes the answer (True:
        one is there; its errors raised there). The statement's own writes
        reach DuckLake's copy only at its COMMIT, after the answer is in."""
        self._ahead.submit(self._aux, "ducklake_snapshot", self._newest_in_copy)
        copy = self._view.copy_snapshot

        def outside() -> bool:
            rows = self._ahead.take(self._newest_in_copy)
            return rows is None or rows[0][0] != copy

        return outside

    def lock_at_head(self, fresh: bool = False) -> None:
        """Take the commit lock and bring DuckLake's copy to the head before
        the statement runs, so its commit needs no rebase (``fresh``: the
        session was refreshed just before; see ``CommitLock.acquire``)."""
        self.lock.acquire(self._host.state, fresh)
        try:
            if not self._view.at_head(self._host.state):
                self._sync(True)
        except BaseException:
            self.lock.release(self._host.state)
            raise

    def release_lock(self) -> None:
        """Give the commit lock back (nothing of this commit will land)."""
        self.lock.release(self._host.state)

    def rollback(self) -> None:
        """Roll back DuckDB's open transaction, if there is one."""
        with suppress(duckdb.TransactionException):  # none open: DuckDB already ended it
            self.front.con.execute("ROLLBACK")

    def commit_change_set(self, cs: ChangeSet) -> Committed:
        """Commit a head-preserving change set built outside DuckLake (status records)."""
        if self._host.read_only:
            raise ReadOnlyError("this session is read-only; it writes no commit-log slot")
        return self._commit(
            lambda: self._host.lake.commit_change_set(self._host.state, cs), in_duckdb=False
        )

    def commit_transaction(
        self, fresh: bool = False, may_go_alone: bool = False, ended: Ended | None = None
    ) -> None:
        """COMMIT DuckDB's open transaction and the change it made to the log.

        Under the lake's commit lock, DuckLake's copy is first brought to the
        log's head; DuckLake's own commit then finds the snapshots it missed
        and rebases onto them by its rules (fresh ids, its conflict check and
        wording), as it does on a catalog shared by processes. Nothing can
        land between that refresh and the slot write, so what DuckLake
        committed in its copy is what the log gets, on the base it was made on.
        ``fresh``: the session was refreshed just before the statement.
        ``may_go_alone``: an autocommit write that can run again, which
        commits without the lock when ``alone`` says it may.
        ``ended``: the explicit transaction being committed (``Ended``): one
        that called a DuckLake maintenance function must not be rebased, and
        one that shared the copy with a cursor is checked against all that
        reached the copy since it began.
        """
        if self._host.read_only:
            self._commit_read_only()
            return
        if may_go_alone and self.alone(fresh):
            self.commit_alone()
            return
        try:
            self.lock.acquire(self._host.state, fresh)
            self._catch_up_in_transaction(ended)
        except BaseException:
            self._abandon_transaction()
            raise
        try:
            self.front.con.execute("COMMIT")
        except duckdb.Error as exc:
            # DuckLake rolled its copy back (and removed the files it wrote)
            self.lock.release(self._host.state)
            raise stmt.refused(exc) from exc
        except BaseException:
            self._view.stale = True  # an interrupt: what DuckDB kept is unknown
            self.lock.release(self._host.state)
            raise
        # a transaction that shared the copy: others' captures may have read its
        # early writes (a flush's) from the query log, so every table is compared
        self.commit_captured(logged=ended is None or not ended.began.shared)

    def alone(self, fresh: bool) -> bool:
        """Whether an autocommit write may commit without taking the lock: the
        session saw the log's end a moment ago (a refresh, or its own lone
        slot landing), DuckLake's copy is at that head, the lock was free
        there, and in the last ``CONTENDED_S`` no commit of this session was
        overtaken and no refresh found another committer's slot. A lake with
        one writer saves a slot per write; one with several keeps the lock,
        which rebases: a write committed alone there is soon overtaken, and
        an overtaken one costs a reload of DuckLake's copy and a second run."""
        if not fresh or self._view.stale or self.front.txn.open:
            return False
        if self._view.busy():
            return False
        if not self._view.at_head(self._host.state):
            return False
        return self._host.lake.read_sys(self._host.state, LOCK_KEY) is None

    def commit_alone(self) -> None:
        """COMMIT in DuckDB, then the slot, with no lock taken. DuckLake's copy
        was at the head the session last saw, so its commit rebased over
        nothing. The slot deletes the lock's key: a commit that landed since
        either minted a snapshot (the log refuses ours over it) or took or
        gave back the lock (the same key: refused); nothing can land under a
        lock another committer holds. A refused write is re-run under the
        lock by the statement runner (``statement_flow.py``)."""
        try:
            self.front.con.execute("COMMIT")
        except duckdb.Error as exc:
            raise stmt.refused(exc) from exc
        except BaseException:
            self._view.stale = True  # an interrupt: what DuckDB kept is unknown
            raise
        self._rebased = []
        looked = time.monotonic()
        try:
            self.commit_captured(fence_lock=True)
        except ConflictError:
            self._view.overtaken_at = time.monotonic()
            raise
        if self._view.at_head(self._host.state):
            # the slot was free when written: a look at the log's end, as a refresh's
            self._view.refreshed_at = looked

    def _commit_read_only(self) -> None:
        try:
            self.front.con.execute("COMMIT")
        except BaseException:
            self._view.stale = True  # what DuckDB kept is unknown: reload from the log
            raise
        if self.captured() is not None:
            self._view.stale = True
            raise ReadOnlyError(
                "this session is read-only but the transaction changed the catalog; nothing was "
                "committed, reconnect without read_only to write"
            )

    def _catch_up_in_transaction(self, ended: Ended | None) -> None:
        """Apply others' commits to DuckLake's copy while a transaction is
        open (the lock is held, the state at the head). The query log is not
        reset: DuckLake may have written its copy before COMMIT. What DuckLake
        rebases over: those, and what reached the copy since an explicit
        transaction began (a cursor's commits, or others' it applied)."""
        began = None if ended is None else ended.began
        reloaded = began is not None and began.load != self._view.loads
        if self._view.stale or self._host.state.pending is None or reloaded:
            self._view.stale = True
            raise ConflictError(
                "this session's copy of the catalog had to be rebuilt while a transaction was "
                "open; nothing was committed, re-run the transaction"
            )
        if any(cs.puts_snapshot_rows and not cs.mints_snapshot for cs in self._host.state.pending):
            raise ConflictError(
                "another writer changed the head snapshot's row without a DuckLake snapshot "
                "(an index took a catalog id), which DuckLake's commit cannot rebase onto; "
                "nothing was committed, re-run the transaction"
            )
        pending = list(self._host.state.pending)
        self._rebased = pending if began is None else self._view.reached_since(began) + pending
        if (
            ended is not None
            and ended.called_maintenance
            and any(cs.mints_snapshot for cs in self._rebased)
        ):
            raise ConflictError(
                "a DuckLake maintenance function ran in this transaction and another "
                "transaction has committed since it began; DuckLake 1.5.5 does not redo a "
                "flush or compaction correctly when it retries, so nothing was committed: "
                "run it again (in autocommit it never needs a retry)"
            )
        if not self._view.at_head(self._host.state):
            self._sync(False)

    def _abandon_transaction(self) -> None:
        """Roll back DuckDB's transaction and give the lock back (best effort)."""
        try:
            self.rollback()
        except BaseException:
            self._view.stale = True
        self.lock.release(self._host.state)

    def captured(self, logged: bool = True) -> Captured | None:
        """What DuckLake changed since the write window opened: the tables its
        query log names, or every table when the log cannot say."""
        return self._host.capture.capture(
            self._host.state, self._host.log.written() if logged else None
        )

    def commit_captured(self, logged: bool = True, fence_lock: bool = False) -> None:
        """Commit what DuckLake changed; with the commit lock held, the slot
        also releases it (so it lands only while the lock is still ours).
        ``fence_lock``: the lock was free at the base; the slot deletes its
        key all the same, so it overlaps (and loses to) any take since."""
        captured = None
        try:
            captured = self.captured(logged)
            if captured is None:
                self.lock.release(self._host.state)
                return
            if self.lock.held and (why := unsafe_rebase(captured.changes_made, self._rebased)):
                raise ConflictError(why)
            self._refuse_expiring_held(captured)
            # the data's change set, plus its index entries and cascaded ends
            cs = indexes.index_writes(self._host, captured)
            if self.lock.held or fence_lock:
                cs = replace(cs, deletes=(*cs.deletes, LOCK_KEY))
            self._commit(
                lambda: self._host.lake.commit_change_set(self._host.state, cs), in_duckdb=True
            )
        except BaseException as exc:  # uncapturable, refused, unreadable index entries
            self._view.stale = True  # DuckDB holds changes the log does not: never carry them
            if isinstance(exc, ConflictError) and captured is not None:  # definitively refused
                data_path = stored_data_path(self._host.state)
                remove_new_files(
                    self._aux, self._host.meta_db, self._host.alias, data_path, captured.changes
                )
            if self.lock.held:  # the slot carrying the release never landed: give it back
                self.lock.release(self._host.state)
            raise
        self.lock.released()
        self._host.capture.landed(captured, self._host.state)
        pending = self._host.state.pending
        # others' catalog rows read with ours are not in DuckLake's copy yet:
        # the next statement applies them, and only then do the two agree
        if self._host.verify and pending is not None and not _catalog_rows(pending):
            self._host.capture.verify(self._host.state)

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
        held = held_snapshots(self._host.lake.read_sys(self._host.state, HOLDS_KEY))
        hit = sorted(gone & held.keys())
        if hit:
            names = "; ".join(f"snapshot {s} by {', '.join(map(repr, held[s]))}" for s in hit)
            raise HeldSnapshotError(
                f"this commit would expire snapshots that retention holds protect ({names}); "
                "nothing was committed: leave them out, or remove the holds first "
                "(slatelake unprotect LAKE NAME)"
            )
        # pins live in the readers' leases, read here after the lock was taken
        # (a pinner checks its snapshot after its lease landed: reader_pins.py)
        exact, onward = pinned(self._host.lake.lease.book.live(prune=False))
        hit = sorted(s for s in gone if s in exact or (onward is not None and s >= onward))
        if hit:
            raise PinnedSnapshotError(
                "this commit would expire snapshots live readers pin "
                f"({', '.join(map(str, hit))}); "
                "nothing was committed: leave them out (slatelake pins LAKE lists the pins; "
                "each ends when its reader closes or its lease lapses)"
            )

    def commit_under_lock(self, build: Callable[[], ChangeSet | None]) -> Committed | None:
        """Commit a head-preserving change set built at the head with the
        commit lock held (``build`` reads what it needs there; None commits
        nothing); the slot gives the lock back. Retention holds change this
        way, so no DuckLake commit can land between a hold's check and its write."""
        if self._host.read_only:
            raise ReadOnlyError("this session is read-only; it writes no commit-log slot")
        self.lock_at_head()
        try:
            cs = build()
            if cs is None:
                self.lock.release(self._host.state)
                return None
            cs = replace(cs, deletes=(*cs.deletes, LOCK_KEY))
            committed = self._commit(
                lambda: self._host.lake.commit_change_set(self._host.state, cs), in_duckdb=False
            )
        except BaseException:
            if self.lock.held:
                self.lock.release(self._host.state)
            raise
        self.lock.released()
        return committed

    def catalog_changed(self) -> None:
        """The state moved in a way DuckDB's copy must see (an index took a
        catalog id): reload before the next statement."""
        self._view.synced = None

    def _commit(self, commit: Callable[[], Committed], in_duckdb: bool) -> Committed:
        """Commit, then say whether DuckLake's copy is at the new head: it is
        when the change came from DuckLake (captured) and landed on the base
        it was made on; otherwise the next statement applies what it lacks."""
        committed = commit()
        pending = self._host.state.pending
        if in_duckdb:
            # DuckLake's copy made our snapshot; a rebased commit's re-read of
            # the log may have taken the state past it (pending, not in the copy)
            self._view.copy_snapshot = committed.change_set.result.snapshot_id
            self._view.reach([committed.change_set])
        if in_duckdb and pending is not None:
            # rebased past head-preserving commits: DuckLake's copy lacks only those
            mine = committed.change_set.txn_id
            self._host.state.pending = [cs for cs in pending if cs.txn_id != mine]
            if not self._host.state.pending:
                self._view.synced = (self._host.state.head, self._host.state.last_seq)
        return committed


def _catalog_rows(change_sets: list[ChangeSet]) -> bool:
    """Whether any of ``change_sets`` writes catalog rows (not only the
    lock's or a status record's)."""
    return any(
        cs.ranges or any(k[0] in CATALOG_SUBSPACES for k in (*(k for k, _ in cs.puts), *cs.deletes))
        for cs in change_sets
    )
