"""Every policy field from outside: hostile spellings are refused naming the
field and its range (never a traceback), what is accepted is stored and read
back as itself, and an orphan age under the floor needs the override."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import slatelake
from slatelake import MaintenanceConfigError, maintenance
from slatelake.cli import main
from slatelake.maintenance.cadence import parse_cron
from slatelake.maintenance.options import ORPHAN_AGE_FLOOR_S, bind
from slatelake.maintenance.policy import (
    AUTO,
    FIELDS,
    LAKE,
    MAX_COUNT,
    PolicyRow,
    Scope,
    decode_rows,
    encode_rows,
    parse_fields,
)
from slatelake.maintenance.policy_plan import plan
from slatelake.maintenance.thinning import parse_keep

HOSTILE: list[object] = [
    "9" * 40,
    str(10**400),
    10**40,
    -(10**40),
    "-1",
    -1,
    "-0",
    -0.0,
    "1e-400",
    "1e400",
    1e-300,
    "nan",
    math.nan,
    "inf",
    "-inf",
    math.inf,
    "",
    "   ",
    "\t\n",
    "\u0661\u0662",  # Arabic-Indic digits
    "\uff11\uff12",  # full-width digits
    "\u00b2",  # superscript two: str.isdigit() says yes
    " 12 ",
    "1_000",
    "0x10",
    "12\x00",
    "\ud800",
    None,
    [],
    {},
    True,
    "true",
    "12 parsecs",
    "1" * 5000,
]


def _in_range(name: str, value: object) -> bool:
    """What a parsed field may hold: its type, inside its stated range."""
    kind = type(FIELDS[name].default)
    if kind is bool:
        return type(value) is bool
    if name == "small_file_min_count":
        return type(value) is int and 1 <= value <= MAX_COUNT
    if name == "rewrite_delete_threshold":
        return type(value) is float and 0.0 <= value <= 1.0 and math.copysign(1, value) > 0
    if name == "target_file_size":
        return value == AUTO or (type(value) is int and 1 <= value < 2**63)
    if name == "cron":  # the five fields as the one cron parser reads them back
        return type(value) is str and parse_cron(value).text == value
    if name == "keep":  # none, or thinning rules as the one parser spells them back
        return type(value) is str and (value == "" or parse_keep("keep", value).text == value)
    return type(value) is float and 0.0 <= value <= 365 * 86400 and math.copysign(1, value) > 0


def _check(name: str, value: object) -> None:
    try:
        parsed = parse_fields({name: value})[name]
    except MaintenanceConfigError as exc:  # the only way to refuse
        assert f"policy {name}=" in str(exc), exc
        assert "\n" not in str(exc)
        return
    assert _in_range(name, parsed), (name, value, parsed)
    # stored and read back as itself (a value that cannot be framed, or that
    # reads back as something else, is no value to accept)
    row = PolicyRow(Scope(LAKE), {name: parsed}, 0, None)
    assert decode_rows(encode_rows([row]))[0].fields == {name: parsed}


@pytest.mark.parametrize("name", sorted(FIELDS))
@pytest.mark.parametrize("value", HOSTILE, ids=repr)
def test_a_hostile_spelling_of_any_field_is_refused_or_kept_in_range(
    name: str, value: object
) -> None:
    _check(name, value)


@settings(max_examples=300, deadline=None)
@given(
    name=st.sampled_from(sorted(FIELDS)),
    value=st.one_of(
        st.text(max_size=30),
        st.integers(),
        st.floats(),
        st.booleans(),
        st.none(),
        st.from_regex(r"[ -]?[0-9]{0,45}(\.[0-9]{0,12})?(e-?[0-9]{1,3})?\s?[a-zA-Z]{0,6}"),
    ),
)
def test_any_value_of_any_field_is_refused_or_kept_in_range(name: str, value: object) -> None:
    _check(name, value)


@pytest.mark.parametrize(
    ("name", "spelled"),
    [
        ("small_file_min_count", "9" * 40),
        ("small_file_min_count", str(MAX_COUNT + 1)),
        ("small_file_min_count", "-0"),
        ("rewrite_delete_threshold", "-0"),
        ("rewrite_delete_threshold", "1e-400"),
        ("rewrite_delete_threshold", "1e-1"),
        ("target_file_size", "1e-400"),
        ("target_file_size", "9" * 40),
        ("retention", "1e-400"),
        ("retention", "-0"),
    ],
)
def test_the_attacks_spellings_are_refused_naming_the_field_and_range(
    name: str, spelled: str
) -> None:
    with pytest.raises(MaintenanceConfigError, match=f"^policy {name}="):
        parse_fields({name: spelled})


def test_stored_seconds_too_small_for_a_plain_decimal_still_read_back() -> None:
    """0.00001 s printed as 1e-05: once stored, it must decode (a record that
    does not decode fails every pass)."""
    seconds = parse_fields({"cleanup_grace": "0.00001s"})["cleanup_grace"]
    row = PolicyRow(Scope(LAKE), {"cleanup_grace": seconds}, 0, None)
    assert decode_rows(encode_rows([row]))[0].fields["cleanup_grace"] == pytest.approx(1e-05)


# -- the CLI ---------------------------------------------------------------------
@pytest.fixture
def lake(tmp_path: Path) -> str:
    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path / 'data'}/") as s:
        s.sql("CREATE TABLE t (x INTEGER)")
    return url


@pytest.mark.parametrize(
    "argv",
    [
        ["--small-file-min-count", "9" * 40],
        ["--small-file-min-count", "-0"],
        ["--rewrite-delete-threshold", "-0"],
        ["--rewrite-delete-threshold", "1e-400"],
        ["--target-file-size", "9" * 40 + "GB"],
        ["--retention", "\u0661d"],
    ],
)
def test_the_cli_refuses_every_hostile_value_with_exit_2_and_no_traceback(
    lake: str, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["policy", "set", lake, *argv]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "policy " in err, err
    assert maintenance.policies(lake).rows == []


# -- the orphan age floor ----------------------------------------------------------
@pytest.mark.parametrize("scope", [[], ["--table", "t"]])
def test_policy_set_refuses_an_orphan_age_under_the_floor_without_the_override(
    lake: str, scope: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["policy", "set", lake, *scope, "--orphan-min-age", "0s"]) == 2
    err = capsys.readouterr().err
    assert "orphan age floor of 1h" in err  # the floor
    assert "write still in flight" in err  # why
    assert "--orphan-age-floor-override" in err  # the way past it
    assert maintenance.policies(lake).rows == []
    argv = ["policy", "set", lake, *scope, "--orphan-min-age", "59m"]
    assert main([*argv, "--orphan-age-floor-override"]) == 0
    (row,) = maintenance.policies(lake).rows
    assert row.fields == {"orphan_min_age": 59 * 60.0, "orphan_age_floor_override": True}


def test_an_orphan_age_at_the_floor_needs_no_override(lake: str) -> None:
    maintenance.set_policy(lake, {"orphan_min_age": "1h"})
    with pytest.raises(MaintenanceConfigError, match="orphan age floor"):
        maintenance.set_policy(lake, {"orphan_min_age": "3599s"})


def test_unsetting_the_override_under_a_short_age_is_refused(lake: str) -> None:
    maintenance.set_policy(lake, {"orphan_min_age": "1m", "orphan_age_floor_override": "true"})
    with pytest.raises(MaintenanceConfigError, match="orphan age floor"):
        maintenance.unset_policy(lake, ["orphan_age_floor_override"])
    maintenance.unset_policy(lake, ["orphan_min_age", "orphan_age_floor_override"])


def test_a_lake_override_covers_a_tables_short_age(lake: str) -> None:
    maintenance.set_policy(lake, {"orphan_age_floor_override": "true"})
    maintenance.set_policy(lake, {"orphan_min_age": "0s"}, table="t")


def _row(fields: dict[str, str], table: str | None = None) -> PolicyRow:
    scope = Scope(LAKE) if table is None else Scope("table", "main", table)
    return PolicyRow(scope, parse_fields(fields), 0, None)


def test_a_pass_built_from_an_overridden_policy_carries_the_override() -> None:
    rows = [_row({"enabled": "true", "orphan_min_age": "0s", "orphan_age_floor_override": "1"})]
    planned = plan(rows, bind({}), [("main", "t")])
    orphans = planned.options.steps["delete_orphaned_files"]
    assert orphans.enabled and orphans.params["older_than"].seconds == 0


def test_a_stored_policy_under_the_floor_without_the_override_is_refused_at_plan() -> None:
    """A record written before the floor existed: refused naming the scope, not run."""
    rows = [_row({"enabled": "true"}), _row({"orphan_min_age": "0s"}, "t")]
    with pytest.raises(MaintenanceConfigError, match="for the table main.t"):
        plan(rows, bind({}), [("main", "t")])


def test_a_lake_wide_orphan_step_under_the_floor_needs_every_policy_overridden() -> None:
    rows = [
        _row({"enabled": "true", "orphan_min_age": "1m", "orphan_age_floor_override": "true"}),
        _row({"orphan_min_age": "2h"}, "t"),
    ]
    planned = plan(rows, bind({}), [("main", "t"), ("main", "u")])
    older = planned.options.steps["delete_orphaned_files"].params["older_than"]
    assert older.seconds == 2 * 3600 >= ORPHAN_AGE_FLOOR_S  # the longest wins
