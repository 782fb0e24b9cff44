"""Fuzz: the index entry points (``create_index``, ``drop_index``,
``list_indexes``, ``column_names``, ``lookup``) given hostile names and values
on one open session, on local files and on moto's S3.

A name resolves, or the call raises a slatelake error; a refused call leaves
the lake as it was. Two kinds of input once escaped as foreign errors: an
index name that is not UTF-8 text, and a lookup value the column cannot hold;
each is pinned below as a MisconfigurationError.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import slatelake
from slatelake.ducklake.indexes import column_names
from slatelake.errors import MisconfigurationError, SlatelakeError
from tests.fuzz.hostile import NASTY_STRINGS, PristineFiles, fuzz, hostile_numbers, hostile_text
from tests.fuzz.inputs import (
    COLUMNS,
    INDEXES,
    TABLES,
    WEIRD_SCHEMA,
    WEIRD_TABLE,
    Lake,
)

pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")
EXAMPLES = {"file": 40, "s3": 10}
_names = st.sampled_from(NASTY_STRINGS) | hostile_text
INDEXED = {"by_v": ("t", "v"), "t_id_idx": ("t", "id"), "t_ts_idx": ("t", "ts")}


@pytest.fixture
def session(pristine: Lake) -> Iterator[tuple[Lake, Any]]:
    with slatelake.connect(pristine.url) as s:
        yield pristine, s


def _examples(lake: Lake) -> int:
    return EXAMPLES["file" if isinstance(lake, PristineFiles) else "s3"]


def test_index_entry_points_resolve_hostile_names_or_refuse_touching_nothing(
    session: tuple[Lake, Any],
) -> None:
    lake, s = session

    @fuzz(_examples(lake))
    @given(
        verb=st.sampled_from(("create", "drop", "list", "columns")),
        table=st.sampled_from(TABLES) | _names,
        column=st.sampled_from(COLUMNS) | _names,
        name=st.none() | st.sampled_from(INDEXES) | _names,
    )
    @example(verb="columns", table="a.b.c", column="", name=None)
    @example(verb="create", table='we.ird.t"q é', column="d e", name="'; DROP TABLE t; --")
    def run(verb: str, table: str, column: str, name: str | None) -> None:
        before = lake.snapshot()
        try:
            if verb == "create":
                info = s.create_index(table, column, name)
                s.drop_index(info.name)  # succeeded: put the lake's indexes back
            elif verb == "drop":
                info = s.drop_index(name or "")
                s.create_index(f"{info.schema}.{info.table}", info.column, info.name)
            elif verb == "list":
                assert {i.name for i in s.list_indexes()} >= set(INDEXED)
            else:
                assert column_names(s, table)
        except SlatelakeError:
            assert lake.snapshot() == before, "a refused call changed the lake"

    run()


def test_an_index_name_that_is_not_utf8_is_refused_as_misconfiguration(
    session: tuple[Lake, Any],
) -> None:
    lake, s = session
    before = lake.snapshot()
    with pytest.raises(MisconfigurationError):
        s.create_index(f"{WEIRD_SCHEMA}.{WEIRD_TABLE}", "c", "\ud800")
    assert lake.snapshot() == before


def test_a_lookup_value_the_column_cannot_hold_is_refused_as_misconfiguration(
    session: tuple[Lake, Any],
) -> None:
    lake, s = session

    @fuzz(20)
    @given(
        column=st.sampled_from(("id", "ts", "v")),
        value=st.sampled_from(NASTY_STRINGS) | hostile_text | hostile_numbers | st.booleans(),
    )
    @example(column="id", value="abc")  # ConversionException
    @example(column="ts", value="not a time")
    @example(column="v", value="\ud800")  # RuntimeError from the binding
    @example(column="id", value=math.nan)  # TypeError
    def run(column: str, value: object) -> None:
        with contextlib.suppress(MisconfigurationError):
            s.lookup("t", column, value)

    run()
