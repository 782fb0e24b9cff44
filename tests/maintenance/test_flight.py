"""Single flight across processes: the lease generations in the bucket."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from slatelake.errors import AmbiguousWriteError, StoreUnavailableError
from slatelake.maintenance import flight
from slatelake.maintenance.flight import AlreadyRunningError, PassLease
from slatelake.store.location import LakeLocation
from slatelake.store.objects import ObjectClient
from tests.conftest import ClockAhead


@pytest.fixture
def location(shared_lake_url: str) -> LakeLocation:
    """Local files and S3: the lease is objects under the lake, created only
    if absent, so the object store is what these tests are about."""
    return LakeLocation.parse(shared_lake_url)


def _later(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """From here on, the lease code's wall clock reads ``seconds`` later."""
    monkeypatch.setattr(flight, "time", ClockAhead(seconds))


def test_one_holder_at_a_time_and_release_frees_it(location: LakeLocation) -> None:
    first, second = PassLease(location), PassLease(location)
    assert first.try_acquire()
    assert not second.try_acquire()
    with pytest.raises(AlreadyRunningError, match="maintenance already running"):
        second.acquire(wait_s=0.3, poll_s=0.1)
    first.release()
    assert second.try_acquire()
    second.release()


def test_a_stale_lease_is_taken_over_by_exactly_one_taker(
    location: LakeLocation, monkeypatch: pytest.MonkeyPatch
) -> None:
    crashed = PassLease(location, ttl_s=60)
    assert crashed.try_acquire()  # and then the holder "dies" without releasing
    _later(monkeypatch, 61)
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
    """The heartbeat renews the lease while the pass runs: a pass that
    outlives the TTL is never taken over by a second one mid-flight."""
    import slatelake
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


class _InterleavedClient(ObjectClient):
    """The real object store, with one event run just before the first GET
    or conditional PUT: how a rival's action lands between two of our calls."""

    def __init__(self, location: LakeLocation, before: str, event) -> None:  # noqa: ANN001
        super().__init__(location)
        self.before, self.event = before, event

    def _fire(self, op: str) -> None:
        if self.before == op and self.event is not None:
            event, self.event = self.event, None
            event()

    def get(self, path: str) -> bytes | None:
        self._fire("get")
        return super().get(path)

    def put_if_absent(self, path: str, data: bytes) -> bool:
        self._fire("put_if_absent")
        return super().put_if_absent(path, data)


def test_a_release_between_a_rivals_list_and_get_never_lets_two_passes_hold(
    location: LakeLocation,
) -> None:
    """B lists the lease generations; before it reads the newest, A releases
    and C takes the lease. B must not take it as well."""
    a, c = PassLease(location), PassLease(location)
    assert a.try_acquire()
    a.renew()  # a later generation, as a pass holding it for a while has
    taken: list[bool] = []
    b = PassLease(
        location,
        client=_InterleavedClient(
            location, "get", lambda: (a.release(), taken.append(c.try_acquire()))
        ),
    )
    b_holds = b.try_acquire()
    assert taken == [True]
    assert not b_holds, "two passes hold the maintenance lease at once"
    assert c.current().owner == c.owner


def test_a_stale_taker_that_recreates_a_collected_generation_does_not_hold(
    location: LakeLocation, monkeypatch: pytest.MonkeyPatch
) -> None:
    """B read an expired lease and was slow to write the next generation; in
    between C took it and renewed, and the generation B writes was already
    collected. B's create succeeds, but C holds the lease, not B."""
    crashed = PassLease(location, ttl_s=60)
    assert crashed.try_acquire()
    _later(monkeypatch, 61)
    c = PassLease(location)

    def c_takes_and_renews() -> None:
        assert c.try_acquire()
        c.renew()

    b = PassLease(
        location, client=_InterleavedClient(location, "put_if_absent", c_takes_and_renews)
    )
    assert not b.try_acquire(), "a stale taker holds the lease beside the live one"
    assert c.current().owner == c.owner


class _LateWriteClient(ObjectClient):
    """The real object store, where the first conditional PUT loses its
    answer and is still in flight: it lands (create-if-absent, as the store
    would apply it) only when ``land`` is called, after the caller gave up."""

    def __init__(self, location: LakeLocation) -> None:
        super().__init__(location)
        self.in_flight: tuple[str, bytes] | None = None
        self.landed: bool | None = None

    def put_if_absent(self, path: str, data: bytes) -> bool:
        if self.landed is None and self.in_flight is None:
            self.in_flight = (path, data)
            raise AmbiguousWriteError(f"PUT {path}: timed out; whether the write landed is unknown")
        return super().put_if_absent(path, data)

    def land(self) -> None:
        assert self.in_flight is not None
        self.landed = ObjectClient.put_if_absent(self, *self.in_flight)


