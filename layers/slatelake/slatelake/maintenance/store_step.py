"""Step 8: store merges submitted through the admin API, executed by the
holder's compactor."""

from __future__ import annotations

from collections.abc import Callable

from slatelake.ducklake.session import Session
from slatelake.maintenance.options import MaintenanceOptions
from slatelake.maintenance.progress import Progress
from slatelake.maintenance.report import SKIPPED, PassReport

NOT_YET = "not available yet"


def run_compact_store(
    session: Session,
    options: MaintenanceOptions,
    progress: Progress,
    report: PassReport,
    out_of_time: Callable[[], str | None],
) -> None:
    """Append this step's rows to ``report`` (and set ``work_pending`` when
    work remains). Never raises for a step failure: it reports ``failed``."""
    for step in ("compact_store",):
        report.add(step, SKIPPED, NOT_YET)
