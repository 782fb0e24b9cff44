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
What travels between phases (``PassPlan``, ``BatchOrder``, ``BatchResult``)
is plain JSON, read back through ``from_dict`` as outside input: a Step
Functions state's payload is not trusted to be the one the plan wrote.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from slatelake.ducklake.session import Session
from slatelake.errors import (
    AlreadyRunningError,
    LeaseLostError,
    MaintenanceConfigError,
)
from slatelake.maintenance.flight import process_lock
from slatelake.maintenance.options import DUCKLAKE_STEPS, MaintenanceOptions
from slatelake.maintenance.progress import Progress, Sink
from slatelake.maintenance.report import FAILED, RAN, SKIPPED, PassReport, StepReport, StepStatus
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
TABLE_STEPS = DUCKLAKE_STEPS[1:4]  # flush, merge, rewrite: table by table
LAST_STEPS = DUCKLAKE_STEPS[4:]  # cleanup, orphans: once every table is done
DEFAULT_BATCH_TABLES = 20
MAX_BATCH_TABLES = 1000
MAX_NAME_CHARS = 1024
_OWNER_CHARS = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class BatchOrder:
    """What one batch needs: the run it belongs to and its tables."""

    lake: str
    run_id: int | None
    lease_owner: str
    request: dict[str, Any]
    index: int
    count: int
    tables: tuple[TableName, ...]

    @property
    def name(self) -> str:
        return f"table batch {self.index + 1} of {self.count}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "lake": self.lake,
            "run_id": self.run_id,
            "lease_owner": self.lease_owner,
            "request": self.request,
            "index": self.index,
            "count": self.count,
            "tables": [list(t) for t in self.tables],
        }

    @classmethod
    def from_dict(cls, doc: object) -> BatchOrder:
        d = _mapping(doc, "a table batch")
        count = _int(d.get("count"), "a table batch's count", least=1)
        index = _int(d.get("index"), "a table batch's index", least=0)
        if index >= count:
            raise MaintenanceConfigError(f"table batch index {index} is not below count {count}")
        tables = d.get("tables")
        if not isinstance(tables, list) or len(tables) > MAX_BATCH_TABLES:
            raise MaintenanceConfigError(
                f"a table batch's tables: a list of at most {MAX_BATCH_TABLES} [schema, table]"
            )
        return cls(
            lake=_text(d.get("lake"), "a table batch's lake"),
            run_id=_run_id(d.get("run_id")),
            lease_owner=_owner(d.get("lease_owner")),
            request=dict(_mapping(d.get("request"), "a table batch's request")),
            index=index,
            count=count,
            tables=tuple(_table(t) for t in tables),
        )


@dataclass
class PassPlan:
    """The plan's answer: the run so far and its batches. ``failed`` names
    the step that failed before the batches (none then run);
    ``catalog_before`` is the catalog's bytes when the run began."""

    lake: str
    request: dict[str, Any]
    report: PassReport
    batches: list[BatchOrder]
    catalog_before: int | None = None
    failed: str | None = None

    def pass_request(self) -> PassRequest:
        """The request the run was planned from (checked again: outside input)."""
        return PassRequest.from_mapping(self.request)

    def to_dict(self) -> dict[str, Any]:
        return {
            "lake": self.lake,
            "request": self.request,
            "report": self.report.to_dict(),
            "batches": [b.to_dict() for b in self.batches],
            "catalog_before": self.catalog_before,
            "failed": self.failed,
        }

    @classmethod
    def from_dict(cls, doc: object) -> PassPlan:
        d = _mapping(doc, "a pass plan")
        batches = d.get("batches")
        if not isinstance(batches, list):
            raise MaintenanceConfigError("a pass plan's batches: a list of table batches")
        try:
            report = PassReport.from_dict(dict(_mapping(d.get("report"), "a pass plan's report")))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise MaintenanceConfigError(f"a pass plan's report does not read: {exc}") from None
        if report.lease_owner is not None:
            _owner(report.lease_owner)
        failed = d.get("failed")
        before = d.get("catalog_before")
        return cls(
            lake=_text(d.get("lake"), "a pass plan's lake"),
            request=dict(_mapping(d.get("request"), "a pass plan's request")),
            report=report,
            batches=[BatchOrder.from_dict(b) for b in batches],
            catalog_before=None if before is None else _int(before, "catalog_before", least=0),
            failed=None if failed is None else _text(failed, "a pass plan's failed step"),
        )


