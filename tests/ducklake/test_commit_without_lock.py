"""An autocommit write on an uncontended lake commits in one slot, without the
commit lock; whatever lands while it runs (a lock taken, a snapshot) makes
its slot lose, and the write runs once more under the lock, landing once.

The rival acts from inside the statement (a Python function DuckDB calls
while the INSERT runs), after the statement's refresh and before its slot.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from slatelake.catalog.commit_lock import WAIT_ENV, CommitLock
from slatelake.catalog.lake import Lake
from slatelake.ducklake import copy_view
from slatelake.ducklake.session import Session, connect
from slatelake.errors import CommitLockBusyError


@pytest.fixture
def lake(tmp_path: Path) -> tuple[str, Path]:
    url = (tmp_path / "lake").as_uri()
    with connect(url, data_path=f"{tmp_path / 'data'}/") as session:
        session.sql("CREATE TABLE t (id INTEGER)")
    return url, tmp_path / "data"


def _slots(session: Session) -> list[int]:
    return list(session.lake.log.list_after(0))


def _during(session: Session, act: Callable[[], None]) -> None:
    """Register ``rival()``: it runs ``act`` on its first call, and returns 1."""
    calls = []

    def rival() -> int:
        if not calls:
            act()
        calls.append(1)
        return 1

    session.con.create_function("rival", rival, [], "INTEGER", side_effects=True)


def test_a_lone_autocommit_write_commits_one_slot_and_takes_no_lock(
    lake: tuple[str, Path],
) -> None:
    url, _ = lake
    with connect(url) as session:
        session.sql("INSERT INTO t VALUES (0)")
        before = _slots(session)
        session.sql("INSERT INTO t VALUES (1)")
        session.sql("DELETE FROM t WHERE id = 0")
        after = _slots(session)
        assert len(after) - len(before) == 2  # one slot per statement, no lock take
        assert session.sql("SELECT id FROM t").fetchall() == [(1,)]
    with connect(url, read_only=True) as fresh:
        assert fresh.sql("SELECT id FROM t").fetchall() == [(1,)]


def test_a_write_after_a_refresh_that_found_another_committers_slot_takes_the_lock(
    lake: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a lake others write to, a write committed alone is soon overtaken
    (discarded, the copy reloaded, the write run again): for ``CONTENDED_S``
    after a refresh finds another committer's slot, writes take the lock."""
    url, _ = lake
    with connect(url) as session, connect(url) as other:
        other.sql("INSERT INTO t VALUES (1)")
        assert session.sql("SELECT count(*) FROM t").fetchone() == (1,)  # finds other's slot
        before = _slots(session)
        session.sql("INSERT INTO t VALUES (2)")
        assert len(_slots(session)) - len(before) == 2  # the lock's take, then the commit
        monkeypatch.setattr(copy_view, "CONTENDED_S", 0.0)  # the window has passed
        session.sql("SELECT count(*) FROM t").fetchone()  # a look at the log's end
        before = _slots(session)
        session.sql("INSERT INTO t VALUES (3)")
        assert len(_slots(session)) - len(before) == 1  # alone again
    with connect(url, read_only=True) as fresh:
        assert fresh.sql("SELECT sum(id), count(*) FROM t").fetchone() == (6, 3)


def test_a_write_without_the_lock_loses_to_a_lock_taken_while_it_ran(
    lake: tuple[str, Path],
) -> None:
    """Nothing lands under a lock another committer holds: the write's slot
    loses to the take, and its re-run waits for the release."""
    url, _ = lake
    with connect(url) as session, Lake.open(url) as rival:
        state = rival.materialize()
        lock = CommitLock(rival, owner="rival", ttl_s=600)
        taken: list[object] = []
        held: list[object] = []

        def release_later() -> None:
            rival.refresh(state, rematerialize=False)
            held.append(state.head)  # what landed while the lock was held: nothing
            lock.release(state)

        def take() -> None:
            lock.acquire(state)
            taken.append(state.head)
            threading.Timer(0.5, release_later).start()

        _during(session, take)
        session.sql("INSERT INTO t SELECT rival() + 6")
        assert taken and held == taken
        assert session.sql("SELECT id FROM t").fetchall() == [(7,)]
    with connect(url, read_only=True) as fresh:
        assert fresh.sql("SELECT id FROM t").fetchall() == [(7,)]


def test_a_write_without_the_lock_is_refused_while_a_taken_lock_stays_held(
    lake: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lock is never broken by a write that did not take it: with the
    rival holding on, the re-run waits out its bound and commits nothing."""
    url, data = lake
    monkeypatch.setenv(WAIT_ENV, "300ms")
    with connect(url) as session, Lake.open(url) as rival:
        state = rival.materialize()
        lock = CommitLock(rival, owner="rival", ttl_s=600)
        _during(session, lambda: lock.acquire(state))
        files_before = set(data.rglob("*.parquet"))
        with pytest.raises(CommitLockBusyError, match="held by rival"):
            session.sql("INSERT INTO t SELECT rival() + i FROM range(3000) r(i)")
        assert set(data.rglob("*.parquet")) == files_before  # the first run's file removed
        rival.refresh(state, rematerialize=False)
        assert lock.held
        lock.release(state)
        assert session.sql("SELECT count(*) FROM t").fetchone() == (0,)
        session.sql("INSERT INTO t VALUES (1)")
    with connect(url, read_only=True) as fresh:
        assert fresh.sql("SELECT id FROM t").fetchall() == [(1,)]


def test_a_write_without_the_lock_overtaken_by_a_snapshot_lands_once_after_it(
    lake: tuple[str, Path],
) -> None:
    url, _ = lake
    with connect(url) as session, connect(url) as other:
        _during(session, lambda: other.sql("INSERT INTO t VALUES (100)"))
        session.sql("INSERT INTO t SELECT rival() + i FROM range(20) r(i)")
        assert session.sql("SELECT count(*), count(DISTINCT id) FROM t").fetchone() == (21, 21)
        # overtaken once: the next writes take the lock (take + commit, two slots)
        before = _slots(session)
        session.sql("INSERT INTO t VALUES (200)")
        assert len(_slots(session)) - len(before) == 2
    with connect(url, read_only=True) as fresh:
        assert fresh.sql("SELECT count(*), sum(id) FROM t").fetchone() == (22, 100 + 210 + 200)
