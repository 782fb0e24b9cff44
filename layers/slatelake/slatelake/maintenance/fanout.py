"""One pass over many processes: a plan, table batches, a finish.

RFC 0021's pass, split where its steps' scope splits. The plan takes the
pass lease for the whole run, records it ``running``, applies the lake's
policy and runs the lake-wide expiry first (the RFC's order); it then cuts
the lake's tables into batches. Each batch (a Step Functions Map item, a
``maintain --parallel`` worker) runs flush, merge and rewrite on its own
tables, with the same per-table deferral and retry rules as the pass in one
process: committers fence nothing, so batches land side by side. The finish
sums the batches' steps into the run's one report, runs cleanup and orphan
deletion only when every batch finished with nothing deferred (the RFC's
"catalog-wide cleanup waits for a complete pass"), then the sweeps and the
store merge, records one status-window entry and one run-history entry, and
gives the lease back. A batch that failed as a whole fails only its tables:
the run is ``failed``, ``failed_reason`` names the batch and its tables, and
cleanup waits. An execution that dies leaves its lease to lapse; the next
pass records the run failed, as for a killed single pass.

Every phase runs on ``PassRun`` (runner.py), so a step's rules are one.
What travels between phases is plain JSON read back as outside input
(fanout_records.py).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping

from slatelake.ducklake.session import Session
from slatelake.errors import (
    AlreadyRunningError,
    LeaseLostError,
    MaintenanceConfigError,
)
from slatelake.maintenance.fanout_records import (
    MAX_BATCH_TABLES,
    TABLE_STEPS,
    BatchOrder,
    BatchResult,
    PassPlan,
)
from slatelake.maintenance.flight import process_lock
from slatelake.maintenance.options import DUCKLAKE_STEPS, MaintenanceOptions
from slatelake.maintenance.progress import Progress, Sink
from slatelake.maintenance.report import FAILED, RAN, SKIPPED, PassReport, StepReport
from slatelake.maintenance.request import PassRequest
from slatelake.maintenance.runner import (
    Flow,
    PassRun,
    refuse_unless_autocommit,
    require_table,
)
from slatelake.maintenance.shared_lease import SharedLease
from slatelake.maintenance.steps import TableName
from slatelake.store.location import show_input

FIRST_STEPS = DUCKLAKE_STEPS[:1]  # expiry: lake-wide, before any table's
LAST_STEPS = DUCKLAKE_STEPS[4:]  # cleanup, orphans: once every table is done
DEFAULT_BATCH_TABLES = 20

__all__ = [
    "DEFAULT_BATCH_TABLES",
    "TABLE_STEPS",
    "BatchOrder",
    "BatchResult",
    "PassPlan",
    "failed_batch",
    "finish_pass",
    "plan_pass",
    "run_batch",
]


# -- the phases ---------------------------------------------------------------------
def plan_pass(
    session: Session,
    request: PassRequest,
    options: MaintenanceOptions,
    *,
    batch_tables: int = DEFAULT_BATCH_TABLES,
    stop: threading.Event | None = None,
    deadline: Callable[[], float] | None = None,
    on_progress: Sink | None = None,
) -> PassPlan:
    """Take the lease for the run, record it ``running``, expire, and cut
    the lake's tables into batches of ``batch_tables``. The lease stays
    held (unbeaten) for the batches; if the plan raises it is given back."""
    if request.dry_run:
        raise MaintenanceConfigError(
            "a dry run is not fanned out: it writes nothing and runs in one process"
        )
    if request.options is not None and not isinstance(request.options, Mapping):
        raise MaintenanceConfigError(
            "a fanned-out pass hands its options to its batches as spelled: give the "
            "MAINTENANCE_* mapping, not bound options"
        )
    if isinstance(batch_tables, bool) or not 1 <= batch_tables <= MAX_BATCH_TABLES:
        raise MaintenanceConfigError(
            f"batch_tables={show_input(batch_tables)}: expected 1 to {MAX_BATCH_TABLES} tables"
        )
    refuse_unless_autocommit(session)
    require_table(session, request.scope)
    stopping = stop or threading.Event()
    lake = session.lake.location.url
    lock = _lock(lake, request.wait_s)
    try:
        lease = SharedLease(session.lake.location, client=session.lake.log.client)
        queued = time.monotonic()
        lease.acquire(request.wait_s, stop=stopping)
        run = _run(session, request, options, lease, stopping, deadline, on_progress)
        if request.wait_s > 0:
            run.report.queued_s = round(time.monotonic() - queued, 3)
        kept = False
        try:
            with _under(session, lease):
                run.begin()
                flow = Flow()
                run.run_steps(FIRST_STEPS, flow)
                tables = _batch_tables(run, flow)
            run.report.rss_hwm_mb = round(run.progress.high_water, 1)
            owner = lease.owner
            count = math.ceil(len(tables) / batch_tables)
            orders = [
                BatchOrder(
                    lake,
                    run.report.run_id,
                    owner,
                    request.to_dict(),
                    n,
                    count,
                    tuple(tables[n * batch_tables : (n + 1) * batch_tables]),
                )
                for n in range(count)
            ]
            run.report.batches = count
            run.progress(f"pass planned: {len(tables)} tables in {count} table batches")
            kept = lease.lost is None
            return PassPlan(
                lake, request.to_dict(), run.report, orders, run.catalog_before, flow.failed
            )
        except Exception as exc:
            run.record_raised(exc)
            raise
        finally:
            if kept:
                lease.detach()
            else:
                lease.release()
    finally:
        lock.release()


def run_batch(
    session: Session,
    order: BatchOrder,
    options: MaintenanceOptions,
    *,
    stop: threading.Event | None = None,
    deadline: Callable[[], float] | None = None,
    on_progress: Sink | None = None,
) -> BatchResult:
    """Flush, merge and rewrite the order's tables (those still live) under
    the run's lease. LeaseLostError, doing nothing, when the run's lease is
    no longer held; writes no record of its own."""
    refuse_unless_autocommit(session)
    if session.lake.location.url != order.lake:
        raise MaintenanceConfigError(
            f"{order.name} belongs to the lake at {show_input(order.lake)}, "
            f"not {session.lake.location.url}"
        )
    request = PassRequest.from_mapping(order.request)
    lease = SharedLease.join(
        session.lake.location, order.lease_owner, order.run_id, client=session.lake.log.client
    )
    stopping = stop or threading.Event()
    run = _run(session, request, options, lease, stopping, deadline, on_progress)
    run.steps.batch = frozenset(order.tables)
    run.progress(f"{order.name}: {len(order.tables)} tables")
    t0 = time.monotonic()
    flow = Flow()
    try:
        with _under(session, lease):
            run.prepare()
            run.run_steps(TABLE_STEPS, flow)
    finally:
        lease.detach()
    return BatchResult(
        index=order.index,
        tables=list(order.tables),
        steps=run.report.steps,
        deferred=sorted(flow.deferred),
        work_pending=run.report.work_pending,
        lease_lost=lease.lost,
        seconds=round(time.monotonic() - t0, 3),
        rss_hwm_mb=round(run.progress.high_water, 1),
    )


def finish_pass(
    session: Session,
    plan: PassPlan,
    results: list[BatchResult],
    options: MaintenanceOptions,
    *,
    stop: threading.Event | None = None,
    deadline: Callable[[], float] | None = None,
    on_progress: Sink | None = None,
) -> PassReport:
    """Sum the batches into the run's report, run cleanup and orphan
    deletion when every batch finished with nothing deferred, the sweeps
    and the store merge; record the run once and give the lease back. A
    run whose lease is gone answers ``lease_lost`` and records nothing."""
    refuse_unless_autocommit(session)
    report = plan.report
    request = plan.pass_request()
    if session.lake.location.url != plan.lake:
        raise MaintenanceConfigError(
            f"the plan belongs to the lake at {show_input(plan.lake)}, "
            f"not {session.lake.location.url}"
        )
    if report.lease_owner is None:
        raise MaintenanceConfigError("the pass plan names no lease owner")
    try:
        lease = SharedLease.join(
            session.lake.location,
            report.lease_owner,
            report.run_id,
            client=session.lake.log.client,
        )
    except LeaseLostError as exc:
        report.lease_lost = str(exc)
        report.work_pending = True
        return report
    lock = _lock(session.lake.location.url, 0.0)
    stopping = stop or threading.Event()
    try:
        run = _run(session, request, options, lease, stopping, deadline, on_progress, report)
        run.catalog_before = plan.catalog_before
        try:
            with _under(session, lease):
                run.prepare()
                flow = Flow(failed=plan.failed)
                if plan.batches:
                    summed = _sum_batches(report, plan.batches, results, flow)
                    run.progress(f"table batches summed: {summed}")
                else:
                    run.run_steps(TABLE_STEPS, flow)
                run.run_steps(LAST_STEPS, flow)
                return run.end()
        except Exception as exc:
            run.record_raised(exc)
            raise
    finally:
        lease.release()
        lock.release()


def failed_batch(order: BatchOrder, error: str) -> BatchResult:
    """The result of a batch that failed as a whole (its process raised or died)."""
    return BatchResult(index=order.index, tables=list(order.tables), error=error)


# -- summing the batches ----------------------------------------------------------------
def _sum_batches(
    report: PassReport, orders: list[BatchOrder], results: list[BatchResult], flow: Flow
) -> str:
    """Append one entry per table step, summed over the batches; carry
    deferred tables and failed batches into ``flow``. Says what it summed."""
    by_index = {r.index: r for r in results}
    done: list[tuple[BatchOrder, BatchResult]] = []
    broken: list[str] = []
    for order in orders:
        result = by_index.get(order.index)
        error = "no result reached the finish" if result is None else result.error
        if result is not None and error is None and result.lease_lost is not None:
            error = f"it lost the pass lease: {result.lease_lost}"
        if error is not None:
            names = ", ".join(f"{s}.{t}" for s, t in order.tables)
            broken.append(f"{order.name} ({names}) failed: {error}")
            flow.failed = flow.failed or order.name
            continue
        assert result is not None
        done.append((order, result))
        flow.deferred.update(result.deferred)
        report.work_pending = report.work_pending or result.work_pending
        report.rss_hwm_mb = max(report.rss_hwm_mb, result.rss_hwm_mb)
    for step in TABLE_STEPS:
        entries = [(o, s) for o, r in done for s in r.steps if s.step == step]
        report.steps.append(_sum_step(step, entries, len(orders), bool(broken)))
    if broken:
        report.failed_reason = "; ".join(broken)
        report.work_pending = True
    return f"{len(done)} of {len(orders)} batches finished" + (
        f", {len(broken)} failed" if broken else ""
    )


def _sum_step(
    step: str, entries: list[tuple[BatchOrder, StepReport]], batches: int, broken: bool
) -> StepReport:
    if not entries:
        why = "its table batches failed" if broken else "no table batch ran"
        return StepReport(step, SKIPPED, f"not attempted: {why}")
    statuses = {s.status for _, s in entries}
    if statuses == {SKIPPED}:
        return StepReport(step, SKIPPED, entries[0][1].detail)
    status = FAILED if FAILED in statuses else RAN
    counts: dict[str, int] = {}
    for _, s in entries:
        for name, value in s.counts.items():
            counts[name] = counts.get(name, 0) + value
    worked = [(o, s) for o, s in entries if s.status != SKIPPED]
    tables = sum(len(o.tables) for o, _ in worked)
    if step == "flush_inlined_data":
        said = f"flushed {counts.get('rows_flushed', 0)} rows"
    else:
        said = (
            f"processed {counts.get('files_processed', 0)} files, "
            f"created {counts.get('files_created', 0)}"
        )
    detail = f"{said} across {tables} tables in {len(worked)} of {batches} table batches"
    notes = [f"{o.name}: {s.detail}" for o, s in worked if s.status == FAILED or ";" in s.detail]
    if notes:
        detail += "; " + "; ".join(notes)
    seconds = round(sum(s.seconds for _, s in entries), 3)
    return StepReport(step, status, detail, counts, seconds)


# -- plumbing ------------------------------------------------------------------------
def _run(
    session: Session,
    request: PassRequest,
    options: MaintenanceOptions,
    lease: SharedLease,
    stop: threading.Event,
    deadline: Callable[[], float] | None,
    on_progress: Sink | None,
    report: PassReport | None = None,
) -> PassRun:
    progress = Progress(options.progress, sink=on_progress)
    return PassRun(
        session,
        options,
        str(request.trigger),
        stop,
        deadline,
        progress,
        lease,
        request.scope,
        request.by,
        report=report,
    )


class _under:  # noqa: N801  (a context manager named for how it reads)
    """The lease beats, and a commit lock the session takes names it, while
    the block runs."""

    def __init__(self, session: Session, lease: SharedLease) -> None:
        self.lock, self.lease = session.commit_lock, lease

    def __enter__(self) -> None:
        self.lease.start_heartbeat()
        if self.lock is not None:
            self.lock.lease = self.lease.ref

    def __exit__(self, *_exc: object) -> None:
        if self.lock is not None:
            self.lock.lease = None


def _lock(lake: str, wait_s: float) -> threading.Lock:
    lock = process_lock(lake)
    if not (lock.acquire(timeout=wait_s) if wait_s > 0 else lock.acquire(blocking=False)):
        raise AlreadyRunningError("maintenance already running on this lake in this process")
    return lock


def _batch_tables(run: PassRun, flow: Flow) -> list[TableName]:
    """The tables the batches share out: none when no table step may run
    (the finish then reports them itself), or the lake's (the scoped one)."""
    if flow.failed is not None or run.stop.is_set():
        return []
    wanted = [
        s
        for s in TABLE_STEPS
        if run.options.steps[s].enabled and run.scope.left_out(s) is None and s not in run.gated
    ]
    if not wanted:
        return []
    return run.steps.tables() if run.scope.table is None else [run.scope.table]
