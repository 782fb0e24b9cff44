"""Thinning: the newest snapshot per hour, day, week, month or year is kept,
counted back in calendar buckets (UTC) from the pass's clock; the rules are
parsed once and refused naming the option; a pass thins a year of hourly
history to exactly the expected snapshots, and holds and pins still win."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

import slatelake
from slatelake import MaintenanceConfigError, maintenance
from slatelake.ducklake.session import META_DB
from slatelake.maintenance import policy
from slatelake.maintenance.options import bind
from slatelake.maintenance.thinning import Keep, kept, parse_keep

UTC = dt.UTC
HOURS_IN_A_YEAR = 8760
KEEP = "hourly:24,daily:30,monthly:12"


def _expected(times: dict[int, dt.datetime], now: dt.datetime) -> set[int]:
    """The oracle, by another route: bucket labels as text, the last N of them
    counted back from now's label by calendar arithmetic."""
    hours = {(now - dt.timedelta(hours=k)).strftime("%Y-%m-%d %H") for k in range(24)}
    days = {(now - dt.timedelta(days=k)).strftime("%Y-%m-%d") for k in range(30)}
    months = set()
    year, month = now.year, now.month
    for _ in range(12):
        months.add(f"{year:04d}-{month:02d}")
        year, month = (year, month - 1) if month > 1 else (year - 1, 12)
    out: set[int] = set()
    for fmt, labels in (("%Y-%m-%d %H", hours), ("%Y-%m-%d", days), ("%Y-%m", months)):
        newest: dict[str, int] = {}
        for sid, at in times.items():
            label = at.strftime(fmt)
            if label in labels and (label not in newest or times[newest[label]] < at):
                newest[label] = sid
        out |= set(newest.values())
    return out


def _year(now: dt.datetime) -> dict[int, dt.datetime]:
    start = now - dt.timedelta(hours=HOURS_IN_A_YEAR - 1)
    return {i: start + dt.timedelta(hours=i) for i in range(HOURS_IN_A_YEAR)}


@pytest.mark.parametrize(
    "now",
    [
        dt.datetime(2026, 12, 6, 13, 30, tzinfo=UTC),
        dt.datetime(2027, 1, 1, 0, 5, tzinfo=UTC),  # a new year's first minutes
        dt.datetime(2028, 3, 1, 0, 0, tzinfo=UTC),  # after a leap day
    ],
)
def test_thinning_keeps_the_newest_per_hour_day_and_month_of_a_year(now: dt.datetime) -> None:
    times = _year(now)
    assert kept(parse_keep("K", KEEP), times.items(), now) == _expected(times, now)


def test_thinning_reads_times_as_utc_whatever_their_zone() -> None:
    now = dt.datetime(2026, 12, 6, 13, 30, tzinfo=UTC)
    times = _year(now)
    tokyo = dt.timezone(dt.timedelta(hours=9))
    shifted = {i: t.astimezone(tokyo) for i, t in times.items()}
    naive = {i: t.replace(tzinfo=None) for i, t in times.items()}
    rule = parse_keep("K", "daily:7,weekly:4,yearly:2")
    assert kept(rule, shifted.items(), now) == kept(rule, times.items(), now)
    assert kept(rule, naive.items(), now) == kept(rule, times.items(), now)


def test_a_lake_left_alone_keeps_nothing_hourly() -> None:
    """Buckets count back from the clock, not from the newest snapshot."""
    now = dt.datetime(2026, 12, 6, 13, 30, tzinfo=UTC)
    month_ago = {i: now - dt.timedelta(days=40, hours=i) for i in range(48)}
    assert kept(parse_keep("K", "hourly:24"), month_ago.items(), now) == set()
    assert kept(parse_keep("K", "monthly:3"), month_ago.items(), now) == {0}


@pytest.mark.parametrize(
    "text",
    [
        "",
        "hourly",
        "hourly:",
        "hourly:0",
        "hourly:-1",
        "hourly:24,hourly:12",
        "minutely:5",
        "hourly:24;daily:3",
        "hourly:１２",  # a full-width digit
        "hourly:9999999",
    ],
)
def test_bad_thinning_rules_are_refused_naming_the_option(text: str) -> None:
    with pytest.raises(MaintenanceConfigError, match="MAINTENANCE_EXPIRE_SNAPSHOTS_KEEP"):
        bind({"MAINTENANCE_EXPIRE_SNAPSHOTS_KEEP": text})


