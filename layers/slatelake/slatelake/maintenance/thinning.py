"""Thinning: keep the newest snapshot per hour, day, week, month or year.

A rule such as ``hourly:24,daily:30,monthly:12`` keeps, for each of the 24
most recent calendar hours (UTC, the current one first), the newest snapshot
made in that hour; likewise for the 30 most recent days and the 12 most
recent months. What the rules keep is the union. Windows are calendar
buckets counted back from the pass's clock, not from the newest snapshot: a
lake nobody wrote to for a month keeps nothing hourly, as a clock-based
retention would. Expiry leaves the kept snapshots out of the explicit
versions list it hands DuckLake, after which retention holds and reader pins
still subtract their own; thinning never expires what they keep.

Buckets are read on UTC so a rule means the same on every host.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from slatelake.errors import MaintenanceConfigError
from slatelake.store.location import show_input

UNITS = ("hourly", "daily", "weekly", "monthly", "yearly")
# a year of hourly snapshots is 8,760; more buckets than this is a typo
MAX_COUNT = 100_000
_RULE = re.compile(r"([a-z]+):(\d{1,6})", re.ASCII)


@dataclass(frozen=True)
class Keep:
    """Thinning rules, as (unit, count) in the canonical order of ``UNITS``."""

    rules: tuple[tuple[str, int], ...]

    @property
    def text(self) -> str:
        return ",".join(f"{unit}:{count}" for unit, count in self.rules)


def parse_keep(option: str, value: object) -> Keep:
    """``hourly:24,daily:30`` (any order, spaces allowed, each unit once) ->
    Keep. Everything else is refused naming the option and a valid example."""
    example = "expected rules such as 'hourly:24,daily:30,monthly:12' (units: " + (
        ", ".join(UNITS) + ")"
    )
    if not isinstance(value, str):
        raise MaintenanceConfigError(f"{option}={show_input(value)}: {example}")
    parts = [p.strip(" \t") for p in value.strip(" \t\r\n").lower().split(",")]
    found: dict[str, int] = {}
    for part in parts:
        m = _RULE.fullmatch(part)
        if m is None or m.group(1) not in UNITS:
            raise MaintenanceConfigError(
                f"{option}={show_input(value)}: {show_input(part)} is not a rule; {example}"
            )
        unit, count = m.group(1), int(m.group(2))
        if unit in found:
            raise MaintenanceConfigError(
                f"{option}={show_input(value)}: {unit} is given twice; give each unit once"
            )
        if not 1 <= count <= MAX_COUNT:
            raise MaintenanceConfigError(
                f"{option}={show_input(value)}: {unit}:{count} must keep 1 to {MAX_COUNT}"
            )
        found[unit] = count
    return Keep(tuple((u, found[u]) for u in UNITS if u in found))


def _bucket(unit: str, at: datetime) -> int:
    """A bucket number that grows by one per unit of calendar time."""
    if unit == "hourly":
        return int(at.timestamp() // 3600)
    if unit == "daily":
        return at.toordinal()
    if unit == "weekly":
        return (at.toordinal() - 1) // 7  # ordinal 1 is a Monday: weeks start on Monday
    if unit == "monthly":
        return at.year * 12 + at.month - 1
    return at.year


def kept(
    keep: Keep, snapshots: Iterable[tuple[int, datetime]], now: datetime | None = None
) -> set[int]:
    """The snapshot ids the rules keep, from (id, time) pairs. Times without
    a zone are read as UTC; snapshots newer than ``now`` (a skewed clock)
    count in the current bucket."""
    at = (now or datetime.now(UTC)).astimezone(UTC)
    newest: dict[tuple[str, int], tuple[datetime, int]] = {}
    current = {unit: _bucket(unit, at) for unit, _ in keep.rules}
    for snapshot_id, made in snapshots:
        when = made if made.tzinfo is not None else made.replace(tzinfo=UTC)
        when = min(when.astimezone(UTC), at)
        for unit, count in keep.rules:
            bucket = _bucket(unit, when)
            if current[unit] - bucket >= count:
                continue
            key = (unit, bucket)
            best = newest.get(key)
            if best is None or (when, snapshot_id) > best:
                newest[key] = (when, snapshot_id)
    return {snapshot_id for _, snapshot_id in newest.values()}


__all__ = ["UNITS", "Keep", "kept", "parse_keep"]