def test_a_claim_whose_answer_was_lost_is_withdrawn_so_its_late_write_cannot_hold(
    location: LakeLocation,
) -> None:
    """The claim's PUT timed out and reads back absent; it lands later. The
    claim created the object first as released, so the late write fails and
    the next pass takes the lease at once, not a TTL later."""
    client = _LateWriteClient(location)
    with pytest.raises(StoreUnavailableError, match="withdrawn, so nothing holds the lease"):
        PassLease(location, client=client).try_acquire()
    client.land()
    assert client.landed is False, "the late claim landed over its withdrawal"
    record = PassLease(location).current()
    assert record is not None and record.state == flight.RELEASED
    nxt = PassLease(location)
    assert nxt.try_acquire()
    nxt.release()


class _HeldStoreClient(ObjectClient):
    """The real object store behind a link that holds every conditional PUT
    past its deadline: each loses its answer and lands later, in the order
    sent, when ``land_all`` is called."""

    def __init__(self, location: LakeLocation) -> None:
        super().__init__(location)
        self.in_flight: list[tuple[str, bytes]] = []

    def put_if_absent(self, path: str, data: bytes) -> bool:
        self.in_flight.append((path, data))
        raise AmbiguousWriteError(f"PUT {path}: timed out; whether the write landed is unknown")

    def land_all(self) -> list[bool]:
        landed = [ObjectClient.put_if_absent(self, *w) for w in self.in_flight]
        self.in_flight = []
        return landed


def test_a_claim_whose_withdrawal_is_held_too_is_superseded_by_a_release_sent_after_it(
    location: LakeLocation,
) -> None:
    """Every lease PUT is held: the claim and its withdrawal both lose their
    answers, and the claim lands first, holding the lease. The release sent
    as the next generation lands after it, so the next pass takes the lease
    at once, not a TTL later."""
    client = _HeldStoreClient(location)
    with pytest.raises(AmbiguousWriteError, match="a release was sent after it"):
        PassLease(location, client=client).try_acquire()
    assert client.land_all() == [True, False, True]  # claim, withdrawal (too late), release
    record = PassLease(location).current()
    assert record is not None and record.state == flight.RELEASED
    nxt = PassLease(location)
    assert nxt.try_acquire()
    nxt.release()


def test_generations_only_grow_across_release(location: LakeLocation) -> None:
    """A release never makes an older generation the newest again."""
    first = PassLease(location)
    assert first.try_acquire()
    taken = first.generation
    first.release()
    second = PassLease(location)
    assert second.try_acquire()
    assert second.generation > taken
    second.release()


def test_the_heartbeat_renews_a_lease_between_boundaries(location: LakeLocation) -> None:
    holder = PassLease(location, ttl_s=1.5)
    holder.acquire()
    holder.start_heartbeat()
    try:
        time.sleep(3.2)  # more than twice the TTL, no boundary called anything
        assert not PassLease(location).try_acquire()
        assert holder.lost is None
    finally:
        holder.release()
    assert PassLease(location).try_acquire()


def test_a_dead_owner_is_replaced_once_its_heartbeat_stops(
    location: LakeLocation, monkeypatch: pytest.MonkeyPatch
) -> None:
    dead = PassLease(location, ttl_s=2.0)
    dead.acquire()
    dead.start_heartbeat()
    _wait_until(lambda: (dead.generation or 0) >= 2, "a heartbeat")  # it beat: it was alive
    dead.stop_heartbeat()  # the process died: no more beats, no release
    rival = PassLease(location)
    assert not rival.try_acquire()
    _later(monkeypatch, 2.1)  # a TTL after its last beat
    assert rival.try_acquire()


def test_a_renewal_that_finds_its_lease_taken_marks_it_lost(location: LakeLocation) -> None:
    holder = PassLease(location, ttl_s=0.6)
    holder.acquire()
    holder.start_heartbeat()
    try:
        _take_over(location)
        _wait_until(lambda: holder.lost is not None, "the heartbeat to find its lease taken")
        assert holder.lost is not None and "lease" in holder.lost
    finally:
        holder.release()
    assert PassLease(location).current().owner == "rival"  # release wrote nothing over it


