"""How a session runs a statement: reads as DuckDB runs them, writes in a
transaction of their own committed under the lake's commit lock.

A statement that raised leaves nothing behind: after any failure the
session rolls back what DuckDB still holds open and, if DuckDB's catalog
moved, reloads from the log before the next statement. A write statement
whose data-file request failed inside DuckDB's httpfs (or the file system)
raises the typed error (``indexes.translate_data_error``), one line naming
the file.

``StatementRunner`` is this half of a session: it classifies each statement
by DuckDB's parser (``statements.py``), moves the session's one transaction
state (``txn_state.Txn``) as BEGIN, COMMIT, ROLLBACK and ``transaction()``
blocks open and end transactions, and has each write committed by the
session's ``Committer`` (``commit_flow.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING, Any, Protocol

import duckdb

from slatelake.ducklake import indexes
from slatelake.ducklake import statements as stmt
from slatelake.ducklake.commit_flow import Committer, log
from slatelake.ducklake.copy_view import CopyView
from slatelake.ducklake.duck_errors import as_duckdb
from slatelake.ducklake.results import Results, in_scope
from slatelake.ducklake.txn_state import Txn, TxnState
from slatelake.errors import (
    CommitLockBusyError,
    ConflictError,
    MisconfigurationError,
    ReadOnlyError,
)

if TYPE_CHECKING:
    from slatelake.catalog.lake import Lake
    from slatelake.ducklake.duck_state import DuckState
    from slatelake.ducklake.write_log import WriteLog

_ST = duckdb.StatementType


@dataclass(frozen=True)
class _Call:
    """One statement that may write, as the caller sent it."""

    query: str
    params: Any
    types: set[Any]
    frame: FrameType | None  # where the caller's Python names are (replacement scans)
    kinds: set[Any]  # the parsed statement types (``types`` may add CALL for ``writes``)


class Attached(Protocol):
    """The other lakes attached beside the host's (``attached_lakes.AttachedLakes``)."""

    def __bool__(self) -> bool: ...

    def statement(self, query: str) -> bool: ...

    def commit_outside_writes(self) -> None: ...

    def named(self, query: str) -> list[Any]: ...

    def ready(self, lakes: list[Any]) -> None: ...

    def writing(self, lakes: list[Any], in_transaction: bool) -> AbstractContextManager[None]: ...


class StatementHost(Protocol):
    """What the statement runner reads of the session it runs statements
    for: the parts a reload or a connection of its own replaces (``state``,
    ``con``), whether it may write its own metadata databases, and its
    refresh (to the log's head)."""

    lake: Lake
    state: DuckState
    con: duckdb.DuckDBPyConnection
    read_only: bool
    log: WriteLog
    metadata_writes: bool

    @property
    def attached_lakes(self) -> Attached: ...

    @property
    def shared(self) -> bool:
        """Whether another connection (a cursor) shares DuckLake's copy."""

    def refresh(self) -> None: ...

    def internal_databases(self) -> frozenset[str]: ...


