"""The maintenance Lambda: parse the event, call what the CLI calls, answer JSON.

It attaches the lake as a commit-log committer and opens no SlateDB writer,
ever: the pass commits through the log, store merges are submitted through
the admin API, and the long-lived holder (``slatelake hold``) folds and
compacts. Responses are ``{"ok": true, "action": ..., "result": ...}`` (the
result is what the CLI prints with ``--json``) or ``{"ok": false, "error":
{"type": ..., "message": ...}}``.

Only the stack's lake (or an allow-listed one) is acted on: any other is
refused in ``parse_event``, before a store is opened, and counted
(``LakeRefused``). The invocation's remaining time bounds every store call
(less ``ANSWER_RESERVE_S``), so a store that hangs or refuses ends in an
answer with the error, and a maintenance invocation that fails counts a
``PassFailed``, before Lambda's own timeout could cut it off silently.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import time
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from invocation import Invocation, LakeNotAllowedError, parse_event, stack_lake
from telemetry import (
    NAMESPACE,
    SERVICE,
    STORE_MERGE_FAILED,
    STORE_MERGE_PENDING,
    emit_crash,
    emit_pass,
    emit_refusal,
    emit_skip,
)

import slatelake
from slatelake.catalog.lake import Lake
from slatelake.errors import NotFoundError, SlatelakeError, StaleViewError
from slatelake.maintenance.flight import AlreadyRunningError, PassLease
from slatelake.maintenance.options import bind
from slatelake.maintenance.runner import run_pass
from slatelake.store.census import CensusRequest, store_census
from slatelake.store.db import deadline, store_exists
from slatelake.store.location import LakeLocation
from slatelake.store.merge import CompactStoreRequest, compact_store

logger = Logger(service=SERVICE)
metrics = Metrics(namespace=NAMESPACE, service=SERVICE)
copy_config_to_registered_loggers(source_logger=logger, include={"slatelake"})

# Seconds kept back from the invocation deadline for the status record and
# the response; the pass stops between tables when the rest is used up.
RESERVE_S = float(os.environ.get("SLATELAKE_DEADLINE_RESERVE_S", "30"))
# How long a manual invoke waits for a running pass (bounded by the deadline).
MANUAL_WAIT_S = float(os.environ.get("SLATELAKE_MANUAL_WAIT_S", "120"))
# Seconds kept back from the invocation deadline for the answer itself: every
# store call is cut off this long before Lambda would end the invocation.
ANSWER_RESERVE_S = 3.0


# The pass session a warm container keeps for its next invocation (_warm_session).
_WARM: dict[str, Any] = {}


class MergeIncompleteError(SlatelakeError):
    """``require_completed`` was asked and a merge is still pending or failed."""


@logger.inject_lambda_context(clear_state=True)
def handler(event: Any, context: LambdaContext) -> dict[str, Any]:
    logger.set_correlation_id(context.aws_request_id)
    ends_at = time.monotonic() + context.get_remaining_time_in_millis() / 1000
    try:
        call = parse_event(event)
        logger.append_keys(lake=call.lake, action=call.action, trigger=call.trigger)
        logger.info("invocation accepted")
        with deadline(ends_at - ANSWER_RESERVE_S):
            result = _ACTIONS[call.action](call, context)
    except LakeNotAllowedError as exc:
        emit_refusal(metrics, stack_lake(os.environ))
        return _error(exc)
    except SlatelakeError as exc:
        return _error(exc)
    except Exception as exc:  # DuckDB or the runtime: still an answer, never a traceback
        logger.exception("invocation failed")
        return _error(exc)
    finally:
        if metrics.metric_set:  # a refused event publishes nothing
            metrics.flush_metrics()
    return {"ok": True, **result}


def _error(exc: BaseException) -> dict[str, Any]:
    logger.warning("invocation refused", extra={"error_type": type(exc).__name__})
    return {"ok": False, "error": {"type": type(exc).__name__, "message": str(exc)}}


def _deadline(context: LambdaContext) -> Any:
    return lambda: context.get_remaining_time_in_millis() / 1000 - RESERVE_S


def _require_lake(call: Invocation) -> None:
    if not store_exists(LakeLocation.parse(call.lake)):
        raise NotFoundError(
            f"no slatelake lake at {call.lake}; the Lambda never creates one - "
            f"run `slatelake init {call.lake} --data-path ...` first"
        )


def _maintenance(call: Invocation, context: LambdaContext) -> dict[str, Any]:
    # Bind first, against the pinned extension: a bad option never reaches the lake.
    bind(call.options)
    try:
        return _pass(call, context)
    except AlreadyRunningError:
        raise
    except Exception:
        # The alarm must see a pass that died: the lake missing, the store
        # refusing or silent past the deadline, or the pass itself raising.
        emit_crash(metrics, call.lake)
        raise


def _pass(call: Invocation, context: LambdaContext) -> dict[str, Any]:
    _require_lake(call)
    if call.trigger == "scheduled":
        wait_s = 0.0
        holder = PassLease(LakeLocation.parse(call.lake)).current()
        if holder is not None and holder.expires_at > time.time():
            # Two small reads instead of an attach; run_pass still decides races.
            return _skipped(call, f"lease generation {holder.generation} is held")
    else:
        left = context.get_remaining_time_in_millis() / 1000 - RESERVE_S
        wait_s = max(0.0, min(call.wait_s if call.wait_s is not None else MANUAL_WAIT_S, left))
    session = _warm_session(call)
    logger.info("first step starting", extra={"since_start_s": _since_start()})
    try:
        report = run_pass(
            session,
            session.options,
            trigger=call.trigger,
            wait_s=wait_s,
            deadline=_deadline(context),
            on_progress=lambda message, fields: logger.info(message, extra=fields),
        )
    except AlreadyRunningError as exc:
        if call.trigger != "scheduled":
            emit_skip(metrics, call.lake)
            raise
        return _skipped(call, str(exc))
    except BaseException:
        release_warm()  # a session in an unknown state is never reused
        raise
    emit_pass(metrics, call.lake, report)
    logger.info(
        "pass finished",
        extra={"work_pending": report.work_pending, "seconds": report.seconds},
    )
    return {"action": call.action, "result": report.to_dict()}


def _warm_session(call: Invocation) -> Any:
    """The pass's session, kept across invocations while the container is warm.

    A reused container (same lake, data path and options) keeps its catalog
    in DuckDB and only replays the slots committed since (one LIST when the
    head did not move); a container that idled past its reader lease reopens
    from the newest catalog image. Anything else gets a fresh session, and the
    previous one is closed."""
    key = json.dumps([call.lake, call.data_path, sorted(call.options.items())], default=str)
    session = _WARM.get("session") if _WARM.get("key") == key else None
    if session is not None:
        try:
            if _rewound(session):
                raise StaleViewError("the lake's log no longer holds this session's newest slot")
            session.refresh()
            logger.info("warm session reused", extra={"head": session.state.head.snapshot_id})
            return session
        except Exception as exc:
            logger.warning("warm session dropped", extra={"error": f"{type(exc).__name__}: {exc}"})
    release_warm()
    session = slatelake.connect(call.lake, data_path=call.data_path, options=call.options)
    if session.scheduler is not None:  # an invocation runs one pass; no timer outlives it
        session.scheduler.stop()
        session.scheduler = None
    _WARM.update(key=key, session=session)
    return session


def _rewound(session: Any) -> bool:
    """The lake went back behind the kept view (restored from a backup): the
    holder never deletes the newest slot, so this session's newest slot is
    either still listed or followed by newer ones. One LIST."""
    seq = session.state.last_seq
    return seq > 0 and not any(True for _ in session.lake.log.list_after(seq - 1))


def release_warm() -> None:
    """Close the kept session (at container shutdown, or before another lake's)."""
    session = _WARM.pop("session", None)
    _WARM.pop("key", None)
    if session is not None:
        with contextlib.suppress(Exception):
            session.close()


atexit.register(release_warm)


def _skipped(call: Invocation, why: str) -> dict[str, Any]:
    logger.info("scheduled pass skipped: another pass holds the lease", extra={"why": why})
    emit_skip(metrics, call.lake)
    return {
        "action": call.action,
        "skipped": f"a maintenance pass is already running ({why}); this tick does nothing",
        "result": None,
    }


def _status(call: Invocation, context: LambdaContext) -> dict[str, Any]:
    _require_lake(call)
    with slatelake.connect(call.lake, read_only=True) as session:
        window = session.maintenance_status()
    return {"action": call.action, "result": [p.to_dict() for p in window]}


def _census(call: Invocation, context: LambdaContext) -> dict[str, Any]:
    _require_lake(call)
    census = store_census(
        call.lake, CensusRequest(count_live_entries=bool(call.options.get("live", False)))
    )
    return {
        "action": call.action,
        "result": census.to_json(),
        "objects": census.objects,
        "objects_error": census.objects_error,
    }


def _compact_store(call: Invocation, context: LambdaContext) -> dict[str, Any]:
    """Submit merges through the admin API; the holder's compactor runs them."""
    _require_lake(call)
    timeout = call.options.get("timeout")
    if timeout is not None:
        timeout = max(0.0, min(timeout, _deadline(context)()))
    with Lake.open(call.lake) as lake:
        report = compact_store(
            lake,
            CompactStoreRequest(subspace=call.options.get("subspace"), wait_s=timeout),
            should_stop=lambda: (
                "the invocation deadline is near" if _deadline(context)() <= 0 else None
            ),
        )
    logger.info("store merge", extra={"outcome": report.outcome, "summary": report.summary()})
    metrics.add_dimension(name="Lake", value=call.lake)
    metrics.add_metric(
        name=STORE_MERGE_PENDING, unit=MetricUnit.Count, value=int(report.outcome == "pending")
    )
    metrics.add_metric(
        name=STORE_MERGE_FAILED, unit=MetricUnit.Count, value=int(report.outcome == "failed")
    )
    if call.options.get("require_completed") and report.outcome not in ("completed", "skipped"):
        raise MergeIncompleteError(
            f"store merge {report.outcome} within {timeout:g}s: {report.summary()}"
        )
    return {"action": call.action, "result": report.to_json()}


def _since_start() -> float:
    """Seconds since this process started (the cold-start figure on a first call)."""
    with open("/proc/self/stat") as f:
        start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime") as f:
        uptime = float(f.read().split()[0])
    return round(uptime - start_ticks / os.sysconf("SC_CLK_TCK"), 3)


_ACTIONS = {
    "maintenance": _maintenance,
    "status": _status,
    "census": _census,
    "compact_store": _compact_store,
}
