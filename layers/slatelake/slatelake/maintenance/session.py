"""A session that carries its maintenance options, validated when it connects.

``LakeSession`` is what ``slatelake.connect`` returns: it owns a
``ducklake.session.Session`` (``.session``) and adds the maintenance options,
the scheduler and ``maintenance()``; everything else a session answers is
the owned session's, read through by name (``ducklake/through.py``), so it is usable
wherever a session is (the maintenance code, the CLI, the Lambda).

Configuration lives at connect (the RFC's attach): a misconfigured session
fails before it exists, and ``maintenance()`` takes no parameters. While
``SLATELAKE_MAINTENANCE_ENABLED`` is false no scheduler starts (a warning
says why) and ``maintenance()`` is refused (``cadence.py``). A pass
never runs on the caller's connection: ``maintenance()`` refuses inside the
caller's explicit transaction, then runs on a DuckDB connection of its own
to this session's database, with this session's lake and catalog (RFC 0021:
no handle opened, and nothing to catch up on after). The caller's
transaction, USE, search path and session settings cannot reach the pass.
If a global setting changed since connect (``SET enable_external_access =
false``, ``SET threads``...), or the DuckDB connection was the caller's, the
pass runs on a session of its own instead, as the scheduler thread always
does, so no setting of the caller's can reach it. (The refusal asks DuckDB
on the caller's connection, two one-row SELECTs: a result the caller left
unfetched there is gone afterwards.)
"""

from __future__ import annotations

import logging
import threading
from abc import ABCMeta
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from types import FrameType
from typing import Any

import duckdb

from slatelake.ducklake.attach_options import global_settings
from slatelake.ducklake.connection_api import ConnectionApi
from slatelake.ducklake.session import Session
from slatelake.ducklake.through import Through
from slatelake.maintenance import api, cadence
from slatelake.maintenance.options import (
    MaintenanceOptions,
    bind,
    ducklake_signatures,
    parse_options,
    pinned_signatures,
)
from slatelake.maintenance.report import PassReport, StatusWindow
from slatelake.maintenance.run_record import read_window
from slatelake.maintenance.runner import refuse_unless_autocommit
from slatelake.maintenance.scheduler import Scheduler

log = logging.getLogger("slatelake.maintenance")
MANUAL_WAIT_S = 60.0


def _owned() -> Any:
    """An attribute of the owned ``Session``, read and set through by name."""
    return Through("session", Session)


