"""The maintenance Lambda: parse the event, run its action, answer JSON.

Two functions of the stack run this handler. The pass function is a
committer only: it fences nothing. The fold function (action ``fold``, its
own schedule, reserved concurrency 1) is the lake's holder for one
invocation. ``registry.ACTIONS`` says what each action parses and runs; this
module only dispatches and turns the outcome into the answer. A manual
invoke answers ``{"ok": true, "action", "result": <what the CLI prints with
--json>}`` (plus ``"skipped"`` when a tick found the work held elsewhere) or
``{"ok": false, "error": {"type", "message"}}``; a scheduled tick whose work
fails or is refused raises once its metrics are out, so Lambda's Errors,
retry and failure queue see it, and so does a manual one with
``"raise_on_failure": true``. Store calls end ``ANSWER_RESERVE_S`` before
Lambda's timeout would; the work stops ``SLATELAKE_DEADLINE_RESERVE_S``
before it, leaving time for the status record and the answer.
"""

from __future__ import annotations

import os
import time
import warnings
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.utilities.typing import LambdaContext
from invocation import Invocation, LakeNotAllowedError, Turn, is_scheduled, stack_lake
from passes import IMAGE_EVERY_SLOTS, BackupFailedError, PassFailedError
from registry import ACTIONS, parse_event
from telemetry import emit_crash, emit_fold_crash, emit_refusal
from warm import WarmSession

import slatelake
from slatelake.durations import parse_duration

__all__ = ["IMAGE_EVERY_SLOTS", "BackupFailedError", "PassFailedError", "handler", "warm"]

logger = Logger()  # service: POWERTOOLS_SERVICE_NAME
metrics = Metrics()  # namespace: POWERTOOLS_METRICS_NAMESPACE
# A read (status, runs, census...) or a refusal publishes no metric; Powertools
# would say so in a warning on every such invocation: that is not news.
QUIET = "No application metrics to publish"
copy_config_to_registered_loggers(source_logger=logger, include={"slatelake"})
# Kept back from the deadline for the status record and the answer (durations).
RESERVE_S = parse_duration(
    "SLATELAKE_DEADLINE_RESERVE_S", os.environ.get("SLATELAKE_DEADLINE_RESERVE_S") or "30s"
)
ANSWER_RESERVE_S = 3.0  # every store call ends this long before Lambda's timeout
warm = WarmSession()  # the pass session, kept across a warm container's invocations
release_warm = warm.release


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
        logger.append_keys(lake=call.lake, action=call.action, trigger=str(call.trigger))
        logger.info("invocation accepted")
        with slatelake.store_deadline(ends_at - ANSWER_RESERVE_S):
            return {"ok": True, "action": call.action, **_run(call, context)}
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


def _run(call: Invocation, context: LambdaContext) -> dict[str, Any]:
    """The call's action, given its time and, if it is marked ``warm``, the
    kept session. A session handed out to an action that raised is in an
    unknown state: it is closed, never reused."""
    action = ACTIONS[call.action]
    handed: list[slatelake.Session] = []

    def session() -> slatelake.Session:
        if not action.warm:
            raise RuntimeError(f"action {call.action!r} is not marked warm in the registry")
        handed.append(warm.get(call.lake, call.data_path))
        return handed[-1]

    def seconds_left() -> float:
        """Time left to work: the pass stops between tables when it is used up."""
        return context.get_remaining_time_in_millis() / 1000 - RESERVE_S

    turn = Turn(seconds_left, session, by=f"lambda:{logger.get_correlation_id()}")
    try:
        return action.run(call, turn)
    except Exception:
        if handed:
            warm.release()
        raise
