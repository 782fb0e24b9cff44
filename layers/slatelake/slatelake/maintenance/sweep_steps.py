"""Steps 7, 7b and 7c: the sweep of orphaned index entries, stranded file
column statistics and inlined-data tables, through the core's ``maintain``.
It runs even when an earlier DuckLake step failed."""

from __future__ import annotations

from collections.abc import Callable

from slatelake.ducklake.session import Session
from slatelake.maintenance.options import MaintenanceOptions
from slatelake.maintenance.progress import Progress
from slatelake.maintenance.report import SKIPPED, PassReport

NOT_YET = "not available yet"


def run_sweep_steps(
    session: Session,
    options: MaintenanceOptions,
    progress: Progress,
    report: PassReport,
    out_of_time: Callable[[], str | None],
) -> None:
    """Append this step's rows to ``report`` (and set ``work_pending`` when
    work remains). Never raises for a step failure: it reports ``failed``."""
    for step in ("sweep_indexes", "sweep_file_stats", "sweep_inlined_tables"):
        report.add(step, SKIPPED, NOT_YET)
