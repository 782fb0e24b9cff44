"""What a caller asks of a pass, parsed once for every surface.

A ``PassRequest`` is built by Python callers directly, and by the CLI and the
Lambda from outside input with ``PassRequest.from_mapping``: the one parser
of a pass's scope, trigger, wait, deadline and dry-run switch, so a value
the Lambda refuses the CLI refuses with the same words. The options stay as
given until the pass binds them against the pinned DuckLake extension (that
needs DuckDB; a request does not).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from slatelake.durations import parse_duration
from slatelake.errors import MaintenanceConfigError
from slatelake.maintenance.option_values import parse_bool
from slatelake.maintenance.prices import DEFAULT_PRICES, Prices, prices_of
from slatelake.maintenance.scope import RunScope, run_scope
from slatelake.store.location import show_input

if TYPE_CHECKING:
    from slatelake.maintenance.options import MaintenanceOptions

# Who a run record names at most: a user, a role, a request id.
MAX_BY_CHARS = 256


class Trigger(StrEnum):
    """Why a pass ran: asked for, a schedule's tick, or a table found due."""

    MANUAL = "manual"
    SCHEDULED = "scheduled"
    THRESHOLD = "threshold"


@dataclass(frozen=True)
class PassRequest:
    """One pass, as asked. ``operations`` (seed names, a list or comma-separated
    text) and ``table`` (``[SCHEMA.]TABLE``, or the bare name with ``schema``)
    scope it; ``wait_s`` is how long to wait for a pass already running;
    ``deadline_s`` the seconds it may work (it stops between steps and tables
    when they are spent); ``dry_run`` returns the plan and writes nothing;
    ``by`` names who asked (kept in the run history and audit log);
    ``prices`` what a dry run's estimate is priced at (``Prices``, a mapping
    of overrides, or a JSON price file's path; None: list prices, prices.py).
    Every field is checked when the request is made, before any lake is
    touched."""

    options: Mapping[str, object] | MaintenanceOptions | None = None
    operations: tuple[str, ...] | None = None
    table: str | None = None
    schema: str | None = None
    trigger: Trigger = Trigger.MANUAL
    wait_s: float = 0.0
    deadline_s: float | None = None
    dry_run: bool = False
    by: str | None = None
    # A schedule's double opt-in: expiry and deletion run only on a lake whose
    # policy a person enabled (the Lambda's ticks set it; options alone never do).
    deletes_need_policy: bool = False
    prices: Prices | Mapping[str, object] | str | None = None
    scope: RunScope = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        scope = run_scope(self.operations, self.table, self.schema)
        set_ = object.__setattr__
        set_(self, "scope", scope)
        set_(self, "operations", scope.operations)
        set_(self, "trigger", _trigger(self.trigger))
        set_(self, "wait_s", _seconds("wait_s", self.wait_s))
        if self.deadline_s is not None:
            set_(self, "deadline_s", _seconds("deadline_s", self.deadline_s))
        for switch in ("dry_run", "deletes_need_policy"):
            if not isinstance(getattr(self, switch), bool):
                raise MaintenanceConfigError(
                    f"{switch}={show_input(getattr(self, switch))}: expected true or false"
                )
        set_(self, "by", _by(self.by))
        set_(self, "prices", prices_of(self.prices))
        if self.options is not None and not isinstance(self.options, Mapping):
            # bound options come from a caller that has DuckDB loaded already
            from slatelake.maintenance.options import MaintenanceOptions

            if not isinstance(self.options, MaintenanceOptions):
                raise MaintenanceConfigError(
                    f"options must be a mapping of MAINTENANCE_* settings, not "
                    f"{type(self.options).__name__}"
                )

    @classmethod
    def from_mapping(cls, doc: Mapping[str, object]) -> PassRequest:
        """A request from outside input (a Lambda event, the CLI's flags):
        unknown keys are refused by name, text is read as the CLI spells it
        (``"90s"`` for a wait, ``"true"`` for a switch)."""
        if not isinstance(doc, Mapping):
            raise MaintenanceConfigError(
                f"a pass request is a JSON object, not {type(doc).__name__}"
            )
        known = {f.name for f in fields(cls) if f.init}
        unknown = sorted(str(k) for k in doc if k not in known)
        if unknown:
            raise MaintenanceConfigError(
                f"unknown key(s) {', '.join(map(show_input, unknown))}; a pass takes "
                + ", ".join(sorted(known))
            )
        given: dict[str, Any] = {k: v for k, v in doc.items() if v is not None}
        for key in ("wait_s", "deadline_s"):
            if isinstance(given.get(key), str):
                given[key] = parse_duration(key, given[key], allow_zero=True)
        for switch in ("dry_run", "deletes_need_policy"):
            if switch in given:
                given[switch] = parse_bool(switch, given[switch])
        ops = given.get("operations")
        if ops is not None and not isinstance(ops, str | list | tuple):
            raise MaintenanceConfigError(
                f"operations must be a list of names or comma-separated text, not "
                f"{type(ops).__name__}"
            )
        prices = given.get("prices")
        if prices is not None and not isinstance(prices, Mapping | str):
            raise MaintenanceConfigError(
                f"prices must be a JSON object of prices or a price file's path, not "
                f"{type(prices).__name__}"
            )
        options = given.get("options")
        if options is not None and not isinstance(options, Mapping):
            raise MaintenanceConfigError(
                f"options must be a JSON object, not {type(options).__name__}"
            )
        return cls(**given)

    def bound(self, fallback: MaintenanceOptions | None = None) -> MaintenanceOptions:
        """The options bound against the pinned DuckLake extension (a refused
        one raises before any lake is touched); ``fallback`` when the request
        names none (a session's own). Loads DuckDB."""
        from slatelake.maintenance.options import MaintenanceOptions, bind

        if isinstance(self.options, MaintenanceOptions):
            options = self.options
        elif self.options is None and fallback is not None:
            options = fallback
        else:
            options = bind(self.options or {})
        return replace(options, deletes_need_policy=True) if self.deletes_need_policy else options

    def to_dict(self) -> dict[str, Any]:
        options = self.options
        return {
            # bound options are no longer spelled as given
            "options": dict(options) if isinstance(options, Mapping) else None,
            "operations": None if self.operations is None else list(self.operations),
            "table": self.table,
            "schema": self.schema,
            "trigger": str(self.trigger),
            "wait_s": self.wait_s,
            "deadline_s": self.deadline_s,
            "dry_run": self.dry_run,
            "by": self.by,
            "deletes_need_policy": self.deletes_need_policy,
            "prices": None if self.prices == DEFAULT_PRICES else self.priced.to_dict(),
        }

    @property
    def priced(self) -> Prices:
        """The prices, as parsed when the request was made."""
        assert isinstance(self.prices, Prices)
        return self.prices


