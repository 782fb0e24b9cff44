"""One model per action: the event's own keys, read by the library's request types.

Each model is an ``Invocation`` (the keys every action shares, checked in
invocation.py) plus what its action takes, built by ``from_event`` from the
unwrapped event. The values are checked by the request type the CLI uses for
the same verb (``PassRequest``, ``PageRequest``, ``MergeRequest``,
``CensusRequest``, ``FoldRequest``), so a value the Lambda refuses the CLI
refuses in the same words, and the refusal is that type's error
(``MaintenanceConfigError``, ``MisconfigurationError``). What is the
Lambda's alone is checked here: the keys an action takes (``KEYS``),
``options`` being a JSON object, and that ``MAINTENANCE_INTERVAL`` means
nothing in a function whose schedule sets the cadence.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Self, TypeVar

from invocation import Invocation, InvocationError, env_options

import slatelake
from slatelake import (
    BatchOrder,
    BatchResult,
    CensusRequest,
    FoldRequest,
    MaintenanceConfigError,
    MergeRequest,
    PageRequest,
    PassPlan,
    PassRequest,
    show_input,
)
from slatelake.durations import parse_duration

R = TypeVar("R")


@dataclass(frozen=True, kw_only=True)
class PlainCall(Invocation):
    """An action that takes no options (status, threshold, health, policy);
    an empty ``options`` object is allowed."""

    KEYS: ClassVar[tuple[str, ...]] = ("options",)

    @classmethod
    def from_event(cls, base: Invocation, doc: Mapping[str, Any], env: Mapping[str, str]) -> Self:
        unknown = sorted(map(str, _options(doc)))
        if unknown:
            raise InvocationError(
                f"unknown option(s) {', '.join(map(show_input, unknown))} for action "
                f"{base.action!r}; it takes none"
            )
        return cls(**_fields(base))


@dataclass(frozen=True, kw_only=True)
class PassCall(Invocation):
    """A pass (``maintenance``): its ``MAINTENANCE_*`` options (none given:
    the function's own), scope (``operations``, ``table``) and ``wait_s``
    (None: the function's ``SLATELAKE_MANUAL_WAIT_S``), as a ``PassRequest``."""

    KEYS: ClassVar[tuple[str, ...]] = ("options", "wait_s", "operations", "table")
    request: PassRequest
    wait_s: float | None = None

    @classmethod
    def from_event(cls, base: Invocation, doc: Mapping[str, Any], env: Mapping[str, str]) -> Self:
        options = _options(doc) if doc.get("options") is not None else env_options(env)
        refuse_interval(options)
        request = _read(
            PassRequest.from_mapping,
            {
                "options": options,
                "operations": doc.get("operations"),
                "table": doc.get("table"),
                "wait_s": doc.get("wait_s"),
                "trigger": base.trigger,
            },
        )
        wait_s = None if doc.get("wait_s") is None else request.wait_s
        return cls(**_fields(base), request=request, wait_s=wait_s)


@dataclass(frozen=True, kw_only=True)
class PlanCall(PassCall):
    """The first phase of a fanned-out pass (``pass_plan``): a pass's keys,
    and ``batch_tables``, the tables per batch (the stack's FanOutBatchTables)."""

    KEYS: ClassVar[tuple[str, ...]] = (*PassCall.KEYS, "batch_tables")
    batch_tables: int = 20

    @classmethod
    def from_event(cls, base: Invocation, doc: Mapping[str, Any], env: Mapping[str, str]) -> Self:
        one = PassCall.from_event(base, doc, env)
        size = doc.get("batch_tables", 20)
        if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= 1000:
            raise MaintenanceConfigError(
                f"batch_tables={show_input(size)}: expected 1 to 1000 tables a batch"
            )
        return cls(**_fields(base), request=one.request, wait_s=one.wait_s, batch_tables=size)


@dataclass(frozen=True, kw_only=True)
class BatchCall(Invocation):
    """One table batch of a planned run (``pass_batch``): the ``order`` the
    plan answered, for the event's own (allowed) lake only."""

    KEYS: ClassVar[tuple[str, ...]] = ("order",)
    order: BatchOrder

    @classmethod
    def from_event(cls, base: Invocation, doc: Mapping[str, Any], env: Mapping[str, str]) -> Self:
        order = BatchOrder.from_dict(doc.get("order"))
        _same_lake(order.lake, base.lake, "the batch")
        return cls(**_fields(base), order=order)


@dataclass(frozen=True, kw_only=True)
class FinishCall(Invocation):
    """The finish of a planned run (``pass_finish``): the ``plan`` and the
    Map's ``results``: each a batch's answer, or Step Functions' error
    object (``{"index": n, "error": {"Error", "Cause"}}``) for a batch
    whose item failed."""

    KEYS: ClassVar[tuple[str, ...]] = ("plan", "results")
    plan: PassPlan
    results: tuple[BatchResult, ...]

    @classmethod
    def from_event(cls, base: Invocation, doc: Mapping[str, Any], env: Mapping[str, str]) -> Self:
        plan = PassPlan.from_dict(doc.get("plan"))
        _same_lake(plan.lake, base.lake, "the plan")
        raw = doc.get("results")
        if not isinstance(raw, list) or len(raw) > len(plan.batches):
            raise InvocationError(
                f"results: a list of at most {len(plan.batches)} batch answers, one per batch"
            )
        orders = {o.index: o for o in plan.batches}
        return cls(**_fields(base), plan=plan, results=tuple(_result(r, orders) for r in raw))


def _result(doc: object, orders: Mapping[int, BatchOrder]) -> BatchResult:
    """A batch's answer, or the failure Step Functions caught for its item."""
    if isinstance(doc, Mapping) and isinstance(doc.get("error"), Mapping):
        index = doc.get("index")
        order = orders.get(index) if isinstance(index, int) else None
        if order is None:
            raise InvocationError(f"a failed batch names no planned batch: {show_input(index)}")
        error = doc["error"]
        what = f"{error.get('Error', 'an error')}: {error.get('Cause', '')}"
        return BatchResult(index=order.index, tables=list(order.tables), error=what[:2000])
    result = BatchResult.from_dict(doc)
    if result.index not in orders:
        raise InvocationError(f"a batch answer names no planned batch: {result.index}")
    return result


def _same_lake(theirs: str, ours: str, what: str) -> None:
    """A phase's document belongs to the event's lake (the allow-listed one)."""
    if theirs != ours:
        raise InvocationError(
            f"{what} belongs to the lake at {show_input(theirs)}, not the event's {ours}"
        )


@dataclass(frozen=True, kw_only=True)
class FleetCall(Invocation):
    """The fleet's lakes (``fleet_lakes``): the ``lakes`` the schedule lists
    (template FleetLakes) and those of the fleet registry, one list."""

    KEYS: ClassVar[tuple[str, ...]] = ("lakes",)
    lakes: tuple[str, ...] = ()

    @classmethod
    def from_event(cls, base: Invocation, doc: Mapping[str, Any], env: Mapping[str, str]) -> Self:
        given = doc.get("lakes") or []
        if not isinstance(given, list) or len(given) > 1000:
            raise InvocationError("lakes: a list of at most 1000 lake URLs")
        lakes = []
        for url in given:
            if not isinstance(url, str):
                raise InvocationError(f"lakes: {show_input(url)} is not a lake URL")
            if url.strip():
                lakes.append(url.strip())
        return cls(**_fields(base), lakes=tuple(lakes))


@dataclass(frozen=True, kw_only=True)
class BackupCall(Invocation):
    """A backup: a pass first when ``options`` are given, waiting ``wait_s``
    (None: the function's) for one already running; then, with
    ``restore_point``, a restore point of the lake as backed up."""

    KEYS: ClassVar[tuple[str, ...]] = ("options", "wait_s", "restore_point")
    options: dict[str, object] | None = None
    wait_s: float | None = None
    restore_point: RestorePointAsk | None = None

    @classmethod
    def from_event(cls, base: Invocation, doc: Mapping[str, Any], env: Mapping[str, str]) -> Self:
        options = _options(doc) or None
        if options is not None:
            refuse_interval(options)
        request = _read(PassRequest.from_mapping, {"options": options, "wait_s": doc.get("wait_s")})
        wait_s = None if doc.get("wait_s") is None else request.wait_s
        point = RestorePointAsk.from_event(base.lake, doc.get("restore_point"))
        return cls(**_fields(base), options=options, wait_s=wait_s, restore_point=point)


@dataclass(frozen=True)
class RestorePointAsk:
    """A backup's ``restore_point``: ``true`` (named for the time, kept until
    deleted) or ``{"name": ..., "ttl": "30d"}``, each key optional; checked
    by the library's own name check and the duration grammar."""

    name: str | None = None
    ttl_s: float | None = None

    @classmethod
    def from_event(cls, lake: str, raw: object) -> RestorePointAsk | None:
        if raw is None or raw is False:
            return None
        if raw is True:
            return cls()
        if not isinstance(raw, dict) or set(raw) - {"name", "ttl"}:
            raise InvocationError(
                f"restore_point {show_input(raw)}: send true, or an object with name and ttl "
                '(e.g. {"name": "nightly", "ttl": "30d"})'
            )
        name, ttl = raw.get("name"), raw.get("ttl")
        if name is not None:
            name = slatelake.open(lake).restore_points.check_name(name)
        seconds = None if ttl is None else parse_duration("restore_point.ttl", ttl)
        return cls(name, seconds)


@dataclass(frozen=True, kw_only=True)
class FoldCall(Invocation):
    """A holder's turn: ``options.image`` and ``options.compact``; the image
    cadence is the function's (the handler sets it)."""

    KEYS: ClassVar[tuple[str, ...]] = ("options",)
    request: FoldRequest

    @classmethod
    def from_event(cls, base: Invocation, doc: Mapping[str, Any], env: Mapping[str, str]) -> Self:
        return cls(**_fields(base), request=_read(FoldRequest.from_mapping, _options(doc)))


@dataclass(frozen=True, kw_only=True)
class MergeCall(Invocation):
    """Store merges (``compact_store``): ``options.subspace``,
    ``options.timeout`` (a duration) and ``options.require_completed``."""

    KEYS: ClassVar[tuple[str, ...]] = ("options",)
    request: MergeRequest

    @classmethod
    def from_event(cls, base: Invocation, doc: Mapping[str, Any], env: Mapping[str, str]) -> Self:
        return cls(**_fields(base), request=_read(MergeRequest.from_mapping, _options(doc)))


@dataclass(frozen=True, kw_only=True)
class CensusCall(Invocation):
    """A census: ``options.live`` adds the scan, ``options.objects`` the listing."""

    KEYS: ClassVar[tuple[str, ...]] = ("options",)
    request: CensusRequest

    @classmethod
    def from_event(cls, base: Invocation, doc: Mapping[str, Any], env: Mapping[str, str]) -> Self:
        return cls(**_fields(base), request=_read(CensusRequest.from_mapping, _options(doc)))


@dataclass(frozen=True, kw_only=True)
class PageCall(Invocation):
    """A page of the run history (``runs``): ``options.limit``, ``options.before``."""

    KEYS: ClassVar[tuple[str, ...]] = ("options",)
    DEFAULT_LIMIT: ClassVar[int] = 20
    request: PageRequest

    @classmethod
    def from_event(cls, base: Invocation, doc: Mapping[str, Any], env: Mapping[str, str]) -> Self:
        def page(options: Mapping[str, object]) -> PageRequest:
            return PageRequest.from_mapping(options, default_limit=cls.DEFAULT_LIMIT)

        return cls(**_fields(base), request=_read(page, _options(doc)))


@dataclass(frozen=True, kw_only=True)
class AuditCall(PageCall):
    """A page of the audit log (``audit``), fifty entries unless told."""

    DEFAULT_LIMIT: ClassVar[int] = 50


def refuse_interval(options: Mapping[str, object]) -> None:
    """The schedule sets a function's cadence: ``MAINTENANCE_INTERVAL`` (any
    spelling, the ``META_`` alias too) is refused, not ignored."""
    for key in options:
        if str(key).upper().removeprefix("META_").endswith("MAINTENANCE_INTERVAL"):
            raise MaintenanceConfigError(
                f"{show_input(key)} has no meaning in the Lambda: the schedule sets the "
                "cadence; drop the option"
            )


def _options(doc: Mapping[str, Any]) -> dict[str, object]:
    """The event's ``options``: a JSON object, or nothing."""
    raw = doc.get("options")
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise InvocationError(f"options must be a JSON object, not {type(raw).__name__}")
    return {str(k): v for k, v in raw.items()}


def _fields(base: Invocation) -> dict[str, Any]:
    """The shared keys, as read into ``base``, for an action's model."""
    return {f.name: getattr(base, f.name) for f in fields(Invocation)}


def _read(parse: Callable[[Any], R], doc: Mapping[str, object]) -> R:
    """``parse(doc)``, with an integer too large to print or convert refused
    naming its key (Python will not print one of over 4,300 digits, so a
    check that names the value would raise ValueError instead)."""
    try:
        return parse(doc)
    except (OverflowError, ValueError):
        huge = [k for k, v in doc.items() if isinstance(v, int) and v.bit_length() > 64]
        if not huge:
            raise  # not the integer too long to print: the error as it is
        raise MaintenanceConfigError(
            f"options.{huge[0]}: an integer too large for any option; send a duration such as 90s"
        ) from None
