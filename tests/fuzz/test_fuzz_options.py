"""Fuzz: maintenance options bind to typed values DuckLake accepts, or are
refused at bind with a MaintenanceConfigError naming the option on one line.

Keys come as any text (homoglyphs, aliases, case, whitespace, NUL) and, from
a Python caller, as anything hashable; values as text, numbers of any size,
NaN, booleans, null, lists. ``parse_options`` and ``--option`` parsing never
raise anything else.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import duckdb
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from slatelake.cli.common import parse_kv
from slatelake.durations import MAX_DURATION_S
from slatelake.maintenance.option_values import (
    MAX_WINDOW_S,
    Instant,
    Interval,
    Versions,
    parse_bool,
)
from slatelake.maintenance.options import (
    MAX_INTERVAL_S,
    MIN_INTERVAL_S,
    ORPHAN_AGE_FLOOR_S,
    MaintenanceConfigError,
    MaintenanceOptions,
    parse_options,
)
from slatelake.store.keys import Subspace
from tests.fuzz.hostile import NASTY_STRINGS, fuzz, hostile_text, named, one_line
from tests.fuzz.inputs import KNOWN, P, canonical, option_keys, option_values

pytestmark = [pytest.mark.fast, pytest.mark.filterwarnings("ignore:Generating overly large repr")]


@pytest.fixture(scope="module")
def duck() -> Iterator[duckdb.DuckDBPyConnection]:
    con = duckdb.connect()
    yield con
    con.close()


def _typed(opts: MaintenanceOptions, signatures: dict[str, dict[str, str]]) -> None:
    """Every bound value is of the type DuckLake declares, in DuckLake's range."""
    for step, config in opts.steps.items():
        for param, value in config.params.items():
            kind = signatures[step][param]
            if kind == "BOOLEAN":
                assert isinstance(value, bool)
            elif kind == "UBIGINT":
                low = 1 if param in ("max_compacted_files", "max_file_size") else 0
                assert type(value) is int and low <= value <= 2**64 - 2
            elif kind == "DOUBLE":
                assert isinstance(value, float) and math.isfinite(value)
            elif kind == "UBIGINT[]":
                assert isinstance(value, Versions) and value.ids
                assert list(value.ids) == sorted(set(value.ids))
            elif isinstance(value, Interval):
                assert 0 <= value.seconds <= MAX_WINDOW_S
            else:
                assert isinstance(value, Instant) and value.utc
        if step in ("cleanup_old_files", "delete_orphaned_files"):
            assert not (config.params.get("cleanup_all") is True and "older_than" in config.params)
    orphans = opts.steps["delete_orphaned_files"].params
    older = orphans.get("older_than")
    young = orphans.get("cleanup_all") is True or (
        isinstance(older, Interval) and older.seconds < ORPHAN_AGE_FLOOR_S
    )
    if young and orphans.get("dry_run") is not True:  # only with the override
        assert opts.orphan_age_floor_override
    assert opts.interval_s is None or MIN_INTERVAL_S <= opts.interval_s <= MAX_INTERVAL_S
    for seconds in (opts.interval_s, opts.compact_store_timeout_s):
        assert seconds is None or 0 < seconds <= MAX_DURATION_S
    assert type(opts.batch_size) is int and 0 < opts.batch_size <= 2**63 - 1
    assert opts.compact_store_subspace is None or isinstance(opts.compact_store_subspace, Subspace)


@fuzz(200)
@given(raw=st.dictionaries(option_keys, option_values, max_size=4))
@example(raw={P + "EXPIRE_SNAPSHOTS_OLDER_THAN": "\ud800"})  # DuckDB's binding: RuntimeError
@example(raw={P + "FLUSH_INLINED_DATA": 10**5000})  # str(): ValueError past 4300 digits
@example(raw={P + "COMPACT_STORE_SUBSPACE": -(10**5000)})
@example(raw={P + "ﬂUSH_INLINED_DATA": "true"})  # upper-cased into FLUSH_INLINED_DATA
@example(raw={"MAıNTENANCE_FLUSH_INLINED_DATA": "true"})
@example(raw={P + "FLUSH\nINLINED_DATA": "true"})  # named raw: a message on two lines
@example(raw={P + "INTERVAL": "٣٠s"})  # Arabic-Indic digits read as 30 seconds
@example(raw={P + "EXPIRE_SNAPSHOTS_VERSIONS": "[٣]"})
@example(
    raw={P + "CLEANUP_OLD_FILES_CLEANUP_ALL": "1", P + "CLEANUP_OLD_FILES_OLDER_THAN": "1 day"}
)
def test_options_bind_to_typed_values_or_are_refused_naming_the_option(
    signatures: dict[str, dict[str, str]], raw: dict[object, object]
) -> None:
    try:
        opts = parse_options(raw, signatures)  # type: ignore[arg-type]
    except MaintenanceConfigError as exc:
        message = str(exc)
        one_line(message)
        assert any(named(k, message) or canonical(k) in message for k in raw), message[:300]
        return
    _typed(opts, signatures)


