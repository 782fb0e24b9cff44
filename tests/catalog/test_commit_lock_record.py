"""The commit lock's record: a round trip with and without the lease it was
taken under, the three-field form older writers left, and garbage refused
only as corruption."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slatelake.catalog.commit_lock import _KIND, LockRecord
from slatelake.errors import CorruptionError
from slatelake.store import values

pytestmark = pytest.mark.fast

texts = st.text(max_size=40)
ttls = st.floats(min_value=0.001, max_value=3600.0, allow_nan=False)
leases = st.none() | st.from_regex(r"[a-z][a-z_]{0,31}/[0-9a-f]{32}", fullmatch=True)


@settings(deadline=None)  # a loaded CI machine is slow, not wrong
@given(token=texts, owner=texts, ttl=ttls, lease=leases)
def test_a_lock_record_round_trips_with_or_without_its_lease(
    token: str, owner: str, ttl: float, lease: str | None
) -> None:
    record = LockRecord(token, owner, ttl, lease)
    assert LockRecord.decode(record.encode()) == record


@settings(deadline=None)  # a loaded CI machine is slow, not wrong
@given(token=texts, owner=texts, ttl=ttls)
def test_a_record_without_a_lease_keeps_the_three_field_form_older_readers_know(
    token: str, owner: str, ttl: float
) -> None:
    raw = LockRecord(token, owner, ttl).encode()
    assert raw == values.frame(_KIND, [token, owner, ttl])
    assert LockRecord.decode(raw).lease is None


@settings(deadline=None)  # a loaded CI machine is slow, not wrong
@given(st.binary(max_size=64))
def test_garbage_raises_only_corruption(raw: bytes) -> None:
    with contextlib.suppress(CorruptionError):
        LockRecord.decode(raw)


@pytest.mark.parametrize(
    "fields",
    [
        ["t", "o", 60.0, 7],  # a lease that is not text
        ["t", "o", 60.0, "maintenance/x", "more"],  # five fields
        ["t", "o", float("nan")],
    ],
)
def test_a_malformed_lock_record_is_corruption(fields: list[object]) -> None:
    with pytest.raises(CorruptionError, match="sys/commit_lock"):
        LockRecord.decode(values.frame(_KIND, fields))
