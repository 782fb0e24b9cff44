"""One duration grammar, read the same by every option, setting and flag."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slatelake.catalog.commit_lock import WAIT_ENV, seconds_from_env
from slatelake.cli import build_parser
from slatelake.durations import MAX_DURATION_S, env_duration, format_duration, parse_duration
from slatelake.errors import MaintenanceConfigError, MisconfigurationError
from slatelake.maintenance.flight import TTL_ENV, default_ttl_s
from slatelake.maintenance.options import parse_options
from slatelake.store._bindings import STORE_TIMEOUT_ENV, store_timeout_s
from slatelake.store.db import COMPACTOR_POLL_ENV, compactor_poll_interval_s


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("200ms", 0.2),
        ("90s", 90),
        ("10m", 600),
        ("1h30m", 5400),
        ("1h 30m", 5400),
        ("7 days", 7 * 86400),
        ("1.5h", 5400),
        ("30", 30),
        (" 2 Hours ", 7200),
        ("1w", 7 * 86400),
        ("2 min 5 sec", 125),
        (45, 45),
        (0.5, 0.5),
    ],
)
def test_every_documented_spelling_reads_as_its_seconds(text: object, seconds: float) -> None:
    assert parse_duration("X", text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("", "expected a duration"),
        ("1h30", "expected a duration"),  # a compound term without its unit
        ("-5s", "must not be negative"),
        ("5 parsecs", "unknown unit 'parsecs'"),
        ("\uff11\uff10s", "expected a duration"),  # full-width digits
        ("\u0661\u0660s", "expected a duration"),  # Arabic-Indic digits
        ("10\u0455", "expected a duration"),  # Cyrillic dze for s
        ("1e5s", "unknown unit 'e'"),
        ("nan", "expected a duration"),
        ("inf s", "expected a duration"),
        ("5s\x00", "expected a duration"),
        ("9" * 40, "expected a duration"),
        ("0", "must be positive"),
        ("400d", "must be at most 365d"),
        (True, "expected a duration"),
        (None, "expected a duration"),
        (math.inf, "expected a finite duration"),
        (10**400, "expected a finite duration"),  # no float holds it: refused, not OverflowError
        ([5], "expected a duration"),
    ],
)
def test_a_value_outside_the_grammar_is_refused_naming_the_setting(
    value: object, says: str
) -> None:
    with pytest.raises(MisconfigurationError, match="^SOME_SETTING=") as caught:
        parse_duration("SOME_SETTING", value)
    assert says in str(caught.value)


def test_zero_is_a_duration_only_where_the_setting_allows_it() -> None:
    assert parse_duration("--wait", "0s", allow_zero=True) == 0
    with pytest.raises(MisconfigurationError, match="must be positive"):
        parse_duration("MAINTENANCE_INTERVAL", "0s")


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=1, max_value=MAX_DURATION_S * 1000))
def test_a_formatted_duration_reads_back_as_itself(millis: int) -> None:
    seconds = millis / 1000
    assert parse_duration("X", format_duration(seconds)) == pytest.approx(seconds)


def test_an_unset_or_empty_setting_takes_its_default() -> None:
    assert env_duration("UNSET", 7.0, environ={}) == 7.0
    assert env_duration("EMPTY", 7.0, environ={"EMPTY": "  "}) == 7.0
    with pytest.raises(MisconfigurationError, match="^BAD='soon'"):
        env_duration("BAD", 7.0, environ={"BAD": "soon"})


def test_the_maintenance_interval_takes_the_same_grammar_as_the_settings(
    signatures: dict[str, dict[str, str]],
) -> None:
    for text, seconds in (("10000ms", 10), ("1h30m", 5400), ("7 days", 7 * 86400)):
        options = parse_options({"MAINTENANCE_INTERVAL": text}, signatures)
        assert options.interval_s == pytest.approx(seconds)
    timeout = parse_options({"MAINTENANCE_COMPACT_STORE_TIMEOUT": "1m30s"}, signatures)
    assert timeout.compact_store_timeout_s == 90
    with pytest.raises(MaintenanceConfigError, match="MAINTENANCE_INTERVAL='1h30'"):
        parse_options({"MAINTENANCE_INTERVAL": "1h30"}, signatures)


def test_every_duration_setting_reads_the_grammar(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(COMPACTOR_POLL_ENV, "200ms")
    assert compactor_poll_interval_s() == pytest.approx(0.2)
    monkeypatch.setenv(COMPACTOR_POLL_ENV, "1m30s")
    assert compactor_poll_interval_s() == pytest.approx(90)
    monkeypatch.setenv(STORE_TIMEOUT_ENV, "90s")
    assert store_timeout_s() == 90
    monkeypatch.setenv(TTL_ENV, "2m")
    assert default_ttl_s() == 120
    monkeypatch.setenv(WAIT_ENV, "1500ms")
    assert seconds_from_env(WAIT_ENV, 10.0) == pytest.approx(1.5)
    for name, read in (
        (COMPACTOR_POLL_ENV, compactor_poll_interval_s),
        (STORE_TIMEOUT_ENV, store_timeout_s),
        (TTL_ENV, default_ttl_s),
    ):
        monkeypatch.setenv(name, "\uff15s")
        with pytest.raises(MisconfigurationError, match=f"^{name}="):
            read()
        monkeypatch.delenv(name)


def test_the_wait_flag_takes_the_grammar() -> None:
    parser = build_parser()
    args = parser.parse_args(["maintain", "file:///tmp/some-lake", "--wait", "1m30s"])
    assert args.wait == 90
    assert parser.parse_args(["maintain", "file:///tmp/some-lake", "--wait", "0"]).wait == 0
    with pytest.raises(SystemExit):
        parser.parse_args(["maintain", "file:///tmp/some-lake", "--wait", "-1s"])
