"""What an event asks for, validated before the lake is touched.

Three shapes arrive: an EventBridge rule's own scheduled-event envelope (the
lake and options come from the function's environment), a schedule's
constant input (``{"trigger": "scheduled", "lake": ..., ...}``, the shape
template.yaml gives EventBridge Scheduler) and a manual invoke (``{"action":
..., "lake": ..., ...}``). Every mistake is an ``InvocationError`` naming the
key and the fix; nothing here opens the lake.

An event may name only the stack's own lake (``SLATELAKE_LAKE``) and data
path (``SLATELAKE_DATA_PATH``), or one the stack allow-lists
(``SLATELAKE_ALLOWED_LAKES``, ``SLATELAKE_ALLOWED_DATA_PATHS``: comma-separated
URLs). Locations compare in slatelake's canonical spelling, so no spelling
(``..``, a trailing slash, a shared prefix) reaches another place; anything
else is a ``LakeNotAllowedError`` before any store is touched.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aws_lambda_powertools.utilities.data_classes import EventBridgeEvent

from slatelake import MaintenanceConfigError, MisconfigurationError, maintenance

ACTIONS = (
    "maintenance",
    "compact_store",
    "census",
    "status",
    "threshold",
    "runs",
    "audit",
    "health",
    "policy",
    "fold",
    "backup",
)
SCHEDULED_ACTIONS = ("maintenance", "threshold", "fold")
# Actions whose "options" are the pass's MAINTENANCE_* settings.
PASS_ACTIONS = ("maintenance", "backup")
# A run's "threshold" trigger is the threshold action's own, never an event's.
EVENT_TRIGGERS = ("manual", "scheduled")
EVENT_KEYS = {
    "action",
    "trigger",
    "lake",
    "data_path",
    "options",
    "wait_s",
    "operations",
    "table",
    "raise_on_failure",
}
# Per action, the options it takes (the CLI's flags, by the same names).
ACTION_OPTIONS: dict[str, set[str]] = {
    "compact_store": {"subspace", "timeout", "require_completed"},
    "census": {"live"},
    "status": set(),
    "threshold": set(),
    "runs": {"limit", "before"},
    "audit": {"limit", "before"},
    "health": set(),
    "policy": set(),
    "fold": {"image", "compact"},
}
ENV_LAKE, ENV_DATA_PATH = "SLATELAKE_LAKE", "SLATELAKE_DATA_PATH"
# Run and audit ids are counters far below a signed 64-bit integer; a larger
# ``before`` is no id from a previous page.
MAX_PAGE_ID = 2**63 - 1
ENV_ALLOWED_LAKES = "SLATELAKE_ALLOWED_LAKES"
ENV_ALLOWED_DATA_PATHS = "SLATELAKE_ALLOWED_DATA_PATHS"
show_input = maintenance.show_input


class InvocationError(MisconfigurationError):
    """The event cannot be acted on; the message names what is wrong."""


class LakeNotAllowedError(InvocationError):
    """The event names a lake or data path this stack does not maintain."""


@dataclass(frozen=True)
class Invocation:
    action: str
    trigger: str
    lake: str
    data_path: str | None
    options: dict[str, Any] = field(default_factory=dict)
    wait_s: float | None = None
    # A scoped pass: the seed's operation names and "schema.table" (None: all).
    operations: tuple[str, ...] | None = None
    table: str | None = None
    # A failed pass or backup raises (a function error) instead of answering ok: false.
    raise_on_failure: bool = False


def _scheduled_envelope(event: dict[str, Any]) -> EventBridgeEvent | None:
    """EventBridge's scheduled-event envelope (a rule without input), or None."""
    if "detail-type" not in event:
        return None
    envelope = EventBridgeEvent(event)
    if envelope.detail_type == "Scheduled Event" and envelope.get("source") == "aws.events":
        return envelope
    raise InvocationError(
        f"unsupported EventBridge event {show_input(envelope.detail_type)} from "
        f"{show_input(envelope.get('source'))}; only aws.events 'Scheduled Event' starts a pass"
    )


def is_scheduled(event: Any) -> bool:
    """Whether the event is a schedule's tick, read before (and whatever) the
    rest of it says: a tick that fails must fail loudly, a manual invoke answers."""
    if not isinstance(event, dict):
        return False
    if event.get("detail-type") == "Scheduled Event" and event.get("source") == "aws.events":
        return True
    return event.get("trigger") == "scheduled"


def _env_options(env: Mapping[str, str]) -> dict[str, str]:
    prefixes = (maintenance.PREFIX, maintenance.ALIAS_PREFIX)
    return {k: v for k, v in env.items() if k.upper().startswith(prefixes) and v != ""}