@dataclass
class BatchResult:
    """What one batch did: its steps' reports, the tables it deferred, and
    ``error`` when it failed as a whole (it raised, or its item died)."""

    index: int
    tables: list[TableName] = field(default_factory=list)
    steps: list[StepReport] = field(default_factory=list)
    deferred: list[TableName] = field(default_factory=list)
    work_pending: bool = False
    lease_lost: str | None = None
    error: str | None = None
    seconds: float = 0.0
    rss_hwm_mb: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "tables": [list(t) for t in self.tables],
            "steps": [
                {
                    "step": s.step,
                    "status": str(s.status),
                    "detail": s.detail,
                    "counts": s.counts,
                    "seconds": s.seconds,
                }
                for s in self.steps
            ],
            "deferred": [list(t) for t in self.deferred],
            "work_pending": self.work_pending,
            "lease_lost": self.lease_lost,
            "error": self.error,
            "seconds": self.seconds,
            "rss_hwm_mb": self.rss_hwm_mb,
        }

    @classmethod
    def from_dict(cls, doc: object) -> BatchResult:
        d = _mapping(doc, "a table batch's result")
        try:
            steps = [
                StepReport(
                    str(s["step"]),
                    StepStatus(s["status"]),
                    str(s["detail"]),
                    {str(k): int(v) for k, v in dict(s.get("counts") or {}).items()},
                    float(s.get("seconds") or 0.0),
                )
                for s in d.get("steps") or []
            ]
            return cls(
                index=_int(d.get("index"), "a table batch result's index", least=0),
                tables=[_table(t) for t in d.get("tables") or []],
                steps=[s for s in steps if s.step in TABLE_STEPS],
                deferred=[_table(t) for t in d.get("deferred") or []],
                work_pending=bool(d.get("work_pending")),
                lease_lost=None if d.get("lease_lost") is None else str(d["lease_lost"]),
                error=None if d.get("error") is None else str(d["error"]),
                seconds=float(d.get("seconds") or 0.0),
                rss_hwm_mb=float(d.get("rss_hwm_mb") or 0.0),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise MaintenanceConfigError(f"a table batch's result does not read: {exc}") from None


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


def _mapping(doc: object, what: str) -> Mapping[str, Any]:
    if not isinstance(doc, Mapping):
        raise MaintenanceConfigError(f"{what} is a JSON object, not {type(doc).__name__}")
    return doc


def _text(value: object, what: str) -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_NAME_CHARS or "\x00" in value:
        raise MaintenanceConfigError(f"{what}={show_input(value)}: expected a non-empty name")
    return value


def _int(value: object, what: str, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise MaintenanceConfigError(f"{what}={show_input(value)}: expected an integer >= {least}")
    return value


def _run_id(value: object) -> int | None:
    return None if value is None else _int(value, "run_id", least=0)


def _owner(value: object) -> str:
    if not isinstance(value, str) or len(value) != 32 or not set(value) <= _OWNER_CHARS:
        raise MaintenanceConfigError(
            f"lease_owner={show_input(value)}: expected the 32 hex digits the plan answered"
        )
    return value


def _table(value: object) -> TableName:
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise MaintenanceConfigError(f"table {show_input(value)}: expected [schema, table]")
    return (_text(value[0], "a schema name"), _text(value[1], "a table name"))


__all__ = [
    "DEFAULT_BATCH_TABLES",
    "BatchOrder",
    "BatchResult",
    "PassPlan",
    "failed_batch",
    "finish_pass",
    "plan_pass",
    "run_batch",
]
