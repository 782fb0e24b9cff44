"""A pass fanned out over invocations: the pass state machine's three actions.

``pass_plan`` takes the lake's pass lease for the whole execution, records
the run, expires, and answers the table batches; ``pass_batch`` runs flush,
merge and rewrite on one batch's tables under that lease; ``pass_finish``
sums the batches (a Map item Step Functions caught as failed fails only its
tables), cleans up when every batch finished, records the run once and
gives the lease back (maintenance/fanout.py). A scheduled plan skips as a
scheduled pass does (switch off, lease held, cron not due), and the finish
counts and raises as the pass does, so the stack's alarms read one run
whichever shape ran it. Each runs on the container's warm session: a batch
that lands in a container that ran one before opens nothing.
"""

from __future__ import annotations

from actions import Answer, require_lake
from calls import BatchCall, FinishCall, PlanCall
from invocation import Turn
from passes import _finished, _opened, _progress, counted, metrics
from telemetry import emit_crash


def plan(call: PlanCall, turn: Turn) -> Answer:
    """The run's plan: ``{"result": PassPlan}``, or a tick's ``skipped``."""
    opened = _opened(call, turn)
    if isinstance(opened, dict):
        return opened
    lake, request, _options = opened
    planned = counted(
        call,
        lambda: lake.maintenance.plan(
            request,
            batch_tables=call.batch_tables,
            session=turn.session(),
            deadline=turn.seconds_left,
            on_progress=_progress,
        ),
    )
    return planned if isinstance(planned, dict) else {"result": planned.to_dict()}


def batch(call: BatchCall, turn: Turn) -> Answer:
    """One batch's per-table steps: ``{"result": BatchResult}``. Raises (its
    Map item fails, and the finish names its tables) when it cannot run."""
    result = require_lake(call).maintenance.batch(
        call.order, session=turn.session(), deadline=turn.seconds_left, on_progress=_progress
    )
    return {"result": result.to_dict()}


def finish(call: FinishCall, turn: Turn) -> Answer:
    """The run's end: ``{"result": PassReport}``, counted as a pass is."""
    lake = require_lake(call)
    try:
        report = lake.maintenance.finish(
            call.plan,
            call.results,
            session=turn.session(),
            deadline=turn.seconds_left,
            on_progress=_progress,
        )
    except Exception:
        emit_crash(metrics, call.lake)
        raise
    return _finished(call, lake, report)
