"""A session that carries its maintenance options, validated when it connects.

Configuration lives at connect (the RFC's attach): a misconfigured session
fails before it exists, and ``maintenance()`` takes no parameters. A pass
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
from collections.abc import Callable, Mapping
from datetime import datetime

import duckdb

from slatelake.ducklake.attach_options import global_settings
from slatelake.ducklake.session import Session
from slatelake.maintenance import api
from slatelake.maintenance.options import (
    MaintenanceOptions,
    bind,
    ducklake_signatures,
    parse_options,
    pinned_signatures,
)
from slatelake.maintenance.report import PassReport, StatusWindow
from slatelake.maintenance.runner import read_window, refuse_unless_autocommit
from slatelake.maintenance.scheduler import Scheduler

log = logging.getLogger("slatelake.maintenance")
MANUAL_WAIT_S = 60.0


class MaintainedSession(Session):
    def __init__(
        self,
        lake_url: str,
        data_path: str | None = None,
        read_only: bool = False,
        alias: str = "lake",
        options: Mapping[str, str] | None = None,
        on_pass: Callable[[PassReport], None] | None = None,
        connection: duckdb.DuckDBPyConnection | None = None,
        snapshot_version: int | None = None,
        snapshot_time: datetime | str | None = None,
    ) -> None:
        self._raw_options = dict(options or {})
        self.scheduler: Scheduler | None = None
        # Options given are bound before the lake is opened (or created), so a
        # refused option leaves nothing behind; none given bind on our own DuckDB.
        bound = bind(self._raw_options) if self._raw_options else None
        super().__init__(
            lake_url,
            data_path=data_path,
            read_only=read_only,
            alias=alias,
            connection=connection,
            snapshot_version=snapshot_version,
            snapshot_time=snapshot_time,
        )
        try:
            # our own connection loads the pinned wheel; a caller's may hold another build
            signatures = (
                pinned_signatures(self.con) if connection is None else ducklake_signatures(self.con)
            )
            self.options: MaintenanceOptions = bound or parse_options(self._raw_options, signatures)
        except BaseException:
            super().close()
            raise
        # the database's global settings now: a pass shares them only while unchanged
        self._settings = None if connection is not None else global_settings(self.con)
        if self.options.interval_s is not None and not read_only:
            self.scheduler = Scheduler(self._pass_session, self.options, on_pass).start()

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
        """Stop the scheduler (a pass in flight completes first), then close."""
        if self.scheduler is not None:
            self.scheduler.stop()
            self.scheduler = None
        super().close()

    def maintenance(
        self, wait_s: float = MANUAL_WAIT_S, stop: threading.Event | None = None
    ) -> PassReport:
        """Run one pass now (the on-demand trigger) on a connection of its own
        and return its report; this session then sees what the pass did.
        Refused inside an explicit transaction."""
        refuse_unless_autocommit(self)
        if self._settings_kept():
            with self.on_connection_of_its_own():
                report = api.run(self, self.options, trigger="manual", wait_s=wait_s, stop=stop)
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
        return read_window(self)