@fuzz(200)
@given(text=st.one_of(st.sampled_from(NASTY_STRINGS), hostile_text))
def test_a_boolean_option_reads_exactly_what_duckdb_casts(
    duck: duckdb.DuckDBPyConnection, text: str
) -> None:
    try:
        value: bool | None = parse_bool(P + "PROGRESS", text)
    except MaintenanceConfigError as exc:
        one_line(str(exc))
        value = None
    if "\x00" in text or any(0xD800 <= ord(c) <= 0xDFFF for c in text):
        assert value is None  # DuckDB cannot even be handed it
        return
    cast = duck.execute("SELECT TRY_CAST(trim(?, ' \t\n\r') AS BOOLEAN)", [text]).fetchone()
    assert value == cast[0], text


@fuzz(150)
@given(
    pairs=st.lists(
        st.one_of(
            st.builds(lambda k, v: f"{k}={v}", st.sampled_from(KNOWN), hostile_text),
            st.builds(lambda k, v: f"{k}={v}", hostile_text, hostile_text),
            hostile_text,
        ),
        max_size=4,
    )
)
def test_option_pairs_split_at_the_first_equals_or_are_refused(pairs: list[str]) -> None:
    try:
        out = parse_kv(pairs)
    except MaintenanceConfigError as exc:
        assert any(named(p, str(exc)) or named(p.partition("=")[2], str(exc)) for p in pairs)
        return
    assert len(out) == len(pairs)
    assert out == {p.partition("=")[0]: p.partition("=")[2] for p in pairs}


@pytest.mark.parametrize("step", ["CLEANUP_OLD_FILES", "DELETE_ORPHANED_FILES"])
def test_cleanup_all_with_older_than_is_refused_at_bind_as_ducklake_refuses_it_mid_pass(
    signatures: dict[str, dict[str, str]], step: str
) -> None:
    both = {f"{P}{step}_CLEANUP_ALL": "true", f"{P}{step}_OLDER_THAN": "1 day"}
    with pytest.raises(MaintenanceConfigError, match=f"{P}{step}_CLEANUP_ALL=true and"):
        parse_options(both, signatures)
    # cleanup_all false with a window is what DuckLake runs.
    fine = parse_options({**both, f"{P}{step}_CLEANUP_ALL": "false"}, signatures)
    assert fine.steps[step.lower()].params["cleanup_all"] is False


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (10**5000, "too large for any option"),
        (None, "expected text, a number or a boolean"),
        ([1, 2], "expected text, a number or a boolean"),
        ({"a": 1}, "expected text, a number or a boolean"),
        ("1 day\ud800", "not UTF-8 text"),
    ],
    ids=["huge-int", "null", "list", "object", "surrogate"],
)
def test_an_option_value_that_is_no_setting_is_refused_naming_the_option(
    signatures: dict[str, dict[str, str]], value: object, why: str
) -> None:
    option = P + "EXPIRE_SNAPSHOTS_OLDER_THAN"
    with pytest.raises(MaintenanceConfigError, match=why) as info:
        parse_options({option: value}, signatures)  # type: ignore[dict-item]
    assert str(info.value).startswith(option)


@pytest.mark.parametrize("key", [P + "ﬂUSH_INLINED_DATA", "MAıNTENANCE_FLUSH_INLINED_DATA"])
def test_an_option_name_with_a_non_ascii_letter_is_refused_not_upper_cased_into_another(
    signatures: dict[str, dict[str, str]], key: str
) -> None:
    with pytest.raises(MaintenanceConfigError, match="option names are ASCII") as info:
        parse_options({key: "true"}, signatures)
    assert repr(key) in str(info.value)


@pytest.mark.parametrize(
    ("option", "value"),
    [("INTERVAL", "٣٠s"), ("BATCH_SIZE", "٣٠"), ("EXPIRE_SNAPSHOTS_VERSIONS", "[٣]")],
)
def test_digits_other_than_ascii_are_refused_as_duckdb_refuses_them(
    signatures: dict[str, dict[str, str]], option: str, value: str
) -> None:
    with pytest.raises(MaintenanceConfigError, match=P + option):
        parse_options({P + option: value}, signatures)


def test_an_unknown_option_is_named_quoted_on_one_line(
    signatures: dict[str, dict[str, str]],
) -> None:
    with pytest.raises(MaintenanceConfigError) as info:
        parse_options({P + "FLUSH\nINLINED": "true"}, signatures)
    one_line(str(info.value))
    assert repr(P + "FLUSH\nINLINED") in str(info.value)


def test_bind_refuses_a_bad_option_with_no_lake_at_all() -> None:
    from slatelake.maintenance.options import bind

    assert bind({P + "FLUSH_INLINED_DATA": "yes"}).configured("flush_inlined_data")
    with pytest.raises(MaintenanceConfigError, match="VACUUM"):
        bind({P + "VACUUM": "true"})


def test_a_repeated_option_key_is_named_quoted_on_one_line() -> None:
    with pytest.raises(MaintenanceConfigError) as info:
        parse_kv(["K\nX=1", "K\nX=2"])
    one_line(str(info.value))
