"""Range reads are absolute: SlateDB 0.17's ``scan_prefix`` takes its subrange
relative to the prefix, so an absolute start there is silently misread. These
pin ``seek_first`` and ``scan_prefix_batches(start_after=...)`` to absolute keys."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slatelake.store.db import open_writer
from slatelake.store.keys import Subspace, encode_key
from slatelake.store.location import LakeLocation

pytestmark = pytest.mark.fast

KEYS = sorted(
    encode_key(Subspace.INDEX, k, i, r) for k in (1, 2) for i in (0, 4, 9) for r in (0, 1)
)
ids = st.integers(-2, 12)


@pytest.fixture(scope="module")
def store() -> Iterator:
    writer = open_writer(LakeLocation.parse(f"memory://{uuid.uuid4().hex}"))
    writer.write([(k, b"") for k in KEYS])
    yield writer
    writer.close()


@settings(max_examples=150, deadline=None)
@given(kind=st.sampled_from([1, 2]), start=ids, row=st.integers(-1, 2))
def test_seek_first_and_start_after_read_absolute_keys(
    store,  # noqa: ANN001
    kind: int,
    start: int,
    row: int,
) -> None:
    prefix = encode_key(Subspace.INDEX, kind)
    at = encode_key(Subspace.INDEX, kind, start, row)
    under = [k for k in KEYS if k.startswith(prefix)]
    found = store.seek_first(prefix, at)
    assert (found[0] if found else None) == next((k for k in under if k >= at), None)
    after = [
        k for batch in store.scan_prefix_batches(prefix, start_after=at, batch=3) for k, _ in batch
    ]
    assert after == [k for k in under if k > at]
    assert [
        k for b in store.scan_prefix_batches(prefix, start_after=b"\x00") for k, _ in b
    ] == under
