"""The invocations other than the pass: status, census, compact_store,
threshold, and the read-only runs, audit, health and policy.

Each answers what the CLI prints with ``--json`` for the same verb. A lake
that does not exist is named, never created. ``seconds_left`` is the
invocation's time left to work (after the reserve for the answer).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from invocation import Invocation
from telemetry import emit_store_merge, emit_threshold
from warm import WarmSession

import slatelake
from slatelake import maintenance

logger = Logger(child=True)
metrics = Metrics()  # Powertools shares one metric set between instances


def require_lake(call: Invocation) -> str:
    """The call's lake, if a slatelake store is there (one read)."""
    if not maintenance.lake_exists(call.lake):
        raise slatelake.NotFoundError(
            f"no slatelake lake at {call.lake}; the Lambda never creates one - "
            f"run `slatelake init {call.lake} --data-path ...` first"
        )
    return call.lake


def status(call: Invocation, seconds_left: Callable[[], float]) -> dict[str, Any]:
    """The status window, newest first: one sys record, no catalog loaded."""
    return {"result": [p.to_dict() for p in maintenance.status(require_lake(call))]}


def census(call: Invocation, seconds_left: Callable[[], float]) -> dict[str, Any]:
    found = maintenance.census(require_lake(call), live=bool(call.options.get("live", False)))
    return {
        "result": found.to_json(),
        "objects": found.objects,
        "objects_error": found.objects_error,
    }


def compact_store(call: Invocation, seconds_left: Callable[[], float]) -> dict[str, Any]:
    """Submit merges through the admin API; the holder's compactor runs them.
    The outcome is counted whether or not ``require_completed`` refuses it."""
    timeout = call.options.get("timeout")
    try:
        report = maintenance.compact_store(
            require_lake(call),
            subspace=call.options.get("subspace"),
            wait_s=None if timeout is None else max(0.0, min(timeout, seconds_left())),
            require_completed=bool(call.options.get("require_completed")),
            should_stop=lambda: "the invocation deadline is near" if seconds_left() <= 0 else None,
        )
    except maintenance.MergeIncompleteError as exc:
        _count(call, exc.report)
        raise
    _count(call, report)
    return {"result": report.to_json()}


def _count(call: Invocation, report: maintenance.CompactStoreReport) -> None:
    logger.info("store merge", extra={"outcome": report.outcome, "summary": report.summary()})
    emit_store_merge(metrics, call.lake, report.outcome)


class ThresholdFailedError(slatelake.SlatelakeError):
    """A threshold run failed: a scheduled tick raises it after its metrics."""


def threshold(
    call: Invocation, seconds_left: Callable[[], float], warm: WarmSession
) -> dict[str, Any]:
    """The threshold trigger (its own schedule, between cadence passes): each
    table with enough small files gets a run of flush, merge and rewrite, on
    the pass's warm session."""
    found = maintenance.run_threshold(
        warm.get(require_lake(call), call.data_path),
        deadline=seconds_left,
        on_progress=lambda message, fields: logger.info(message, extra=fields),
        by=f"lambda:{logger.get_correlation_id()}",
    )
    emit_threshold(metrics, call.lake, found)
    logger.info("threshold check", extra={"due": len(found.due), "ran": len(found.runs)})
    if found.failed and call.trigger == "scheduled":
        failed = [r.table for r in found.runs if r.failed]
        raise ThresholdFailedError(f"threshold runs failed on {', '.join(map(str, failed))}")
    return {"result": found.to_dict()}


def runs(call: Invocation, seconds_left: Callable[[], float]) -> dict[str, Any]:
    """A page of the run history, newest first (``options.limit``, ``options.before``)."""
    page = maintenance.runs(require_lake(call), **call.options)
    return {"result": [r.to_dict() for r in page.items], "next_before": page.next_before}


def audit(call: Invocation, seconds_left: Callable[[], float]) -> dict[str, Any]:
    """A page of the audit log, newest first."""
    page = maintenance.audit_log(require_lake(call), **call.options)
    return {"result": [e.to_dict() for e in page.items], "next_before": page.next_before}


def health(call: Invocation, seconds_left: Callable[[], float]) -> dict[str, Any]:
    """What ``slatelake health --json`` prints: catalog reads only."""
    return {"result": maintenance.health(require_lake(call)).to_dict()}


def policy(call: Invocation, seconds_left: Callable[[], float]) -> dict[str, Any]:
    """The stored policy rows and every table's resolved policy."""
    return {"result": maintenance.policies(require_lake(call)).to_dict()}
