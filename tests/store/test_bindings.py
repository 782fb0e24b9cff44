"""The binding fast paths produce exactly what the generated code produces."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from slatelake.store import _bindings
from slatelake.store.db import SubspaceExtractor


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=5000))
def test_patched_bytes_lowering_is_byte_identical_to_the_generated_one(value: bytes) -> None:
    assert _bindings.fast_lower_bytes(value) == _bindings.generated_lower_bytes(value)


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
    generated, fast = _bindings.lift_key_values_both(kvs)
    as_tuples = [(kv.key, kv.value, kv.seq, kv.create_ts, kv.expire_ts) for kv in generated]
    assert as_tuples == items
    assert [(kv.key, kv.value, kv.seq, kv.create_ts, kv.expire_ts) for kv in fast] == as_tuples