def _trigger(value: object) -> Trigger:
    try:
        return Trigger(value if isinstance(value, str) else "")
    except ValueError:
        raise MaintenanceConfigError(
            f"trigger {show_input(value)}: expected one of {', '.join(t.value for t in Trigger)}"
        ) from None


def _seconds(what: str, value: object) -> float:
    """Seconds: a finite number, zero or more (not a boolean)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise MaintenanceConfigError(f"{what}={show_input(value)}: expected seconds, zero or more")
    try:
        seconds = float(value)
    except OverflowError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds < 0:
        raise MaintenanceConfigError(f"{what}={show_input(value)}: expected seconds, zero or more")
    return seconds


def _by(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_BY_CHARS or "\x00" in value:
        raise MaintenanceConfigError(
            f"by={show_input(value)}: expected a name of 1 to {MAX_BY_CHARS} characters"
        )
    return value


def _only(doc: Mapping[str, object], what: str, accepted: tuple[str, ...]) -> dict[str, object]:
    """``doc`` as a dict, refusing a non-mapping or a key outside ``accepted``."""
    if not isinstance(doc, Mapping):
        raise MaintenanceConfigError(f"{what} is a JSON object, not {type(doc).__name__}")
    unknown = sorted(str(k) for k in doc if k not in accepted)
    if unknown:
        raise MaintenanceConfigError(
            f"unknown option(s) {', '.join(map(show_input, unknown))} for {what}; it takes "
            + (", ".join(accepted) or "none")
        )
    return {str(k): v for k, v in doc.items() if v is not None}


def _whole(what: str, value: object) -> object:
    """A page bound as JSON or a flag gives it: a whole number or its digits."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise MaintenanceConfigError(f"{what} {show_input(value)}: expected a whole number")
    return value


