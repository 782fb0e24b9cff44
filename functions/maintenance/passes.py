"""The actions that do the work and count it: the pass, the fold and the backup.

A pass runs on the container's warm session; a scheduled tick skips while
``SLATELAKE_MAINTENANCE_ENABLED`` is false (nothing read), while another pass
holds the lease (two reads, nothing attached) and until the lake's policy
``cron`` is due (the policy and status records at the log's head), and never
expires or deletes on a lake whose policy no person enabled. While the
switch is off a manual pass, or a backup's pass, is refused before the lake
is touched; the fold runs either way (it keeps the lake readable). The fold function is
the lake's holder for one invocation, skipped while a live holder holds it.
Each publishes its metrics before it answers or raises: a scheduled tick
whose work fails raises (``PassFailedError``...), so Lambda's Errors, retry
and failure queue see it, and so does a manual one with
``raise_on_failure``.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from typing import Any, TypeVar

from actions import Answer, require_lake
from aws_lambda_powertools import Logger, Metrics
from calls import BackupCall, FoldCall, PassCall
from handoff import Handoff
from invocation import Invocation, Turn
from telemetry import (
    emit_backlog,
    emit_backup,
    emit_crash,
    emit_fold,
    emit_fold_crash,
    emit_pass,
    emit_skip,
)

import slatelake
from slatelake import PassReport, PassRequest, StepStatus, show_input
from slatelake.durations import parse_duration

R = TypeVar("R")
logger = Logger(child=True)
metrics = Metrics()  # Powertools shares one metric set between instances


def _env_duration(name: str, default: str, allow_zero: bool = False) -> float:
    return parse_duration(name, os.environ.get(name) or default, allow_zero=allow_zero)


def _env_slots(name: str, default: int) -> int:
    """The fold's image cadence (``slatelake hold --image-every-slots``)."""
    text = (os.environ.get(name) or str(default)).strip()
    if not (text.isascii() and text.isdigit() and len(text) <= 7):
        raise slatelake.MisconfigurationError(
            f"{name}={show_input(text)}: expected a whole number of slots, 0 (off) to 9999999"
        )
    return int(text)


# How long a manual pass or backup waits for a running pass, unless the event says.
MANUAL_WAIT_S = _env_duration("SLATELAKE_MANUAL_WAIT_S", "120s", allow_zero=True)
IMAGE_EVERY_SLOTS = _env_slots("SLATELAKE_IMAGE_EVERY_SLOTS", 50)  # template: ImageEverySlots
IMAGE_MAX_AGE_S = _env_duration("SLATELAKE_IMAGE_MAX_AGE", "600s")


Opened = tuple[slatelake.LakeHandle, PassRequest, Any]  # the lake, the request, its options


class PassFailedError(slatelake.SlatelakeError):
    """A scheduled pass failed a step or lost its lease (its report says which)."""


class BackupFailedError(slatelake.SlatelakeError):
    """A backup whose pass or fold failed, raised when the event asks."""


def _progress(message: str, fields: dict[str, Any]) -> None:
    logger.info(message, extra=fields)


def maintain(call: PassCall, turn: Turn) -> Answer:
    """One pass on the warm session. A scheduled tick skips while the switch
    is off, while a lease is held, and until the lake's policy cron is due;
    a manual one is refused while the switch is off, before the lake is touched."""
    opened = _opened(call, turn)
    if isinstance(opened, dict):
        return opened
    lake, request, options = opened
    if call.scheduled and (handoff := Handoff.configured()) is not None:
        tables = len(turn.session().live_tables())
        if tables > handoff.above_tables:
            execution = handoff.start(call.lake, call.data_path, request)
            logger.info(
                "scheduled pass handed to the pass state machine",
                extra={"tables": tables, "execution": execution},
            )
            why = (
                f"{tables} tables, above {handoff.above_tables}: the pass runs fanned out as "
                f"execution {execution}"
            )
            return {"skipped": why, "result": None, "execution": execution}
    report = counted(
        call,
        lambda: lake.maintenance.run(
            dataclasses.replace(request, options=options),
            session=turn.session(),
            deadline=turn.seconds_left,
            on_progress=_progress,
        ),
    )
    return report if isinstance(report, dict) else _finished(call, lake, report)


