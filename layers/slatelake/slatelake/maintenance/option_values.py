"""One option's value, parsed once to the type it is declared as.

``options`` decides what an option is (its name, its step, DuckLake's
declared type for it); this module turns the value given, text from the
environment or a flag, or a number or boolean from a Lambda event's JSON,
into that type: a real bool (DuckDB's own spellings), an integer in range,
a finite number, an interval or a UTC instant (read by DuckDB itself), a
list of snapshot ids, a duration, a store subspace. Every refusal is a
MaintenanceConfigError naming the option on one line.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from slatelake.durations import format_duration, parse_duration
from slatelake.errors import MaintenanceConfigError, MisconfigurationError
from slatelake.maintenance.thinning import Keep
from slatelake.store.keys import Subspace
from slatelake.store.location import show_input

if TYPE_CHECKING:
    import duckdb

# Whitespace trimmed around a value (and, in ``options``, around an option's name).
WS = " \t\r\n"
# DuckDB's BOOLEAN cast from text, case-insensitive (tests hold it to DuckDB's).
_TRUE = frozenset({"true", "t", "yes", "y", "1"})
_FALSE = frozenset({"false", "f", "no", "n", "0"})
_SPELLINGS = "true, t, yes, y, 1 or false, f, no, n, 0"
# A retention window over a century is a typo (far beyond, now() minus it leaves
# DuckDB's timestamp range and the step would fail mid-pass).
MAX_WINDOW_S = 100 * 365 * 86400
MAX_OWN_INT = 2**63 - 1
# DuckLake reads UBIGINT 2**64-1 as "unset" and fails internally on it.
_INT_RANGES = {"UBIGINT": (0, 2**64 - 2), "BIGINT": (-(2**63), 2**63 - 1)}
# DuckLake's own bounds on particular parameters (checked by it only at the call).
_AT_LEAST_ONE = {"max_compacted_files", "max_file_size"}
_FRACTION = {"delete_threshold"}
_DECIMAL = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?", re.ASCII)
_VERSIONS = re.compile(r"\[\s*(\d+(?:\s*,\s*\d+)*)\s*\]", re.ASCII)
# An integer option given as a number (JSON, Python) longer than this is no setting.
_MAX_INT_BITS = 128
_TIMESTAMPTZ = "TIMESTAMP WITH TIME ZONE"


@dataclass(frozen=True)
class Interval:
    """An ``older_than`` given as a duration: a window ending at each call's now()."""

    text: str  # DuckDB's own spelling of the interval, e.g. '7 days' or '01:30:00'
    seconds: float


@dataclass(frozen=True)
class Instant:
    """An ``older_than`` given as a point in time, as UTC text ('... +00'): the
    same instant on every host (a timestamp without an offset is read as UTC)."""

    utc: str
    # Seconds since the epoch, as DuckDB read it: the orphan age floor compares
    # it with now (None when built by hand, e.g. in a test's expectation).
    epoch_s: float | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Versions:
    """Snapshot ids for ``versions``, sorted and distinct."""

    ids: tuple[int, ...]

    @property
    def text(self) -> str:
        """The string spelling DuckLake casts to UBIGINT[] (the RFC's passthrough)."""
        return "[" + ",".join(str(i) for i in self.ids) + "]"


# What a step parameter holds once bound (Keep: slatelake's thinning rules).
Value = bool | int | float | Interval | Instant | Versions | Keep


def _bad(option: str, value: object, why: str) -> MaintenanceConfigError:
    return MaintenanceConfigError(f"{option}={show_input(value)}: {why}")


