"""The one duration grammar, for every option and setting that takes a span of time.

``200ms``, ``90s``, ``10m``, ``1h30m``, ``1h 30m``, ``7 days``, ``1.5h`` and a
bare number of seconds (``30``) all read the same way wherever slatelake asks
for a duration: ``MAINTENANCE_INTERVAL``, ``MAINTENANCE_COMPACT_STORE_TIMEOUT``,
the ``SLATELAKE_*`` environment settings, CLI flags and Lambda events. Only
ASCII digits and unit names are read (a look-alike digit or letter is
refused, not normalized), and every refusal is a MisconfigurationError naming
the setting and the value. DuckLake's own INTERVAL parameters (``older_than``)
are read by DuckDB instead, which also knows calendar units such as months.
Imports nothing of slatelake but its errors, so every layer can use it.
"""

from __future__ import annotations

import math
import os
import re

from slatelake.errors import MisconfigurationError

_UNITS = {
    name: seconds
    for seconds, names in (
        (0.001, "ms msec msecs millisecond milliseconds"),
        (1, "s sec secs second seconds"),
        (60, "m min mins minute minutes"),
        (3600, "h hr hrs hour hours"),
        (86400, "d day days"),
        (7 * 86400, "w week weeks"),
    )
    for name in names.split()
}
_TERM = re.compile(r"(\d{1,15}(?:\.\d{1,9})?)[ \t]*([a-z]*)[ \t]*", re.ASCII)
_WS = " \t\r\n"
# What slatelake waits on (timers, timeouts) stays well inside threading's TIMEOUT_MAX.
MAX_DURATION_S = 365 * 86400
EXAMPLES = "200ms, 90s, 10m, 1h30m or 7 days"


def parse_duration(
    what: str,
    value: object,
    *,
    allow_zero: bool = False,
    maximum: float = MAX_DURATION_S,
) -> float:
    """Seconds from ``value`` (text in the grammar above, or a number of
    seconds). Positive unless ``allow_zero``; at most ``maximum``. ``what``
    names the setting in the error."""
    seconds = _seconds(what, value)
    if seconds < 0 or (seconds == 0 and not allow_zero):
        raise MisconfigurationError(
            f"{what}={_show(value)}: must be {'zero or more' if allow_zero else 'positive'}"
        )
    if seconds > maximum:
        raise MisconfigurationError(
            f"{what}={_show(value)}: must be at most {format_duration(maximum)}"
        )
    return seconds


def env_duration(
    name: str,
    default: float | None,
    *,
    allow_zero: bool = False,
    maximum: float = MAX_DURATION_S,
    environ: dict[str, str] | None = None,
) -> float | None:
    """The environment variable ``name`` as seconds, or ``default`` when it is
    unset or empty; a value that does not parse is refused naming the variable."""
    raw = (os.environ if environ is None else environ).get(name, "")
    if not raw.strip(_WS):
        return default
    return parse_duration(name, raw, allow_zero=allow_zero, maximum=maximum)


def format_duration(seconds: float) -> str:
    """A duration as the grammar spells it, e.g. ``1h30m`` or ``200ms``."""
    if seconds < 1:
        return f"{seconds * 1000:g}ms"
    parts = []
    rest = seconds
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        whole = int(rest // size)
        if whole:
            parts.append(f"{whole}{unit}")
            rest -= whole * size
    if rest or not parts:
        parts.append(f"{rest:g}s")
    return "".join(parts)


def _seconds(what: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise MisconfigurationError(
            f"{what}={_show(value)}: expected a duration such as {EXAMPLES}"
        )
    if isinstance(value, int | float):
        try:
            seconds = float(value)
        except OverflowError:  # an integer too long for a float
            seconds = math.inf
        if not math.isfinite(seconds):
            raise MisconfigurationError(
                f"{what}=<a number too large or not finite>: expected a finite duration"
            )
        return seconds
    text = value.strip(_WS).lower()
    if text.startswith("-"):
        raise MisconfigurationError(f"{what}={_show(value)}: must not be negative")
    total, pos, terms = 0.0, 0, 0
    while pos < len(text):
        match = _TERM.match(text, pos)
        if match is None or match.end() == pos:
            break
        number, unit = match.groups()
        if unit and unit not in _UNITS:
            raise MisconfigurationError(
                f"{what}={_show(value)}: unknown unit {unit!r}; use ms, s, m, h, d or w "
                f"(e.g. {EXAMPLES})"
            )
        if not unit and match.end() < len(text):
            break  # a unitless number is allowed only alone, as seconds
        total += float(number) * _UNITS.get(unit or "s", 1)
        pos, terms = match.end(), terms + 1
    if terms == 0 or pos != len(text) or (terms > 1 and not all_units(text)):
        raise MisconfigurationError(
            f"{what}={_show(value)}: expected a duration such as {EXAMPLES}"
        )
    return total


def all_units(text: str) -> bool:
    """Every term of a compound duration names its unit (``1h30`` is refused)."""
    return all(unit for _, unit in _TERM.findall(text))


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
