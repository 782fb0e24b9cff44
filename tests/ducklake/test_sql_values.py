"""Our statements spell their values as literals (``ducklake/sql.py``): each
literal reads back as the value and type DuckDB gives the bound parameter, a
placeholder is found only where DuckDB's tokenizer finds one, and a value
with no spelling is still bound, never mangled."""

from __future__ import annotations

import datetime as dt
import decimal
import uuid
from typing import Any

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slatelake.ducklake.sql import bound, run, value_sql

pytestmark = pytest.mark.fast

ROUND_TRIP = "SELECT typeof(?), CAST(? AS VARCHAR), ? IS NOT DISTINCT FROM ?"

EDGES: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    2**31 - 1,
    2**31,
    -(2**31) - 1,
    2**63 - 1,
    -(2**63),
    0.0,
    -0.0,
    1.5,
    5e-324,
    1e300,
    float("inf"),
    float("-inf"),
    "",
    "it's",
    "'); DROP TABLE t; --",
    "?",
    "caf\u00e9 \U0001f986",
    'a"b\\n',
    b"",
    b"\x00\xff'?",
    bytearray(b"ab"),
    uuid.UUID("5c9c7634-a718-4d6a-af63-88f81a7ea75d"),
    decimal.Decimal("1.23"),
    decimal.Decimal("-0"),
    decimal.Decimal("-10.5"),
    decimal.Decimal("100"),
    decimal.Decimal("12345678901234567890123456789012345678"),
    dt.date(2024, 1, 2),
    dt.date(1, 1, 1),
    dt.datetime(2024, 1, 2, 3, 4, 5, 6),
    dt.datetime(2024, 3, 10, 2, 30, tzinfo=dt.timezone(dt.timedelta(hours=-5, minutes=-30))),
    dt.time(1, 2, 3, 4),
    dt.time(0, 0),
    [1, None, 3],
    [None, 2**40],
    [None],
    [],
    ["a", "it's", None, '"', "\\", "caf\u00e9"],
    [uuid.UUID("5c9c7634-a718-4d6a-af63-88f81a7ea75d"), None],
    (1, 2**40),
    [[1], [2, 3]],
]
# Values DuckDB types in ways a literal does not follow: these stay bound.
UNSPELLED: list[Any] = [
    2**63,
    -(2**63) - 1,
    "nul\x00byte",
    decimal.Decimal("1E+2"),
    decimal.Decimal("0.001"),
    decimal.Decimal("0.0"),
    decimal.Decimal("0E-5"),
    decimal.Decimal("1E-40"),
    decimal.Decimal("NaN"),
    dt.timedelta(days=1),
    dt.time(1, tzinfo=dt.UTC),
    {"a": 1},
    [{"a": 1}, {"a": 2}],
    [True, 1],
    [1, 1.5],
]


def _both(value: Any) -> tuple[list[Any], list[Any]]:
    con = duckdb.connect()
    text = bound(ROUND_TRIP, [value] * 4)
    assert text is not None, value
    return con.execute(text).fetchall(), con.execute(ROUND_TRIP, [value] * 4).fetchall()


@pytest.mark.parametrize("value", EDGES, ids=repr)
def test_a_spelled_value_reads_back_as_the_bound_parameter_would(value: Any) -> None:
    spelled, as_bound = _both(value)
    assert spelled == as_bound
    assert spelled[0][2] is True


@pytest.mark.parametrize("value", UNSPELLED, ids=repr)
def test_a_value_without_a_faithful_spelling_stays_bound(value: Any) -> None:
    assert value_sql(value) is None
    assert bound("SELECT ?", [value]) is None
    con = duckdb.connect()
    assert run(con, "SELECT ? IS NOT DISTINCT FROM ?", [value, value]).fetchall() == [(True,)]


_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False),
    st.text().filter(lambda s: "\x00" not in s),
    st.binary(),
    st.integers(0, 12).flatmap(
        lambda places: st.decimals(allow_nan=False, allow_infinity=False, places=places)
    ),
    st.decimals(allow_nan=False, allow_infinity=False),
    st.dates(),
    st.datetimes(),
    st.times(),
    st.uuids(),
)


@settings(max_examples=300, deadline=None)
@given(_scalars)
def test_any_scalar_spelled_reads_back_as_bound(value: Any) -> None:
    if value_sql(value) is None:
        return
    spelled, as_bound = _both(value)
    assert spelled == as_bound


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(min_value=-(2**63), max_value=2**63 - 1) | st.none(), max_size=20))
def test_an_integer_list_spelled_reads_back_as_bound(value: list[int | None]) -> None:
    spelled, as_bound = _both(value)
    assert spelled == as_bound


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text().filter(lambda s: "\x00" not in s) | st.none(), max_size=20))
def test_a_text_list_spelled_reads_back_as_bound(value: list[str | None]) -> None:
    spelled, as_bound = _both(value)
    assert spelled == as_bound


class _Labelled(float):
    def __repr__(self) -> str:
        return f"_Labelled({float(self)})"


def test_a_float_subclass_is_spelled_by_its_value_not_its_repr() -> None:
    value = _Labelled(1.5)
    assert duckdb.connect().execute(bound("SELECT ?", [value]) or "").fetchall() == [(1.5,)]


def test_only_the_tokenizers_placeholders_are_filled() -> None:
    sql = "SELECT '?' AS \"a?\", ? -- a ? in a comment\n, /* ? */ ?::BIGINT[]"
    text = bound(sql, ["x'?", [1, 2]])
    assert text is not None
    assert duckdb.connect().execute(text).fetchall() == [("?", "x'?", [1, 2])]


def test_placeholders_after_text_of_several_bytes_are_filled_in_place() -> None:
    # DuckDB's tokenizer counts UTF-8 bytes, not characters
    sql = "SELECT '\u2400caf\u00e9 \U0001f986' AS \"\u00e9?\", ?, '?', ?"
    text = bound(sql, ["\u00e9", 2])
    assert text is not None
    assert duckdb.connect().execute(text).fetchall() == [
        ("\u2400caf\u00e9 \U0001f986", "\u00e9", "?", 2)
    ]


def test_a_placeholder_count_that_does_not_match_is_refused() -> None:
    with pytest.raises(ValueError, match="2 placeholders for 1 values"):
        bound("SELECT ?, ?", [1])


def test_a_hostile_text_value_runs_nothing() -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE t (v VARCHAR)")
    hostile = "x'); DROP TABLE t; SELECT ('"
    run(con, "INSERT INTO t VALUES (?)", [hostile])
    assert con.execute("SELECT v FROM t").fetchall() == [(hostile,)]
