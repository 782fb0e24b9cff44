"""Property tests for value framing and the value codec (slatelake.store.values).

Obligations: every storable value round trips with its type; a frame with a
bad magic, another codec version, the wrong kind or a truncated payload raises
CorruptionError and never returns a value; garbage raises only CorruptionError.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import math
import struct
import uuid
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slatelake.errors import CorruptionError
from slatelake.store import values

pytestmark = pytest.mark.fast

EXAMPLES = settings(max_examples=200, deadline=None)
FEWER = settings(max_examples=100, deadline=None)

# DuckDB INTERVAL / TIMESTAMP ranges fit in 64-bit microseconds; so must ours.
_MAX_DELTA = dt.timedelta(microseconds=(1 << 63) - 1)
ints64 = st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    ints64,
    st.floats(allow_nan=False),
    st.text(max_size=20),
    st.binary(max_size=20),
    st.decimals(allow_nan=False),
    st.uuids(),
    st.dates(),
    st.times(),
    st.datetimes(),
    st.datetimes(timezones=st.just(dt.UTC)),
    st.timedeltas(min_value=-_MAX_DELTA, max_value=_MAX_DELTA),
)
storable = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.dictionaries(st.one_of(st.text(max_size=8), ints64), inner, max_size=5),
    ),
    max_leaves=20,
)
# Rejection tests need a valid frame to damage, not the whole value space.
small = st.one_of(scalars, st.lists(scalars, max_size=3))
kinds = st.integers(min_value=0, max_value=0xFF)


def assert_same(got: Any, want: Any) -> None:
    """Equal and of the same type all the way down (True is not 1, a list not a tuple)."""
    assert type(got) is type(want), (got, want)
    if isinstance(want, list):
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            assert_same(g, w)
    elif isinstance(want, dict):
        assert list(got) == list(want)
        for k in want:
            assert_same(got[k], want[k])
    elif isinstance(want, float):
        assert got == want and math.copysign(1, got) == math.copysign(1, want)
    elif isinstance(want, decimal.Decimal):
        assert str(got) == str(want)
    elif isinstance(want, dt.datetime | dt.time):
        assert got == want and got.tzinfo == want.tzinfo
    else:
        assert got == want


@EXAMPLES
@given(kinds, storable)
def test_value_round_trips_through_frame(kind: int, value: Any) -> None:
    framed = values.frame(kind, value)
    assert framed[:2] == values.MAGIC
    assert framed[2] == values.CODEC_VERSION
    assert framed[3] == kind
    assert_same(values.unframe(framed, kind), value)


@pytest.mark.parametrize(
    "value",
    [
        dt.datetime(1, 1, 1),
        dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
        dt.datetime(1, 1, 1, tzinfo=dt.UTC),
        dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=dt.UTC),
        dt.time(0, 0),
        dt.time(23, 59, 59, 999999),
        dt.date(1, 1, 1),
        dt.date(9999, 12, 31),
        -_MAX_DELTA,
        _MAX_DELTA,
        decimal.Decimal("-0.000"),
        decimal.Decimal("1E+30"),
        decimal.Decimal("Infinity"),
        uuid.UUID(int=0),
        uuid.UUID(int=(1 << 128) - 1),
        -(1 << 63),
        (1 << 63) - 1,
        -0.0,
        math.inf,
    ],
    ids=repr,
)
def test_edge_values_round_trip(value: Any) -> None:
    assert_same(values.unframe(values.frame(7, value), 7), value)


def test_time_with_a_time_zone_is_refused_on_write() -> None:
    with pytest.raises(TypeError):
        values.frame(1, dt.time(12, 0, tzinfo=dt.UTC))


def test_unstorable_type_is_refused_on_write() -> None:
    with pytest.raises(TypeError):
        values.frame(1, object())


@FEWER
@given(kinds, small, st.binary(min_size=2, max_size=2).filter(lambda m: m != values.MAGIC))
def test_bad_magic_raises_corruption_error(kind: int, value: Any, magic: bytes) -> None:
    framed = magic + values.frame(kind, value)[2:]
    with pytest.raises(CorruptionError, match="bad magic"):
        values.unframe(framed, kind)


@FEWER
@given(
    kinds,
    small,
    st.integers(min_value=0, max_value=0xFF).filter(lambda v: v != values.CODEC_VERSION),
)
def test_other_codec_version_raises_corruption_error(kind: int, value: Any, version: int) -> None:
    framed = bytearray(values.frame(kind, value))
    framed[2] = version
    with pytest.raises(CorruptionError, match="codec version"):
        values.unframe(bytes(framed), kind)


@FEWER
@given(kinds, kinds, small)
def test_value_framed_for_another_kind_raises_corruption_error(
    kind: int, expected: int, value: Any
) -> None:
    if kind == expected:
        return
    with pytest.raises(CorruptionError, match="kind"):
        values.unframe(values.frame(kind, value), expected)


@FEWER
@given(kinds, small, st.data())
def test_truncated_frame_raises_corruption_error(
    kind: int, value: Any, data: st.DataObject
) -> None:
    framed = values.frame(kind, value)
    cut = data.draw(st.integers(min_value=0, max_value=len(framed) - 1))
    with pytest.raises(CorruptionError):
        values.unframe(framed[:cut], kind)


@FEWER
@given(kinds, small, st.binary(min_size=1, max_size=16))
def test_trailing_bytes_after_a_payload_raise_corruption_error(
    kind: int, value: Any, tail: bytes
) -> None:
    with pytest.raises(CorruptionError):
        values.unframe(values.frame(kind, value) + tail, kind)


@EXAMPLES
@given(st.binary(max_size=64), kinds)
def test_garbage_raises_only_corruption_error(raw: bytes, kind: int) -> None:
    try:
        values.unframe(raw, kind)
    except CorruptionError:
        return
    # Random bytes only decode when they happen to carry a valid header.
    assert raw[:2] == values.MAGIC and raw[2] == values.CODEC_VERSION and raw[3] == kind


@EXAMPLES
@given(kinds, st.binary(max_size=64))
def test_garbage_after_a_valid_header_raises_only_corruption_error(
    kind: int, payload: bytes
) -> None:
    header = values.MAGIC + bytes((values.CODEC_VERSION, kind))
    with contextlib.suppress(CorruptionError):
        values.unframe(header + payload, kind)


# Extension payloads msgpack will carry but the codec must reject: wrong widths,
# out-of-range dates and datetimes, undecodable decimals, unknown codes.
_ext_garbage = st.builds(
    lambda code, data: msgpack.packb(msgpack.ExtType(code, data)),
    st.integers(min_value=0, max_value=127),
    st.one_of(
        st.binary(max_size=20),
        ints64.map(lambda n: struct.pack(">q", n)),
    ),
)


@EXAMPLES
@given(kinds, _ext_garbage)
def test_garbage_extension_payload_raises_only_corruption_error(kind: int, payload: bytes) -> None:
    header = values.MAGIC + bytes((values.CODEC_VERSION, kind))
    with contextlib.suppress(CorruptionError):
        values.unframe(header + payload, kind)


@pytest.mark.parametrize(
    "raw",
    [b"", b"\xd1", values.MAGIC, values.MAGIC + bytes((values.CODEC_VERSION,))],
    ids=["empty", "one-byte", "magic-only", "no-kind"],
)
def test_frame_shorter_than_its_header_raises_corruption_error(raw: bytes) -> None:
    with pytest.raises(CorruptionError):
        values.unframe(raw, 0)


def test_corruption_error_names_what_was_read() -> None:
    with pytest.raises(CorruptionError, match="sys/head"):
        values.unframe(b"junk", 1, "sys/head")