def parse_event(event: Any, env: Mapping[str, str] | None = None) -> Invocation:
    env = os.environ if env is None else env
    if not isinstance(event, dict):
        raise InvocationError(
            f"the event is a {type(event).__name__}, not a JSON object; send "
            '{"action": "maintenance", "lake": "s3://bucket/prefix"}'
        )
    envelope = _scheduled_envelope(event)
    if envelope is not None:
        detail = envelope.get("detail")
        detail = {} if detail is None else detail
        if not isinstance(detail, dict):
            raise InvocationError("the scheduled event's detail is not a JSON object")
        return _build({**detail, "trigger": "scheduled"}, env)
    return _build(event, env)


def _build(doc: dict[str, Any], env: Mapping[str, str]) -> Invocation:
    unknown = sorted(set(doc) - EVENT_KEYS)
    if unknown:
        raise InvocationError(
            f"unknown event key(s) {', '.join(map(show_input, unknown))}; an event takes "
            + ", ".join(sorted(EVENT_KEYS))
        )
    trigger = doc.get("trigger", "manual")
    if trigger not in EVENT_TRIGGERS:
        raise InvocationError(
            f"trigger {show_input(trigger)} is not one of {', '.join(EVENT_TRIGGERS)}"
        )
    action = doc.get("action", "maintenance")
    if action not in ACTIONS:
        raise InvocationError(
            f"unknown action {show_input(action)}; expected one of {', '.join(ACTIONS)}"
        )
    if trigger == "scheduled" and action not in SCHEDULED_ACTIONS:
        raise InvocationError(
            "a scheduled event runs the maintenance pass, the threshold check or the fold, "
            f"not {action!r}"
        )
    if doc.get("lake") is not None and not isinstance(doc["lake"], str):
        # Not "absent": a 0, false or [] must not fall back to the stack's lake.
        raise InvocationError(f"lake must be a string, not {type(doc['lake']).__name__}")
    lake = doc.get("lake") or env.get(ENV_LAKE)
    if not lake or not isinstance(lake, str):
        raise InvocationError(
            f'no lake: give "lake" in the event or set {ENV_LAKE} in the function\'s environment'
        )
    lake = allowed_lake(lake, env)
    data_path = allowed_data_path(doc.get("data_path"), lake, env)
    raw = doc.get("options")
    if raw is None:
        raw = _env_options(env) if action == "maintenance" else {}
    if not isinstance(raw, dict):
        raise InvocationError(f"options must be a JSON object, not {type(raw).__name__}")
    options = {str(k): v for k, v in raw.items()}
    if action in PASS_ACTIONS:
        _check_maintenance_options(options)
    else:
        options = _action_options(action, options)
    operations, table = _scope(doc, action)
    raise_on_failure = doc.get("raise_on_failure", False)
    if not isinstance(raise_on_failure, bool):
        raise InvocationError(
            f"raise_on_failure={show_input(raise_on_failure)}: expected true or false"
        )
    return Invocation(
        action,
        trigger,
        lake,
        data_path,
        options,
        _wait_s(doc.get("wait_s")),
        operations,
        table,
        raise_on_failure,
    )


def _scope(doc: dict[str, Any], action: str) -> tuple[tuple[str, ...] | None, str | None]:
    """The pass's ``operations`` (a list of names or comma-separated text) and
    ``table`` (``[schema.]table``), checked as ``maintenance.run`` checks them;
    only the maintenance action takes them."""
    operations, table = doc.get("operations"), doc.get("table")
    if operations is None and table is None:
        return None, None
    if action != "maintenance":
        given = [k for k in ("operations", "table") if doc.get(k) is not None]
        raise InvocationError(
            f"{' and '.join(given)} scope a maintenance pass; action {action!r} takes neither"
        )
    if isinstance(operations, list | str) or operations is None:
        scope = maintenance.run_scope(operations, table)
    else:
        raise InvocationError(
            f"operations must be a list of names or comma-separated text, not "
            f"{type(operations).__name__}"
        )
    return scope.operations, scope.table_name


def _wait_s(value: Any) -> float | None:
    """Seconds to wait for a running pass: a finite number, zero or more (not a
    boolean, not NaN, nothing too large to be a float)."""
    if value is None:
        return None
    try:
        seconds = float(value) if isinstance(value, int | float) else math.nan
    except OverflowError:
        seconds = math.nan
    if isinstance(value, bool) or not math.isfinite(seconds) or seconds < 0:
        raise InvocationError(f"wait_s={show_input(value)}: expected seconds, zero or more")
    return seconds


def _check_maintenance_options(options: dict[str, Any]) -> None:
    """Shape only; the pass's own parser validates names and values at bind."""
    for key, value in options.items():
        # The key quoted: it is outside text.
        options[key] = maintenance.value_text(show_input(key), value)
        if key.upper().removeprefix("META_").endswith("MAINTENANCE_INTERVAL"):
            raise MaintenanceConfigError(
                f"{show_input(key)} has no meaning in the Lambda: the schedule sets the "
                "cadence; drop the option"
            )


