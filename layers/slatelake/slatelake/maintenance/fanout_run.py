"""Entry points of a fanned-out pass: each phase on a lake, and the whole
pass over worker processes on this machine (``maintain --parallel N``).

The phases (fanout.py) take a lake URL or an open session, as ``run_request``
does: the Lambda's ``pass_plan``, ``pass_batch`` and ``pass_finish`` actions
call them, on the container's warm session when it has one. ``run_parallel``
is the same plan, batches and finish with the batches in ``workers``
processes, each with a session of its own kept for all its batches, so the
fan-out is testable and useful without AWS. Its workers ignore SIGINT: a
stop (the CLI's signal handler sets it) cancels the batches not started,
which the finish reports as work left for the next pass, and lets running
ones end at their next table boundary by their deadline.
"""

from __future__ import annotations

import math
import multiprocessing
import multiprocessing.util
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from contextlib import contextmanager
from typing import Any

from slatelake.ducklake.session import Session
from slatelake.errors import MaintenanceConfigError
from slatelake.maintenance import cadence
from slatelake.maintenance.api import opened_session
from slatelake.maintenance.fanout import (
    DEFAULT_BATCH_TABLES,
    TABLE_STEPS,
    BatchOrder,
    BatchResult,
    PassPlan,
    failed_batch,
    finish_pass,
    plan_pass,
    run_batch,
)
from slatelake.maintenance.options import MaintenanceOptions
from slatelake.maintenance.progress import Sink
from slatelake.maintenance.report import SKIPPED, PassReport, StepReport
from slatelake.maintenance.request import PassRequest

MAX_WORKERS = 64
# A local fan-out cuts the tables into this many batches per worker, so a
# slow table holds up one small batch, not a worker's whole share.
BATCHES_PER_WORKER = 4
Deadline = Callable[[], float]


def plan(
    lake: str | Session,
    request: PassRequest,
    *,
    data_path: str | None = None,
    batch_tables: int = DEFAULT_BATCH_TABLES,
    deadline: Deadline | None = None,
    stop: threading.Event | None = None,
    on_progress: Sink | None = None,
) -> PassPlan:
    """The plan phase (fanout.plan_pass). Refused, before the lake is
    touched, while SLATELAKE_MAINTENANCE_ENABLED is false."""
    cadence.require_enabled(f"a {request.trigger} maintenance pass", dry_run_allowed=True)
    with _opened(lake, data_path) as session:
        return plan_pass(
            session,
            request,
            _bound(request, session),
            batch_tables=batch_tables,
            deadline=deadline,
            stop=stop,
            on_progress=on_progress,
        )


def batch(
    lake: str | Session,
    order: BatchOrder,
    *,
    deadline: Deadline | None = None,
    stop: threading.Event | None = None,
    on_progress: Sink | None = None,
) -> BatchResult:
    """One table batch of a planned run (fanout.run_batch)."""
    request = PassRequest.from_mapping(order.request)
    with opened_session(lake) as session:
        options = _bound(request, session)
        return run_batch(
            session, order, options, deadline=deadline, stop=stop, on_progress=on_progress
        )


def finish(
    lake: str | Session,
    planned: PassPlan,
    results: list[BatchResult],
    *,
    deadline: Deadline | None = None,
    stop: threading.Event | None = None,
    on_progress: Sink | None = None,
) -> PassReport:
    """The finish phase of a planned run (fanout.finish_pass)."""
    request = planned.pass_request()
    with opened_session(lake) as session:
        options = _bound(request, session)
        return finish_pass(
            session,
            planned,
            results,
            options,
            deadline=deadline,
            stop=stop,
            on_progress=on_progress,
        )


