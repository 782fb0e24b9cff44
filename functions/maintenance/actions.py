"""The invocations other than the pass, the fold and the backup: status,
census, compact_store, threshold, and the read-only runs, audit, health and
policy.

Each calls the lake handle's verb and answers, as ``result``, the object the
CLI prints with ``--json`` for the same verb. A lake that does not exist is
named, never created.
"""

from __future__ import annotations

import os
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from calls import AuditCall, CensusCall, FleetCall, MergeCall, PageCall
from invocation import Invocation, Turn, canonical_lake, registry_lakes
from telemetry import emit_fsck, emit_store_merge, emit_threshold

import slatelake

logger = Logger(child=True)
metrics = Metrics()  # Powertools shares one metric set between instances
Answer = dict[str, Any]


def require_lake(call: Invocation) -> slatelake.LakeHandle:
    """The call's lake, if a slatelake store is there (one read)."""
    lake = call.lake_handle()
    if not lake.exists():
        raise slatelake.NotFoundError(
            f"no slatelake lake at {call.lake}; the Lambda never creates one - "
            f"run `slatelake init {call.lake} --data-path ...` first"
        )
    return lake


def status(call: Invocation, turn: Turn) -> Answer:
    """The status window, newest first: one sys record, no catalog loaded."""
    return {"result": [p.to_dict() for p in require_lake(call).maintenance.status()]}


def census(call: CensusCall, turn: Turn) -> Answer:
    """What the store weighs per subspace, and the object totals."""
    asked = call.request
    found = require_lake(call).store.census(live=asked.live, objects=asked.objects)
    return {"result": found.to_dict()}


def compact_store(call: MergeCall, turn: Turn) -> Answer:
    """Submit merges through the admin API; the holder's compactor runs them.
    A wait is cut to the invocation's time left. The outcome is counted
    whether or not ``require_completed`` refuses it."""
    asked = call.request
    wait_s = None if asked.wait_s is None else max(0.0, min(asked.wait_s, turn.seconds_left()))
    try:
        report = require_lake(call).store.compact(
            subspace=asked.subspace,
            wait_s=wait_s,
            require_completed=asked.require_completed,
            should_stop=lambda: (
                "the invocation deadline is near" if turn.seconds_left() <= 0 else None
            ),
        )
    except slatelake.MergeIncompleteError as exc:
        _count(call, exc.report)
        raise
    _count(call, report)
    return {"result": report.to_dict()}


def _count(call: Invocation, report: slatelake.CompactStoreReport) -> None:
    logger.info("store merge", extra={"outcome": report.outcome, "summary": report.summary()})
    emit_store_merge(metrics, call.lake, report.outcome)


class ThresholdFailedError(slatelake.SlatelakeError):
    """A threshold run failed: a scheduled tick raises it after its metrics."""


def threshold(call: Invocation, turn: Turn) -> Answer:
    """The threshold trigger (its own schedule, between cadence passes): each
    table with enough small files gets a run of flush, merge and rewrite, on
    the pass's warm session. While the switch is off a scheduled tick skips
    (nothing read) and a manual one is refused before the lake is touched."""
    switch = slatelake.maintenance_switch()
    if call.scheduled and not switch.enabled:
        why = switch.reason
        logger.info("threshold check skipped: maintenance is switched off", extra={"why": why})
        return {"skipped": why, "result": None}
    switch.require("a manual threshold run")
    found = require_lake(call).maintenance.threshold(
        session=turn.session(),
        deadline=turn.seconds_left,
        on_progress=lambda message, fields: logger.info(message, extra=fields),
        by=turn.by,
    )
    emit_threshold(metrics, call.lake, found)
    logger.info("threshold check", extra={"due": len(found.due), "ran": len(found.runs)})
    if found.failed and call.scheduled:
        failed = [r.table for r in found.runs if r.failed]
        raise ThresholdFailedError(f"threshold runs failed on {', '.join(map(str, failed))}")
    return {"result": found.to_dict()}


def runs(call: PageCall, turn: Turn) -> Answer:
    """A page of the run history, newest first; ``next_before`` continues it."""
    asked = call.request
    page = require_lake(call).maintenance.runs(limit=asked.limit, before=asked.before)
    return {"result": {"runs": [r.to_dict() for r in page.items], "next_before": page.next_before}}


def audit(call: AuditCall, turn: Turn) -> Answer:
    """A page of the audit log, newest first; ``next_before`` continues it."""
    asked = call.request
    page = require_lake(call).maintenance.audit(limit=asked.limit, before=asked.before)
    entries = [e.to_dict() for e in page.items]
    return {"result": {"entries": entries, "next_before": page.next_before}}


def health(call: Invocation, turn: Turn) -> Answer:
    """What ``slatelake health --json`` prints: catalog reads only."""
    return {"result": require_lake(call).maintenance.health().to_dict()}


def policy(call: Invocation, turn: Turn) -> Answer:
    """The stored policy rows and every table's resolved policy."""
    return {"result": require_lake(call).policy.show().to_dict()}


def fleet_lakes(call: FleetCall, turn: Turn) -> Answer:
    """The lakes a fleet execution maps over: those its schedule lists and
    those of the fleet registry (``SLATELAKE_FLEET_REGISTRY``), each once in
    its canonical spelling. A listed lake that is no lake URL stays as given:
    its own pass refuses it, alone. Every lake's pass checks the allow-list."""
    lakes: dict[str, None] = {}
    for url in call.lakes:
        try:
            lakes[canonical_lake(url)] = None
        except slatelake.MisconfigurationError:
            lakes[url] = None
    for url in sorted(registry_lakes(os.environ)):
        lakes[url] = None
    return {"result": {"lakes": list(lakes)}}


class FsckFindingsError(slatelake.SlatelakeError):
    """fsck found problems, raised when the event asks (``raise_on_failure``)."""


def fsck(call: Invocation, turn: Turn) -> Answer:
    """fsck on the warm session (maintenance/fsck.py): ``FsckFindings`` counts
    what it found; the summary stays on the lake for orphan deletion."""
    report = require_lake(call).maintenance.fsck(session=turn.session())
    emit_fsck(metrics, call.lake, sum(report.counts.values()))
    if not report.ok and call.raise_on_failure:
        found = ", ".join(f"{n} {kind}" for kind, n in sorted(report.counts.items()))
        raise FsckFindingsError(f"fsck found {found}")
    return {"result": report.to_dict()}