def _subspace(value: Any) -> str:
    text = maintenance.value_text("options.subspace", value)
    label = text.lower() if text.isascii() else text  # any case, never a look-alike
    if label not in maintenance.SUBSPACES:
        raise InvocationError(
            f"options.subspace={show_input(value)}: unknown subspace; expected one of "
            + ", ".join(maintenance.SUBSPACES)
        )
    return label


def _action_options(action: str, options: dict[str, Any]) -> dict[str, Any]:
    accepted = ACTION_OPTIONS[action]
    unknown = sorted(set(options) - accepted)
    if unknown:
        raise InvocationError(
            f"unknown option(s) {', '.join(map(show_input, unknown))} for action {action!r}; "
            "it takes " + (", ".join(sorted(accepted)) or "none")
        )
    out: dict[str, Any] = {}
    for key, value in options.items():
        if key == "subspace":
            out[key] = _subspace(value)
        elif key == "timeout":
            text = maintenance.value_text("options.timeout", value)
            out[key] = maintenance.parse_duration("options.timeout", text)
        elif key == "limit":
            out[key] = _checked(maintenance.check_limit, "options.limit", value)
        elif key == "before":
            out[key] = _checked(maintenance.check_before, "options.before", value)
            if out[key] is not None and out[key] > MAX_PAGE_ID:
                raise InvocationError(
                    f"options.before {show_input(value)}: an id from a previous page is at most "
                    f"{MAX_PAGE_ID}"
                )
        else:
            out[key] = maintenance.parse_bool(f"options.{key}", value)
    if out.get("require_completed") and "timeout" not in out:
        raise InvocationError(
            "options.require_completed needs options.timeout: without a bound the merge "
            "is only submitted"
        )
    return out


def _checked(check: Callable[[object], Any], what: str, value: object) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise InvocationError(f"{what} {show_input(value)}: expected a whole number")
    try:
        return check(value)
    except MisconfigurationError as exc:
        raise InvocationError(f"{what}: {exc}") from None


def _configured(
    env: Mapping[str, str], single: str, listed: str, canonical: Callable[[str], str]
) -> dict[str, str]:
    """Canonical URL -> configured spelling, for the stack's own location
    (``single``) and its comma-separated allow-list (``listed``)."""
    out: dict[str, str] = {}
    entries = [(single, env.get(single, "").strip())]
    entries += [(listed, item.strip()) for item in env.get(listed, "").split(",")]
    for var, item in entries:
        if not item:
            continue
        try:
            out[canonical(item)] = item
        except MisconfigurationError as exc:
            raise InvocationError(f"the function's {var} is invalid: {exc}") from None
    return out


def stack_lake(env: Mapping[str, str]) -> str | None:
    """The stack's own lake, canonical (the ``Lake`` dimension of its metrics)."""
    raw = env.get(ENV_LAKE, "").strip()
    try:
        return maintenance.canonical_lake(raw) if raw else None
    except MisconfigurationError:
        return None


def allowed_lake(lake: str, env: Mapping[str, str]) -> str:
    """The event's lake, canonical, if the stack maintains it; else refused."""
    allowed = _configured(env, ENV_LAKE, ENV_ALLOWED_LAKES, maintenance.canonical_lake)
    if not allowed:
        raise LakeNotAllowedError(
            f"lake {show_input(lake)} refused: this function has no lake configured; set "
            f"{ENV_LAKE} (the stack's lake) or {ENV_ALLOWED_LAKES}"
        )
    try:
        url = maintenance.canonical_lake(lake)
    except MisconfigurationError as exc:
        raise InvocationError(f'"lake": {exc}') from None
    if url not in allowed:
        raise LakeNotAllowedError(
            f"lake {show_input(lake)} refused: this function maintains only "
            f"{', '.join(sorted(allowed))}; deploy a stack for that lake or add it to "
            f"{ENV_ALLOWED_LAKES}"
        )
    return url


def allowed_data_path(data_path: Any, lake: str, env: Mapping[str, str]) -> str | None:
    """The data path to attach with, as the stack configured it: the event's
    if allowed (else refused), or the stack's own for the stack's own lake."""
    if data_path is None or data_path == "":
        own = env.get(ENV_DATA_PATH, "").strip()
        return own if own and lake == stack_lake(env) else None
    if not isinstance(data_path, str):
        raise InvocationError(f"data_path must be a string, not {type(data_path).__name__}")
    allowed = _configured(
        env, ENV_DATA_PATH, ENV_ALLOWED_DATA_PATHS, maintenance.canonical_data_path
    )
    try:
        url = maintenance.canonical_data_path(data_path)
    except MisconfigurationError as exc:
        raise InvocationError(f'"data_path": {exc}') from None
    if url not in allowed:
        raise LakeNotAllowedError(
            f"data_path {show_input(data_path)} refused: this function writes data only under "
            f"{', '.join(sorted(allowed)) or 'no data path (none configured)'}; set "
            f"{ENV_DATA_PATH} or add it to {ENV_ALLOWED_DATA_PATHS}"
        )
    return allowed[url]
