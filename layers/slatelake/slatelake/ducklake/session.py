"""A DuckDB session with a slatelake lake attached as a real DuckLake.

``connect`` opens the committed catalog in DuckDB (the newest catalog image
plus the log after it, else the store) and attaches DuckLake over a copy of
it. Every statement first brings the session to the log's head (one LIST
when nothing moved). The session answers as a DuckDB connection does
(``sql``, ``execute``, ``executemany``, ``register``, transactions;
``results.py``). The session is composed, not layered: it loads and
refreshes DuckLake's copy of the catalog itself and hands each statement to
its ``StatementRunner`` (``statement_flow.py``), which has its change land
in the log under the commit lock through its ``Committer``
(``commit_flow.py``); the reads of DuckLake's copy asked by maintenance are
``CopyQueries`` (``copy_queries.py``). The transaction state is one
``Txn`` (``txn_state.py``), the copy's standing one ``CopyView``
(``copy_view.py``), both owned here and shared with the two. Read-only
sessions attach DuckLake read-only and never write a slot. ATTACH options
(the data path, a past snapshot) are in ``attach_options.py``. See
docs/decisions/0005-ducklake-bridge.md.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
import weakref
from abc import ABCMeta
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb

from slatelake.catalog.commit_lock import CommitLock
from slatelake.catalog.lake import Lake
from slatelake.ducklake import extensions, indexes, reader_pins
from slatelake.ducklake.attach_options import (
    check_override,
    current_use,
    data_path_options,
    pin_options,
    restore_use,
    setting,
)
from slatelake.ducklake.attached_lakes import AttachedLakes
from slatelake.ducklake.capture import Capture
from slatelake.ducklake.catalog_apply import apply_change_sets
from slatelake.ducklake.catalog_db import copy_database
from slatelake.ducklake.commit_flow import BASE_DB, META_DB, Committer, Front
from slatelake.ducklake.connection_api import ConnectionApi
from slatelake.ducklake.copy_queries import CopyQueries
from slatelake.ducklake.copy_view import CopyView
from slatelake.ducklake.duck_errors import duckdb_errors
from slatelake.ducklake.duck_state import DuckState
from slatelake.ducklake.front import RunnerFront
from slatelake.ducklake.guard import check_overlap, data_location, resolve_data_path
from slatelake.ducklake.opening import attach_copy, drop_image_schema, open_base, work_dir
from slatelake.ducklake.read_ahead import ReadAhead
from slatelake.ducklake.request_log import LOG_TYPE, RequestWatch
from slatelake.ducklake.results import Results
from slatelake.ducklake.session_cursor import SessionCursor
from slatelake.ducklake.sql import ident, literal
from slatelake.ducklake.statement_flow import StatementRunner
from slatelake.ducklake.txn_state import Txn
from slatelake.ducklake.write_log import WriteLog
from slatelake.errors import (
    MisconfigurationError,
    NotFoundError,
    StaleViewError,
    retry_conflicts,
)
from slatelake.log.changeset import ChangeSet
from slatelake.log.committer import Committed
from slatelake.log.leases import Pin
from slatelake.store.db import store_exists
from slatelake.store.location import LakeLocation

__all__ = ["BASE_DB", "META_DB", "VERIFY_ENV", "Session", "connect", "retry"]
VERIFY_ENV = "SLATELAKE_VERIFY_CAPTURE"


class Session(RunnerFront, ConnectionApi, metaclass=ABCMeta):  # noqa: B024 - see the docstring
    """A DuckDB connection with the lake attached as DuckLake catalog ``alias``;
    it answers DuckDB's connection API (``connection_api.py``); its
    ``cursor()`` is a second connection on the same copy (``session_cursor.py``).

    (ABCMeta only so that a class owning a Session and answering as one can
    say so: ``maintenance.session.LakeSession``; nothing is abstract.)"""

    def __init__(
        self,
        lake_url: str,
        data_path: str | None = None,
        read_only: bool | None = None,
        alias: str = "lake",
        connection: duckdb.DuckDBPyConnection | None = None,
        snapshot_version: int | None = None,
        snapshot_time: datetime | str | None = None,
        pin: bool = False,
        encrypted: bool = False,
        write_deletion_vectors: bool = False,
        override_data_path: bool = False,
        *,
        _internal: tuple[str, str] | None = None,
    ) -> None:
        self._encrypted = encrypted
        self._deletion_vectors = write_deletion_vectors
        self._override = override_data_path
        self._pinned = pin_options(snapshot_version, snapshot_time)
        if self._pinned and read_only is False:  # asked for by name, as DuckLake's READ_WRITE
            raise MisconfigurationError(
                "SNAPSHOT_VERSION / SNAPSHOT_TIME can only be used in read-only mode: "
                "a past snapshot is read, never written to; leave read_only unset or True"
            )
        # a past snapshot is read, never written to; unset: read-write
        read_only = bool(self._pinned) or bool(read_only)
        if override_data_path:
            check_override(data_path, read_only)
        if data_path is not None:
            # once, to the absolute path DuckLake would use from here: the overlap
            # check sees the place written, and a reload after a chdir never moves it
            data_path = resolve_data_path(lake_url, data_path)
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
        self.lake = Lake.open(lake_url, read_only=read_only, seen=True)
        try:
            # a caller's connection: its databases and settings stay usable beside the lake
            con = connection
            self.con = extensions.connect() if con is None else extensions.prepare(con)
        except BaseException:
            self.lake.close()
            raise
        self._workdir = work_dir()
        self._meta_file: Path | None = None  # DuckLake's copy as a file (opened from an image)
        # DuckLake's copy and the committed catalog, attached databases of their own;
        # a lake attached to another session shares its database (attached_lakes.py)
        self.meta_db, self.base_db = _internal or (META_DB, BASE_DB)
        self._shares_database = _internal is not None
        self.attached_lakes: AttachedLakes[Session] = AttachedLakes(self, Session)
        try:
            self._aux = self.con.cursor()
            self._ahead = ReadAhead()  # the worker beside the helper cursor (read_ahead.py)
            self.capture = Capture(self._aux, self.meta_db, self.base_db, self._ahead)
            self.log = WriteLog(self._aux, self.meta_db, self.base_db)
            self.log.enable()
            self.verify = os.environ.get(VERIFY_ENV) == "1"
            # Whether statements may write the session's own metadata databases by
            # hand (tests of capture and DuckLake's own test files do; a user's
            # hand-written change could unmake what a retention hold keeps).
            self.metadata_writes = False
            # DuckLake re-commits at once when the copy already holds what it lost to
            self.con.execute("SET ducklake_retry_wait_ms = 0")
            self._txn = Txn()  # autocommit, or which transaction is open (txn_state.py)
            self._view = CopyView()  # how DuckLake's copy stands against the log
            self._attached = False
            # one call of one connection (this one, or a cursor) at a time (front.py)
            self._serial = threading.RLock()
            self._fronts: weakref.WeakSet[SessionCursor] = weakref.WeakSet()
            self._committer = Committer(
                self,
                self._aux,
                self._ahead,
                CommitLock(self.lake),
                self,
                self._view,
                sync=lambda reset_log: self._sync(reset_log),
            )
            self._runner = StatementRunner(
                self, self._committer, Results(self.con), self._txn, self._view
            )
            self._queries = CopyQueries(self._aux, self.meta_db)
            self.state = self._open_state()
            self._load()
            if pin:
                reader_pins.pin(self)
        except BaseException:  # refused (another data path...): leave no reader lease behind
            self._close()
            raise

    # -- loading -------------------------------------------------------------
    def _open_state(self) -> DuckState:
        """The committed catalog at the log's head, in DuckDB (``BASE_DB``):
        the newest catalog image plus the log after it, else the store."""
        return open_base(self.lake, self._aux, self.base_db, self._workdir)

    def _load(self) -> None:
        """(Re)build DuckLake's copy of the catalog from the base and attach DuckLake."""
        con = self.con
        # where the user's unqualified names point, kept across the reload
        where = current_use(con) if self._attached else None
        # Unconditionally: a load that failed half way leaves either attached.
        self._attached = False
        self._view.reloaded()  # a cursor's open transaction loses its base
        con.execute("USE memory")
        con.execute(f"DETACH DATABASE IF EXISTS {ident(self.alias)}")
        con.execute(f"DETACH DATABASE IF EXISTS {ident(self.meta_db)}")
        state = self.state
        genesis = state.is_empty()
        if genesis and self.read_only:
            raise NotFoundError(f"{self.url} has no DuckLake catalog yet; connect with a data path")
        self._meta_file = None
        if state.image_file is not None and state.pending is not None:
            # opened from an image: the same file, the same tail (no load at all);
            # it stays attached, hidden: DuckLake attaching ``ducklake:<file>`` takes
            # the database already attached from that path (one it attached itself
            # would show in the user's listings)
            meta_file = self._workdir / "meta.duckdb"
            attach_copy(self._aux, state.image_file, meta_file, self.meta_db)
            drop_image_schema(self._aux, self.meta_db)
            apply_change_sets(
                self._aux, self.meta_db, state.pending, own=False, columns=state.columns
            )
            self._meta_file = meta_file
        else:
            # hidden from the user's listings, as stock DuckLake hides its metadata catalog
            con.execute(f"ATTACH ':memory:' AS {ident(self.meta_db)} (HIDDEN)")
            if not genesis:
                state.settle()
                copy_database(self._aux, self.base_db, self.meta_db, own=False)
        state.image_file = None
        state.pending = []
        self._attach_outside_transactions()
        if where is not None:
            restore_use(con, where)
        if genesis:
            self._committer.commit_captured(logged=False)
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
        apply_change_sets(self._aux, self.meta_db, pending, own=False, columns=self.state.columns)
        self._view.reach(pending)
        self.state.pending = []
        self._view.caught_up(self.state)
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
            f"METADATA_CATALOG {literal(self.meta_db)}",
            *data_path_options(self.url, self.data_path, self.state, self._override),
            *self._pinned,
            # DuckLake's: a new lake encrypts its data files (the flag is then in
            # its catalog); an existing one must match, DuckLake refuses otherwise
            *(["ENCRYPTED"] if self._encrypted else []),
            # DuckLake's, per attach: this session's deletes as puffin deletion vectors
            *(["WRITE_DELETION_VECTORS true"] if self._deletion_vectors else []),
        ]
        catalog = f"ducklake:{self._meta_file}" if self._meta_file else "ducklake::memory:"
        try:
            con.execute(f"ATTACH {literal(catalog)} AS {ident(self.alias)} ({', '.join(options)})")
        except duckdb.Error as exc:
            raise MisconfigurationError(f"attaching {self.url} as DuckLake failed: {exc}") from exc
        con.execute(f"USE {ident(self.alias)}")
        self._attached = True
        self._view.caught_up(self.state)

    @property
    def last_seq(self) -> int:
        """The newest commit-log slot this session's view includes."""
        return int(self.state.last_seq)

    def rewound(self) -> bool:
        """Whether the lake went back behind this view (restored from a
        backup): the holder never deletes the newest slot, so the view's
        newest slot is still listed or followed by newer ones. One LIST."""
        seq = self.last_seq
        return seq > 0 and not any(True for _ in self.lake.log.list_after(seq - 1))

    def refresh(self) -> None:
        """Bring the session to the log's head; reload only when it moved."""
        with self._serial:
            self._refresh()

    def _refresh(self) -> None:
        self._view.refreshed_at = time.monotonic()
        if self._view.stale:
            self.state = self._open_state()
            self._load()
            self._pins_read_through()
            return
        seen = self.state.last_seq
        try:
            self.lake.refresh(self.state, rematerialize=False)
        except StaleViewError:  # idle past its lease: reopen (newest image, else the store)
            self.state = self._open_state()
            self._load()
            self._pins_read_through()
            return
        if self.state.last_seq != seen:
            self._view.others_at = time.monotonic()  # only others' slots move it here
        if not self._view.at_head(self.state):
            self._sync()  # others committed, or ours rebased past theirs
            self._pins_read_through()

    def _pins_read_through(self) -> None:
        """The copy moved: a pinned snapshot may now be read through other
        files (a merge), which the pin keeps too (reader_pins.py)."""
        if self.lake.lease.pins:
            reader_pins.record_files(self)

    # -- connections: this one and its cursors (front.py, session_cursor.py) --
    def _serve(self) -> AbstractContextManager[None]:
        return self.serving(self)

    @contextmanager
    def serving(self, front: Front) -> Iterator[None]:
        """Hold the session for one call of ``front`` (this connection or a
        cursor): the committer commits that connection's transaction. After
        it, what no open transaction began before is forgotten."""
        with self._serial:
            before, self._committer.front = self._committer.front, front
            try:
                yield
            finally:
                self._committer.front = before
                if self._view.keeps_reached:
                    opened = [f.txn.began.reached for f in (self, *self._fronts) if f.txn.open]
                    self._view.keep_reached_from(min(opened, default=None))

    @property
    def shared(self) -> bool:
        """Whether a cursor shares DuckLake's copy with this connection."""
        return bool(self._fronts)

    def _cursor(self) -> SessionCursor:
        """A connection of the session's database on the same copy (DuckDB's cursor)."""
        with self._serial:
            opened = SessionCursor(self, self._committer, self._view)
            self._view.keeps_reached = True
            for front in (self, *self._fronts):
                front.txn.share()  # its early writes may now be read by another's capture
            self._fronts.add(opened)
        return opened

    def left(self, front: SessionCursor) -> None:
        """A cursor closed."""
        with self._serial:
            self._fronts.discard(front)

    def internal_databases(self) -> frozenset[str]:
        """The session's own databases (and its attached lakes'), lower case:
        statements read them, never write them."""
        own = frozenset({self.meta_db.lower(), self.base_db.lower()})
        return own | self.attached_lakes.internal_databases()

    def attach(
        self,
        lake_url: str,
        alias: str,
        *,
        read_only: bool | None = None,
        data_path: str | None = None,
        snapshot_version: int | None = None,
        snapshot_time: datetime | str | None = None,
        create_if_not_exists: bool = True,
        encrypted: bool = False,
        write_deletion_vectors: bool = False,
        override_data_path: bool = False,
    ) -> Session:
        """Attach another slatelake lake as catalog ``alias`` of this session
        (``ATTACH 'slatelake:<url>' AS alias (...)``): statements here read
        and write it, each write committed through its own log
        (``attached_lakes.py``). Returns its session, for transactions on it."""
        with duckdb_errors():
            return self.attached_lakes.attach(
                lake_url,
                alias,
                read_only=read_only,
                data_path=data_path,
                snapshot_version=snapshot_version,
                snapshot_time=snapshot_time,
                create_if_not_exists=create_if_not_exists,
                encrypted=encrypted,
                write_deletion_vectors=write_deletion_vectors,
                override_data_path=override_data_path,
            )

    def detach(self, alias: str) -> None:
        """Close the attached lake ``alias`` (``DETACH alias``)."""
        with duckdb_errors():
            if not self.attached_lakes.detach(alias):
                raise MisconfigurationError(f"no slatelake lake is attached as {alias!r}")

    @property
    def commit_lock(self) -> CommitLock:
        """The lake's commit lock as this session takes it (a pass names its
        lease on it, so a lock a dead pass leaves dies with that lease)."""
        return self._committer.lock

    @contextmanager
    def writing_metadata(self) -> Iterator[Session]:
        """Let the block's statements write the session's own metadata
        databases (maintenance's own bookkeeping; tests of capture)."""
        before, self.metadata_writes = self.metadata_writes, True
        try:
            yield self
        finally:
            self.metadata_writes = before

    @contextmanager
    def on_connection_of_its_own(self) -> Iterator[Session]:
        """Run the block's statements on a new DuckDB connection to this
        session's database, with this session's lake, catalog and log.

        The caller's connection keeps what is its own: transaction, ``USE``,
        search path, ``SET SESSION`` values, temporary objects and a result
        it left pending. Global settings belong to the database and are
        shared. RFC 0021's on-demand trigger runs a pass this way: no second
        catalog to open, and none to bring up to date after."""
        if self._txn.open:
            raise MisconfigurationError(
                "a connection of its own is not taken inside a transaction; commit or roll back"
            )
        caller, results = self.con, self._runner.results
        own = caller.cursor()
        try:
            own.execute(f"USE {ident(self.alias)}")
            self.con, self._runner.results = own, Results(own)
            yield self
        finally:
            self.con, self._runner.results = caller, results
            own.close()

    @contextmanager
    def watch_requests(self) -> Iterator[RequestWatch]:
        """Keep DuckDB's HTTP log while the block runs; the watch then names
        the data-file requests no try got answered (``request_log``)."""
        watch = RequestWatch(self._aux)
        self.log.also = (LOG_TYPE, watch.harvest)
        try:
            self.log.enable()
            yield watch
            watch.harvest()
        finally:
            self.log.also = None
            self.log.enable()

    # -- committing (commit_flow.py) and DuckLake's copy (copy_queries.py) -----
    def commit_change_set(self, cs: ChangeSet) -> Committed:
        """Commit a head-preserving change set built outside DuckLake (status records)."""
        with self._serve():
            return self._committer.commit_change_set(cs)

    def commit_under_lock(self, build: Callable[[], ChangeSet | None]) -> Committed | None:
        """Commit a head-preserving change set ``build`` makes at the head with
        the commit lock held (retention holds; ``Committer.commit_under_lock``)."""
        with self._serve():
            return self._committer.commit_under_lock(build)

    def run_maintenance_unless(
        self, query: str, check: Callable[[], str | None]
    ) -> tuple[duckdb.DuckDBPyRelation | None, str | None]:
        """Run one DuckLake maintenance call in autocommit unless ``check``, asked
        with the commit lock held on the head, gives a reason against it:
        (result, None) or (None, the reason). See ``StatementRunner``."""
        with self._serve():
            return self._runner.run_maintenance_unless(query, check)

    def catalog_changed(self) -> None:
        """The state moved in a way DuckDB's copy must see (an index took a
        catalog id): reload before the next statement."""
        self._committer.catalog_changed()

    def snapshots_present(self, ids: Iterable[int]) -> set[int]:
        """Which of ``ids`` are snapshots in DuckLake's copy of the catalog."""
        return self._queries.snapshots_present(ids)

    def catalog_has(self, schema: str, table: str | None = None) -> bool:
        """Whether the live catalog (DuckLake's copy) has the schema, or the table."""
        return self._queries.catalog_has(schema, table)

    def live_tables(self) -> list[tuple[str, str]]:
        """(schema, table) of every live table, from DuckLake's copy of the catalog."""
        return self._queries.live_tables()

    def catalog_file_bytes(self) -> int:
        """Bytes of every data and delete file the catalog lists (live or kept by history)."""
        return self._queries.catalog_file_bytes()

    # -- reader pins (reader_pins.py) ------------------------------------------
    def pin(self, snapshot: int | None = None, *, onward: bool = False) -> int:
        """Keep ``snapshot`` (None: the one this session reads) from expiry
        and cleanup while this session lives; ``onward``: every snapshot from
        it on (a change feed's start). Returns the snapshot id."""
        return reader_pins.pin(self, snapshot, onward)

    def unpin(self, snapshot: int | None = None) -> int:
        """Drop this session's pins on ``snapshot`` (None: all); how many went."""
        return reader_pins.unpin(self, snapshot)

    @property
    def pins(self) -> tuple[Pin, ...]:
        """This session's pins."""
        return self.lake.lease.pins

    def held_files_scheduled(self, snapshot_ids: Iterable[int]) -> list[str]:
        """Files scheduled for deletion that one of ``snapshot_ids`` still references."""
        return self._queries.held_files_scheduled(snapshot_ids)

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

    def close(self) -> None:
        """Close the session (a write made outside ``sql`` is committed first)
        and the sessions its ``cursor`` opened."""
        try:
            self._close_cursors()
            self.attached_lakes.close()
            with self._serve(), suppress(duckdb.ConnectionException):  # the caller closed it
                self._committer.commit_outside_writes()
        finally:
            self._close()

    def _close(self) -> None:
        try:
            ahead = getattr(self, "_ahead", None)  # a failed open may not have made it
            try:
                if ahead is not None:
                    ahead.close()  # the worker's cursor, before the connection
                if getattr(self, "_shares_database", False):
                    self._detach_own()  # the host's database lives on
            finally:
                self.con.close()
        finally:
            try:
                self.lake.close()
            finally:
                shutil.rmtree(self._workdir, ignore_errors=True)

    def _detach_own(self) -> None:
        """An attached lake leaves its host's database as it found it."""
        with suppress(duckdb.Error):
            self.con.execute("USE memory")
        for name in (self.alias, self.meta_db, self.base_db):
            with suppress(duckdb.Error):
                self.con.execute(f"DETACH DATABASE IF EXISTS {ident(name)}")

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect(
    lake_url: str,
    data_path: str | None = None,
    read_only: bool | None = None,
    alias: str = "lake",
    connection: duckdb.DuckDBPyConnection | None = None,
    snapshot_version: int | None = None,
    snapshot_time: datetime | str | None = None,
    pin: bool = False,
    encrypted: bool = False,
    write_deletion_vectors: bool = False,
    override_data_path: bool = False,
) -> Session:
    """Open a session on a lake; with ``data_path``, an empty root becomes a new lake.

    ``connection``: attach the lake to this DuckDB connection instead of a new
    one (its other databases and settings stay usable); the session then owns
    it and closes it with the session. ``snapshot_version``/``snapshot_time``:
    a read-only session at that snapshot, like DuckLake's ATTACH options.
    ``pin``: keep the snapshot read at open from expiry while the session lives.
    ``encrypted``: DuckLake's ENCRYPTED (a new lake encrypts its data files).
    ``write_deletion_vectors``: DuckLake's WRITE_DELETION_VECTORS (this
    session's deletes write puffin deletion vectors). ``override_data_path``:
    DuckLake's OVERRIDE_DATA_PATH, for a read-only session reading the files
    from ``data_path`` instead of the catalog's (a mirror, a mount)."""
    return Session(
        lake_url,
        data_path=data_path,
        read_only=read_only,
        alias=alias,
        connection=connection,
        snapshot_version=snapshot_version,
        snapshot_time=snapshot_time,
        pin=pin,
        encrypted=encrypted,
        write_deletion_vectors=write_deletion_vectors,
        override_data_path=override_data_path,
    )


retry = retry_conflicts  # re-runs a callable on ConflictError (slatelake.retry)