class StatementRunner:
    """The statement half of a session: runs each statement as DuckDB would,
    a write in a transaction of its own committed by the ``Committer``, and
    moves the session's transaction state (``txn``) as statements open and
    end transactions."""

    def __init__(
        self,
        host: StatementHost,
        committer: Committer,
        results: Results,
        txn: Txn,
        view: CopyView,
    ) -> None:
        self._host = host
        self._committer = committer
        self.results = results  # DuckDB's answers as the session returns them
        self._txn = txn
        self._view = view
        self._write_marked = False  # this session's reader lease says it is writing

    def statements(
        self, query: str, params: Any, writes: bool | None, frame: FrameType | None, pending: bool
    ) -> Any:
        try:
            return self._statement(query, params, writes, frame, pending)
        finally:
            if self._write_marked and not self._txn.open:
                self.unmark_write()

    def ready_to_read(self) -> None:
        """What a statement does before it runs in autocommit: a write DuckDB
        made behind the session's back is committed, and the session comes
        to the log's head (a transaction reads its own snapshot)."""
        if not self._txn.open:
            self._committer.commit_outside_writes()
            self._host.refresh()

    def _mark_write(self) -> None:
        """Before a write's first data file can land: the session's reader
        lease says it is writing, so the orphan step spares what it writes."""
        if not self._write_marked:
            self._host.lake.lease.begin_write(self._host.state.last_seq)
            self._write_marked = True

    def unmark_write(self) -> None:
        if self._write_marked:
            self._write_marked = False
            self._host.lake.lease.end_write()

    def _refuse_metadata_write(self, query: str, types: set[Any]) -> None:
        """A statement that may write, or a USE/SET, naming the session's own
        metadata databases is refused: DuckLake's statements and functions
        are the way to change a lake (a hand-written UPDATE of a file's end
        snapshot would unmake what a retention hold keeps)."""
        writes = bool(types - stmt.READ_TYPES)
        if not (writes or _ST.SET in types):
            return
        named = stmt.names_any(query, self._host.internal_databases(), strings=not writes)
        if named is not None:
            raise ReadOnlyError(
                f"{named} holds this session's copy of the lake's DuckLake metadata, which "
                "statements only read: change the lake with SQL on its tables and DuckLake's "
                "functions (a hand-written change to the metadata could remove files a retention "
                "hold keeps); SELECT from it to inspect"
            )

    def _statement(
        self, query: str, params: Any, writes: bool | None, frame: FrameType | None, pending: bool
    ) -> Any:
        parsed = stmt.parse(query)
        if params is None and len(parsed) > 1 and all(st.query.strip() for st in parsed):
            result = None
            for st in parsed:
                result = self._statement(st.query, None, writes, frame, pending)
            return result
        types = {st.type for st in parsed}
        if writes:
            types = types | {_ST.CALL}
        kinds = {st.type for st in parsed}
        attached = self._host.attached_lakes  # other slatelake lakes in this database
        if len(parsed) == 1 and types <= {_ST.ATTACH, _ST.DETACH} and attached.statement(query):
            return self._host.con if pending else None
        if not self._host.metadata_writes:
            self._refuse_metadata_write(query, types)
        if self._host.read_only:
            refused = sorted(t.name for t in types - stmt.READ_TYPES - {_ST.CALL, _ST.TRANSACTION})
            if refused:
                raise ReadOnlyError(
                    f"this session is read-only and refuses {', '.join(refused)}; "
                    "reconnect without read_only to write"
                )
        if types == {_ST.TRANSACTION} and len(parsed) == 1:
            self.transaction_statement(query)
            return self._host.con if pending else None
        if self._txn.state is TxnState.BLOCK_FAILED:
            raise _in_transaction(
                MisconfigurationError(
                    "a statement in this transaction failed; leave the transaction block "
                    "(it is rolled back) and run it again"
                )
            )
        if not attached:
            return self._one(query, params, types, kinds, frame, pending)
        attached.commit_outside_writes()
        named = attached.named(query)
        if named and self._may_write(query, types) and not types <= stmt.NOT_LAKE_WRITES:
            with attached.writing(named, self._txn.open):
                result = self._one(query, params, types, kinds, frame, pending)
        else:
            attached.ready(named)
            result = self._one(query, params, types, kinds, frame, pending)
        self._host.log.truncate_if_due()
        return result

    @staticmethod
    def _may_write(query: str, types: set[Any]) -> bool:
        # A read can still change the catalog through a DuckLake table function
        # (SELECT * FROM ducklake_expire_snapshots(...)): treat those as writes.
        return bool(types - stmt.READ_TYPES) or stmt.names_ducklake(query)

    def _one(
        self,
        query: str,
        params: Any,
        types: set[Any],
        kinds: set[Any],
        frame: FrameType | None,
        pending: bool,
    ) -> Any:
        """One statement on the session's own lake (and DuckDB's databases)."""
        may_write = self._may_write(query, types)
        if may_write and not (self._host.read_only or types <= stmt.NOT_LAKE_WRITES):
            self._mark_write()
        look = None
        if not self._txn.open:
            if may_write and self._looks_beside(query, types):
                started = time.monotonic()
                look = self._look_beside(), started
            else:
                self.ready_to_read()
        if not may_write:
            self._host.log.read_done()
            return self._read(query, params, frame, pending)
        call = _Call(query, params, types, frame, kinds=kinds)
        wrapped = not (self._txn.open or self._host.read_only or types <= stmt.NOT_LAKE_WRITES)
        if wrapped:
            result = self._autocommit_write(call, look)
        else:
            if self._txn.open and stmt.is_maintenance_call(query):
                self._txn.note_maintenance_call()
            result = self._run(call)
            if self._host.read_only:
                if self._committer.captured() is not None:
                    self._view.stale = True
                    raise ReadOnlyError(
                        "this session is read-only but the statement changed the catalog; "
                        "nothing was committed, reconnect without read_only to write"
                    )
            elif not self._txn.open:
                self._committer.commit_captured()
        return self.results.pend(result) if pending else result

    def _looks_beside(self, query: str, types: set[Any]) -> bool:
        """Whether an autocommit write may run while the session looks at the
        log's end (a LIST, on a worker thread), instead of after: one that
        will commit alone, right after the session saw the log's end (a look,
        or its own slot landing). Before anything commits, the look's answer
        is in: if the log moved, DuckDB's transaction is rolled back (nothing
        of it committed anywhere, DuckLake removes its files) and the write
        runs again on the head, so it sees what a look before it would have.
        A write after a pause, or on a busy lake, looks first and rarely runs
        twice."""
        if self._host.read_only or types <= stmt.NOT_LAKE_WRITES or stmt.is_maintenance_call(query):
            return False
        return self._committer.alone(self._view.just_refreshed())

    def _look_beside(self) -> Callable[[], str | None]:
        """Look at the log's end, and ask whether DuckDB committed a write
        behind the session's back, while the statement runs (what a read asks
        first). The call returned takes both answers: why the write must run
        again, or None."""
        outside = self._committer.outside_write_beside()
        log_moved = self._host.lake.look_beside(self._host.state)

        def look() -> str | None:
            behind = outside()  # taken first: the worker's answer is never left behind
            if log_moved():
                return "the log moved"
            return "a write outside session.sql was waiting" if behind else None

        return look

    def _read(self, query: str, params: Any, frame: FrameType | None, pending: bool) -> Any:
        """DuckDB's own answer to a read: a lazy relation, or the pending result."""
        try:
            if pending:
                return in_scope(frame, self._host.con.execute, query, params)
            return in_scope(frame, self._host.con.sql, query, params=params)
        except BaseException as exc:
            self._statement_failed(exc)
            raise

    def _autocommit_write(
        self, call: _Call, look: tuple[Callable[[], str | None], float] | None
    ) -> duckdb.DuckDBPyRelation | None:
        """A write in a transaction of its own. A DuckLake maintenance call runs
        with the commit lock held from the start (its commit never needs a
        rebase); any other write runs first without it, and if its commit is
        refused as a conflict it runs once more with the lock held on the head,
        where nothing can overtake it: nothing of the first run was committed,
        and a statement run again later is what its author would have got by
        sending it a moment later. A write that ran beside its look at the
        log (``look``: its answer and when it started) and finds the log
        moved, or a write DuckDB committed behind the session's back, runs
        again the same way, before anything of it committed (that write is
        committed first)."""
        lock_first = stmt.is_maintenance_call(call.query)
        if lock_first and self._maintenance_alone(call.query):
            try:
                return self._commit_maintenance_alone(call)
            except ConflictError as exc:
                log.info("re-running a maintenance call under the commit lock after: %s", exc)
            self._host.refresh()
            return self._write_in_transaction(call, lock_first=True)
        try:
            return self._write_in_transaction(call, lock_first, look)
        except CommitLockBusyError:
            raise
        except _LogMoved as moved:
            log.info("re-running a write on the head: %s while it ran", moved)
            self._committer.commit_outside_writes()  # first, as before any statement
        except ConflictError as exc:
            if lock_first:
                raise
            log.info("re-running a write under the commit lock after: %s", exc)
        self._host.refresh()
        return self._write_in_transaction(call, lock_first=True)

    def run_maintenance_unless(
        self, query: str, check: Callable[[], str | None]
    ) -> tuple[duckdb.DuckDBPyRelation | None, str | None]:
        """Run one DuckLake maintenance call in autocommit, unless ``check``,
        asked with the commit lock held and DuckLake's copy at the head, gives
        a reason against it. Nothing can commit between the check and the
        call's commit. Returns (the call's result, None) or (None, the reason;
        nothing ran, the lock is given back)."""
        if self._txn.open or self._host.read_only or not stmt.is_maintenance_call(query):
            raise MisconfigurationError(
                "a checked maintenance call runs one DuckLake maintenance function in "
                "autocommit on a writable session"
            )
        parsed = stmt.parse(query)
        kinds = {st.type for st in parsed}
        # built SQL naming no Python object: no caller's frame to resolve names in
        call = _Call(query, None, kinds | {_ST.CALL}, None, kinds=kinds)
        self._committer.commit_outside_writes()
        self._host.refresh()
        if self._maintenance_alone(query):
            try:
                reason = check()
                if reason is not None:
                    return None, reason
                return self._commit_maintenance_alone(call), None
            except ConflictError as exc:
                log.info("re-running a maintenance call under the commit lock after: %s", exc)
            self._host.refresh()
        self._committer.lock_at_head(fresh=self._view.just_refreshed())
        try:
            reason = check()
        except BaseException:
            self._committer.release_lock()
            raise
        if reason is not None:
            self._committer.release_lock()
            return None, reason
        self._begin(holds_lock=True)
        result = self._run(call, holds_lock=True)
        self._committer.commit_transaction()
        return result, None

    def _maintenance_alone(self, query: str) -> bool:
        """Whether a maintenance call may run without the commit lock, as a
        lone write commits (decision 0006): the session saw the log's end a
        moment ago with the lock free and DuckLake's copy at that head, and
        the call's only outside effect is the files it writes. DuckLake then
        never rebases it: its COMMIT finds nothing new in the copy, and the
        slot, which deletes the lock's key, loses to anything that landed
        since (the call's files removed); it then runs again under the lock.
        A lake with one maintainer saves a slot per call (a PUT on S3); on
        one where others committed within ``CONTENDED_S`` the lock is taken
        first, as a call run twice costs its Parquet work twice."""
        if not stmt.maintenance_may_go_alone(query):
            return False
        return self._committer.alone(self._view.just_refreshed())

    def _commit_maintenance_alone(self, call: _Call) -> duckdb.DuckDBPyRelation | None:
        """Run a maintenance call and commit it alone: its slot lands on the
        head it ran on, or ``ConflictError`` and nothing of it stays."""
        self._begin(holds_lock=False)
        result = self._run(call)
        self._committer.commit_alone()
        return result

    def _write_in_transaction(
        self,
        call: _Call,
        lock_first: bool,
        look: tuple[Callable[[], str | None], float] | None = None,
    ) -> duckdb.DuckDBPyRelation | None:
        if lock_first:
            self._committer.lock_at_head(fresh=self._view.just_refreshed())
        self._begin(holds_lock=lock_first)
        try:
            result = self._run(call, holds_lock=lock_first)
        except Exception:
            if look is not None and (why := _moved(look[0])):  # an error of the stale head's?
                raise _LogMoved(why) from None
            raise
        if look is not None:
            if why := _moved(look[0]):
                self._committer.rollback()  # nothing committed: DuckLake removes the files it wrote
                raise _LogMoved(why)
            self._view.refreshed_at = look[1]  # the look saw the log's end at the session's head
        self._committer.commit_transaction(
            fresh=self._view.just_refreshed(), may_go_alone=not lock_first
        )
        return result

    def _begin(self, holds_lock: bool) -> None:
        """BEGIN; a lock taken for this write goes back if even that fails."""
        try:
            self._host.con.execute("BEGIN TRANSACTION")
        except BaseException:
            if holds_lock:
                self._committer.release_lock()
            raise

    def _run(self, call: _Call, holds_lock: bool = False) -> duckdb.DuckDBPyRelation | None:
        """Run a write; its result is materialized before anything commits."""
        self._host.log.user_statement(call.query)
        try:
            return self.results.write(call.query, call.params, call.kinds, call.frame)
        except BaseException as exc:
            self._statement_failed(exc)
            if holds_lock:
                self._committer.release_lock()
            if isinstance(exc, duckdb.IOException):  # httpfs's HTTPException too
                what = stmt.described(call.query, call.types)
                translated = indexes.translate_data_error(what, exc)
                if translated is not None:
                    raise translated from None
            raise

    def transaction_statement(self, query: str) -> None:
        """BEGIN, COMMIT or ROLLBACK sent as SQL: the same transaction as
        ``transaction()``, committed under the commit lock at COMMIT."""
        verb = query.strip().split(None, 1)[0].rstrip(";").lower()
        if verb in ("begin", "start"):
            if not self._txn.open:
                self._host.refresh()
            self._host.con.execute(query)  # DuckDB refuses a nested BEGIN itself
            self._txn.begin(raw=True, began=self._view.began(self._host.shared))
            return
        if not self._txn.open:
            self._host.con.execute(query)  # DuckDB's own "no transaction is active"
            return
        if not self._txn.state.raw:
            raise _in_transaction(
                MisconfigurationError(
                    f"{verb.upper()} inside a session.transaction() block: the block commits when "
                    "it ends and rolls back when it raises"
                )
            )
        failed = self._txn.state.failed or self._aborted()  # a lazy read may have failed at fetch
        ended = self._txn.end()
        if verb in ("commit", "end") and not failed:
            self._committer.commit_transaction(ended=ended)
            return
        self._committer.rollback()
        if verb in ("commit", "end"):  # as DuckDB answers a COMMIT of an aborted transaction
            raise duckdb.TransactionException(
                "a statement in this transaction failed, so it was rolled back and nothing was "
                "committed; run it again"
            )

    def _statement_failed(self, exc: BaseException) -> None:
        """A statement raised, maybe after DuckDB applied it: drop its effect.

        In a transaction, an error DuckDB raised is DuckDB's to judge, as in
        DuckDB: a binder or catalog error leaves the transaction usable, an
        execution error aborts it (DuckDB then refuses every statement but
        ROLLBACK, in its own words). Something raised after DuckDB ran the
        statement poisons the transaction. Either way its COMMIT rolls it back
        and says so (DuckDB's own COMMIT of an aborted transaction is silent).
        Otherwise what DuckDB holds open is rolled back, and if DuckDB's
        catalog still moved (it committed before the failure) the session
        reloads from the log before the next statement."""
        if self._txn.open:
            if not isinstance(exc, duckdb.Error):
                self._txn.fail()
            return
        if not isinstance(exc, Exception):  # an interrupt: ask DuckDB nothing more
            self._view.stale = True
            return
        try:
            self._committer.rollback()
            if self._committer.captured() is not None:
                self._view.stale = True
        except Exception:
            self._view.stale = True

    def _aborted(self) -> bool:
        """Whether DuckDB aborted the open transaction (it refuses any statement)."""
        try:
            self._host.con.execute("SELECT 1")
        except duckdb.TransactionException:
            return True
        except duckdb.Error:
            return False
        return False

    def begin_block(self) -> None:
        """Open the transaction of a ``session.transaction()`` block."""
        if self._txn.open:
            raise _in_transaction(
                MisconfigurationError("a transaction is already open on this session")
            )
        self._host.refresh()
        self._host.con.execute("BEGIN TRANSACTION")
        self._txn.begin(raw=False, began=self._view.began(self._host.shared))

    def commit_block(self) -> None:
        """The block ended without raising: commit its transaction, unless a
        statement in it failed (then it is rolled back, and that raised)."""
        if self._txn.state.failed or self._aborted():  # a lazy read may have failed at fetch
            self.end_failed_transaction()
            raise _in_transaction(
                MisconfigurationError(
                    "a statement in this transaction failed, so the transaction was rolled back "
                    "and nothing was committed; run it again"
                )
            )
        ended = self._txn.end()
        self._committer.commit_transaction(ended=ended)

    def end_failed_transaction(self) -> None:
        """Roll back the open transaction: back to autocommit."""
        self._txn.end()
        try:
            self._committer.rollback()
        except BaseException:
            self._view.stale = True
            raise


class _LogMoved(Exception):
    """A write that ran beside its look found the log moved (or a write
    behind the session's back): run it again."""


def _moved(look: Callable[[], str | None]) -> str | None:
    """The look's answer; a look that failed counts as moved (the refresh
    before the write runs again meets the error itself)."""
    try:
        return look()
    except Exception:
        return "the look failed"


def _in_transaction(exc: MisconfigurationError) -> BaseException:
    """A refusal about the transaction's state: DuckDB words those as a
    TransactionException (its "Current transaction is aborted")."""
    return as_duckdb(exc, duckdb.TransactionException)