def test_a_holder_whose_lease_expired_unrenewed_may_not_act(
    location: LakeLocation, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process stalled past its TTL (SIGSTOP, a swap storm) learns at its
    next boundary that it no longer holds the lease, before its heartbeat runs."""
    stalled = PassLease(location, ttl_s=60)
    stalled.acquire()
    assert stalled.lost is None
    _later(monkeypatch, 61)
    assert stalled.lost is not None and "expired" in stalled.lost
    assert not stalled.renew()
    stalled.release()  # writes nothing: the lease may be someone else's by now
    assert PassLease(location).current().state == "held"


def _wait_until(check, what: str, timeout: float = 10.0) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
        time.sleep(0.02)


def _take_over(location: LakeLocation) -> None:
    """Another process writes the next lease generation (as a taker does once
    it judged the lease expired, or as ``lease break`` does)."""
    probe = PassLease(location)
    for _ in range(50):  # the holder's heartbeat may take the next generation first
        newest = probe.current()
        body = {"owner": "rival", "expires_at": time.time() + 600, "heartbeat_at": time.time()}
        path = probe._path(newest.generation + 1)
        if probe.client.put_if_absent(path, json.dumps(body).encode()):
            return
    raise AssertionError("the rival never won a lease generation")


def test_a_pass_keeps_its_lease_by_heartbeat_inside_one_long_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No boundary for longer than the TTL (one long DuckLake call): the
    heartbeat, not the step boundaries, keeps the lease."""
    import slatelake
    from slatelake.maintenance.runner import run_pass

    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path}/data/") as s:
        s.sql("CREATE TABLE a (id INTEGER)")
    monkeypatch.setattr(flight, "DEFAULT_TTL_S", 1.5)
    rivals: list[bool] = []

    def one_long_call(message: str, fields: dict[str, float]) -> None:
        if message.startswith("pass start"):
            time.sleep(3.2)
            rivals.append(PassLease(LakeLocation.parse(url)).try_acquire())

    with slatelake.connect(url) as s:
        run_pass(s, s.options, on_progress=one_long_call)
    assert rivals == [False], "a rival took the lease of a running pass"


@pytest.mark.parametrize("store", ["file", "s3"])
def test_a_pass_that_loses_its_lease_stops_at_the_next_boundary_and_writes_nothing_more(
    store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    import slatelake
    from slatelake.catalog.lake import Lake
    from slatelake.maintenance.runner import run_pass

    if store == "s3":
        url = f"s3://{request.getfixturevalue('s3_bucket')}/lake"
        data = f"s3://{request.getfixturevalue('s3_bucket')}/data/"
    else:
        url, data = (tmp_path / "lake").as_uri(), f"{tmp_path}/data/"
    with slatelake.connect(url, data_path=data) as s:
        for t in ("a", "b", "c"):
            s.sql(f"CREATE TABLE {t} (id INTEGER)")
            s.sql(f"INSERT INTO {t} VALUES (1)")
    monkeypatch.setattr(flight, "DEFAULT_TTL_S", 1.2)
    options = {"MAINTENANCE_FLUSH_INLINED_DATA": "true", "MAINTENANCE_TABLE_BATCHES": "true"}
    at_takeover: list[int] = []

    def taken_mid_pass(message: str, fields: dict[str, float]) -> None:
        if message == "step flush_inlined_data start":
            _take_over(LakeLocation.parse(url))
            with Lake.open(url, read_only=True) as lake:
                at_takeover.append(lake.summary().last_slot)
            time.sleep(0.6)  # several heartbeats: the next renewal finds the lease taken

    with slatelake.connect(url, options=options) as s:
        before = len(s.maintenance_status())
        report = run_pass(s, s.options, on_progress=taken_mid_pass)
    with Lake.open(url, read_only=True) as lake:
        assert lake.summary().last_slot == at_takeover[0], "the pass wrote after losing its lease"
    assert report.step("flush_inlined_data").counts.get("rows_flushed", 0) == 0
    assert report.lease_lost and "lease" in report.lease_lost
    assert report.failed and report.work_pending
    with slatelake.connect(url, read_only=True) as ro:
        assert len(ro.maintenance_status()) == before


@pytest.mark.parametrize("raw", ["0", "-5", "nan", "inf", "soon", "0.5"])
def test_a_bad_lease_ttl_setting_is_refused_naming_the_variable(
    raw: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from slatelake.errors import MisconfigurationError
    from slatelake.maintenance.flight import TTL_ENV

    monkeypatch.setenv(TTL_ENV, raw)
    with pytest.raises(MisconfigurationError, match=TTL_ENV):
        PassLease(LakeLocation.parse((tmp_path / "lake").as_uri()))
    monkeypatch.setenv(TTL_ENV, "90")
    assert PassLease(LakeLocation.parse((tmp_path / "lake").as_uri())).ttl_s == 90.0
