"""The maintenance Lambda: parse the event, call the maintenance API, answer JSON.

Two functions of the stack run this handler. The pass function is a
committer only: it fences nothing. The fold function (action ``fold``, its
own schedule, reserved concurrency 1) is the lake's holder for one
invocation: it folds, images, truncates and lets SlateDB's compactor execute
the store merges passes submitted, unless a resident ``slatelake hold``
holds the lake. A manual invoke answers ``{"ok": true, "action", "result":
<the CLI's --json>}`` or ``{"ok": false, "error": {"type", "message"}}``; a
scheduled tick whose work fails or is refused raises once its metrics are
out, so Lambda's Errors, retry and failure queue see it, and so does a
manual one with ``"raise_on_failure": true``. A scheduled pass never
expires or deletes on a lake whose policy no person enabled. Store calls end
``ANSWER_RESERVE_S`` before Lambda's timeout would.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import time
import warnings
from collections.abc import Callable
from typing import Any

import actions
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.utilities.typing import LambdaContext
from invocation import Invocation, LakeNotAllowedError, is_scheduled, parse_event, stack_lake
from telemetry import (
    emit_backlog,
    emit_backup,
    emit_crash,
    emit_fold,
    emit_fold_crash,
    emit_pass,
    emit_refusal,
    emit_skip,
)
from warm import WarmSession

import slatelake
from slatelake import maintenance

logger = Logger()  # service: POWERTOOLS_SERVICE_NAME
metrics = Metrics()  # namespace: POWERTOOLS_METRICS_NAMESPACE
# A read (status, runs, census...) or a refusal publishes no metric; Powertools
# would say so in a warning on every such invocation: that is not news.
QUIET = "No application metrics to publish"
copy_config_to_registered_loggers(source_logger=logger, include={"slatelake"})
# Kept back from the deadline for the status record and the answer (durations).
RESERVE_S = maintenance.parse_duration(
    "SLATELAKE_DEADLINE_RESERVE_S", os.environ.get("SLATELAKE_DEADLINE_RESERVE_S") or "30s"
)
MANUAL_WAIT_S = maintenance.parse_duration(
    "SLATELAKE_MANUAL_WAIT_S", os.environ.get("SLATELAKE_MANUAL_WAIT_S") or "120s", allow_zero=True
)
ANSWER_RESERVE_S = 3.0  # every store call ends this long before Lambda's timeout


# The fold function's image cadence (slatelake hold's --image-every-slots/--image-max-age).
def _env_slots(name: str, default: int) -> int:
    text = (os.environ.get(name) or str(default)).strip()
    if not (text.isascii() and text.isdigit() and len(text) <= 7):
        raise slatelake.MisconfigurationError(
            f"{name}={maintenance.show_input(text)}: expected a whole number of slots, "
            "0 (off) to 9999999"
        )
    return int(text)


IMAGE_EVERY_SLOTS = _env_slots("SLATELAKE_IMAGE_EVERY_SLOTS", 50)  # template: ImageEverySlots
IMAGE_MAX_AGE_S = maintenance.parse_duration(
    "SLATELAKE_IMAGE_MAX_AGE", os.environ.get("SLATELAKE_IMAGE_MAX_AGE") or "600s"
)
warm = WarmSession()  # the pass session, kept across a warm container's invocations
release_warm = warm.release


class PassFailedError(slatelake.SlatelakeError):
    """A scheduled pass failed a step or lost its lease (its report says which)."""


def handler(event: Any, context: LambdaContext) -> dict[str, Any]:
    """Lambda's entry point: ``_handle`` with Powertools' empty-metrics warning silenced."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=QUIET, category=UserWarning)
        return _handle(event, context)


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics(capture_cold_start_metric=True)
def _handle(event: Any, context: LambdaContext) -> dict[str, Any]:
    logger.set_correlation_id(context.aws_request_id)
    ends_at, call = time.monotonic() + context.get_remaining_time_in_millis() / 1000, None
    try:
        call = parse_event(event)
        logger.append_keys(lake=call.lake, action=call.action, trigger=call.trigger)
        logger.info("invocation accepted")
        left = functools.partial(_seconds_left, context)
        with maintenance.store_deadline(ends_at - ANSWER_RESERVE_S):
            return {"ok": True, "action": call.action, **ACTIONS[call.action](call, left)}
    except Exception as exc:  # DuckDB's or the runtime's too: an answer, or a loud tick
        if isinstance(exc, LakeNotAllowedError):
            emit_refusal(metrics, stack_lake(os.environ))
        elif is_scheduled(event) and not metrics.metric_set:  # refused before it started
            lake = call.lake if call else stack_lake(os.environ)
            folding = isinstance(event, dict) and event.get("action") == "fold"
            (emit_fold_crash if folding else emit_crash)(metrics, lake)
        unexpected = not isinstance(exc, slatelake.SlatelakeError)  # a traceback only then
        logger.warning("invocation failed", exc_info=unexpected, extra={"error": repr(exc)})
        if is_scheduled(event) or (call is not None and call.raise_on_failure):
            raise
        return {"ok": False, "error": {"type": type(exc).__name__, "message": str(exc)}}


def _seconds_left(context: LambdaContext) -> float:
    """Time left to work: the pass stops between tables when it is used up."""
    return context.get_remaining_time_in_millis() / 1000 - RESERVE_S


