"""Replay refuses damage; the committer resolves races and ambiguous PUTs."""

from __future__ import annotations

import pytest

from slatelake.catalog.changes import RowChanges
from slatelake.catalog.lake import Lake
from slatelake.errors import (
    ConflictError,
    CorruptionError,
    OperationLimitError,
    StoreUnavailableError,
)
from slatelake.log.changeset import ChangeSet, Head, encode_envelope
from slatelake.log.committer import Committer
from slatelake.log.replay import read_tail
from slatelake.store.objects import AmbiguousWriteError, ObjectClient
from tests.catalog.helpers import commit_inserts
from tests.catalog.synthetic import commit_changes

pytestmark = pytest.mark.fast


@pytest.fixture
def lake(lake_url: str):  # noqa: ANN201
    Lake.create(lake_url).close()
    commit_inserts(lake_url, 5, 1)
    handle = Lake.open(lake_url)
    yield handle
    handle.close()


def test_slot_deleted_from_the_middle_is_refused_naming_the_seq(lake: Lake) -> None:
    lake.log.delete(3)
    with pytest.raises(CorruptionError, match=r"slot 3 is missing below present slot 4"):
        lake.materialize()
    with pytest.raises(CorruptionError, match="slot 3"):
        read_tail(lake.log, Head(-1, 0), 0)


def test_slot_whose_base_head_is_ahead_is_refused_naming_the_seq(lake: Lake) -> None:
    ahead = ChangeSet(base=Head(40, 41), puts=((b"\x03\x14" + b"\0" * 8, b"x"),))
    assert lake.log.try_write(6, encode_envelope([ahead], 6))
    with pytest.raises(CorruptionError, match=r"slot 6: change set .* ahead of the view"):
        lake.materialize()


def test_base_behind_the_view_is_already_folded_and_skipped(lake: Lake) -> None:
    state = lake.materialize()
    stale = ChangeSet(base=Head(0, 1), deletes=(b"\x03\x14" + b"\0" * 8,))
    assert lake.log.try_write(6, encode_envelope([stale], 6))
    tail = read_tail(lake.log, state.head, 5)
    assert tail.skipped == 1 and tail.applied == [] and tail.last_seq == 6


def test_corrupt_slot_bytes_fail_as_corruption(lake: Lake) -> None:
    lake.log.delete(5)
    assert lake.log.try_write(5, b"not an envelope at all")
    with pytest.raises(CorruptionError, match="commit log slot 5"):
        lake.materialize()


class FlakyClient(ObjectClient):
    """Fails the next slot PUT: after it landed ("after") or before ("before")."""

    def __init__(self, inner: ObjectClient, when: str) -> None:
        super().__init__(inner.location, inner.store)
        self.when = when
        self.armed = True
        self.slot_puts = 0

    def put_if_absent(self, path: str, data: bytes) -> bool:
        if "/commits/" in f"/{path}":
            self.slot_puts += 1
        if self.armed and "/commits/" in f"/{path}":
            self.armed = False
            if self.when == "after":
                super().put_if_absent(path, data)
            raise AmbiguousWriteError(f"PUT {path}: connection reset (injected)")
        return super().put_if_absent(path, data)


@pytest.mark.parametrize("when", ["after", "before"])
def test_ambiguous_put_is_resolved_by_txn_id_and_never_applied_twice(lake: Lake, when: str) -> None:
    state = lake.materialize()
    flaky = FlakyClient(lake.log.client, when)
    lake.log.client = flaky
    committed = lake.commit(state, commit_changes(state, 1), mints_snapshot=True)
    assert committed.seq == 6
    assert flaky.slot_puts == (1 if when == "after" else 2)
    envelopes = [lake.log.read(s.seq) for s in lake.log.list_after(0)]
    txns = [cs.txn_id for env in envelopes for cs in env]
    assert txns.count(committed.change_set.txn_id) == 1
    fresh = Lake.open(lake.location.url, read_only=True)
    try:
        assert fresh.materialize().same_rows(state)
    finally:
        fresh.close()


