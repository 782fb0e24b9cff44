"""The binding fast paths produce exactly what the generated code produces,
and go in only for the slatedb build they mirror."""

from __future__ import annotations

import ctypes
import importlib.metadata
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slatelake.store import _bindings
from slatelake.store.db import SubspaceExtractor

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parents[2]


def _lowered(rbuf: Any) -> bytes:
    try:
        return ctypes.string_at(rbuf.data, rbuf.len)
    finally:
        _bindings._rust_call(_bindings._free, rbuf)


def _lift_both(items: list[Any]) -> tuple[list[Any], list[Any]]:
    """``items`` lowered by the generated writer, then lifted both ways."""
    gen = _bindings._gen
    conv = gen._UniffiFfiConverterSequenceTypeKeyValue
    lowered = [gen._UniffiConverterRustBuffer.lower.__func__(conv, items) for _ in range(2)]
    return _bindings._generated_kv_lift(lowered[0]), _bindings._lift_key_values(lowered[1])


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=5000))
def test_patched_bytes_lowering_is_byte_identical_to_the_generated_one(value: bytes) -> None:
    fast = _lowered(_bindings._lower_bytes(value))
    assert fast == _lowered(_bindings._generated_bytes_lower(value))


def test_fast_extractor_answers_like_the_python_extractor(tmp_path) -> None:  # noqa: ANN001
    from slatedb.uniffi import PrefixTarget

    ext = SubspaceExtractor()
    assert ext.prefix_len(PrefixTarget.POINT(b"\x03abc")) == 1
    assert ext.prefix_len(PrefixTarget.PREFIX(b"\x03")) == 1
    assert ext.prefix_len(PrefixTarget.PREFIX(b"")) is None


def test_every_subspace_is_its_own_segment(tmp_path) -> None:  # noqa: ANN001
    from slatelake.store.db import open_admin, open_writer
    from slatelake.store.keys import Subspace, encode_key
    from slatelake.store.location import LakeLocation

    location = LakeLocation.parse((tmp_path / "lake").as_uri())
    writer = open_writer(location)
    try:
        writer.write([(encode_key(s, 1, i), b"v") for s in Subspace for i in range(3)])
        writer.flush()
        assert writer.get(encode_key(Subspace.INDEX, 1, 2)) == b"v"
        assert len(list(writer.scan_prefix(bytes((Subspace.CURRENT,))))) == 3
    finally:
        writer.close()
    manifest = open_admin(location).read_manifest()
    prefixes = sorted(bytes(seg.prefix) for seg in manifest.segments)
    assert prefixes == sorted(bytes((s,)) for s in Subspace)
    for seg in manifest.segments:
        for view in seg.l0:
            first = bytes(view.sst.info.first_entry or b"")
            assert first[:1] == bytes(seg.prefix)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.binary(max_size=64),
            st.binary(max_size=512),
            st.integers(0, 2**64 - 1),
            st.integers(-(2**63), 2**63 - 1),
            st.none() | st.integers(-(2**63), 2**63 - 1),
        ),
        max_size=40,
    )
)
def test_fast_key_value_lifting_equals_the_generated_one(items: list) -> None:  # noqa: ANN001
    from slatedb.uniffi import KeyValue

    kvs = [KeyValue(key=k, value=v, seq=s, create_ts=c, expire_ts=e) for k, v, s, c, e in items]
    generated, fast = _lift_both(kvs)
    as_tuples = [(kv.key, kv.value, kv.seq, kv.create_ts, kv.expire_ts) for kv in generated]
    assert as_tuples == items
    assert [(kv.key, kv.value, kv.seq, kv.create_ts, kv.expire_ts) for kv in fast] == as_tuples


def test_fast_paths_fit_only_the_pinned_slatedb_build() -> None:
    pins = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert f"slatedb=={_bindings.PINNED_SLATEDB}" in pins
    assert importlib.metadata.version("slatedb") == _bindings.PINNED_SLATEDB
    assert _bindings.fast_paths_fit(_bindings.PINNED_SLATEDB)
    for other in ("0.17.1", "0.18.0", "0.16.9", "0.17.0rc1", ""):
        assert not _bindings.fast_paths_fit(other)
    assert _bindings.install() is True  # the pinned build is installed here
