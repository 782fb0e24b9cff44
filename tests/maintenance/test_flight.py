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


def test_a_pass_longer_than_the_lease_ttl_keeps_its_lease(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pass renews its lease at step and table boundaries: a pass that
    outlives the TTL is never taken over by a second one mid-flight."""
    import slatelake
    from slatelake.maintenance import flight
    from slatelake.maintenance.runner import run_pass

    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path}/data/") as s:
        for t in ("a", "b", "c"):
            s.sql(f"CREATE TABLE {t} (id INTEGER)")
            s.sql(f"INSERT INTO {t} VALUES (1)")
    monkeypatch.setattr(flight, "DEFAULT_TTL_S", 1.5)
    options = {"MAINTENANCE_FLUSH_INLINED_DATA": "true", "MAINTENANCE_TABLE_BATCHES": "true"}
    rivals: list[bool] = []

    def slow_tables(message: str, fields: dict[str, float]) -> None:
        if message.startswith("flush_inlined_data: "):
            time.sleep(0.8)  # three tables: the pass outlives the 1.5 s TTL
        if message.startswith("step flush_inlined_data end"):
            rival = PassLease(LakeLocation.parse(url))
            rivals.append(rival.try_acquire())

    with slatelake.connect(url, options=options) as s:
        t0 = time.monotonic()
        report = run_pass(s, s.options, on_progress=slow_tables)
        assert time.monotonic() - t0 > 2.4
    assert report.step("flush_inlined_data").counts["rows_flushed"] == 3
    assert rivals == [False], "a rival took the lease of a running pass"
