"""A view whose reader lease lapsed, against a log the folder truncated.

The folder may truncate every slot a view still needed once the view's lease
lapsed. Such a view must find out that it is stale (however long it idled),
must never commit into the truncated part of the log, and must never apply a
slot re-created there (an orphan) as if it were the log's history.
"""

from __future__ import annotations

import pytest

from slatelake.catalog.lake import Lake
from slatelake.catalog.state import CatalogState
from slatelake.errors import ConflictError
from slatelake.log import leases
from slatelake.log.changeset import ChangeSet, Head, encode_envelope
from slatelake.log.leases import LeaseBook
from slatelake.log.replay import StaleViewError, read_tail
from slatelake.store.location import LakeLocation
from tests.catalog.helpers import commit_inserts, fold_all
from tests.catalog.synthetic import commit_changes
from tests.conftest import ClockAhead


def _messages(state: CatalogState) -> list[str]:
    """The commit messages of every snapshot, in snapshot order."""
    return [r[3] for r in sorted(state.rows("ducklake_snapshot_changes")) if r[3]]


def _fresh(url: str) -> CatalogState:
    with Lake.open(url, read_only=True) as lake:
        return lake.materialize()


def _commit(lake: Lake, state: CatalogState, message: str) -> None:
    lake.commit(state, commit_changes(state, 7, message=message), mints_snapshot=True)


@pytest.fixture
def idle(lake_url: str):  # noqa: ANN201
    """A lake with one commit, and a writer whose view then lost its lease while
    another committer landed three commits and the folder truncated them all."""
    Lake.create(lake_url).close()
    commit_inserts(lake_url, 1, 1)
    fold_all(lake_url)
    writer = Lake.open(lake_url)
    state = writer.materialize()
    assert state.last_seq == 1
    writer.lease.release()  # idled past its TTL: the folder no longer sees it
    commit_inserts(lake_url, 3, 2)
    fold_all(lake_url)
    yield lake_url, writer, state
    writer.close()


def test_idle_writer_refreshing_before_each_commit_loses_no_acknowledged_commit(idle) -> None:  # noqa: ANN001
    url, writer, state = idle
    for i in range(1, 6):
        writer.refresh(state)
        _commit(writer, state, f"late:{i}")
    expected = ["1:0", "2:0", "2:1", "2:2", *(f"late:{i}" for i in range(1, 6))]
    assert _messages(_fresh(url)) == expected
    fold_all(url)
    folded = _fresh(url)
    assert _messages(folded) == expected
    assert folded.same_rows(state)


def test_commit_from_a_stale_view_is_refused_and_leaves_no_slot_behind(idle) -> None:  # noqa: ANN001
    url, writer, state = idle
    before = [s.seq for s in writer.log.list_after(0)]
    with pytest.raises(ConflictError, match="stale") as info:
        _commit(writer, state, "late:1")
    assert "re-run on a fresh view" in str(info.value)
    assert [s.seq for s in writer.log.list_after(0)] == before
    fold_all(url)
    assert "late:1" not in _messages(_fresh(url))
    # The refused author re-materializes and lands it, once.
    state = writer.materialize()
    _commit(writer, state, "late:1")
    fold_all(url)
    assert _messages(_fresh(url)).count("late:1") == 1


def test_stale_view_is_detected_however_many_truncations_it_slept_through(idle) -> None:  # noqa: ANN001
    url, writer, state = idle
    for _ in range(3):
        with pytest.raises(StaleViewError):
            read_tail(writer.log, state.head, state.last_seq)
        commit_inserts(url, 2, 3)
        fold_all(url)
    writer.refresh(state)  # re-materializes
    fresh = _fresh(url)
    assert state.last_seq == fresh.last_seq == 10
    assert state.same_rows(fresh)


def test_folder_keeps_the_newest_slot_and_marks_what_it_truncated(lake_url: str) -> None:
    Lake.create(lake_url).close()
    commit_inserts(lake_url, 5, 1)
    fold_all(lake_url)
    with Lake.open(lake_url, read_only=True) as lake:
        assert [s.seq for s in lake.log.list_after(0)] == [5]
        assert lake.log.truncated_upto() == 4
        commit_inserts(lake_url, 2, 1)
        fold_all(lake_url)
        assert [s.seq for s in lake.log.list_after(0)] == [7]
        assert lake.log.truncated_upto() == 6


def _orphan(lake: Lake, seq: int, base: Head) -> ChangeSet:
    """A slot a stale committer re-created at ``seq`` (already truncated), on
    a head the log had before it: another history than the folded one."""
    orphan = ChangeSet(
        base=base, puts=((b"\x03\x14" + b"\x07" * 8, b"orphan"),), mints_snapshot=True
    )
    assert lake.log.try_write(seq, encode_envelope([orphan], seq))
    return orphan


@pytest.mark.parametrize("cursor", [1, 3])
def test_orphan_slot_below_the_fold_is_never_applied(lake_url: str, cursor: int) -> None:
    Lake.create(lake_url).close()
    commit_inserts(lake_url, 5, 1)
    with Lake.open(lake_url) as lake:
        heads = {s.seq: lake.log.read(s.seq)[0].result for s in lake.log.list_after(0)}
        fold_all(lake_url)  # keeps slot 5; 1..4 truncated
        # Right after the view's cursor: contiguous with the kept slot when cursor is 3.
        _orphan(lake, cursor + 1, heads[cursor])
        with pytest.raises(StaleViewError):
            read_tail(lake.log, heads[cursor], cursor)
        # A fresh view starts at the fold cursor and never sees it; the folder
        # folds past it and its next truncation removes it.
        expected = _fresh(lake_url)
        assert expected.last_seq == 5
        commit_inserts(lake_url, 1, 1)
        fold_all(lake_url)
        assert [s.seq for s in lake.log.list_after(0)] == [6]
        assert _fresh(lake_url).row_count() > expected.row_count()


def test_refresh_renews_the_reader_lease_of_an_idle_view(
    lake_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    Lake.create(lake_url).close()
    commit_inserts(lake_url, 1, 1)
    book = LeaseBook(LakeLocation.parse(lake_url))
    with Lake.open(lake_url) as lake:
        lake.lease.ttl_s = 2.0
        state = lake.materialize()
        monkeypatch.setattr(leases, "time", ClockAhead(1.2))  # past half its life
        lake.refresh(state)
        monkeypatch.setattr(leases, "time", ClockAhead(2.4))  # past the first lease's expiry
        live = {lease.reader_id: lease for lease in book.live()}
        assert lake.lease.reader_id in live
        assert live[lake.lease.reader_id].fold <= state.last_seq
        # It pins what the view needs: the folder keeps every slot after it.
        lake.lease.ttl_s = 60.0  # renewed by this refresh, it outlasts the commits and fold
        lake.refresh(state)
        commit_inserts(lake_url, 3, 2)
        fold_all(lake_url)
        assert [s.seq for s in lake.log.list_after(state.last_seq)] == [2, 3, 4]
        lake.refresh(state)
        assert state.same_rows(_fresh(lake_url))