@dataclass(frozen=True)
class PageRequest:
    """A page of the run history or audit log: at most ``limit`` entries with
    ids below ``before`` (None: the newest)."""

    limit: int = 20
    before: int | None = None

    def __post_init__(self) -> None:
        from slatelake.maintenance.history import check_before, check_limit

        object.__setattr__(self, "limit", check_limit(_whole("limit", self.limit)))
        if self.before is not None:
            object.__setattr__(self, "before", check_before(_whole("before", self.before)))

    @classmethod
    def from_mapping(cls, doc: Mapping[str, object], default_limit: int = 20) -> PageRequest:
        given = _only(doc, "a page", ("limit", "before"))
        return cls(limit=given.get("limit", default_limit), before=given.get("before"))  # type: ignore[arg-type]


@dataclass(frozen=True)
class MergeRequest:
    """Store merges: every subspace or ``subspace``; ``wait_s`` how long to
    wait for them (None: submit only); ``require_completed`` makes a merge
    still pending or failed at the end an error (it needs a wait)."""

    subspace: str | None = None
    wait_s: float | None = None
    require_completed: bool = False

    def __post_init__(self) -> None:
        from slatelake.store.keys import Subspace

        if self.subspace is not None:
            text = self.subspace if isinstance(self.subspace, str) else ""
            label = text.lower() if text.isascii() else text  # any case, never a look-alike
            if label not in {s.label for s in Subspace}:
                raise MaintenanceConfigError(
                    f"subspace {show_input(self.subspace)}: unknown; expected one of "
                    + ", ".join(s.label for s in Subspace)
                )
            object.__setattr__(self, "subspace", label)
        if self.wait_s is not None:
            object.__setattr__(self, "wait_s", _seconds("wait_s", self.wait_s))
        if not isinstance(self.require_completed, bool):
            raise MaintenanceConfigError(
                f"require_completed={show_input(self.require_completed)}: expected true or false"
            )
        if self.require_completed and self.wait_s is None:
            raise MaintenanceConfigError(
                "require_completed needs a wait (a timeout): without one every merge is only "
                "submitted"
            )

    @classmethod
    def from_mapping(cls, doc: Mapping[str, object]) -> MergeRequest:
        """``subspace``, ``timeout`` (a duration: ``90s``, ``5m``, seconds) and
        ``require_completed``, as the CLI's flags and a Lambda event name them."""
        given = _only(doc, "a store merge", ("subspace", "timeout", "require_completed"))
        timeout = given.get("timeout")
        wait = None if timeout is None else parse_duration("timeout", timeout, allow_zero=True)
        done = given.get("require_completed", False)
        return cls(
            subspace=given.get("subspace"),  # type: ignore[arg-type]
            wait_s=wait,
            require_completed=parse_bool("require_completed", done),
        )


@dataclass(frozen=True)
class CensusRequest:
    """A census: ``live`` adds a scan counting live keys (reads the whole
    store); ``objects`` the totals of one listing."""

    live: bool = False
    objects: bool = True

    @classmethod
    def from_mapping(cls, doc: Mapping[str, object]) -> CensusRequest:
        given = _only(doc, "a census", ("live", "objects"))
        return cls(
            live=parse_bool("live", given.get("live", False)),
            objects=parse_bool("objects", given.get("objects", True)),
        )
