"""Who an event is from and which lake it may touch, checked before anything else.

Three shapes arrive: an EventBridge rule's own scheduled-event envelope (the
lake and options come from the function's environment), a schedule's
constant input (``{"trigger": "scheduled", "lake": ..., ...}``, the shape
template.yaml gives EventBridge Scheduler) and a manual invoke (``{"action":
..., "lake": ..., ...}``). This module unwraps the envelope and reads the
keys every action shares into an ``Invocation``; ``calls.py`` reads each
action's own keys, ``registry.py`` joins the two. Every mistake here is an
``InvocationError`` naming the key and the fix; nothing here opens the lake.

An event may name only the stack's own lake (``SLATELAKE_LAKE``) and data
path (``SLATELAKE_DATA_PATH``), or one the stack allow-lists
(``SLATELAKE_ALLOWED_LAKES``, ``SLATELAKE_ALLOWED_DATA_PATHS``: comma-separated
URLs). Locations compare in slatelake's canonical spelling
(``slatelake.open(url).url``), so no spelling (``..``, a trailing slash, a
shared prefix) reaches another place; anything else is a
``LakeNotAllowedError`` before any store is touched.

Models are stdlib frozen dataclasses, not Powertools' Parser (pydantic).
Measured for the deploy target (python3.12, arm64): pydantic 2.14.4 +
pydantic-core 2.50.5 + annotated-types + typing-inspection add 7.1 MB
unzipped to a layer of 157.0 MB (layers/build_layer.py, limit 250 MiB), so
size does not argue against it; but importing pydantic and building one
model costs about 0.2 s here, most of the handler's measured cold import
(0.31-0.34 s, docs/decisions/0011), and every value check is the library's
request types' (``PassRequest``, ``PageRequest``, ``MergeRequest``,
``CensusRequest``, ``FoldRequest``), whose errors already name the key: a
pydantic model would only wrap them and reword their refusals.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from aws_lambda_powertools.utilities.data_classes import EventBridgeEvent

import slatelake
from slatelake import MisconfigurationError, Trigger, show_input

ENV_LAKE, ENV_DATA_PATH = "SLATELAKE_LAKE", "SLATELAKE_DATA_PATH"
ENV_ALLOWED_LAKES = "SLATELAKE_ALLOWED_LAKES"
ENV_FLEET_REGISTRY = "SLATELAKE_FLEET_REGISTRY"
ENV_ALLOWED_DATA_PATHS = "SLATELAKE_ALLOWED_DATA_PATHS"
# The keys every action takes; each action's own are its model's KEYS.
COMMON_KEYS = ("action", "trigger", "lake", "data_path", "raise_on_failure")
# A run's "threshold" trigger is the threshold action's own, never an event's.
EVENT_TRIGGERS = (Trigger.MANUAL, Trigger.SCHEDULED)


@dataclass(frozen=True)
class Turn:
    """What the handler gives an action besides its call: the time left to
    work (after the reserve for the answer), the container's warm session
    (opened when first asked for; only an action marked ``warm`` asks), and
    who a run record names."""

    seconds_left: Callable[[], float]
    session: Callable[[], slatelake.Session]
    by: str


class InvocationError(MisconfigurationError):
    """The event cannot be acted on; the message names what is wrong."""


class LakeNotAllowedError(InvocationError):
    """The event names a lake or data path this stack does not maintain."""


@dataclass(frozen=True, kw_only=True)
class Invocation:
    """What every event says, whatever its action: the lake (canonical and
    allowed), the data path to attach with, why it runs, and whether a
    failure raises (a function error) instead of answering ``ok: false``."""

    # The event keys an action's model (calls.py) takes beside these.
    KEYS: ClassVar[tuple[str, ...]] = ()
    action: str
    trigger: Trigger
    lake: str
    data_path: str | None
    raise_on_failure: bool = False

    @property
    def scheduled(self) -> bool:
        return self.trigger == Trigger.SCHEDULED

    def lake_handle(self) -> slatelake.LakeHandle:
        """The handle every verb of this invocation goes through."""
        return slatelake.open(self.lake, self.data_path)

    @classmethod
    def from_event(cls, base: Invocation, doc: Mapping[str, Any], env: Mapping[str, str]) -> Self:
        """The action's model from ``base`` (the shared keys, read by
        ``common``) and the event's own keys; an action's model overrides it."""
        raise NotImplementedError(f"{cls.__name__} reads no event")

    @classmethod
    def common(
        cls, doc: Mapping[str, Any], env: Mapping[str, str], action: str, trigger: Trigger
    ) -> Invocation:
        """The shared keys of ``doc`` (an unwrapped event) for ``action``,
        its ``trigger`` read already (``event_trigger``), checked."""
        lake = allowed_lake(_lake_of(doc, env), env)
        raise_on_failure = doc.get("raise_on_failure", False)
        if not isinstance(raise_on_failure, bool):
            raise InvocationError(
                f"raise_on_failure={show_input(raise_on_failure)}: expected true or false"
            )
        return cls(
            action=action,
            trigger=trigger,
            lake=lake,
            data_path=allowed_data_path(doc.get("data_path"), lake, env),
            raise_on_failure=raise_on_failure,
        )


def unwrap(event: Any) -> dict[str, Any]:
    """The event as a manual invoke spells it: EventBridge's scheduled-event
    envelope (a rule without input) becomes its detail with ``trigger:
    scheduled``; any other EventBridge event, or no JSON object, is refused."""
    if not isinstance(event, dict):
        raise InvocationError(
            f"the event is a {type(event).__name__}, not a JSON object; send "
            '{"action": "maintenance", "lake": "s3://bucket/prefix"}'
        )
    if "detail-type" not in event:
        return event
    envelope = EventBridgeEvent(event)
    if envelope.detail_type != "Scheduled Event" or envelope.get("source") != "aws.events":
        raise InvocationError(
            f"unsupported EventBridge event {show_input(envelope.detail_type)} from "
            f"{show_input(envelope.get('source'))}; only aws.events 'Scheduled Event' starts a pass"
        )
    detail = envelope.get("detail")
    detail = {} if detail is None else detail
    if not isinstance(detail, dict):
        raise InvocationError("the scheduled event's detail is not a JSON object")
    return {**detail, "trigger": "scheduled"}


def event_trigger(doc: Mapping[str, Any]) -> Trigger:
    """Why the event runs: ``manual`` (the default) or ``scheduled``."""
    trigger = doc.get("trigger", "manual")
    if trigger not in EVENT_TRIGGERS:
        raise InvocationError(
            f"trigger {show_input(trigger)} is not one of {', '.join(EVENT_TRIGGERS)}"
        )
    return Trigger(trigger)


def is_scheduled(event: Any) -> bool:
    """Whether the event is a schedule's tick, read before (and whatever) the
    rest of it says: a tick that fails must fail loudly, a manual invoke answers."""
    if not isinstance(event, dict):
        return False
    if event.get("detail-type") == "Scheduled Event" and event.get("source") == "aws.events":
        return True
    return event.get("trigger") == "scheduled"


def env_options(env: Mapping[str, str]) -> dict[str, str]:
    """The function's own ``MAINTENANCE_*`` settings: a pass event without options."""
    prefixes = (slatelake.OPTION_PREFIX, slatelake.OPTION_ALIAS_PREFIX)
    return {k: v for k, v in env.items() if k.upper().startswith(prefixes) and v != ""}


