"""The truncation mark: commits and replays below the fold are refused.

The folder raises ``log/truncated`` before deleting slots and keeps the newest
slot; a committer that wins a slot at or below the mark withdraws it, and a
replay that meets one declares its view stale instead of applying it.
"""

from __future__ import annotations

import pytest

from slatelake.catalog.folder import Folder
from slatelake.catalog.lake import Lake
from slatelake.errors import ConflictError, CorruptionError
from slatelake.log.changeset import ChangeSet, Head, encode_envelope
from slatelake.log.committer import Committer
from slatelake.log.replay import StaleViewError, read_tail
from slatelake.log.slots import SlotLog
from slatelake.store.location import LakeLocation
from slatelake.store.objects import ObjectClient
from tests.catalog.helpers import commit_inserts, fold_all
from tests.catalog.synthetic import commit_changes

pytestmark = pytest.mark.fast

KEY = b"\x03\x14" + b"\x05" * 8


@pytest.fixture
def folded(lake_url: str):  # noqa: ANN201
    """Five commits, folded; slots 1..4 truncated, slot 5 kept. Yields the lake
    and the head each slot produced (read before truncation)."""
    Lake.create(lake_url).close()
    commit_inserts(lake_url, 5, 1)
    handle = Lake.open(lake_url)
    heads = {s.seq: handle.log.read(s.seq)[0].result for s in handle.log.list_after(0)}
    fold_all(lake_url)
    yield handle, heads
    handle.close()


def test_commit_at_a_truncated_seq_is_refused_and_withdrawn(folded) -> None:  # noqa: ANN001
    lake, heads = folded
    assert [s.seq for s in lake.log.list_after(0)] == [5]
    cs = ChangeSet(base=heads[1], puts=((KEY, b"late"),), mints_snapshot=True)
    with pytest.raises(ConflictError, match=r"slot 2 was already truncated .* stale"):
        Committer(lake.log, backoff_s=0).commit(cs, 2)
    assert lake.log.read(2) is None
    assert [s.seq for s in lake.log.list_after(0)] == [5]


class TruncatingClient(ObjectClient):
    """While a view reads ``slot``, the folder truncates it and a stale
    committer re-creates it: the read returns that other history's bytes."""

    def __init__(self, inner: ObjectClient, log: SlotLog, slot: int, orphan: bytes) -> None:
        super().__init__(inner.location, inner.store)
        self.log, self.slot, self.orphan = log, slot, orphan
        self.armed = True

    def get(self, path: str) -> bytes | None:
        if self.armed and path == self.log.path(self.slot):
            self.armed = False
            self.log.mark_truncated(self.slot)
            self.log.delete(self.slot)
            assert self.log.try_write(self.slot, self.orphan)
        return super().get(path)


def test_slot_truncated_and_recreated_while_being_read_is_never_applied(lake_url: str) -> None:
    Lake.create(lake_url).close()
    commit_inserts(lake_url, 3, 1)
    with Lake.open(lake_url) as lake:
        head1 = lake.log.read(1)[0].result
        orphan = ChangeSet(base=head1, puts=((KEY, b"orphan"),), mints_snapshot=True)
        log = SlotLog(lake.location)
        log.client = TruncatingClient(log.client, log, 2, encode_envelope([orphan], 2))
        with pytest.raises(StaleViewError, match="truncated the commit log up to slot 2"):
            read_tail(log, head1, 1)


def test_orphan_left_below_the_fold_is_truncated_and_the_mark_never_lowered(
    lake_url: str,
) -> None:
    Lake.create(lake_url).close()
    commit_inserts(lake_url, 5, 1)
    location = LakeLocation.parse(lake_url)
    older = Folder(location, margin_s=0)  # fenced by the next one, still truncating
    try:
        older.fold_once(truncate=False)
        commit_inserts(lake_url, 2, 1)
        fold_all(lake_url)  # the newer folder: fold cursor 7, mark 6
        log = SlotLog(location)
        assert [s.seq for s in log.list_after(0)] == [7]
        assert log.truncated_upto() == 6
        # A stale committer that died before withdrawing its slot left an orphan.
        assert log.try_write(2, encode_envelope([ChangeSet(base=Head(0, 1))], 2))
        assert older.truncate() == 1
        assert [s.seq for s in log.list_after(0)] == [7]
        assert log.truncated_upto() == 6
    finally:
        older.close()


def test_unreadable_mark_is_corruption_and_the_folder_rewrites_it(folded) -> None:  # noqa: ANN001
    lake, heads = folded
    lake.log.client.put(lake.log.mark_path, b'{"upto": "four"}')
    with pytest.raises(CorruptionError, match=r"log/truncated is unreadable.*slatelake fold"):
        lake.log.truncated_upto()
    fold_all(lake.location.url)  # the folder's fold cursor is 5
    assert lake.log.truncated_upto() == 5
    with pytest.raises(StaleViewError):
        read_tail(lake.log, heads[3], 3)


def test_lake_truncated_before_the_mark_existed_gets_one_when_a_folder_opens(
    lake_url: str,
) -> None:
    Lake.create(lake_url).close()
    commit_inserts(lake_url, 2, 1)
    with Lake.open(lake_url) as stale:
        state = stale.materialize()  # a view at slot 2
        stale.lease.release()
        commit_inserts(lake_url, 3, 1)
        fold_all(lake_url)
        # What a folder without the mark left behind: every slot gone, no mark.
        stale.log.delete(5)
        stale.log.client.delete(stale.log.mark_path)
        fold_all(lake_url)
        assert stale.log.truncated_upto() == 5
        with pytest.raises(ConflictError, match="stale"):
            stale.commit(state, commit_changes(state, 1), mints_snapshot=True)
        assert list(stale.log.list_after(0)) == []
        # The next commit gives the log a newest slot again: the view sees it is stale.
        commit_inserts(lake_url, 1, 2)
        stale.refresh(state)
        assert state.last_seq == 6
        with Lake.open(lake_url, read_only=True) as fresh:
            assert state.same_rows(fresh.materialize())
