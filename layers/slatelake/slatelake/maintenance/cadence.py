"""When maintenance may run: the process's switch and a lake's cadence.

**The switch.** ``SLATELAKE_MAINTENANCE_ENABLED`` (unset or empty: on) is
read with the options' boolean parser (``true``/``false``, ``t``/``f``,
``yes``/``no``, ``y``/``n``, ``1``/``0``, any case); any other spelling is
refused naming the variable. Off, nothing scheduled runs (a Lambda tick, a
session's ``MAINTENANCE_INTERVAL`` scheduler) and a manual pass is refused
before any lake is touched (``require_enabled``). A dry run is allowed: it
writes nothing, and it is how an operator sees what a pass would do before
switching maintenance back on. The fold is not maintenance: it keeps the
lake readable (the log folded, images written) and runs either way.

**The cadence.** A lake's policy may carry ``cron``: five fields in UTC,
``minute hour day-of-month month day-of-week``, each ``*``, a number, a range
``a-b``, a step ``*/n`` or ``a-b/n``, or a comma list of those (numbers:
minute 0-59, hour 0-23, day of month 1-31, month 1-12, day of week 0-7 with
0 and 7 Sunday; a step from 1 to the field's largest value). Names
(``MON``, ``JAN``), ``?``, ``L``, ``W``, ``#`` and ``@daily`` are not in the
subset; anything else is refused naming the field, its position and the
character where it starts. Day of month and day of week combine as
crontab(5) says: when both are restricted (neither starts with ``*``) a day
matching either runs; otherwise a day must match both (so ``*`` leaves the
other field alone to decide). A cron that can never fire (``0 0 30 2 *``)
is refused. UTC has no daylight saving: every day has each minute once.

**The stagger.** Many lakes given the same cron must not start at once, so
each lake's fire times are the cron's moved later by a delay of its own:
the first 8 bytes of BLAKE2b of the lake's canonical URL, big-endian, modulo
``STAGGER_MAX_S`` (600): 0 to 9 min 59 s, the same for a lake on every host.

**Due.** With a cron, a scheduled pass runs only when the lake has a fire
time in (its last scheduled pass's start, now]; else the tick answers
``not due until <next fire time> (policy cron '...')``. A last scheduled
pass that left work pending (a deadline ran out) does not count: the next
tick continues it. Without a cron every tick runs, as before.

Pure: reads only the environment; ``api.scheduled_due`` reads the lake.
"""

from __future__ import annotations

import calendar
import hashlib
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from typing import Any

from slatelake.durations import format_duration
from slatelake.errors import (
    MaintenanceDisabledError,
    MisconfigurationError,
)
from slatelake.maintenance.option_values import WS, parse_bool
from slatelake.store.location import show_input

ENABLED_ENV = "SLATELAKE_MAINTENANCE_ENABLED"
# A cron longer than this is no schedule a person wrote (every minute listed is 170).
MAX_CRON_CHARS = 200
STAGGER_MAX_S = 600
# A cron that fires at all fires within 28 years (the calendar's weekday cycle;
# a century year that is no leap year stretches it): search a little further.
_SEARCH_YEARS = 60
_FIELDS = (
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day of month", 1, 31),
    ("month", 1, 12),
    ("day of week", 0, 7),
)
_ITEM = re.compile(r"(\*|(\d{1,2})(?:-(\d{1,2}))?)(?:/(\d{1,2}))?", re.ASCII)
_SUBSET = "*, a number, a range a-b, a step */n or a-b/n, or a comma list of those"
_MINUTE = timedelta(minutes=1)
_DAY = timedelta(days=1)


# -- the switch ------------------------------------------------------------------
def _raw_switch(environ: Mapping[str, str] | None) -> str:
    return (os.environ if environ is None else environ).get(ENABLED_ENV, "")


