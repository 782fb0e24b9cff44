"""Single flight across processes: the lease generations in the bucket."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from slatelake.maintenance.flight import AlreadyRunningError, PassLease
from slatelake.store.location import LakeLocation


@pytest.fixture
def location(lake_url: str) -> LakeLocation:
    return LakeLocation.parse(lake_url)


def test_one_holder_at_a_time_and_release_frees_it(location: LakeLocation) -> None:
    first, second = PassLease(location), PassLease(location)
    assert first.try_acquire()
    assert not second.try_acquire()
    with pytest.raises(AlreadyRunningError, match="maintenance already running"):
        second.acquire(wait_s=0.3, poll_s=0.1)
    first.release()
    assert second.try_acquire()
    second.release()


def test_a_stale_lease_is_taken_over_by_exactly_one_taker(location: LakeLocation) -> None:
    crashed = PassLease(location, ttl_s=0.2)
    assert crashed.try_acquire()  # and then the holder "dies" without releasing
    time.sleep(0.3)
    takers = [PassLease(location) for _ in range(3)]
    assert [t.try_acquire() for t in takers].count(True) == 1
    holder = takers[0].current()
    assert holder is not None and holder.generation == 2


def test_an_unreadable_lease_counts_as_expired(location: LakeLocation, tmp_path: Path) -> None:
    lease = PassLease(location)
    lease.client.put(lease._path(5), b"not json")
    assert lease.try_acquire()
    assert lease.current().generation == 6
    assert json.loads(lease.client.get(lease._path(6)))["owner"] == lease.owner