class LakeSession(ConnectionApi):
    """A session on a lake with its maintenance options (``slatelake.connect``)."""

    # what a session is and says, the owned session's
    url = _owned()
    alias = _owned()
    read_only = _owned()
    data_path = _owned()
    lake = _owned()
    con = _owned()
    state = _owned()
    capture = _owned()
    log = _owned()
    verify = _owned()
    metadata_writes = _owned()
    in_transaction = _owned()
    commit_lock = _owned()
    # statements (bound to the owned session: see ``Through``)
    refresh = _owned()
    last_seq = _owned()
    rewound = _owned()
    watch_requests = _owned()
    # commits and the catalog, for the maintenance steps and retention holds
    commit_change_set = _owned()
    commit_under_lock = _owned()
    run_maintenance_unless = _owned()
    catalog_changed = _owned()
    snapshots_present = _owned()
    catalog_has = _owned()
    live_tables = _owned()
    catalog_file_bytes = _owned()
    held_files_scheduled = _owned()
    # reader pins
    pin = _owned()
    unpin = _owned()
    pins = _owned()
    # other slatelake lakes in this session's database (ducklake/attached_lakes.py)
    attach = _owned()
    detach = _owned()
    attached_lakes = _owned()
    # equality indexes
    create_index = _owned()
    drop_index = _owned()
    list_indexes = _owned()
    lookup = _owned()

    def __init__(
        self,
        lake_url: str,
        data_path: str | None = None,
        read_only: bool | None = None,
        alias: str = "lake",
        options: Mapping[str, str] | None = None,
        on_pass: Callable[[PassReport], None] | None = None,
        connection: duckdb.DuckDBPyConnection | None = None,
        snapshot_version: int | None = None,
        snapshot_time: datetime | str | None = None,
        pin: bool = False,
        encrypted: bool = False,
        write_deletion_vectors: bool = False,
        override_data_path: bool = False,
    ) -> None:
        self._raw_options = dict(options or {})
        self.scheduler: Scheduler | None = None
        # Options given are bound before the lake is opened (or created), so a
        # refused option leaves nothing behind; none given bind on our own DuckDB.
        bound = bind(self._raw_options) if self._raw_options else None
        # A scheduler starts only while the switch is on; a misspelled switch
        # is refused here, before the lake is opened.
        schedules = bound is not None and bound.interval_s is not None and not read_only
        switched_on = cadence.maintenance_enabled() if schedules else True
        self.session = Session(
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
        try:
            # our own connection loads the pinned wheel; a caller's may hold another build
            signatures = (
                pinned_signatures(self.con) if connection is None else ducklake_signatures(self.con)
            )
            self.options: MaintenanceOptions = bound or parse_options(self._raw_options, signatures)
        except BaseException:
            self.session.close()
            raise
        # the database's global settings now: a pass shares them only while unchanged
        self._settings = None if connection is not None else global_settings(self.con)
        if self.options.interval_s is not None and not self.session.read_only:
            if switched_on:
                self.scheduler = Scheduler(
                    self._pass_session, self.options, on_pass, lake_url=self.url
                ).start()
            else:
                log.warning(
                    "MAINTENANCE_INTERVAL given, but no pass is scheduled: %s",
                    cadence.disabled_reason(),
                )

    # -- DuckDB's connection API (connection_api.py), through the owned session --
    def _statements(
        self, query: str, params: Any, writes: bool | None, frame: FrameType | None, pending: bool
    ) -> Any:
        return self.session._statements(query, params, writes, frame, pending)

    def _ready_to_read(self) -> None:
        self.session._ready_to_read()

    def _cursor(self) -> ConnectionApi:
        """A second connection on the session's copy of the lake
        (``ducklake/session_cursor.py``): statements and transactions of its
        own; maintenance stays this session's."""
        return self.session.cursor()

    # -- what returns the session returns this one ---------------------------
    def begin(self) -> LakeSession:
        """``BEGIN``, as DuckDB's ``begin``."""
        self.session.begin()
        return self

    def commit(self) -> LakeSession:
        """``COMMIT``, as DuckDB's ``commit``: under the lake's commit lock
        (nothing to do outside a transaction, as in DuckDB)."""
        self.session.commit()
        return self

    def rollback(self) -> LakeSession:
        self.session.rollback()
        return self

    @contextmanager
    def transaction(self) -> Iterator[LakeSession]:
        """Group statements into one DuckLake transaction and one change set."""
        with self.session.transaction():
            yield self

    @contextmanager
    def writing_metadata(self) -> Iterator[LakeSession]:
        """Let the block's statements write the session's own metadata
        databases (maintenance's own bookkeeping; tests of capture)."""
        with self.session.writing_metadata():
            yield self

    @contextmanager
    def on_connection_of_its_own(self) -> Iterator[LakeSession]:
        """Run the block's statements on a new DuckDB connection to this
        session's database (``Session.on_connection_of_its_own``)."""
        with self.session.on_connection_of_its_own():
            yield self

    def __enter__(self) -> LakeSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- maintenance ---------------------------------------------------------
    def _pass_session(self) -> Session:
        """A session of the pass's own (its own DuckDB connection and lake
        handle) on this lake; the options stay this session's."""
        return Session(self.url, alias=self.alias)

    def _settings_kept(self) -> bool:
        """Whether the database's global settings are still those at connect
        (and the connection was ours): then a pass may share them."""
        if self._settings is None:
            return False
        now = global_settings(self.con)
        changed = sorted(
            k for k in now.keys() | self._settings.keys() if now.get(k) != self._settings.get(k)
        )
        if changed:
            log.info(
                "global settings changed (%s): the pass runs on a session of its own",
                ", ".join(changed),
            )
        return not changed

    def close(self) -> None:
        """Stop the scheduler (a pass in flight completes first), then close
        (the sessions ``cursor`` opened too)."""
        self._close_cursors()
        if self.scheduler is not None:
            self.scheduler.stop()
            self.scheduler = None
        self.session.close()

    def maintenance(
        self, wait_s: float = MANUAL_WAIT_S, stop: threading.Event | None = None
    ) -> PassReport:
        """Run one pass now (the on-demand trigger) on a connection of its own
        and return its report; this session then sees what the pass did.
        Refused inside an explicit transaction, and while
        ``SLATELAKE_MAINTENANCE_ENABLED`` is false (before anything is opened)."""
        cadence.require_enabled("session.maintenance()")
        refuse_unless_autocommit(self.session)
        if self._settings_kept():
            with self.on_connection_of_its_own():
                report = api.run(
                    self.session, self.options, trigger="manual", wait_s=wait_s, stop=stop
                )
        else:
            with self._pass_session() as own:
                report = api.run(own, self.options, trigger="manual", wait_s=wait_s, stop=stop)
        try:
            self.refresh()
        except Exception as exc:  # the pass stands; the next statement refreshes again
            log.warning("after the maintenance pass, refreshing the session failed: %s", exc)
        return report

    def maintenance_status(self) -> StatusWindow:
        """The last 16 passes, newest first (works read-only); ``.warning``
        says what of the stored window could not be read."""
        self.refresh()
        return read_window(self.session)


# A LakeSession is taken wherever a Session is (``isinstance`` in backup and
# borrowed-file release): it answers as one, by delegation.
ABCMeta.register(Session, LakeSession)  # ``Session.register`` is DuckDB's register