def _lake_of(doc: Mapping[str, Any], env: Mapping[str, str]) -> str:
    if doc.get("lake") is not None and not isinstance(doc["lake"], str):
        # Not "absent": a 0, false or [] must not fall back to the stack's lake.
        raise InvocationError(f"lake must be a string, not {type(doc['lake']).__name__}")
    lake = doc.get("lake") or env.get(ENV_LAKE)
    if not lake or not isinstance(lake, str):
        raise InvocationError(
            f'no lake: give "lake" in the event or set {ENV_LAKE} in the function\'s environment'
        )
    return lake


def canonical_lake(url: str) -> str:
    """A lake URL as slatelake spells it, or MisconfigurationError."""
    return slatelake.open(url).url


def canonical_data_path(path: str, lake: str) -> str:
    """A data path as slatelake spells it, or MisconfigurationError: the
    lake's handle checks it as a data path, its spelling is the location's
    canonical URL. (The facade spells no data path yet, so one that only the
    lake rules refuse, holding '~', '%' or a non-ASCII letter, is refused.)"""
    slatelake.open(lake, path)
    return slatelake.open(path).url


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
        return canonical_lake(raw) if raw else None
    except MisconfigurationError:
        return None


def registry_lakes(env: Mapping[str, str]) -> set[str]:
    """The lakes of the stack's fleet registry (``SLATELAKE_FLEET_REGISTRY``,
    template FleetRegistry), canonical; none when it is not set. One LIST and
    one GET: read only for a lake the configured lists do not name."""
    raw = env.get(ENV_FLEET_REGISTRY, "").strip()
    if not raw:
        return set()
    try:
        return {entry.url for entry in slatelake.FleetRegistry(raw).lakes()}
    except MisconfigurationError as exc:
        raise InvocationError(f"the function's {ENV_FLEET_REGISTRY} is invalid: {exc}") from None


def allowed_lake(lake: str, env: Mapping[str, str]) -> str:
    """The event's lake, canonical, if the stack maintains it (its lake, its
    allow-list, or its fleet registry's lakes); else refused."""
    allowed = _configured(env, ENV_LAKE, ENV_ALLOWED_LAKES, canonical_lake)
    if not allowed and not env.get(ENV_FLEET_REGISTRY, "").strip():
        raise LakeNotAllowedError(
            f"lake {show_input(lake)} refused: this function has no lake configured; set "
            f"{ENV_LAKE} (the stack's lake) or {ENV_ALLOWED_LAKES}"
        )
    try:
        url = canonical_lake(lake)
    except MisconfigurationError as exc:
        raise InvocationError(f'"lake": {exc}') from None
    if url not in allowed and url not in registry_lakes(env):
        listed = sorted(allowed) + (
            [f"the lakes of its fleet registry {env[ENV_FLEET_REGISTRY].strip()}"]
            if env.get(ENV_FLEET_REGISTRY, "").strip()
            else []
        )
        raise LakeNotAllowedError(
            f"lake {show_input(lake)} refused: this function maintains only "
            f"{', '.join(listed)}; deploy a stack for that lake or add it to "
            f"{ENV_ALLOWED_LAKES} (or to the fleet registry: `slatelake fleet add`)"
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
        env, ENV_DATA_PATH, ENV_ALLOWED_DATA_PATHS, lambda item: canonical_data_path(item, lake)
    )
    try:
        url = canonical_data_path(data_path, lake)
    except MisconfigurationError as exc:
        raise InvocationError(f'"data_path": {exc}') from None
    if url not in allowed:
        raise LakeNotAllowedError(
            f"data_path {show_input(data_path)} refused: this function writes data only under "
            f"{', '.join(sorted(allowed)) or 'no data path (none configured)'}; set "
            f"{ENV_DATA_PATH} or add it to {ENV_ALLOWED_DATA_PATHS}"
        )
    return allowed[url]