def run_parallel(
    lake: str | Session,
    request: PassRequest,
    *,
    workers: int,
    data_path: str | None = None,
    deadline: Deadline | None = None,
    stop: threading.Event | None = None,
    on_progress: Sink | None = None,
) -> PassReport:
    """A whole pass, its table batches in ``workers`` processes. A dry run
    writes nothing and has no batches: it runs as one pass does."""
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= MAX_WORKERS:
        raise MaintenanceConfigError(f"parallel={workers!r}: expected 1 to {MAX_WORKERS} workers")
    if request.dry_run:
        from slatelake.maintenance.api import run_request

        return run_request(
            lake,
            request,
            data_path=data_path,
            deadline=deadline,
            stop=stop,
            on_progress=on_progress,
        )
    cadence.require_enabled(f"a {request.trigger} maintenance pass", dry_run_allowed=True)
    stopping = stop or threading.Event()
    with _opened(lake, data_path) as session:
        options = _bound(request, session)
        tables = len(session.live_tables()) if request.scope.table is None else 1
        size = max(1, math.ceil(tables / (workers * BATCHES_PER_WORKER)))
        planned = plan_pass(
            session,
            request,
            options,
            batch_tables=size,
            deadline=deadline,
            stop=stopping,
            on_progress=on_progress,
        )
        results = _in_workers(session.url, planned.batches, workers, deadline, stopping)
        return finish_pass(
            session,
            planned,
            results,
            options,
            deadline=deadline,
            stop=stopping,
            on_progress=on_progress,
        )


# -- the worker processes ------------------------------------------------------------
def _in_workers(
    url: str,
    orders: list[BatchOrder],
    workers: int,
    deadline: Deadline | None,
    stop: threading.Event,
) -> list[BatchResult]:
    """Each order's result: run, cancelled by a stop (work left), or failed."""
    if not orders:
        return []
    ends = None if deadline is None else time.time() + max(0.0, deadline())
    context = multiprocessing.get_context("spawn")  # no fork of DuckDB's threads
    results: list[BatchResult] = []
    with ProcessPoolExecutor(
        max_workers=min(workers, len(orders)),
        mp_context=context,
        initializer=_open_worker,
        initargs=(url,),
    ) as pool:
        pending: dict[Future[dict[str, Any]], BatchOrder] = {
            pool.submit(_work, order.to_dict(), ends): order for order in orders
        }
        while pending:
            done, _ = wait(list(pending), timeout=0.5, return_when=FIRST_COMPLETED)
            for future in done:
                order = pending.pop(future)
                results.append(_result_of(future, order))
            if stop.is_set():
                for future, order in list(pending.items()):
                    if future.cancel():
                        pending.pop(future)
                        results.append(_not_started(order, "shutdown requested"))
    return results


def _result_of(future: Future[dict[str, Any]], order: BatchOrder) -> BatchResult:
    try:
        return BatchResult.from_dict(future.result())
    except Exception as exc:  # the batch raised, or its worker died
        return failed_batch(order, f"{type(exc).__name__}: {exc}")


def _not_started(order: BatchOrder, why: str) -> BatchResult:
    steps = [
        StepReport(s, SKIPPED, f"not attempted: {why}; left for the next pass") for s in TABLE_STEPS
    ]
    return BatchResult(index=order.index, tables=list(order.tables), steps=steps, work_pending=True)


_worker_session: Session | None = None


def _open_worker(url: str) -> None:
    """A worker's start: its own session, kept for all its batches."""
    global _worker_session
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    _worker_session = Session(url)
    # closed as the worker exits (it ends its reader lease, which would hold
    # back the finish's orphan deletion); atexit does not run in a pool's worker
    multiprocessing.util.Finalize(None, _worker_session.close, exitpriority=10)


def _work(order: dict[str, Any], ends: float | None) -> dict[str, Any]:
    session = _worker_session
    if session is None:
        raise RuntimeError("the worker's session did not open")
    deadline = None if ends is None else (lambda: ends - time.time())
    return batch(session, BatchOrder.from_dict(order), deadline=deadline).to_dict()


# -- plumbing ---------------------------------------------------------------------
@contextmanager
def _opened(lake: str | Session, data_path: str | None) -> Iterator[Session]:
    """The caller's session, or one on ``lake`` (a data path makes an empty
    root a new lake, as ``run_request`` does) closed after."""
    if isinstance(lake, Session):
        yield lake
        return
    with Session(lake, data_path=data_path) as session:
        yield session


def _bound(request: PassRequest, session: Session) -> MaintenanceOptions:
    own = getattr(session, "options", None)
    return request.bound(own if isinstance(own, MaintenanceOptions) else None)
