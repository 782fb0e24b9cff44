"""The maintenance pass (RFC 0021): options, steps, status window, triggers.

``run_pass(session, options)`` is the one pass every surface calls (Python
``session.maintenance()``, ``slatelake maintain``, the scheduler thread in
``slatelake hold``, the Lambda). Steps 1-6 call DuckLake; 7, 7b and 7c run
the core's sweep (``sweep_steps``); 8 submits store merges (``store_step``).
"""

from slatelake.maintenance.options import (
    MaintenanceConfigError,
    MaintenanceOptions,
    parse_options,
)
from slatelake.maintenance.report import PassReport, StepReport
from slatelake.maintenance.runner import read_window, run_pass

__all__ = [
    "MaintenanceConfigError",
    "MaintenanceOptions",
    "PassReport",
    "StepReport",
    "parse_options",
    "read_window",
    "run_pass",
]
