"""A DuckDB session with a slatelake lake attached as a real DuckLake.

``connect`` materializes the catalog into an in-memory DuckDB database and
attaches DuckLake over it. Every statement first brings the session to the
log's head (one LIST when nothing moved). Every write runs in a DuckDB
transaction; at its COMMIT the session takes the lake's commit lock, brings
DuckLake's copy to the head, and lets DuckLake's own commit rebase it (or
refuse it, in DuckLake's words, as ConflictError); the captured change is
then committed through the log, releasing the lock. DuckLake's maintenance
calls take the lock before they run. ``retry`` re-runs a callable on
conflict. Read-only sessions attach DuckLake read-only and never write a
slot. See docs/architecture.md, "Concurrent writers".

A write statement whose data-file request failed inside DuckDB's httpfs
(or the file system) raises the typed error (``indexes.translate_data_error``:
a refusal, a missing file, an unavailable store), one line naming the file.
A statement that raised leaves nothing behind: a write's rows are fetched
before its COMMIT, and after any failure the session rolls back what DuckDB
still holds open and, if DuckDB's catalog moved, reloads from the log before
the next statement. ATTACH options (the data path, a past snapshot) are in
``attach_options.py``.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

import duckdb

from slatelake.catalog.commit_lock import LOCK_KEY, CommitLock
from slatelake.catalog.lake import Lake
from slatelake.ducklake import extensions, indexes
from slatelake.ducklake import statements as stmt
from slatelake.ducklake.attach_options import (
    current_use,
    data_path_options,
    pin_options,
    restore_use,
    setting,
    stored_data_path,
)
from slatelake.ducklake.capture import Capture, Captured
from slatelake.ducklake.catalog_db import apply_change_sets, copy_database
from slatelake.ducklake.duck_state import DuckState
from slatelake.ducklake.guard import check_overlap, data_location
from slatelake.ducklake.opening import attach_copy, drop_image_schema, open_base, work_dir
from slatelake.ducklake.refused_commit import remove_new_files, unsafe_rebase
from slatelake.ducklake.results import Results, in_scope
from slatelake.ducklake.sql import ident, literal
from slatelake.ducklake.write_log import WriteLog
from slatelake.errors import (
    CommitLockBusyError,
    ConflictError,
    MisconfigurationError,
    NotFoundError,
    ReadOnlyError,
    StaleViewError,
    retry_conflicts,
)
from slatelake.log.changeset import ChangeSet
from slatelake.log.committer import Committed
from slatelake.store.db import store_exists
from slatelake.store.location import LakeLocation

log = logging.getLogger("slatelake.session")
META_DB = "__slatelake_meta"
BASE_DB = "__slatelake_base"
VERIFY_ENV = "SLATELAKE_VERIFY_CAPTURE"
T = TypeVar("T")
_ST = duckdb.StatementType


@dataclass(frozen=True)
class _Call:
    """One statement that may write, as the caller sent it."""

    query: str
    params: Any
    types: set[Any]
    frame: FrameType
    kinds: set[Any]  # the parsed statement types (``types`` may add CALL for ``writes``)


class Session:
    def __init__(
        self,
        lake_url: str,
        data_path: str | None = None,
        read_only: bool = False,
        alias: str = "lake",
        connection: duckdb.DuckDBPyConnection | None = None,
        snapshot_version: int | None = None,
        snapshot_time: datetime | str | None = None,
    ) -> None:
        self._pinned = pin_options(snapshot_version, snapshot_time)
        if self._pinned:
            read_only = True  # a past snapshot is read, never written to
        if data_path is not None:
            data_location(data_path)
            check_overlap(lake_url, data_path)
        location = LakeLocation.parse(lake_url)
        if not store_exists(location):
            if data_path is None or read_only:
                raise NotFoundError(
                    f"no slatelake lake at {lake_url}; create it by connecting with a data path "
                    f"(slatelake init {lake_url} --data-path PATH)"
                )
            Lake.create(lake_url).close()
        self.url = lake_url
        self.alias = alias
        self.read_only = read_only
        self.data_path = data_path
        self.lake = Lake.open(lake_url, read_only=read_only)
        try:
            # a caller's connection: its databases and settings stay usable beside the lake
            con = connection
            self.con = extensions.connect() if con is None else extensions.prepare(con)
        except BaseException:
            self.lake.close()
            raise
        self._workdir = work_dir()
        self._meta_file: Path | None = None  # DuckLake's copy as a file (opened from an image)
        try:
            self._aux = self.con.cursor()
            self.capture = Capture(self._aux, META_DB, BASE_DB)
            self.log = WriteLog(self._aux, META_DB, BASE_DB)
            self._results = Results(self.con)
            self.log.enable()
            self.verify = os.environ.get(VERIFY_ENV) == "1"
            self._lock = CommitLock(self.lake)
            # DuckLake re-commits at once when the copy already holds what it lost to
            self.con.execute("SET ducklake_retry_wait_ms = 0")
            self._in_txn = False
            self._raw_txn = False  # opened by a BEGIN statement, not by transaction()
            self._txn_maintains = False  # the open transaction called a maintenance function
            self._rebased: list[ChangeSet] = []  # commits the open COMMIT rebases over
            self._txn_failed = False
            self._stale = False
            self._attached = False
            self._copy_snapshot: int | None = None  # the newest snapshot DuckLake's copy holds
            self.state = self._open_state()
            self._load()
        except BaseException:  # refused (another data path...): leave no reader lease behind
            self._close()
            raise

    # -- loading -------------------------------------------------------------
    def _open_state(self) -> DuckState:
        """The committed catalog at the log's head, in DuckDB (``BASE_DB``):
        the newest catalog image plus the log after it, else the store."""
        return open_base(self.lake, self._aux, BASE_DB, self._workdir)

    def _load(self) -> None:
        """(Re)build DuckLake's copy of the catalog from the base and attach DuckLake."""
        con = self.con
        # where the user's unqualified names point, kept across the reload
        where = current_use(con) if self._attached else None
        # Unconditionally: a load that failed half way leaves either attached.
        self._attached = False
        con.execute("USE memory")
        con.execute(f"DETACH DATABASE IF EXISTS {ident(self.alias)}")
        con.execute(f"DETACH DATABASE IF EXISTS {ident(META_DB)}")
        state = self.state
        genesis = state.is_empty()
        if genesis and self.read_only:
            raise NotFoundError(f"{self.url} has no DuckLake catalog yet; connect with a data path")
        self._meta_file = None
        if state.image_file is not None and state.pending is not None:
            # opened from an image: the same file, the same tail (no load at all);
            # DuckLake then attaches the file itself, as it attaches a stock catalog
            meta_file = self._workdir / "meta.duckdb"
            attach_copy(self._aux, state.image_file, meta_file, META_DB)
            drop_image_schema(self._aux, META_DB)
            apply_change_sets(self._aux, META_DB, state.pending, own=False, columns=state.columns)
            self._aux.execute(f"DETACH DATABASE {ident(META_DB)}")
            self._meta_file = meta_file
        else:
            con.execute(f"ATTACH ':memory:' AS {ident(META_DB)}")
            if not genesis:
                copy_database(self._aux, BASE_DB, META_DB, own=False)
        state.image_file = None
        state.pending = []
        self._attach_outside_transactions()
        if where is not None:
            restore_use(con, where)
        if genesis:
            self._commit_captured(logged=False)
        self.log.open()  # this load's own writes to DuckLake's copy are not DuckLake's

    def _sync(self, reset_log: bool = True) -> None:
        """Others' commits reached the base: apply the same change sets to
        DuckLake's copy (a few statements per table). DuckLake stays attached:
        it reads the newest snapshot from its metadata catalog at each
        transaction, as it does when another process commits to a shared
        catalog (detaching it would drop the metadata database with it)."""
        pending = self.state.pending
        if pending is None:
            self._load()
            return
        apply_change_sets(self._aux, META_DB, pending, own=False, columns=self.state.columns)
        self.state.pending = []
        self._stale = False
        self._synced = (self.state.head, self.state.last_seq)
        self._copy_snapshot = self.state.head.snapshot_id
        if reset_log:
            self.log.open()  # the applied change sets are not DuckLake's writes

    def _attach_outside_transactions(self) -> None:
        """ATTACH with ``immediate_transaction_mode`` off: with it on, DuckDB
        opens the new catalog's transaction before DuckLake knows its metadata
        schema, and DuckLake's first query names an empty schema. The user's
        setting is restored either way."""
        immediate = setting(self.con, "immediate_transaction_mode") is True
        if immediate:
            self.con.execute("SET immediate_transaction_mode = false")
        try:
            self._attach()
        finally:
            if immediate:
                self.con.execute("SET immediate_transaction_mode = true")

    def _attach(self) -> None:
        con = self.con
        options = [
            f"METADATA_CATALOG {literal(META_DB)}",
            *data_path_options(self.url, self.data_path, self.state),
            *self._pinned,
        ]
        catalog = f"ducklake:{self._meta_file}" if self._meta_file else "ducklake::memory:"
        try:
            con.execute(f"ATTACH {literal(catalog)} AS {ident(self.alias)} ({', '.join(options)})")
        except duckdb.Error as exc:
            raise MisconfigurationError(f"attaching {self.url} as DuckLake failed: {exc}") from exc
        con.execute(f"USE {ident(self.alias)}")
        self._attached = True
        self._stale = False
        self._synced = (self.state.head, self.state.last_seq)
        self._copy_snapshot = self.state.head.snapshot_id

    def refresh(self) -> None:
        """Bring the session to the log's head; reload only when it moved."""
        if self._stale:
            self.state = self._open_state()
            self._load()
            return
        try:
            self.lake.refresh(self.state, rematerialize=False)
        except StaleViewError:  # idle past its lease: reopen (newest image, else the store)
            self.state = self._open_state()
            self._load()
            return
        if (self.state.head, self.state.last_seq) != self._synced:
            self._sync()  # others committed, or ours rebased past theirs

    # -- statements ------------------------------------------------------------
    def sql(
        self, query: str, params: Any = None, writes: bool | None = None, *, alias: str = ""
    ) -> duckdb.DuckDBPyRelation | None:
        """Run SQL as DuckDB's ``sql`` does; each statement autocommits
        (unless a transaction is open).

        A read returns DuckDB's relation (lazy, as DuckDB's). A statement that
        may write runs to completion in a transaction of its own, committed
        under the lake's commit lock (``_commit_transaction``), before its
        result comes back, materialized: DuckDB's row count as a one-row
        relation, or its rows (``RETURNING``, a DuckLake function). ``None``
        where DuckDB returns None (SET, BEGIN). Several statements in one
        string run one after the other; the last one's result comes back.
        Python objects named in the query are found in the caller's scope
        (DuckDB's replacement scans). ``writes`` overrides the guess of whether
        the statement may change the catalog; ``alias`` names the relation.
        """
        result = self._statements(query, params, writes, sys._getframe(1), pending=False)
        return result.set_alias(alias) if alias and result is not None else result

    def execute(self, query: str, params: Any = None) -> duckdb.DuckDBPyConnection:
        """Run SQL as DuckDB's ``execute`` does: the session's connection comes
        back with the result pending (``fetchone``, ``fetchall``, ``df`` ...)."""
        self._statements(query, params, None, sys._getframe(1), pending=True)
        return self.con

    def executemany(self, query: str, parameters: Any = None) -> duckdb.DuckDBPyConnection:
        """Run one statement once per parameter set, as DuckDB's ``executemany``;
        in autocommit, all of them as one transaction (one commit)."""
        frame = sys._getframe(1)
        sets = list(parameters or [])
        if self._in_txn:
            for params in sets:
                self._statements(query, params, None, frame, pending=True)
            return self.con
        with self.transaction():
            for params in sets:
                self._statements(query, params, None, frame, pending=True)
        return self.con

    def begin(self) -> Session:
        """``BEGIN``, as DuckDB's ``begin``."""
        self._transaction_statement("BEGIN")
        return self

    def commit(self) -> Session:
        """``COMMIT``, as DuckDB's ``commit``: under the lake's commit lock
        (nothing to do outside a transaction, as in DuckDB)."""
        if self._in_txn:
            self._transaction_statement("COMMIT")
        return self

    def rollback(self) -> Session:
        self._transaction_statement("ROLLBACK")
        return self

    def register(self, name: str, python_object: Any) -> duckdb.DuckDBPyConnection:
        """Make a pandas, Arrow or polars object queryable as ``name`` (DuckDB's ``register``)."""
        return self.con.register(name, python_object)

    def unregister(self, name: str) -> duckdb.DuckDBPyConnection:
        return self.con.unregister(name)

    def _statements(
        self, query: str, params: Any, writes: bool | None, frame: FrameType, pending: bool
    ) -> Any:
        parsed = stmt.parse(query)
        if params is None and len(parsed) > 1 and all(st.query.strip() for st in parsed):
            result = None
            for st in parsed:
                result = self._statements(st.query, None, writes, frame, pending)
            return result
        types = {st.type for st in parsed}
        if writes:
            types = types | {_ST.CALL}
        if self.read_only:
            refused = sorted(t.name for t in types - stmt.READ_TYPES - {_ST.CALL, _ST.TRANSACTION})
            if refused:
                raise ReadOnlyError(
                    f"this session is read-only and refuses {', '.join(refused)}; "
                    "reconnect without read_only to write"
                )
        if types == {_ST.TRANSACTION} and len(parsed) == 1:
            self._transaction_statement(query)
            return self.con if pending else None
        if self._txn_failed and not self._raw_txn:
            raise MisconfigurationError(
                "a statement in this transaction failed; leave the transaction block "
                "(it is rolled back) and run it again"
            )
        if not self._in_txn:
            self._commit_outside_writes()
            self.refresh()
        # A read can still change the catalog through a DuckLake table function
        # (SELECT * FROM ducklake_expire_snapshots(...)): treat those as writes.
        may_write = bool(types - stmt.READ_TYPES) or "ducklake_" in query.lower()
        if not may_write:
            self.log.read_done()
            return self._read(query, params, frame, pending)
        call = _Call(query, params, types, frame, kinds={st.type for st in parsed})
        wrapped = not (self._in_txn or self.read_only or types <= stmt.NOT_LAKE_WRITES)
        if wrapped:
            result = self._autocommit_write(call)
        else:
            if self._in_txn and stmt.maintains(query):
                self._txn_maintains = True
            result = self._run(call)
            if self.read_only:
                if self._captured() is not None:
                    self._stale = True
                    raise ReadOnlyError(
                        "this session is read-only but the statement changed the catalog; "
                        "nothing was committed, reconnect without read_only to write"
                    )
            elif not self._in_txn:
                self._commit_captured()
        return self._results.pend(result) if pending else result

    def _commit_outside_writes(self) -> None:
        """Commit a write DuckDB ran outside the session's statements (a
        relation's ``insert_into``, ``create`` or ``update``; ``session.con``):
        DuckLake committed it to the session's copy, so it is committed now,
        before anything else, when nothing has landed since; otherwise it
        cannot be rebased and is refused, never dropped without a word."""
        if self.read_only or self._in_txn or self._stale or self._synced is None:
            return
        (newest,) = self._aux.execute(
            f"SELECT max(snapshot_id) FROM {ident(META_DB)}.ducklake_snapshot"
        ).fetchone()
        if newest == self._copy_snapshot:
            return
        try:
            self._lock.acquire(self.state)
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

    def _read(self, query: str, params: Any, frame: FrameType, pending: bool) -> Any:
        """DuckDB's own answer to a read: a lazy relation, or the pending result."""
        try:
            if pending:
                return in_scope(frame, self.con.execute, query, params)
            return in_scope(frame, self.con.sql, query, params=params)
        except BaseException as exc:
            self._statement_failed(exc)
            raise

    def _autocommit_write(self, call: _Call) -> duckdb.DuckDBPyRelation | None:
        """A write in a transaction of its own. A DuckLake maintenance call runs
        with the commit lock held from the start (its commit never needs a
        rebase); any other write runs first without it, and if its commit is
        refused as a conflict it runs once more with the lock held on the head,
        where nothing can overtake it: nothing of the first run was committed,
        and a statement run again later is what its author would have got by
        sending it a moment later."""
        lock_first = stmt.maintains(call.query)
        try:
            return self._write_in_transaction(call, lock_first)
        except CommitLockBusyError:
            raise
        except ConflictError as exc:
            if lock_first:
                raise
            log.info("re-running a write under the commit lock after: %s", exc)
        self.refresh()
        return self._write_in_transaction(call, lock_first=True)

    def _write_in_transaction(
        self, call: _Call, lock_first: bool
    ) -> duckdb.DuckDBPyRelation | None:
        if lock_first:
            self._lock_at_head()
        self.con.execute("BEGIN TRANSACTION")
        result = self._run(call, holds_lock=lock_first)
        self._commit_transaction()
        return result

    def _run(self, call: _Call, holds_lock: bool = False) -> duckdb.DuckDBPyRelation | None:
        """Run a write; its result is materialized before anything commits."""
        try:
            return self._results.write(call.query, call.params, call.kinds, call.frame)
        except BaseException as exc:
            self._statement_failed(exc)
            if holds_lock:
                self._lock.release(self.state)
            if isinstance(exc, duckdb.IOException):  # httpfs's HTTPException too
                what = stmt.described(call.query, call.types)
                translated = indexes.translate_data_error(what, exc)
                if translated is not None:
                    raise translated from None
            raise

    def _lock_at_head(self) -> None:
        """Take the commit lock and bring DuckLake's copy to the head before
        the statement runs, so its commit needs no rebase."""
        self._lock.acquire(self.state)
        try:
            if (self.state.head, self.state.last_seq) != self._synced:
                self._sync()
        except BaseException:
            self._lock.release(self.state)
            raise

    def _transaction_statement(self, query: str) -> None:
        """BEGIN, COMMIT or ROLLBACK sent as SQL: the same transaction as
        ``transaction()``, committed under the commit lock at COMMIT."""
        verb = query.strip().split(None, 1)[0].rstrip(";").lower()
        if verb in ("begin", "start"):
            if not self._in_txn:
                self.refresh()
            self.con.execute(query)  # DuckDB refuses a nested BEGIN itself
            self._in_txn, self._raw_txn, self._txn_failed = True, True, False
            self._txn_maintains = False
            return
        if not self._in_txn:
            self.con.execute(query)  # DuckDB's own "no transaction is active"
            return
        if not self._raw_txn:
            raise MisconfigurationError(
                f"{verb.upper()} inside a session.transaction() block: the block commits when "
                "it ends and rolls back when it raises"
            )
        failed = self._txn_failed or self._aborted()  # a lazy read may have failed at fetch
        self._in_txn, self._raw_txn, self._txn_failed = False, False, False
        if verb in ("commit", "end") and not failed:
            self._commit_transaction()
            return
        self._rollback()
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
        ROLLBACK). An aborted transaction, or one where something raised
        after DuckDB ran the statement, is failed: its COMMIT rolls it back
        and says so (DuckDB's own COMMIT of an aborted transaction is silent).
        Otherwise what DuckDB holds open is rolled back, and if DuckDB's
        catalog still moved (it committed before the failure) the session
        reloads from the log before the next statement."""
        if self._in_txn:
            if not isinstance(exc, duckdb.Error) or self._aborted():
                self._txn_failed = True
            return
        if not isinstance(exc, Exception):  # an interrupt: ask DuckDB nothing more
            self._stale = True
            return
        try:
            self._rollback()
            if self._captured() is not None:
                self._stale = True
        except Exception:
            self._stale = True

    def _aborted(self) -> bool:
        """Whether DuckDB aborted the open transaction (it refuses any statement)."""
        try:
            self.con.execute("SELECT 1")
        except duckdb.TransactionException:
            return True
        except duckdb.Error:
            return False
        return False

    def _rollback(self) -> None:
        """Roll back DuckDB's open transaction, if there is one."""
        with suppress(duckdb.TransactionException):  # none open: DuckDB already ended it
            self.con.execute("ROLLBACK")

    @property
    def in_transaction(self) -> bool:
        return self._in_txn

    def commit_change_set(self, cs: ChangeSet) -> Committed:
        """Commit a head-preserving change set built outside DuckLake (status records)."""
        if self.read_only:
            raise ReadOnlyError("this session is read-only; it writes no commit-log slot")
        return self._commit(lambda: self.lake.commit_change_set(self.state, cs), in_duckdb=False)

    @contextmanager
    def transaction(self) -> Iterator[Session]:
        """Group statements into one DuckLake transaction and one change set."""
        if self._in_txn:
            raise MisconfigurationError("a transaction is already open on this session")
        self.refresh()
        self.con.execute("BEGIN TRANSACTION")
        self._in_txn, self._txn_failed, self._txn_maintains = True, False, False
        try:
            yield self
        except BaseException:
            self._end_failed_transaction()
            raise
        if self._txn_failed or self._aborted():  # a lazy read may have failed at fetch
            self._end_failed_transaction()
            raise MisconfigurationError(
                "a statement in this transaction failed, so the transaction was rolled back and "
                "nothing was committed; run it again"
            )
        self._in_txn = False
        self._commit_transaction()

    def _commit_transaction(self) -> None:
        """COMMIT DuckDB's open transaction and the change it made to the log.

        Under the lake's commit lock, DuckLake's copy is first brought to the
        log's head; DuckLake's own commit then finds the snapshots it missed
        and rebases onto them by its rules (fresh ids, its conflict check and
        wording), as it does on a catalog shared by processes. Nothing can
        land between that refresh and the slot write, so what DuckLake
        committed in its copy is what the log gets, on the base it was made on.
        """
        if self.read_only:
            self._commit_read_only()
            return
        try:
            self._lock.acquire(self.state)
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

    def _end_failed_transaction(self) -> None:
        self._in_txn, self._txn_failed = False, False
        try:
            self._rollback()
        except BaseException:
            self._stale = True
            raise

    def _captured(self, logged: bool = True) -> Captured | None:
        """What DuckLake changed since the write window opened: the tables its
        query log names, or every table when the log cannot say."""
        return self.capture.capture(self.state, self.log.written() if logged else None)

    def _commit_captured(self, logged: bool = True) -> None:
        """Commit what DuckLake changed; with the commit lock held, the slot
        also releases it (so it lands only while the lock is still ours)."""
        captured = None
        try:
            captured = self._captured(logged)
            if captured is None:
                self._lock.release(self.state)
                return
            if self._lock.held and (why := unsafe_rebase(captured.changes_made, self._rebased)):
                raise ConflictError(why)
            # the data's change set, plus its index entries and cascaded ends
            cs = indexes.index_writes(self, captured)
            if self._lock.held:
                cs = replace(cs, deletes=(*cs.deletes, LOCK_KEY))
            self._commit(lambda: self.lake.commit_change_set(self.state, cs), in_duckdb=True)
        except BaseException as exc:  # uncapturable, refused, unreadable index entries
            self._stale = True  # DuckDB holds changes the log does not: never carry them
            if isinstance(exc, ConflictError) and captured is not None:  # definitively refused
                data_path = stored_data_path(self.state)
                remove_new_files(self._aux, META_DB, self.alias, data_path, captured.changes)
            if self._lock.held:
                self._lock.released(committed=False)
                self._lock.release(self.state)
            raise
        self._lock.released(committed=True)
        self.capture.landed(captured, self.state.last_seq)
        if self.verify:
            self.capture.verify(self.state)

    def catalog_changed(self) -> None:
        """The state moved in a way DuckDB's copy must see (an index took a
        catalog id): reload before the next statement."""
        self._synced = None

    # -- equality indexes (ducklake/indexes.py) ------------------------------
    def create_index(self, table: str, column: str, name: str | None = None) -> indexes.IndexInfo:
        """Index ``column`` of ``table`` ('t' or 'schema.t') for equality lookups."""
        return indexes.create_index(self, table, column, name)

    def drop_index(self, name: str) -> indexes.IndexInfo:
        """End an index; its entries are invisible at once and swept later."""
        return indexes.drop_index(self, name)

    def list_indexes(self) -> list[indexes.IndexInfo]:
        return indexes.list_indexes(self)

    def lookup(self, table: str, column: str, value: Any) -> list[tuple[Any, ...]]:
        """The live rows whose ``column`` equals ``value``, through the index."""
        return indexes.lookup(self, table, column, value)

    def _commit(self, commit: Callable[[], Committed], in_duckdb: bool) -> Committed:
        """Commit, then say whether DuckLake's copy is at the new head: it is
        when the change came from DuckLake (captured) and landed on the base
        it was made on; otherwise the next statement applies what it lacks."""
        committed = commit()
        pending = self.state.pending
        if in_duckdb:
            self._copy_snapshot = self.state.head.snapshot_id  # DuckLake's copy made it
        if in_duckdb and pending is not None:
            # rebased past head-preserving commits: DuckLake's copy lacks only those
            mine = committed.change_set.txn_id
            self.state.pending = [cs for cs in pending if cs.txn_id != mine]
            if not self.state.pending:
                self._synced = (self.state.head, self.state.last_seq)
        return committed

    def close(self) -> None:
        """Close the session (a write made outside ``sql`` is committed first)."""
        try:
            with suppress(duckdb.ConnectionException):  # the caller closed the connection
                self._commit_outside_writes()
        finally:
            self._close()

    def _close(self) -> None:
        try:
            self.con.close()
        finally:
            try:
                self.lake.close()
            finally:
                shutil.rmtree(self._workdir, ignore_errors=True)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect(
    lake_url: str,
    data_path: str | None = None,
    read_only: bool = False,
    alias: str = "lake",
    connection: duckdb.DuckDBPyConnection | None = None,
    snapshot_version: int | None = None,
    snapshot_time: datetime | str | None = None,
) -> Session:
    """Open a session on a lake; with ``data_path``, an empty root becomes a new lake.

    ``connection``: attach the lake to this DuckDB connection instead of a new
    one (its other databases and settings stay usable); the session then owns
    it and closes it with the session. ``snapshot_version``/``snapshot_time``:
    a read-only session at that snapshot, like DuckLake's ATTACH options."""
    return Session(
        lake_url,
        data_path=data_path,
        read_only=read_only,
        alias=alias,
        connection=connection,
        snapshot_version=snapshot_version,
        snapshot_time=snapshot_time,
    )


retry = retry_conflicts  # re-runs a callable on ConflictError (slatelake.retry)
