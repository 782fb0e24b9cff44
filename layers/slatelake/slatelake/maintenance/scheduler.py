"""The interval scheduler: one thread per read-write session that configures
MAINTENANCE_INTERVAL, running ``run_pass`` with trigger ``scheduled``.

Single flight: a tick that finds a pass running (here, or in another process
through the bucket lease) skips and says so. Stopping sets the stop flag and
joins: a pass in flight ends at its next safe point (between steps, tables
or expiry batches), records its report, and only then does ``stop`` return.
The thread opens its own session (its own DuckDB connection), so it never
shares a connection with the caller.

Interpreter exit without ``close()`` stops it too: an ``atexit`` hook (run
while daemon threads still live) sets the stop flag and joins for at most
``EXIT_JOIN_S``, so a pass in flight ends at its next safe point, records its
report and releases its lease before the process goes. A process killed
outright (SIGKILL) runs no hook; its lease lapses once its heartbeat stops.

Each tick first asks whether it may run (``cadence.py``): not while
``SLATELAKE_MAINTENANCE_ENABLED`` is false (a session does not even start
the thread then), and, when the lake's policy has a ``cron``, only once the
lake's next fire time has come since its last scheduled pass. A tick that
may not run is counted in ``skipped_ticks`` and logged with the reason.
"""

from __future__ import annotations

import atexit
import logging
import threading
from collections.abc import Callable

from slatelake.ducklake.session import Session
from slatelake.errors import MaintenanceConfigError
from slatelake.maintenance import api, cadence
from slatelake.maintenance.flight import AlreadyRunningError
from slatelake.maintenance.options import MaintenanceOptions
from slatelake.maintenance.report import PassReport
from slatelake.maintenance.runner import run_pass

log = logging.getLogger("slatelake.scheduler")
# How long interpreter exit waits for a pass in flight to reach a safe point.
EXIT_JOIN_S = 120.0


class Scheduler:
    def __init__(
        self,
        open_session: Callable[[], Session],
        options: MaintenanceOptions,
        on_pass: Callable[[PassReport], None] | None = None,
        *,
        lake_url: str,
    ) -> None:
        if options.interval_s is None:
            raise ValueError("the scheduler needs MAINTENANCE_INTERVAL")
        self.lake_url = lake_url  # where the tick reads its cadence
        self.open_session = open_session
        self.options = options
        self.on_pass = on_pass
        self.stop_event = threading.Event()
        self.passes = 0
        self.skipped_ticks = 0
        self._thread = threading.Thread(
            target=self._loop, name="slatelake-maintenance", daemon=True
        )

    def start(self) -> Scheduler:
        self._thread.start()
        atexit.register(self._at_exit)
        return self

    def _at_exit(self) -> None:
        """The process is exiting without close(): finish the pass in flight."""
        if self._thread.is_alive():
            log.info("interpreter exit: stopping the maintenance scheduler")
        self.stop(EXIT_JOIN_S)
        if self._thread.is_alive():
            log.warning(
                "a maintenance pass was still running %gs after interpreter exit began; "
                "it is abandoned and its lease lapses once its heartbeat stops",
                EXIT_JOIN_S,
            )

    def _loop(self) -> None:
        session: Session | None = None
        try:
            while not self.stop_event.wait(self.options.interval_s):
                try:
                    why = self._skip_reason()
                    if why is not None:
                        self.skipped_ticks += 1
                        log.info("maintenance tick skipped: %s", why)
                        continue
                    if session is None:
                        session = self.open_session()
                    report = run_pass(
                        session, self.options, trigger="scheduled", wait_s=0, stop=self.stop_event
                    )
                except AlreadyRunningError as exc:
                    self.skipped_ticks += 1
                    log.info("maintenance tick skipped: %s", exc)
                    continue
                except Exception:
                    log.exception("scheduled maintenance pass failed")
                    continue
                self.passes += 1
                if self.on_pass is not None:
                    self.on_pass(report)
        finally:
            if session is not None:
                session.close()

    def _skip_reason(self) -> str | None:
        """Why this tick does nothing (the switch is off, or the lake's cron
        is not due), else None."""
        try:
            if not cadence.maintenance_enabled():
                return cadence.disabled_reason()
        except MaintenanceConfigError as exc:  # a misspelled switch runs nothing
            return str(exc)
        check = api.scheduled_due(self.lake_url)
        return None if check.due else check.reason

    def stop(self, timeout: float | None = None) -> None:
        """Stop ticking; a pass in flight finishes (at a safe point) first."""
        self.stop_event.set()
        atexit.unregister(self._at_exit)
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)
