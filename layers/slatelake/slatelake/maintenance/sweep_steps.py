"""Steps 7, 7b and 7c: the sweeps of orphaned index entries, stranded file
column statistics and inlined-data tables, through the catalog's ``sweep``.

One ``sweep`` call does the ones switched on (RFC 0021); the pass reports
them as three rows because what orphans each differs, and reading one count
against another is how a leak shows. It runs even when an earlier DuckLake
step failed: it depends on none of them. ``MAINTENANCE_SWEEP_INDEXES``,
``MAINTENANCE_SWEEP_FILE_STATS`` and ``MAINTENANCE_SWEEP_INLINED_TABLES``
switch each (the last two follow the first unless given);
``MAINTENANCE_BATCH_SIZE`` bounds the deletes per commit. Never raises for a
step failure: the rows that ran report ``failed``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from slatelake.catalog.sweep import DEFAULT_PACE_S, SweepReport, SweepRequest, sweep
from slatelake.ducklake.session import Session
from slatelake.maintenance.options import MaintenanceOptions
from slatelake.maintenance.progress import Progress
from slatelake.maintenance.report import FAILED, RAN, SKIPPED, PassReport

STEPS = ("sweep_indexes", "sweep_file_stats", "sweep_inlined_tables")
SWITCHES = (
    "MAINTENANCE_SWEEP_INDEXES",
    "MAINTENANCE_SWEEP_FILE_STATS",
    "MAINTENANCE_SWEEP_INLINED_TABLES",
)


def run_sweep_steps(
    session: Session,
    options: MaintenanceOptions,
    progress: Progress,
    report: PassReport,
    out_of_time: Callable[[], str | None],
    pace_s: float = DEFAULT_PACE_S,
) -> None:
    """Append the three sweep rows to ``report`` in step order (and set
    ``work_pending`` when a sweep stopped with work left)."""
    on = (options.sweep_indexes, options.sweep_file_stats, options.sweep_inlined_tables)
    if not any(on):
        for step, switch in zip(STEPS, SWITCHES, strict=True):
            report.add(step, SKIPPED, f"{switch} is false")
        return
    reason = out_of_time()
    if reason is not None:
        for step in STEPS:
            report.add(step, SKIPPED, f"not attempted: {reason}; left for the next pass")
        report.work_pending = True
        return
    progress(f"step sweep start (batch size {options.batch_size})")
    t0 = time.monotonic()
    try:
        request = SweepRequest(*on, batch_size=options.batch_size, pace_s=pace_s)
        session.refresh()
        swept = sweep(
            session.lake, request, session.state, progress=progress, should_stop=out_of_time
        )
    except Exception as exc:  # the log or the store refused: report, never abort the pass
        for step, switch, ran in zip(STEPS, SWITCHES, on, strict=True):
            if ran:
                report.add(step, FAILED, f"{type(exc).__name__}: {exc}")
            else:
                report.add(step, SKIPPED, f"{switch} is false")
        report.work_pending = True
        progress(f"step sweep end: failed ({exc})")
        return
    rows = [
        report.add(step, RAN, d, c) if ran else report.add(step, SKIPPED, f"{switch} is false")
        for step, switch, ran, (d, c) in zip(STEPS, SWITCHES, on, step_rows(swept), strict=True)
    ]
    timed = next(row for row, ran in zip(rows, on, strict=True) if ran)
    timed.seconds = round(time.monotonic() - t0, 3)  # one call does them all; timed once
    if swept.stopped is not None:
        report.work_pending = True
    progress(f"step sweep end: {swept.batches} batches, {swept.rebases} rebased")


def step_rows(swept: SweepReport) -> list[tuple[str, dict[str, int]]]:
    """(detail, counts) of the three rows, in step order."""
    left = f"; stopped ({swept.stopped}), the rest is left for the next pass"
    tail = left if swept.stopped else ""
    ranges = ", ".join(f"index {r.index_id}: {r.entries}" for r in swept.ranges)
    return [
        (
            f"reclaimed {swept.index_entries_reclaimed} entries of {swept.indexes_swept} "
            f"dropped indexes" + (f" ({ranges})" if ranges else "") + tail,
            {
                "indexes_swept": swept.indexes_swept,
                "index_entries_reclaimed": swept.index_entries_reclaimed,
                "batches": swept.batches,
            },
        ),
        (
            f"reclaimed {swept.file_column_stats_reclaimed} file column statistics of "
            f"{swept.file_stats_files} absent data files",
            {
                "file_column_stats_reclaimed": swept.file_column_stats_reclaimed,
                "file_stats_files": swept.file_stats_files,
            },
        ),
        (
            f"reclaimed {swept.inlined_tables_reclaimed} inlined tables "
            f"({swept.inlined_rows_reclaimed} rows) of absent tables",
            {
                "inlined_tables_reclaimed": swept.inlined_tables_reclaimed,
                "inlined_rows_reclaimed": swept.inlined_rows_reclaimed,
            },
        ),
    ]
