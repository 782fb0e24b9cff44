"""The maintenance pass (RFC 0021): options, steps, status window, triggers.

``run_pass(session, options)`` is the one pass every surface calls (Python
``session.maintenance()``, ``slatelake maintain``, the scheduler thread in
``slatelake hold``). Steps 1-6 call DuckLake; 7, 7b, 7c (sweep) and 8 (store
merge) report ``skipped: not available yet`` until their issues land.
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
