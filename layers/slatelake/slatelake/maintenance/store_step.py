"""Step 8: store merges submitted through the admin API, executed by the
holder's compactor.

The step is the pass's form of ``Lake.compact_store``: same verb, so the two
cannot drift. Status follows the RFC's vocabulary (ran / skipped / failed);
the merge outcome leads the detail -- ``completed: ...``, ``pending: ...``,
``failed: ...``. The wait is ``COMPACT_STORE_TIMEOUT`` (default 60 s), cut
short by the pass's own deadline, and only while a live holder holds the
lake (its holder lease): with none, nothing can execute the merge before
the next holder's turn (the fold function's), so the step submits and hands
over at once instead of waiting out the timeout on every pass. A merge the
pass waited on and that is still pending, or failed, marks ``work_pending``;
one handed over does not (it is the holder's work, counted by the backlog's
``store_merges_pending``). Never raises for a step failure: it reports it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from slatelake.ducklake.session import Session
from slatelake.maintenance import report as rpt
from slatelake.maintenance.holder import HolderLease
from slatelake.maintenance.options import MaintenanceOptions
from slatelake.maintenance.progress import Progress
from slatelake.maintenance.report import PassReport
from slatelake.store.merge import (
    COMPLETED,
    FAILED,
    PENDING,
    SKIPPED,
    CompactStoreReport,
    CompactStoreRequest,
    compact_store,
)

STEP = "compact_store"
DEFAULT_TIMEOUT_S = 60.0


def run_compact_store(
    session: Session,
    options: MaintenanceOptions,
    progress: Progress,
    report: PassReport,
    out_of_time: Callable[[], str | None],
) -> None:
    """Append this step's row to ``report`` (and set ``work_pending`` when
    work remains). Never raises for a step failure: it reports ``failed``."""
    if not options.compact_store:
        report.add(STEP, rpt.SKIPPED, "not configured")
        return
    reason = out_of_time()
    if reason is not None:
        report.add(STEP, rpt.SKIPPED, f"not attempted: {reason}; left for the next pass")
        report.work_pending = True
        return
    timeout = options.compact_store_timeout_s or DEFAULT_TIMEOUT_S
    holder = HolderLease(session.lake.location, client=session.lake.log.client).current()
    handed_over = holder is None or not holder.held()
    request = CompactStoreRequest(
        subspace=options.compact_store_subspace, wait_s=None if handed_over else timeout
    )
    wait = "no holder is live: submit and hand over" if handed_over else f"wait {timeout:g}s"
    progress(f"step {STEP} start (target {request.subspace or 'whole store'}, {wait})")
    t0 = time.monotonic()
    try:
        merged = compact_store(session.lake, request, should_stop=out_of_time)
    except Exception as exc:  # the admin API refused: report, never abort the pass
        row = report.add(STEP, rpt.FAILED, f"{type(exc).__name__}: {exc}")
        row.seconds = round(time.monotonic() - t0, 3)
        report.work_pending = True
        progress(f"step {STEP} end: failed ({exc})")
        return
    status = {
        COMPLETED: rpt.RAN,
        PENDING: rpt.RAN,
        FAILED: rpt.FAILED,
        SKIPPED: rpt.SKIPPED,
    }[merged.outcome]
    detail = merged.summary()
    if handed_over and merged.outcome == PENDING:
        detail += (
            "; no holder is live, so none waited: the next holder's turn (the fold function, "
            "`slatelake fold --compact`, `slatelake hold`) executes it"
        )
    row = report.add(STEP, status, detail, step_counts(merged))
    row.seconds = round(time.monotonic() - t0, 3)
    if merged.outcome == FAILED or (merged.outcome == PENDING and not handed_over):
        report.work_pending = True
    progress(f"step {STEP} end after {merged.waited_s:.2f}s: {status} ({merged.summary()})")


def step_counts(merged: CompactStoreReport) -> dict[str, int]:
    """Numbers for the status window and the Lambda's metrics."""
    done = merged.of(COMPLETED)
    return {
        "subspaces_merged": len(done),
        "subspaces_pending": len(merged.of(PENDING)),
        "subspaces_failed": len(merged.of(FAILED)),
        "subspaces_skipped": len(merged.of(SKIPPED)),
        "store_bytes_before": sum(m.bytes_before for m in merged.merges),
        "merged_bytes_before": sum(m.bytes_before for m in done),
        "merged_bytes_after": sum(m.bytes_after or 0 for m in done),
    }