def maintenance_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``SLATELAKE_MAINTENANCE_ENABLED`` lets maintenance run (unset
    or empty: yes); MaintenanceConfigError naming the variable for a value
    that is neither true nor false."""
    raw = _raw_switch(environ)
    if not raw.strip(WS):
        return True
    return parse_bool(ENABLED_ENV, raw)


def disabled_reason(environ: Mapping[str, str] | None = None) -> str:
    """Why nothing runs while the switch is off (a skipped tick's answer)."""
    return (
        f"maintenance is switched off ({ENABLED_ENV}={show_input(_raw_switch(environ))}); "
        f"set {ENABLED_ENV}=true, or unset it, to run passes again"
    )


def require_enabled(
    what: str, environ: Mapping[str, str] | None = None, *, dry_run_allowed: bool = False
) -> None:
    """MaintenanceDisabledError naming the variable and the fix when the switch
    is off (or misspelled): ``what`` (a pass, the threshold trigger) is
    refused; ``dry_run_allowed`` adds that a dry run of it is still allowed."""
    maintenance_switch(environ).require(what, dry_run_allowed=dry_run_allowed)


@dataclass(frozen=True)
class MaintenanceSwitch:
    """The process's maintenance switch as read now: ``enabled``, and when it
    is off, ``reason`` (what a skipped tick answers)."""

    enabled: bool
    reason: str | None = None

    def require(self, what: str, *, dry_run_allowed: bool = False) -> None:
        """MaintenanceDisabledError refusing ``what`` while the switch is off."""
        if not self.enabled:
            also = " (a dry run is still allowed)" if dry_run_allowed else ""
            raise MaintenanceDisabledError(f"{what} refused: {self.reason}{also}")


def maintenance_switch(environ: Mapping[str, str] | None = None) -> MaintenanceSwitch:
    """``SLATELAKE_MAINTENANCE_ENABLED`` read once (a misspelled value is
    refused naming the variable, so a bad deploy fails loudly)."""
    enabled = maintenance_enabled(environ)
    return MaintenanceSwitch(enabled, None if enabled else disabled_reason(environ))


# -- the cron --------------------------------------------------------------------
@dataclass(frozen=True)
class Cron:
    """A parsed cron: the values each field allows (day of week 0-6, Sunday
    0) and whether day of month or day of week started with ``*``."""

    text: str  # the five fields as given, one space between them
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    day_star: bool
    weekday_star: bool

    def day_matches(self, day: date) -> bool:
        """Whether the cron fires on ``day`` (month, then day of month and day
        of week as crontab(5) combines them)."""
        if day.month not in self.months:
            return False
        by_date = day.day in self.days
        by_weekday = day.isoweekday() % 7 in self.weekdays
        if self.day_star or self.weekday_star:
            return by_date and by_weekday
        return by_date or by_weekday

    def _times(self) -> list[tuple[int, int]]:
        return sorted((h, m) for h in self.hours for m in self.minutes)

    def next_after(self, at: datetime) -> datetime:
        """The first fire time strictly after ``at`` (UTC)."""
        start = _minute(at) + _MINUTE
        times = self._times()
        for day in self._days(start.date(), forward=True):
            for h, m in times:
                fire = datetime(day.year, day.month, day.day, h, m, tzinfo=UTC)
                if fire >= start:
                    return fire
        raise MisconfigurationError(f"cron {show_input(self.text)} never fires")

    def last_at_or_before(self, at: datetime) -> datetime:
        """The last fire time at or before ``at`` (UTC)."""
        end = _minute(at)
        times = self._times()[::-1]
        for day in self._days(end.date(), forward=False):
            for h, m in times:
                fire = datetime(day.year, day.month, day.day, h, m, tzinfo=UTC)
                if fire <= end:
                    return fire
        raise MisconfigurationError(f"cron {show_input(self.text)} never fires")

    def _days(self, first: date, forward: bool) -> Iterator[date]:
        """The days it fires on from ``first`` on (or back), months it skips
        jumped over whole."""
        day, limit = first, _SEARCH_YEARS * 366
        while limit > 0 and date.min + _DAY < day < date.max - _DAY:
            if day.month not in self.months:
                limit -= 1
                if forward:
                    day = date(day.year + day.month // 12, day.month % 12 + 1, 1)
                else:
                    day = date(day.year, day.month, 1) - _DAY
                continue
            if self.day_matches(day):
                yield day
            day += _DAY if forward else -_DAY
            limit -= 1


def _minute(at: datetime) -> datetime:
    """``at`` in UTC, to the whole minute (a naive datetime is taken as UTC)."""
    at = at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)
    return at.replace(second=0, microsecond=0)


def parse_cron(text: object, what: str = "cron") -> Cron:
    """The one parser of a cron (see the module doc); MisconfigurationError
    ``<what>=<text>: field N (name) ...`` naming the field, its position and
    the character where the refused item starts."""
    if not isinstance(text, str):
        raise MisconfigurationError(
            f"{what}={show_input(text)}: expected text, five fields such as '0 3 * * *'"
        )
    spelled = text.strip(WS)
    if len(spelled) > MAX_CRON_CHARS:
        raise MisconfigurationError(
            f"{what}=<{len(spelled)} characters>: longer than {MAX_CRON_CHARS}; no cron needs it"
        )
    if spelled.startswith("@"):
        raise MisconfigurationError(
            f"{what}={show_input(text)}: @-macros are not in slatelake's cron subset; give "
            "five fields (@daily is '0 0 * * *')"
        )
    lead = len(text) - len(text.lstrip(WS))  # positions count in the text as given
    parts = [(m.group(), lead + m.start() + 1) for m in re.finditer(r"[^ \t]+", spelled)]
    if len(parts) != len(_FIELDS):
        raise MisconfigurationError(
            f"{what}={show_input(text)}: expected 5 fields (minute hour day-of-month month "
            f"day-of-week, UTC) separated by spaces, got {len(parts)}"
        )
    sets = []
    for number, ((name, low, high), (field, at)) in enumerate(zip(_FIELDS, parts, strict=True), 1):
        where = f"{what}={show_input(text)}: field {number} ({name})"
        sets.append(_field(field, at, low, high, where))
    day_star, weekday_star = parts[2][0].startswith("*"), parts[4][0].startswith("*")
    minutes, hours, days, months, weekdays = (frozenset(values) for values in sets)
    cron = Cron(
        " ".join(p for p, _ in parts),
        minutes,
        hours,
        days,
        months,
        frozenset(d % 7 for d in weekdays),  # 7 is Sunday too
        day_star,
        weekday_star,
    )
    if day_star or weekday_star:
        # a day must match both: some month of the cron must have one of its days
        longest = max(calendar.monthrange(2024, m)[1] for m in cron.months)  # 2024: a leap year
        if min(cron.days) > longest:
            listed = ",".join(map(str, sorted(cron.months)))
            raise MisconfigurationError(
                f"{what}={show_input(text)}: day of month {min(cron.days)} never falls in month "
                f"{listed}; the cron would never fire"
            )
    return cron


def _field(field: str, at: int, low: int, high: int, where: str) -> set[int]:
    """One field's values; ``at`` is where it starts in the text (1-based)."""
    out: set[int] = set()
    offset = 0
    for item in field.split(","):
        here = f"{where} {show_input(item)} at character {at + offset}"
        offset += len(item) + 1
        match = _ITEM.fullmatch(item)
        if match is None:
            why = (
                "names are not in slatelake's cron subset; use numbers"
                if re.search("[A-Za-z]", item)
                else f"expected {_SUBSET}"
            )
            raise MisconfigurationError(f"{here}: {why}")
        star, first, last, step = match.groups()
        if star == "*":
            lo, hi = low, high
        else:
            lo = int(first)
            hi = lo if last is None else int(last)
            for value in (lo, hi):
                if not low <= value <= high:
                    raise MisconfigurationError(f"{here}: {value} is outside {low}-{high}")
            if lo > hi:
                raise MisconfigurationError(f"{here}: the range runs backwards ({lo} > {hi})")
            if step is not None and last is None:
                raise MisconfigurationError(f"{here}: a step needs * or a range (*/n, a-b/n)")
        stride = 1 if step is None else int(step)
        if not 1 <= stride <= high:
            raise MisconfigurationError(f"{here}: the step must be 1 to {high}")
        out.update(range(lo, hi + 1, stride))
    return out


# -- the stagger and the decision -----------------------------------------------
def stagger_s(lake_url: str) -> int:
    """This lake's delay after each of its cron's fire times, in whole seconds
    (0 to STAGGER_MAX_S - 1): stable for a lake, spread across lakes.
    ``lake_url`` is the canonical URL (``LakeLocation.parse(url).url``)."""
    digest = hashlib.blake2b(lake_url.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % STAGGER_MAX_S


def lake_fires(cron: Cron, lake_url: str, now: datetime) -> tuple[datetime, datetime]:
    """The lake's last fire time at or before ``now`` and its next after it
    (the cron's, moved by the lake's stagger)."""
    delay = timedelta(seconds=stagger_s(lake_url))
    return cron.last_at_or_before(now - delay) + delay, cron.next_after(now - delay) + delay


@dataclass(frozen=True)
class CadenceCheck:
    """Whether a scheduled tick on a lake is due now, and why."""

    due: bool
    reason: str
    cron: str | None = None
    stagger_s: int | None = None
    last_fire: datetime | None = None
    next_fire: datetime | None = None
    last_scheduled_start: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        def iso(at: datetime | None) -> str | None:
            return None if at is None else at.isoformat().replace("+00:00", "Z")

        return {
            "due": self.due,
            "reason": self.reason,
            "cron": self.cron,
            "stagger_s": self.stagger_s,
            "last_fire": iso(self.last_fire),
            "next_fire": iso(self.next_fire),
            "last_scheduled_start": iso(self.last_scheduled_start),
        }


def every_tick() -> CadenceCheck:
    return CadenceCheck(True, "no policy cron: every scheduled tick runs")


def decide(
    cron: Cron,
    lake_url: str,
    now: datetime,
    last_start: datetime | None,
    left_pending: bool = False,
) -> CadenceCheck:
    """Due when the lake has a fire time in (``last_start``, ``now``] (no
    scheduled pass yet: due), or when that pass left work pending."""
    last_fire, next_fire = lake_fires(cron, lake_url, now)
    delay = stagger_s(lake_url)
    known = CadenceCheck(False, "", cron.text, delay, last_fire, next_fire, last_start)
    if last_start is not None and left_pending:
        why = "the last scheduled pass left work pending; this tick continues it"
        return replace(known, due=True, reason=why)
    if last_start is None or last_fire > last_start:
        why = f"due: policy cron {show_input(cron.text)} fired at {_utc(last_fire)}"
        return replace(known, due=True, reason=why)
    why = (
        f"not due until {_utc(next_fire)} (policy cron {show_input(cron.text)}; this lake runs "
        f"{format_duration(delay) if delay else 'no time'} after each of its times)"
    )
    return replace(known, reason=why)


def _utc(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
