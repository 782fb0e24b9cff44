"""Property tests for the keyspace codec (slatelake.store.keys).

Obligations: a key round trips; byte order equals component order (negative
ids included); a prefix is a prefix of every key under it; garbage raises only
CorruptionError; subspaces have stable labels and census names.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slatelake.errors import CorruptionError
from slatelake.store.keys import (
    COMPONENT_WIDTH,
    Subspace,
    decode_int,
    decode_key,
    encode_int,
    encode_key,
    prefix,
    subspace_label,
)

pytestmark = pytest.mark.fast

EXAMPLES = settings(max_examples=200, deadline=None)

I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1
ints64 = st.integers(min_value=I64_MIN, max_value=I64_MAX)
# Bias towards the edges of the range and zero, where sign handling goes wrong.
components64 = st.one_of(
    ints64,
    st.sampled_from([I64_MIN, I64_MIN + 1, -1, 0, 1, I64_MAX - 1, I64_MAX]),
    st.integers(min_value=-300, max_value=300),
)
subspaces = st.sampled_from(list(Subspace))
kinds = st.integers(min_value=0, max_value=0xFF)
component_tuples = st.lists(components64, max_size=6).map(tuple)
KNOWN_BYTES = {int(s) for s in Subspace}


@EXAMPLES
@given(subspaces, kinds, component_tuples)
def test_key_round_trips(sub: Subspace, kind: int, comps: tuple[int, ...]) -> None:
    key = encode_key(sub, kind, *comps)
    assert len(key) == 2 + COMPONENT_WIDTH * len(comps)
    assert key[0] == sub and key[1] == kind
    decoded_sub, decoded_kind, decoded = decode_key(key)
    assert decoded_sub is sub
    assert decoded_kind == kind
    assert decoded == comps


@EXAMPLES
@given(ints64)
def test_component_round_trips_in_eight_bytes(value: int) -> None:
    raw = encode_int(value)
    assert len(raw) == COMPONENT_WIDTH
    assert decode_int(raw) == value


@EXAMPLES
@given(subspaces, kinds, st.data())
def test_key_byte_order_equals_component_order(
    sub: Subspace, kind: int, data: st.DataObject
) -> None:
    n = data.draw(st.integers(min_value=0, max_value=5))
    a = data.draw(st.lists(components64, min_size=n, max_size=n).map(tuple))
    b = data.draw(st.lists(components64, min_size=n, max_size=n).map(tuple))
    ka, kb = encode_key(sub, kind, *a), encode_key(sub, kind, *b)
    assert (ka < kb) == (a < b)
    assert (ka == kb) == (a == b)
    assert (ka > kb) == (a > b)


@EXAMPLES
@given(components64, components64)
def test_component_byte_order_equals_numeric_order(a: int, b: int) -> None:
    assert (encode_int(a) < encode_int(b)) == (a < b)


def test_negative_components_sort_below_zero() -> None:
    keys = [encode_key(Subspace.CURRENT, 9, v) for v in (I64_MIN, -5, -1, 0, 1, I64_MAX)]
    assert keys == sorted(keys)


@EXAMPLES
@given(subspaces, kinds, component_tuples, st.data())
def test_prefix_is_a_prefix_of_every_key_with_those_leading_components(
    sub: Subspace, kind: int, comps: tuple[int, ...], data: st.DataObject
) -> None:
    key = encode_key(sub, kind, *comps)
    cut = data.draw(st.integers(min_value=0, max_value=len(comps)))
    assert key.startswith(prefix(sub))
    assert key.startswith(prefix(sub, kind))
    assert key.startswith(prefix(sub, kind, *comps[:cut]))
    assert prefix(sub, kind, *comps) == key


@EXAMPLES
@given(subspaces, kinds, component_tuples, subspaces, kinds, component_tuples)
def test_prefix_matches_only_keys_with_those_leading_components(
    sub: Subspace,
    kind: int,
    comps: tuple[int, ...],
    other_sub: Subspace,
    other_kind: int,
    other: tuple[int, ...],
) -> None:
    key = encode_key(other_sub, other_kind, *other)
    matches = (
        other_sub == sub
        and other_kind == kind
        and len(other) >= len(comps)
        and other[: len(comps)] == comps
    )
    assert key.startswith(prefix(sub, kind, *comps)) == matches


def test_prefix_of_components_without_a_kind_is_refused() -> None:
    with pytest.raises(ValueError):
        prefix(Subspace.CURRENT, None, 1)


@pytest.mark.parametrize("kind", [-1, 0x100])
def test_kind_outside_one_byte_is_refused(kind: int) -> None:
    with pytest.raises(ValueError):
        encode_key(Subspace.CURRENT, kind)


@EXAMPLES
@given(st.binary(max_size=64))
def test_garbage_key_raises_only_corruption_error(raw: bytes) -> None:
    try:
        sub, kind, comps = decode_key(raw)
    except CorruptionError:
        return
    # Anything that does decode must be exactly what encode_key would write.
    assert encode_key(sub, kind, *comps) == raw


@EXAMPLES
@given(st.binary(max_size=64).filter(lambda b: len(b) < 2 or (len(b) - 2) % COMPONENT_WIDTH))
def test_key_of_wrong_length_raises_corruption_error(raw: bytes) -> None:
    with pytest.raises(CorruptionError):
        decode_key(raw)


@EXAMPLES
@given(
    st.integers(min_value=0, max_value=0xFF).filter(lambda b: b not in KNOWN_BYTES),
    kinds,
    component_tuples,
)
def test_key_in_unknown_subspace_raises_corruption_error(
    byte: int, kind: int, comps: tuple[int, ...]
) -> None:
    raw = bytes((byte,)) + encode_key(Subspace.SYS, kind, *comps)[1:]
    with pytest.raises(CorruptionError):
        decode_key(raw)


def test_subspace_labels_are_the_census_names() -> None:
    assert {s.label: int(s) for s in Subspace} == {
        "sys": 0x01,
        "snapshot": 0x02,
        "current": 0x03,
        "history": 0x04,
        "inline": 0x05,
        "index": 0x06,
    }


@pytest.mark.parametrize("sub", list(Subspace))
def test_from_label_inverts_label_in_any_case(sub: Subspace) -> None:
    assert Subspace.from_label(sub.label) is sub
    assert Subspace.from_label(sub.label.upper()) is sub
    assert Subspace.from_label(sub.label.title()) is sub


@pytest.mark.parametrize("label", ["", "unknown", "currents", "data", "0x03"])
def test_from_label_refuses_an_unknown_name_listing_the_known_ones(label: str) -> None:
    with pytest.raises(ValueError, match="sys, snapshot, current, history, inline, index"):
        Subspace.from_label(label)


def test_subspace_label_names_ours_and_reports_others_as_unknown() -> None:
    labels = {byte: subspace_label(byte) for byte in range(0x100)}
    assert {b: labels[b] for b in KNOWN_BYTES} == {b: Subspace(b).label for b in KNOWN_BYTES}
    assert {labels[b] for b in range(0x100) if b not in KNOWN_BYTES} == {"unknown"}