def maintain(call: Invocation, seconds_left: Callable[[], float]) -> dict[str, Any]:
    """One pass on the warm session; a scheduled tick skips while a lease is held."""
    options = maintenance.bind(call.options)  # a refused option never reaches the lake
    scheduled, wait_s, lake = call.trigger == "scheduled", 0.0, None
    if scheduled:  # the template's options never switch a lake's policy on
        options = dataclasses.replace(options, deletes_need_policy=True)
    try:
        lake = actions.require_lake(call)
        lease = maintenance.pass_lease(lake) if scheduled else None
        if lease is not None and lease.expires_at > time.time():  # two reads, no attach
            raise slatelake.AlreadyRunningError(f"lease generation {lease.generation} is held")
        if not scheduled:
            wait_s = MANUAL_WAIT_S if call.wait_s is None else call.wait_s
            wait_s = max(0.0, min(wait_s, seconds_left()))
        report = maintenance.run(
            warm.get(lake, call.data_path),
            options,
            trigger=call.trigger,
            wait_s=wait_s,
            deadline=seconds_left,
            on_progress=lambda message, fields: logger.info(message, extra=fields),
            operations=call.operations,
            table=call.table,
            by=f"lambda:{logger.get_correlation_id()}",
        )
    except slatelake.AlreadyRunningError as exc:
        emit_skip(metrics, call.lake)
        if not scheduled:
            raise
        logger.info("scheduled pass skipped: another pass holds the lease", extra={"why": str(exc)})
        why = f"a maintenance pass is already running ({exc}); this tick does nothing"
        return {"skipped": why, "result": None}
    except Exception as exc:
        warm.release()  # a session in an unknown state is never reused
        if not _refused(exc, call, lake_found=lake is not None):
            emit_crash(metrics, call.lake)  # the alarm sees a pass that died
        raise
    emit_pass(metrics, call.lake, report)
    _publish_backlog(call.lake)
    logger.info(
        "pass finished", extra={"work_pending": report.work_pending, "seconds": report.seconds}
    )
    if (scheduled or call.raise_on_failure) and report.failed:
        failed = [f"{s.step}: {s.detail}" for s in report.steps if s.status == maintenance.FAILED]
        lost = [f"lease lost: {report.lease_lost}"] if report.lease_lost else []
        raise PassFailedError("the pass failed: " + "; ".join(failed + lost))
    return {"result": report.to_dict()}


def _refused(exc: Exception, call: Invocation, *, lake_found: bool) -> bool:
    """A manual pass refused before it began is the caller's answer, not the
    alarm's (no PassFailed): a scope or option the caller got wrong, or a
    table the lake lacks (the lake itself was found). A missing lake stays a
    failure. A scheduled tick is counted by the handler whatever it was."""
    if isinstance(exc, slatelake.MisconfigurationError):
        return True
    return isinstance(exc, slatelake.NotFoundError) and lake_found and call.table is not None


def _publish_backlog(lake: str) -> None:
    """The backlog's numbers after a pass; a failed read is logged, never
    turned into a failed pass (the pass's own outcome stands)."""
    try:
        emit_backlog(metrics, lake, maintenance.backlog_of(lake))
    except slatelake.SlatelakeError as exc:
        logger.warning("backlog not measured", extra={"error": repr(exc)})


def fold(call: Invocation, seconds_left: Callable[[], float]) -> dict[str, Any]:
    """One holder's turn (``maintenance.fold_turn``); skipped while a live
    holder holds the lake."""
    request = maintenance.FoldRequest(
        image=call.options.get("image"),
        compact=call.options.get("compact", True),
        every_slots=IMAGE_EVERY_SLOTS,
        max_age_s=IMAGE_MAX_AGE_S,
    )
    try:
        turn = maintenance.fold_turn(
            actions.require_lake(call),
            request,
            deadline=seconds_left,
            on_progress=lambda message, fields: logger.info(message, extra=fields),
        )
    except Exception:
        emit_fold_crash(metrics, call.lake)
        raise
    emit_fold(metrics, call.lake, turn)
    if turn.status == "skipped":
        logger.info("fold skipped: a live holder holds the lake", extra={"why": turn.reason})
        return {"skipped": turn.reason, "result": turn.to_dict()}
    return {"result": turn.to_dict()}


def backup(call: Invocation, seconds_left: Callable[[], float]) -> dict[str, Any]:
    """Before a backup: a pass when options are given, then fold, image and
    the manifest of what a copy takes. Waits for a running pass like a
    manual pass does."""
    options = maintenance.bind(call.options) if call.options else None
    wait_s = MANUAL_WAIT_S if call.wait_s is None else call.wait_s
    try:
        report = maintenance.backup(
            warm.get(actions.require_lake(call), call.data_path),
            options=options,
            wait_s=max(0.0, min(wait_s, seconds_left())),
            deadline=seconds_left,
            on_progress=lambda message, fields: logger.info(message, extra=fields),
            by=f"lambda:{logger.get_correlation_id()}",
        )
    except Exception:
        warm.release()
        emit_backup(metrics, call.lake, failed=True)
        raise
    emit_backup(metrics, call.lake, failed=report.failed)
    if report.pass_report is not None:
        emit_pass(metrics, call.lake, report.pass_report)
    if report.fold is not None and report.fold.backlog is not None:
        emit_backlog(metrics, call.lake, report.fold.backlog)
    if report.failed and call.raise_on_failure:
        raise BackupFailedError(f"the backup failed: {report.reason}")
    return {"result": report.to_dict()}


class BackupFailedError(slatelake.SlatelakeError):
    """A backup whose pass or fold failed, raised when the event asks."""


ACTIONS = {
    "maintenance": maintain,
    "fold": fold,
    "backup": backup,
    "status": actions.status,
    "census": actions.census,
    "compact_store": actions.compact_store,
    "threshold": functools.partial(actions.threshold, warm=warm),
    **{name: getattr(actions, name) for name in ("runs", "audit", "health", "policy")},
}
