"""The maintenance pass (RFC 0021): options, steps, status window, triggers.

``run_pass(session, options)`` is the one pass every surface calls (Python
``session.maintenance()``, ``slatelake maintain``, the scheduler thread in
``slatelake hold``, the Lambda). Steps 1-6 call DuckLake; 7, 7b and 7c run
the core's sweep (``sweep_steps``); 8 submits store merges (``store_step``).
Single flight is ``flight``: a lock per lake in the process and a lease in the
bucket, renewed by heartbeat and broken by ``break_lease`` once its owner is
silent.
"""

from slatelake.maintenance.flight import AlreadyRunningError, LeaseLiveError, break_lease
from slatelake.maintenance.options import (
    MaintenanceConfigError,
    MaintenanceOptions,
    parse_options,
)
from slatelake.maintenance.report import PassReport, StatusWindow, StepReport
from slatelake.maintenance.runner import read_window, run_pass

__all__ = [
    "AlreadyRunningError",
    "LeaseLiveError",
    "MaintenanceConfigError",
    "MaintenanceOptions",
    "PassReport",
    "StatusWindow",
    "StepReport",
    "break_lease",
    "parse_options",
    "read_window",
    "run_pass",
]