def test_thinning_rules_bind_in_canonical_order_and_imply_expiry() -> None:
    options = bind({"maintenance_expire_snapshots_keep": " Monthly:12 , HOURLY:24 "})
    step = options.steps["expire_snapshots"]
    assert step.enabled and step.params["keep"] == Keep((("hourly", 24), ("monthly", 12)))
    assert step.params["keep"].text == "hourly:24,monthly:12"
    with pytest.raises(MaintenanceConfigError, match="give each unit once"):
        parse_keep("X", "daily:1,DAILY:2")


def test_the_policy_keep_field_is_the_lakes_own_and_canonical() -> None:
    assert policy.parse_fields({"keep": "daily:30, hourly:24"}) == {"keep": "hourly:24,daily:30"}
    assert policy.parse_fields({"keep": "none"}) == {"keep": ""}
    with pytest.raises(MaintenanceConfigError, match="keep"):
        policy.parse_fields({"keep": "weekly:zero"})
    with pytest.raises(MaintenanceConfigError, match="lake's own"):
        policy.check_scope_fields(policy.Scope.of(table="t"), ["keep"])


def _synthetic_year(url: str, data: str, now: dt.datetime) -> dict[int, dt.datetime]:
    """A lake whose snapshots are a year of hourly commits: the real first
    three (schema, table, rows) retimed, the rest written as DuckLake writes
    an empty snapshot, through the session's metadata path (a test's)."""
    start = now - dt.timedelta(hours=HOURS_IN_A_YEAR - 1)
    with slatelake.connect(url, data_path=data) as s:
        s.sql("CREATE TABLE t (a INTEGER)")
        s.sql("INSERT INTO t VALUES (1), (2)")
        with s.writing_metadata():
            s.sql(
                f"UPDATE {META_DB}.ducklake_snapshot "
                "SET snapshot_time = CAST(? AS TIMESTAMPTZ) + to_hours(snapshot_id)",
                [start.isoformat()],
            )
            s.sql(
                f"INSERT INTO {META_DB}.ducklake_snapshot "
                "SELECT i, CAST(? AS TIMESTAMPTZ) + to_hours(i), v, c, f "
                f"FROM range(3, {HOURS_IN_A_YEAR}) r(i), (SELECT schema_version v, "
                f"next_catalog_id c, next_file_id f FROM {META_DB}.ducklake_snapshot "
                "WHERE snapshot_id = 2)",
                [start.isoformat()],
            )
    return _year(now)


def _snapshots(url: str) -> set[int]:
    with slatelake.connect(url, read_only=True) as s:
        return {r[0] for r in s.sql("SELECT snapshot_id FROM lake.snapshots()").fetchall()}


def test_a_pass_thins_a_year_of_hourly_history_and_holds_and_pins_still_win(
    tmp_path: Path,
) -> None:
    url, data = (tmp_path / "lake").as_uri(), f"{tmp_path / 'data'}/"
    # the pass reads its own clock: build the year to end within this hour
    now = dt.datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    times = _synthetic_year(url, data, now)
    assert len(_snapshots(url)) == HOURS_IN_A_YEAR
    held, pinned = 1000, 2000  # thinning would expire both
    expected = _expected(times, now)
    assert held not in expected and pinned not in expected
    maintenance.protect(url, held, "audit")
    options: dict[str, Any] = {"MAINTENANCE_EXPIRE_SNAPSHOTS_KEEP": KEEP}
    with slatelake.connect(url, read_only=True) as reader:
        reader.pin(pinned)
        dry = maintenance.run(url, options, dry_run=True)
        assert dry.plan is not None
        planned = dry.plan["expire_snapshots"]
        report = maintenance.run(url, options)
    newest = HOURS_IN_A_YEAR - 1
    assert _snapshots(url) == expected | {held, pinned, newest}
    counts = report.step("expire_snapshots").counts
    assert counts == {
        "snapshots_expired": HOURS_IN_A_YEAR - len(expected | {held, pinned, newest}),
        "snapshots_kept_by_thinning": len(expected - {newest}),
        "snapshots_kept_by_holds": 1,
        "snapshots_kept_by_pins": 1,
    }
    assert planned.total == counts["snapshots_expired"]
    assert planned.details["kept_by_pins"] == [pinned]
    assert "kept by thinning" in report.step("expire_snapshots").detail
