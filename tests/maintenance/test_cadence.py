"""The maintenance switch and a lake's cadence, without a lake: the cron
subset (what it accepts, what it refuses and how it says so), next and last
fire times against a brute-force minute walk, crontab(5)'s day-of-month /
day-of-week rule, UTC without daylight saving, the per-lake stagger, and
when a scheduled tick is due."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slatelake import MaintenanceConfigError, MisconfigurationError
from slatelake.maintenance.cadence import (
    ENABLED_ENV,
    STAGGER_MAX_S,
    Cron,
    decide,
    disabled_reason,
    lake_fires,
    maintenance_enabled,
    parse_cron,
    require_enabled,
    stagger_s,
)

pytestmark = pytest.mark.fast

T0 = datetime(2026, 12, 6, 8, 35, 17, tzinfo=UTC)  # a Sunday


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def _walk(cron: Cron, start: datetime, step: int, limit_days: int) -> datetime:
    """The first fire time from ``start`` on (``step`` 1) or back (-1), found
    by trying every minute of every day the day fields allow (the definition)."""
    t = start.replace(second=0, microsecond=0)
    for _ in range(limit_days + 2):
        if cron.day_matches(t.date()):
            while True:
                if t.hour in cron.hours and t.minute in cron.minutes:
                    return t
                moved = t + timedelta(minutes=step)
                if moved.date() != t.date():
                    t = moved
                    break
                t = moved
        else:
            day = t.date() + timedelta(days=step)
            t = datetime(day.year, day.month, day.day, tzinfo=UTC)
            if step < 0:
                t += timedelta(hours=23, minutes=59)
    raise AssertionError("no fire time found by walking")


def brute_next(cron: Cron, start: datetime, limit_days: int = 800) -> datetime:
    return _walk(cron, start.replace(second=0, microsecond=0) + timedelta(minutes=1), 1, limit_days)


def brute_last(cron: Cron, end: datetime, limit_days: int = 800) -> datetime:
    return _walk(cron, end, -1, limit_days)


# -- the switch ------------------------------------------------------------------
@pytest.mark.parametrize("raw", ["", "   ", "\t"])
def test_an_unset_or_empty_switch_is_on(raw: str) -> None:
    assert maintenance_enabled({}) is True
    assert maintenance_enabled({ENABLED_ENV: raw}) is True


@pytest.mark.parametrize(
    ("raw", "on"),
    [("true", True), ("TRUE", True), (" yes ", True), ("1", True), ("t", True), ("y", True)]
    + [("false", False), ("False", False), ("no", False), ("0", False), ("f", False)]
    + [("n", False), (" false\n", False)],
)
def test_the_switch_takes_the_options_boolean_spellings(raw: str, on: bool) -> None:
    assert maintenance_enabled({ENABLED_ENV: raw}) is on


@pytest.mark.parametrize("raw", ["off", "on", "disabled", "2", "nope", "fals", "true!", "\x00"])
def test_any_other_spelling_of_the_switch_is_refused_naming_it(raw: str) -> None:
    with pytest.raises(MaintenanceConfigError, match=f"^{ENABLED_ENV}="):
        maintenance_enabled({ENABLED_ENV: raw})


def test_require_enabled_names_the_variable_and_the_fix() -> None:
    require_enabled("a pass", {})  # on: nothing
    with pytest.raises(MaintenanceConfigError) as caught:
        require_enabled("a manual maintenance pass", {ENABLED_ENV: "false"})
    message = str(caught.value)
    assert message.startswith("a manual maintenance pass refused: maintenance is switched off")
    assert f"{ENABLED_ENV}='false'" in message and f"set {ENABLED_ENV}=true" in message
    assert "dry run" not in message
    with pytest.raises(MaintenanceConfigError, match="a dry run is still allowed"):
        require_enabled("a pass", {ENABLED_ENV: "0"}, dry_run_allowed=True)
    assert ENABLED_ENV in disabled_reason({ENABLED_ENV: "no"})


# -- the subset ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "field", "values"),
    [
        ("* * * * *", "minutes", set(range(60))),
        ("*/15 * * * *", "minutes", {0, 15, 30, 45}),
        ("1,2 * * * *", "minutes", {1, 2}),
        ("10-12 * * * *", "minutes", {10, 11, 12}),
        ("0-30/10 * * * *", "minutes", {0, 10, 20, 30}),
        ("05 * * * *", "minutes", {5}),
        ("0 */6 * * *", "hours", {0, 6, 12, 18}),
        ("0 1,13-14 * * *", "hours", {1, 13, 14}),
        ("0 0 1,15 * *", "days", {1, 15}),
        ("0 0 * 1-3,12 *", "months", {1, 2, 3, 12}),
        ("0 0 * * 1-5", "weekdays", {1, 2, 3, 4, 5}),
        ("0 0 * * 7", "weekdays", {0}),
        ("0 0 * * 5-7", "weekdays", {5, 6, 0}),
        ("0 0 * * */7", "weekdays", {0}),
        ("0 0 * * */2", "weekdays", {0, 2, 4, 6}),
    ],
)
def test_the_subset_reads_each_form(text: str, field: str, values: set[int]) -> None:
    assert set(getattr(parse_cron(text), field)) == values


def test_the_text_is_kept_as_five_fields_with_one_space() -> None:
    assert parse_cron("  0\t3  *  * *\n").text == "0 3 * * *"
    assert parse_cron(parse_cron("0  3 * * *").text).text == "0 3 * * *"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("0 3 * * 8", "field 5 (day of week) '8' at character 9: 8 is outside 0-7"),
        ("60 * * * *", "field 1 (minute) '60' at character 1: 60 is outside 0-59"),
        ("0 24 * * *", "field 2 (hour) '24' at character 3: 24 is outside 0-23"),
        ("0 0 0 * *", "field 3 (day of month) '0' at character 5: 0 is outside 1-31"),
        ("0 0 32 * *", "field 3 (day of month) '32' at character 5"),
        ("0 0 * 13 *", "field 4 (month) '13' at character 7: 13 is outside 1-12"),
        ("0 0 * 0 *", "field 4 (month) '0'"),
        ("0 3 * * MON", "field 5 (day of week) 'MON' at character 9: names are not"),
        ("0 3 * JAN *", "field 4 (month) 'JAN' at character 7: names are not"),
        ("0 3 ? * *", "field 3 (day of month) '?' at character 5: expected *"),
        ("0 3 L * *", "field 3 (day of month) 'L' at character 5: names are not"),
        ("0 3 15W * *", "field 3 (day of month) '15W'"),
        ("0 3 * * 1#2", "field 5 (day of week) '1#2'"),
        ("*/0 * * * *", "field 1 (minute) '*/0' at character 1: the step must be 1 to 59"),
        ("*/60 * * * *", "the step must be 1 to 59"),
        ("5/15 * * * *", "field 1 (minute) '5/15' at character 1: a step needs * or a range"),
        ("0 5-1 * * *", "field 2 (hour) '5-1' at character 3: the range runs backwards"),
        ("0,,5 * * * *", "field 1 (minute) '' at character 3"),
        ("0, * * * *", "field 1 (minute) '' at character 3"),
        ("1,2,x * * * *", "field 1 (minute) 'x' at character 5"),
        ("-1 * * * *", "field 1 (minute) '-1' at character 1"),
        ("*-5 * * * *", "field 1 (minute) '*-5'"),
        ("007 * * * *", "field 1 (minute) '007'"),
        ("\u0661 * * * *", "field 1 (minute)"),  # an Arabic-Indic digit
        ("  0 3 * * 9", "field 5 (day of week) '9' at character 11"),
        ("0 3 * *", "expected 5 fields"),
        ("0 3 * * * *", "expected 5 fields (minute hour day-of-month month day-of-week, UTC)"),
        ("", "expected 5 fields"),
        ("@daily", "@-macros are not in slatelake's cron subset"),
        ("0 0 30 2 *", "day of month 30 never falls in month 2; the cron would never fire"),
        ("0 0 31 4,6,9,11 *", "day of month 31 never falls in month 4,6,9,11"),
        ("0 0 31 2 */1", "never falls in month 2"),
        ("0 3 * * *\x00", "field 5 (day of week)"),
    ],
)
def test_anything_else_is_refused_naming_the_field_and_position(text: str, words: str) -> None:
    with pytest.raises(MisconfigurationError) as caught:
        parse_cron(text, "policy cron")
    message = str(caught.value)
    assert message.startswith("policy cron="), message
    assert words in message, message
    assert "\n" not in message


@pytest.mark.parametrize("value", [None, 3, 3.0, True, [], {}, b"0 3 * * *"])
def test_a_cron_is_text(value: object) -> None:
    with pytest.raises(MisconfigurationError, match="expected text"):
        parse_cron(value)


def test_a_cron_is_bounded_in_length() -> None:
    every = ",".join(map(str, range(60)))
    assert len(parse_cron(f"{every} * * * *").minutes) == 60  # 170 characters: accepted
    with pytest.raises(MisconfigurationError, match="longer than 200"):
        parse_cron(f"{every},{every} * * * *")


def test_day_31_alone_in_some_months_still_fires() -> None:
    cron = parse_cron("0 0 31 2,3 *")  # never in February, always in March
    assert cron.next_after(T0) == at("2027-03-31T00:00")


def test_an_impossible_date_with_a_restricted_weekday_fires_on_the_weekday() -> None:
    """Both restricted: either matches, so the 30th of February never blocks it."""
    cron = parse_cron("0 0 30 2 1")
    assert cron.next_after(T0) == at("2027-02-01T00:00")  # the first Monday of February


# -- next and last fire times ------------------------------------------------------
def test_the_daily_example() -> None:
    cron = parse_cron("0 3 * * *")
    assert cron.next_after(T0) == at("2026-12-07T03:00")
    assert cron.last_at_or_before(T0) == at("2026-12-06T03:00")


def test_next_is_strictly_after_and_last_is_at_or_before() -> None:
    cron = parse_cron("0 3 * * *")
    fire = at("2026-12-06T03:00")
    assert cron.next_after(fire) == at("2026-12-07T03:00")
    assert cron.last_at_or_before(fire) == fire
    assert cron.last_at_or_before(fire - timedelta(microseconds=1)) == at("2026-12-05T03:00")
    assert cron.next_after(fire - timedelta(microseconds=1)) == fire
    assert cron.next_after(fire + timedelta(seconds=59)) == at("2026-12-07T03:00")


def test_times_cross_month_year_and_leap_day() -> None:
    assert parse_cron("30 23 31 12 *").next_after(T0) == at("2026-12-31T23:30")
    assert parse_cron("0 0 1 1 *").next_after(T0) == at("2027-01-01T00:00")
    assert parse_cron("0 0 1 1 *").last_at_or_before(T0) == at("2026-01-01T00:00")
    leap = parse_cron("0 12 29 2 *")
    assert leap.next_after(T0) == at("2028-02-29T12:00")
    assert leap.last_at_or_before(T0) == at("2024-02-29T12:00")


def test_the_29th_of_february_on_a_sunday_is_decades_apart() -> None:
    cron = parse_cron("0 0 29 2 */7")  # starts with *: both must match
    found = cron.next_after(T0)
    assert found == at("2032-02-29T00:00") and found.isoweekday() == 7
    back = cron.last_at_or_before(T0)
    assert back == at("2004-02-29T00:00") and back.isoweekday() == 7


def test_a_naive_or_offset_instant_is_read_in_utc() -> None:
    cron = parse_cron("0 3 * * *")
    naive = datetime(2026, 12, 6, 8, 35)
    assert cron.next_after(naive) == at("2026-12-07T03:00")
    tokyo = datetime(2026, 12, 6, 11, 30, tzinfo=timezone(timedelta(hours=9)))
    assert cron.next_after(tokyo) == at("2026-12-06T03:00")  # 02:30 UTC


# -- day of month and day of week, as crontab(5) combines them ---------------------
def test_both_restricted_means_either() -> None:
    cron = parse_cron("0 0 13 * 5")  # the 13th, or any Friday
    fires = [T0]
    for _ in range(6):
        fires.append(cron.next_after(fires[-1]))
    days = [f.date().isoformat() for f in fires[1:]]
    assert days == [
        "2026-12-11",
        "2026-12-13",
        "2026-12-18",
        "2026-12-25",
        "2027-01-01",
        "2027-01-08",
    ]


def test_a_star_day_of_month_leaves_the_weekday_to_decide() -> None:
    cron = parse_cron("0 0 * * 1")  # Mondays only, not every day
    assert [cron.next_after(T0), cron.next_after(at("2026-12-07T00:00"))] == [
        at("2026-12-07T00:00"),
        at("2026-12-14T00:00"),
    ]


def test_a_star_weekday_leaves_the_day_of_month_to_decide() -> None:
    cron = parse_cron("0 0 1 * *")
    assert cron.next_after(T0) == at("2027-01-01T00:00")


def test_a_field_starting_with_star_counts_as_unrestricted() -> None:
    """crontab(5): restricted means "does not start with *": with */2 as the
    day of month the days must match both fields (odd days that are Mondays)."""
    cron = parse_cron("0 0 */2 * 1")
    found = cron.next_after(T0)
    assert found == at("2026-12-07T00:00")  # Monday the 7th (odd)
    assert cron.next_after(found) == at("2026-12-21T00:00")  # the 14th is even: skipped
    either = parse_cron("0 0 1-31/2 * 1")  # the same days, written as a range: restricted
    assert either.next_after(T0) == at("2026-12-07T00:00")
    assert either.next_after(at("2026-12-07T00:00")) == at("2026-12-09T00:00")  # odd, not Monday


def test_the_month_restricts_both_day_fields() -> None:
    cron = parse_cron("0 0 15 6 1")  # June only: the 15th or a Monday in June
    assert cron.next_after(T0) == at("2027-06-07T00:00")
    assert cron.next_after(at("2027-06-14T00:00")) == at("2027-06-15T00:00")


def test_sunday_is_zero_and_seven() -> None:
    assert parse_cron("0 0 * * 0").next_after(T0) == parse_cron("0 0 * * 7").next_after(T0)
    assert parse_cron("0 0 * * 7").next_after(T0) == at("2026-12-13T00:00")


# -- UTC: no daylight saving -------------------------------------------------------
@pytest.mark.parametrize("day", ["2026-03-29", "2026-10-25", "2026-03-08", "2026-11-01"])
def test_dst_change_days_have_every_minute_once(day: str) -> None:
    """The days Europe and the US change clocks: in UTC each hour fires once."""
    cron = parse_cron("30 * * * *")
    t = at(f"{day}T00:00") - timedelta(minutes=1)
    fires = []
    while True:
        t = cron.next_after(t)
        if t.date().isoformat() != day:
            break
        fires.append(t)
    assert [f.hour for f in fires] == list(range(24))
    assert all(b - a == timedelta(hours=1) for a, b in zip(fires, fires[1:], strict=False))


# -- against the definition ---------------------------------------------------------
FIELD_ITEMS = {
    "minute": st.sampled_from(["*", "0", "*/15", "5,35", "10-20/5", "59"]),
    "hour": st.sampled_from(["*", "3", "*/6", "0-5", "22,23"]),
    "day": st.sampled_from(["*", "1", "13", "29", "31", "*/10", "1-7", "15,28"]),
    "month": st.sampled_from(["*", "2", "1-3", "*/4", "2,12", "6"]),
    "weekday": st.sampled_from(["*", "0", "5", "1-5", "*/3", "6,7"]),
}


@settings(max_examples=60, deadline=None)
@given(
    fields=st.fixed_dictionaries(FIELD_ITEMS),
    offset_min=st.integers(min_value=0, max_value=2 * 365 * 1440),
)
def test_next_and_last_match_a_minute_by_minute_walk(
    fields: dict[str, str], offset_min: int
) -> None:
    text = " ".join(fields[name] for name in FIELD_ITEMS)
    try:
        cron = parse_cron(text)
    except MisconfigurationError as exc:
        assert "never fire" in str(exc)
        return
    start = at("2026-01-01T00:00") + timedelta(minutes=offset_min, seconds=17)
    expected = brute_next(cron, start, limit_days=40 * 366)
    assert cron.next_after(start) == expected
    assert cron.last_at_or_before(expected) == expected
    assert cron.last_at_or_before(start) == brute_last(cron, start, limit_days=40 * 366)


# -- the stagger and the decision ---------------------------------------------------
LAKE = "s3://bucket/lakes/sales"


def test_the_stagger_is_stable_bounded_and_spread() -> None:
    assert stagger_s(LAKE) == stagger_s(LAKE)
    delays = {stagger_s(f"s3://bucket/lakes/lake{i}") for i in range(200)}
    assert all(0 <= d < STAGGER_MAX_S for d in delays)
    assert len(delays) > 150  # 200 lakes land on many different seconds
    assert max(delays) - min(delays) > STAGGER_MAX_S * 0.8


def test_a_lakes_fire_times_are_the_crons_moved_by_its_stagger() -> None:
    cron = parse_cron("0 3 * * *")
    delay = timedelta(seconds=stagger_s(LAKE))
    last, following = lake_fires(cron, LAKE, T0)
    assert last == at("2026-12-06T03:00") + delay
    assert following == at("2026-12-07T03:00") + delay
    # just before today's staggered time, the last one is yesterday's
    before = at("2026-12-06T03:00") + delay - timedelta(microseconds=1)
    if delay >= timedelta(minutes=1):
        assert lake_fires(cron, LAKE, before)[0] == at("2026-12-05T03:00") + delay


def test_no_scheduled_pass_yet_is_due() -> None:
    check = decide(parse_cron("0 3 * * *"), LAKE, T0, None)
    assert check.due and "fired at 2026-12-06 03:" in check.reason


def test_a_fire_time_since_the_last_scheduled_pass_is_due() -> None:
    cron = parse_cron("0 3 * * *")
    yesterday = at("2026-12-05T08:00")
    check = decide(cron, LAKE, T0, yesterday)
    assert check.due and check.last_scheduled_start == yesterday


def test_no_fire_time_since_the_last_scheduled_pass_waits_for_the_next() -> None:
    cron = parse_cron("0 3 * * *")
    check = decide(cron, LAKE, T0, at("2026-12-06T04:00"))
    assert not check.due
    delay = timedelta(seconds=stagger_s(LAKE))
    next_fire = at("2026-12-07T03:00") + delay
    assert check.next_fire == next_fire
    assert check.reason.startswith(
        f"not due until {next_fire:%Y-%m-%d %H:%M:%S} UTC (policy cron '0 3 * * *'"
    )
    doc = check.to_dict()
    assert doc["due"] is False and doc["next_fire"].endswith("Z") and doc["cron"] == "0 3 * * *"


def test_the_interval_is_open_at_the_last_start_and_closed_at_now() -> None:
    cron = parse_cron("0 3 * * *")
    fire, _ = lake_fires(cron, LAKE, T0)
    assert not decide(cron, LAKE, T0, fire).due  # a pass that began at the fire time
    assert decide(cron, LAKE, T0, fire - timedelta(microseconds=1)).due
    assert decide(cron, LAKE, fire, fire - timedelta(seconds=1)).due  # now == the fire time


def test_a_scheduled_pass_that_left_work_pending_is_continued() -> None:
    cron = parse_cron("0 3 * * *")
    check = decide(cron, LAKE, T0, at("2026-12-06T04:00"), left_pending=True)
    assert check.due and "work pending" in check.reason