def counted(call: PassCall, work: Callable[[], R]) -> R | Answer:
    """``work()``, counted as a pass is: a pass found running makes a tick's
    skip (a manual call raises); any other error, unless the caller's own
    refusal, counts as a pass that died (the alarm sees it) and is raised."""
    try:
        return work()
    except slatelake.AlreadyRunningError as exc:
        return _already_running(call, exc)
    except Exception as exc:
        if not _refused(exc, call, lake_found=True):
            emit_crash(metrics, call.lake)
        raise


def _opened(call: PassCall, turn: Turn) -> Opened | Answer:
    """The lake, the request a pass (or a fanned-out run's plan) runs and
    its options bound, or
    the answer of a tick that skips: the switch is off, another pass holds
    the lease, or the lake's policy cron is not due. The request's options
    are checked here (a refused one never reaches the lake); a tick's
    deletes need the lake's policy enabled too (double opt-in)."""
    switch = slatelake.maintenance_switch()
    if call.scheduled and not switch.enabled:
        return _skip(call, str(switch.reason), "maintenance is switched off")
    if not call.request.dry_run:
        switch.require("a manual maintenance pass")
    request = dataclasses.replace(call.request, deletes_need_policy=call.scheduled)
    options = request.bound()
    lake = None
    try:
        lake = require_lake(call)
        lease = lake.maintenance.lease() if call.scheduled else None
        if lease is not None and lease.expires_at > time.time():  # two reads, no attach
            raise slatelake.AlreadyRunningError(f"lease generation {lease.generation} is held")
        if call.scheduled:  # the policy and status records at the head; no catalog
            cadence = lake.maintenance.due()
            if not cadence.due:
                return _skip(call, cadence.reason, "the lake's policy cron is not due")
        wait_s = 0.0
        if not call.scheduled:
            wait_s = MANUAL_WAIT_S if call.wait_s is None else call.wait_s
            wait_s = max(0.0, min(wait_s, turn.seconds_left()))
        return lake, dataclasses.replace(request, wait_s=wait_s, by=turn.by), options
    except slatelake.AlreadyRunningError as exc:
        return _already_running(call, exc)
    except Exception as exc:
        if not _refused(exc, call, lake_found=lake is not None):
            emit_crash(metrics, call.lake)
        raise


def _already_running(call: PassCall, exc: slatelake.AlreadyRunningError) -> Answer:
    """A tick that finds a pass running does nothing; a manual call raises."""
    emit_skip(metrics, call.lake)
    if not call.scheduled:
        raise exc
    logger.info("scheduled pass skipped: another pass holds the lease", extra={"why": str(exc)})
    why = f"a maintenance pass is already running ({exc}); this tick does nothing"
    return {"skipped": why, "result": None}


def _finished(call: Invocation, lake: slatelake.LakeHandle, report: PassReport) -> Answer:
    """A finished pass's metrics and answer; a tick (or a call asking it)
    whose pass failed raises, after the metrics are out."""
    emit_pass(metrics, call.lake, report)
    _publish_backlog(lake)
    logger.info(
        "pass finished", extra={"work_pending": report.work_pending, "seconds": report.seconds}
    )
    if (call.scheduled or call.raise_on_failure) and report.failed:
        failed = [f"{s.step}: {s.detail}" for s in report.steps if s.status == StepStatus.FAILED]
        lost = [f"lease lost: {report.lease_lost}"] if report.lease_lost else []
        died = [report.failed_reason] if report.failed_reason else []
        raise PassFailedError("the pass failed: " + "; ".join(failed + lost + died))
    return {"result": report.to_dict()}