def value_text(option: str, value: object) -> str:
    """The text an option's value spells. Environment variables and flags are
    text; a Lambda event's JSON or a Python caller may give a number or a
    boolean, read as JSON prints it. Anything else (a list, an object, null),
    an integer too long to be a setting, a NUL byte (DuckDB would end the
    statement there) or text that is not UTF-8 (a lone surrogate) is refused,
    naming the option: nothing downstream meets a value it cannot print."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if value.bit_length() > _MAX_INT_BITS:
            raise MaintenanceConfigError(
                f"{option}=<an integer of {value.bit_length()} bits>: too large for any option"
            )
        return str(value)
    if isinstance(value, float):
        return repr(value)  # 'nan' and 'inf' spell themselves and are refused as such
    if not isinstance(value, str):
        raise _bad(option, value, "expected text, a number or a boolean")
    if "\x00" in value:
        raise _bad(option, value, "contains a NUL byte; remove it")
    if any(0xD800 <= ord(ch) <= 0xDFFF for ch in value):
        raise _bad(option, value, "not UTF-8 text (a lone surrogate); respell it")
    return value


def parse_bool(option: str, value: object) -> bool:
    """True or false as DuckDB reads text (trimmed, any case); anything else refused."""
    text = value_text(option, value).strip(WS).lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise _bad(option, value, f"expected true or false ({_SPELLINGS})")


def parse_seconds(option: str, value: object) -> float:
    """Seconds in the one duration grammar (``200ms``, ``90s``, ``1h30m``,
    ``7 days``, a bare number of seconds); positive, at most 365 days."""
    text = value_text(option, value)
    try:
        return parse_duration(option, text)
    except MisconfigurationError as exc:
        raise MaintenanceConfigError(str(exc)) from None


def seconds_between(low: float, high: float, why: str) -> Callable[[str, object], float]:
    """A parser of seconds in the duration grammar held to ``low``..``high``;
    ``why`` says what the bounds protect, in the refusal."""

    def parse(option: str, value: object) -> float:
        text = value_text(option, value)
        try:
            seconds = parse_duration(option, text, maximum=high)
        except MisconfigurationError as exc:
            raise MaintenanceConfigError(f"{exc} ({why})") from None
        if seconds < low:
            raise _bad(
                option,
                value,
                f"must be at least {format_duration(low)} ({why})",
            )
        return seconds

    return parse


def _whole(text: str) -> int | None:
    """An integer from decimal digits (optional sign), or None; never a huge parse."""
    if not re.fullmatch(r"[+-]?\d{1,40}", text, re.ASCII):
        return None
    return int(text)


def parse_positive_int(option: str, value: object) -> int:
    number = _whole(value_text(option, value).strip(WS))
    if number is None:
        raise _bad(option, value, "expected a positive integer")
    if number <= 0:
        raise _bad(option, value, "must be positive")
    if number > MAX_OWN_INT:
        raise _bad(option, value, f"must be at most {MAX_OWN_INT}")
    return number


def _parse_int(option: str, param: str, type_: str, value: object) -> int:
    low, high = _INT_RANGES[type_]
    if param in _AT_LEAST_ONE:
        low = max(low, 1)
    number = _whole(value_text(option, value).strip(WS))
    if number is None or not low <= number <= high:
        raise _bad(option, value, f"DuckLake takes a whole number from {low} to {high}")
    return number


def _parse_double(option: str, param: str, value: object) -> float:
    text = value_text(option, value).strip(WS)
    number = float(text) if _DECIMAL.fullmatch(text) else math.nan
    if not math.isfinite(number):
        raise _bad(option, value, "expected a finite number")
    if param in _FRACTION and not 0.0 <= number <= 1.0:
        raise _bad(option, value, "must be between 0 and 1")
    return number


def _parse_versions(option: str, value: object) -> Versions:
    m = _VERSIONS.fullmatch(value_text(option, value).strip(WS))
    ids = [_whole(d) for d in re.findall(r"\d+", m.group(1), re.ASCII)] if m else []
    high = _INT_RANGES["UBIGINT"][1]
    if not ids or any(i is None or i > high for i in ids):
        raise _bad(option, value, "expected a non-empty list of snapshot ids such as '[2,3]'")
    return Versions(tuple(sorted({i for i in ids if i is not None})))


class Casts:
    """DuckDB's own reading of intervals and timestamps, on a private in-memory
    connection pinned to UTC so a value means the same on every host."""

    def __init__(self) -> None:
        self._con: duckdb.DuckDBPyConnection | None = None

    def older_than(self, option: str, value: object) -> Interval | Instant:
        # DuckDB only here: parsing the other values (and a request) needs none
        import duckdb

        from slatelake.ducklake.sql import run

        if self._con is None:
            self._con = duckdb.connect(
                config={"autoinstall_known_extensions": False, "autoload_known_extensions": False}
            )
            self._con.execute("SET TimeZone = 'UTC'")
        text = value_text(option, value).strip(WS)
        row = run(
            self._con,
            "SELECT CAST(TRY_CAST(? AS INTERVAL) AS VARCHAR), epoch(TRY_CAST(? AS INTERVAL)), "
            "CAST(TRY_CAST(? AS TIMESTAMPTZ) AS VARCHAR), isfinite(TRY_CAST(? AS TIMESTAMPTZ)), "
            "CASE WHEN isfinite(TRY_CAST(? AS TIMESTAMPTZ)) "
            "THEN epoch(TRY_CAST(? AS TIMESTAMPTZ)) END",
            [text] * 6,
        ).fetchone()
        assert row is not None  # a SELECT of constants has one row
        interval, seconds, instant, finite, epoch_s = row
        if interval is not None:
            if not 0 <= seconds <= MAX_WINDOW_S:
                raise _bad(option, value, "a window must be zero or more and at most 100 years")
            return Interval(interval, float(seconds))
        if instant is None or not finite:
            raise _bad(
                option,
                value,
                "expected an interval such as '7 days' or a finite timestamp such as "
                "'2024-01-01 00:00:00+00' (no offset means UTC)",
            )
        return Instant(instant, float(epoch_s))

    def close(self) -> None:
        if self._con is not None:
            self._con.close()


def param_parser(step: str, param: str, type_: str, casts: Casts) -> Callable[[str, Any], Any]:
    """How one DuckLake parameter's text becomes its value, by its declared type."""
    if type_ == "BOOLEAN":
        return parse_bool
    if type_ in _INT_RANGES:
        return lambda option, value: _parse_int(option, param, type_, value)
    if type_ == "DOUBLE":
        return lambda option, value: _parse_double(option, param, value)
    if type_ == _TIMESTAMPTZ:
        return casts.older_than
    if type_ == "UBIGINT[]":
        return _parse_versions
    raise MaintenanceConfigError(
        f"ducklake_{step}'s parameter {param} is {type_}, which this slatelake build cannot "
        "validate; use the DuckLake version it pins"
    )


def parse_subspace(option: str, value: object) -> Subspace:
    try:
        return Subspace.from_label(value_text(option, value).strip(WS))
    except ValueError as exc:
        raise _bad(option, value, str(exc)) from None
