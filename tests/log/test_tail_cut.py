"""A log tail that can be checked: a cut is found, a seq is never reused
silently (catalog/lake.py, log/replay.py, log/changeset.py version 3).

Deleting the newest unfolded slot used to drop that commit without a trace,
and the next commit took its seq. Now every slot names the digest of the
slot before it, a handle remembers the slots it saw, and the folder the one
it folded: a cut slot a handle saw, or a seq written again under a slot
chained to the first, is CorruptionError naming the slot. What stays
undetectable: a cut slot nobody still running saw (log/seen.py)."""

from __future__ import annotations

import pytest

from slatelake.catalog.folder import Folder
from slatelake.catalog.lake import Lake
from slatelake.errors import ConflictError, CorruptionError
from slatelake.log.changeset import ChangeSet, Head
from slatelake.log.committer import Committer
from slatelake.log.slots import SlotLog
from slatelake.store.location import LakeLocation
from tests.catalog.helpers import commit_inserts, fold_all
from tests.catalog.synthetic import commit_changes


def _commit(lake: Lake, state) -> int:  # noqa: ANN001
    return lake.commit(state, commit_changes(state, 1), mints_snapshot=True).seq


@pytest.fixture
def url(lake_url: str) -> str:
    Lake.create(lake_url).close()
    commit_inserts(lake_url, 4, 1)  # slots 1..4
    return lake_url


def test_a_handle_that_saw_the_newest_slot_finds_it_cut(url: str) -> None:
    with Lake.open(url) as lake:
        state = lake.materialize()
        assert _commit(lake, state) == 5
        lake.log.delete(5)  # the newest slot, unfolded: cut outside slatelake
        with pytest.raises(CorruptionError, match=r"commit log cut: commit log slot 5 "):
            lake.materialize()


def test_a_handle_never_acknowledges_a_commit_at_a_seq_it_saw_taken(url: str) -> None:
    with Lake.open(url) as lake:
        first, second = lake.materialize(), lake.materialize()  # two views at slot 4
        assert _commit(lake, first) == 5
        lake.log.delete(5)
        with pytest.raises(CorruptionError, match=r"commit log cut: commit log slot 5 .*withdrawn"):
            _commit(lake, second)
        assert lake.log.read_raw(5) is None  # nothing was left at the cut seq


def test_a_seq_written_again_after_a_cut_is_found_by_the_handle_that_saw_the_first(
    url: str,
) -> None:
    with Lake.open(url) as saw, Lake.open(url) as other:
        mine = saw.materialize()
        theirs = other.materialize()
        assert _commit(saw, mine) == 5
        saw.log.delete(5)
        # another writer, which never saw slot 5, takes its seq and the next
        assert _commit(other, theirs) == 5 and _commit(other, theirs) == 6
        with pytest.raises(CorruptionError, match=r"slot 6 .* slot 5 was replaced.*forked"):
            saw.refresh(mine)


def test_a_slot_chained_to_a_cut_one_is_refused_by_every_reader(url: str) -> None:
    """The writer that saw the cut slot commits again on its view: its slot
    names the slot it saw, not the one now at that seq."""
    with Lake.open(url) as saw, Lake.open(url) as other:
        mine = saw.materialize()
        theirs = other.materialize()
        assert _commit(saw, mine) == 5
        saw.log.delete(5)
        assert _commit(other, theirs) == 5  # the seq written again
        assert _commit(saw, mine) == 6  # on the slot 5 it saw
    with Lake.open(url) as reader, pytest.raises(CorruptionError, match=r"slot 6 .*forked"):
        reader.materialize()


def test_the_folder_refuses_a_slot_that_does_not_chain_to_the_one_it_folded(url: str) -> None:
    with Lake.open(url) as late:
        behind = late.materialize()  # a view at slot 4
        commit_inserts(url, 1, 1)  # slot 5, by another writer
        folder = Folder(LakeLocation.parse(url), margin_s=3600)
        try:
            assert folder.fold_once().fold_seq == 5
            late.log.delete(5)  # folded, then cut
            assert _commit(late, behind) == 5 and _commit(late, behind) == 6
            with pytest.raises(CorruptionError, match=r"slot 6 .*forked"):
                folder.fold_once()
        finally:
            folder.close()
    # a reopened folder knows the folded slot's digest from the store
    folder = Folder(LakeLocation.parse(url), margin_s=3600)
    try:
        with pytest.raises(CorruptionError, match=r"slot 6 .*forked"):
            folder.fold_once()
    finally:
        folder.close()


def test_a_stale_view_chained_to_a_truncated_slot_is_a_conflict_not_a_fork(url: str) -> None:
    """A view at a slot the folder truncated may have chained to an orphan
    another stale committer made there: its next race is lost to a slot
    that names the real one, which is staleness, not corruption."""
    commit_inserts(url, 1, 1)  # slot 5
    fold_all(url)  # slots 1..4 truncated, the mark at 4; slot 5 (the newest) stays
    log = SlotLog(LakeLocation.parse(url))
    assert [i.seq for i in log.list_after(0)] == [5] and log.truncated_upto() == 4
    stale = ChangeSet(base=Head(3, 4), puts=((b"\x00probe", b"x"),), tables=("probe",))
    orphan = {4: "0" * 32}  # the digest of an orphan slot 4 it read
    with pytest.raises(ConflictError, match="slot 4 this view ended at was truncated"):
        Committer(log).commit(stale, 5, chain=orphan)