def _skip(call: PassCall, why: str, what: str) -> Answer:
    """A scheduled tick that runs nothing on purpose: counted as a skip
    (``PassSkipped``; its ``PassRuns`` of 0 keeps the silence alarm quiet,
    the schedule being alive), never an alarm."""
    emit_skip(metrics, call.lake)
    logger.info(f"scheduled pass skipped: {what}", extra={"why": why})
    return {"skipped": why, "result": None}


def _refused(exc: Exception, call: PassCall, *, lake_found: bool) -> bool:
    """A manual pass refused before it began is the caller's answer, not the
    alarm's (no PassFailed): a scope or option the caller got wrong, or a
    table the lake lacks (the lake itself was found). A missing lake stays a
    failure. A scheduled tick is counted by the handler whatever it was."""
    if isinstance(exc, slatelake.MisconfigurationError):
        return True
    scoped = call.request.table is not None
    return isinstance(exc, slatelake.NotFoundError) and lake_found and scoped


def _publish_backlog(lake: slatelake.LakeHandle) -> None:
    """The backlog's numbers after a pass; a failed read is logged, never
    turned into a failed pass (the pass's own outcome stands)."""
    try:
        emit_backlog(metrics, lake.url, lake.maintenance.backlog())
    except slatelake.SlatelakeError as exc:
        logger.warning("backlog not measured", extra={"error": repr(exc)})


def fold(call: FoldCall, turn: Turn) -> Answer:
    """One holder's turn at the function's image cadence; skipped while a
    live holder holds the lake."""
    request = dataclasses.replace(
        call.request, every_slots=IMAGE_EVERY_SLOTS, max_age_s=IMAGE_MAX_AGE_S
    )
    try:
        turn_ = require_lake(call).maintenance.fold(
            request, deadline=turn.seconds_left, on_progress=_progress
        )
    except Exception:
        emit_fold_crash(metrics, call.lake)
        raise
    emit_fold(metrics, call.lake, turn_)
    if turn_.status == "skipped":
        logger.info("fold skipped: a live holder holds the lake", extra={"why": turn_.reason})
        return {"skipped": turn_.reason, "result": turn_.to_dict()}
    return {"result": turn_.to_dict()}


def backup(call: BackupCall, turn: Turn) -> Answer:
    """Before a backup: a pass when options are given, then fold, image and
    the manifest of what a copy takes. Waits for a running pass like a
    manual pass does."""
    if call.options is not None:  # a pass first: refused while the switch is off
        slatelake.maintenance_switch().require("a backup's maintenance pass (its options)")
    options = None if call.options is None else slatelake.PassRequest(options=call.options).bound()
    wait_s = MANUAL_WAIT_S if call.wait_s is None else call.wait_s
    try:
        lake = require_lake(call)
        report = lake.maintenance.backup(
            session=turn.session(),
            options=options,
            wait_s=max(0.0, min(wait_s, turn.seconds_left())),
            deadline=turn.seconds_left,
            on_progress=_progress,
            by=turn.by,
        )
    except Exception:
        emit_backup(metrics, call.lake, failed=True)
        raise
    emit_backup(metrics, call.lake, failed=report.failed)
    if report.pass_report is not None:
        emit_pass(metrics, call.lake, report.pass_report)
    if report.fold is not None and report.fold.backlog is not None:
        emit_backlog(metrics, call.lake, report.fold.backlog)
    if report.failed and call.raise_on_failure:
        raise BackupFailedError(f"the backup failed: {report.reason}")
    answer: dict[str, Any] = {"result": report.to_dict()}
    ask = call.restore_point
    if ask is not None and not report.failed:  # the lake as backed up, kept whole
        change = lake.restore_points.create(
            ask.name, ttl=ask.ttl_s, by=turn.by, wait_s=max(0.0, min(wait_s, turn.seconds_left()))
        )
        answer["restore_point"] = change.to_dict()
    return answer