def test_lost_race_on_a_minting_change_set_is_a_conflict(lake: Lake) -> None:
    stale = lake.materialize()
    commit_inserts(lake.location.url, 1, 2)  # someone else takes slot 6
    with pytest.raises(ConflictError, match="Transaction conflict") as info:
        lake.commit(stale, commit_changes(stale, 1), mints_snapshot=True)
    assert "slot 6" in str(info.value)
    assert [s.seq for s in lake.log.list_after(5)] == [6]


def _stats_row(tag: int) -> RowChanges:
    return RowChanges().insert("ducklake_table_stats", (900 + tag, 0, 0, 0))


def test_head_preserving_batch_rebases_past_a_disjoint_winner(lake: Lake) -> None:
    stale = lake.materialize()
    commit_inserts(lake.location.url, 1, 2)  # slot 6 minted by another committer
    committed = lake.commit(stale, _stats_row(1), mints_snapshot=False)
    assert committed.seq == 7 and committed.attempts == 2
    assert committed.head == Head(5, 7)  # snapshot id unchanged by the batch itself
    assert stale.head == committed.head
    fresh = Lake.open(lake.location.url, read_only=True)
    try:
        assert fresh.materialize().same_rows(stale)
    finally:
        fresh.close()


def test_head_preserving_batch_touching_the_winners_keys_is_a_conflict(lake: Lake) -> None:
    stale = lake.materialize()
    other = Lake.open(lake.location.url)
    try:
        mine = other.materialize()
        other.commit(mine, _stats_row(1), mints_snapshot=False)
    finally:
        other.close()
    with pytest.raises(ConflictError, match="same keys"):
        lake.commit(stale, _stats_row(1), mints_snapshot=False)


def test_operation_limit_refused_before_anything_is_written(lake_url: str) -> None:
    Lake.create(lake_url).close()
    with Lake.open(lake_url, max_operations=3) as lake:
        state = lake.materialize()
        changes = commit_changes(state, 1)
        with pytest.raises(OperationLimitError, match="over the limit of 3") as info:
            lake.commit(state, changes, mints_snapshot=True)
        assert info.value.operations > 3
        assert list(lake.log.list_after(0)) == []


def test_committer_gives_up_after_bounded_attempts(lake: Lake) -> None:
    committer = Committer(lake.log, max_attempts=2, backoff_s=0)
    state = lake.materialize()
    # Every seq from 1 is taken, so a stale writer at seq 1 loses to a winner whose
    # base differs from its own: that is a stale view, reported as a conflict.
    cs = ChangeSet(base=state.head, puts=((b"\x03\x14" + b"\1" * 8, b"v"),))
    with pytest.raises(ConflictError):
        committer.commit(cs, 1)


class NoWriteClient(ObjectClient):
    """Credentials that may read the lake but not write to it."""

    def put(self, path: str, data: bytes) -> None:
        raise PermissionError(f"AccessDenied: PUT {path}")


def test_read_only_view_survives_credentials_that_refuse_the_lease(lake: Lake) -> None:
    expected = lake.materialize()
    with Lake.open(lake.location.url, read_only=True) as reader:
        reader.log.client = NoWriteClient(reader.location, reader.log.client.store)
        reader.lease.book.client = reader.log.client
        assert reader.materialize().same_rows(expected)


class OutageOnceClient(ObjectClient):
    """A store whose first PUT gets no answer (an outage, not a refusal)."""

    failed = False

    def put(self, path: str, data: bytes) -> None:
        if not self.failed:
            self.failed = True
            raise StoreUnavailableError(f"PUT {path}: connection reset")
        super().put(path, data)


def test_a_read_only_view_whose_lease_write_met_an_outage_writes_it_at_the_next_refresh(
    lake: Lake,
) -> None:
    with Lake.open(lake.location.url, read_only=True) as reader:
        reader.log.client = OutageOnceClient(reader.location, reader.log.client.store)
        reader.lease.book.client = reader.log.client
        state = reader.materialize()  # its lease PUT meets the outage
        assert reader.lease.lease is None
        reader.refresh(state)
        live = {lease.reader_id for lease in reader.lease.book.live()}
        assert reader.lease.reader_id in live


def test_a_writer_whose_lease_is_refused_fails_loudly(lake: Lake) -> None:
    with Lake.open(lake.location.url) as writer:
        writer.lease.book.client = NoWriteClient(writer.location, writer.log.client.store)
        with pytest.raises(PermissionError, match="AccessDenied"):
            writer.materialize()
