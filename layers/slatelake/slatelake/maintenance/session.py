"""A session that carries its maintenance options, validated when it connects.

Configuration lives at connect (the RFC's attach): a misconfigured session
fails before it exists, and ``maintenance()`` takes no parameters.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from slatelake.ducklake.session import Session
from slatelake.maintenance.options import MaintenanceOptions, ducklake_signatures, parse_options
from slatelake.maintenance.report import PassReport
from slatelake.maintenance.runner import read_window, run_pass
from slatelake.maintenance.scheduler import Scheduler

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
    ) -> None:
        super().__init__(lake_url, data_path=data_path, read_only=read_only, alias=alias)
        self._raw_options = dict(options or {})
        self.scheduler: Scheduler | None = None
        try:
            self.options: MaintenanceOptions = parse_options(
                self._raw_options, ducklake_signatures(self.con)
            )
        except BaseException:
            super().close()
            raise
        if self.options.interval_s is not None and not read_only:
            self.scheduler = Scheduler(self._scheduler_session, self.options, on_pass).start()

    def _scheduler_session(self) -> MaintainedSession:
        """The scheduler thread's own session (its own connection; no interval)."""
        raw = {
            k: v
            for k, v in self._raw_options.items()
            if not k.upper().endswith("MAINTENANCE_INTERVAL")
        }
        return MaintainedSession(self.url, alias=self.alias, options=raw)

    def close(self) -> None:
        """Stop the scheduler (a pass in flight completes first), then close."""
        if self.scheduler is not None:
            self.scheduler.stop()
            self.scheduler = None
        super().close()

    def maintenance(
        self, wait_s: float = MANUAL_WAIT_S, stop: threading.Event | None = None
    ) -> PassReport:
        """Run one pass now (the on-demand trigger) and return its report."""
        return run_pass(self, self.options, trigger="manual", wait_s=wait_s, stop=stop)

    def maintenance_status(self) -> list[PassReport]:
        """The last 16 passes, newest first (works read-only)."""
        self.refresh()
        return read_window(self)
