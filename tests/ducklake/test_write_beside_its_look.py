"""An autocommit write that follows a look at the log's end (a refresh, or
its own slot landing) within a moment runs while the session looks again,
on a worker thread, instead of after. Before anything of it commits the
look's answer is in: if the log moved, the write is rolled back and runs
again on the head. These tests count the requests a write makes on the log
and act as a rival would between two writes, where the look finds it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from slatelake.ducklake import copy_view
from slatelake.ducklake.session import Session, connect
from slatelake.store.objects import ObjectClient


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = (tmp_path / "lake").as_uri()
    with connect(url, data_path=f"{tmp_path / 'data'}/") as session:
        session.sql("CREATE TABLE t (id INTEGER, v INTEGER)")
        session.sql("INSERT INTO t VALUES (1, 10), (2, 20)")
    return url


@pytest.fixture
def requests(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, str]]]:
    """Every store request slatelake makes, as (operation, path)."""
    seen: list[tuple[str, str]] = []
    real = ObjectClient._call

    def counted(self: ObjectClient, op: str, path: str, *args: object, **kwargs: object) -> object:
        seen.append((op, path))
        return real(self, op, path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ObjectClient, "_call", counted)
    yield seen


def _log_requests(seen: list[tuple[str, str]]) -> list[str]:
    """The requests on the commit log (slots, the truncation mark), by kind."""
    return [
        f"{op} {'mark' if path.endswith('log/truncated') else 'slot'}"
        for op, path in seen
        if "/commits/" in path or path.startswith("commits/") or path.endswith("log/truncated")
    ]


def _runs_again(session: Session, query: str, caplog: pytest.LogCaptureFixture) -> None:
    """Run ``query``, which its look must find the log moved under."""
    with caplog.at_level(logging.INFO, "slatelake.session"):
        session.sql(query)
    assert "the log moved while it ran" in caplog.text


def _rows(session: Session) -> list[tuple[int, int]]:
    return sorted(session.sql("SELECT id, v FROM t").fetchall())


def test_a_write_right_after_its_own_commit_looks_beside_it_and_reads_no_mark(
    url: str, requests: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    with connect(url) as session:
        session.sql("INSERT INTO t VALUES (3, 30)")  # looks first: the session just opened
        refreshes: list[int] = []
        monkeypatch.setattr(Session, "refresh", lambda self: refreshes.append(1))
        requests.clear()
        session.sql("INSERT INTO t VALUES (4, 40)")
        session.sql("UPDATE t SET v = v + 1 WHERE id = 4")
        monkeypatch.undo()
        # each write's LIST ran beside it (no refresh before it), and no
        # truncation-mark GET followed either slot: the reader lease pins them
        assert refreshes == []
        assert _log_requests(requests) == ["LIST slot", "PUT slot", "LIST slot", "PUT slot"]
        assert _rows(session)[-2:] == [(3, 30), (4, 41)]


def test_a_read_still_looks_at_the_log_right_after_a_commit(
    url: str, requests: list[tuple[str, str]]
) -> None:
    with connect(url) as session, connect(url) as other:
        session.sql("INSERT INTO t VALUES (3, 30)")
        other.sql("INSERT INTO t VALUES (4, 40)")
        requests.clear()
        assert (4, 40) in _rows(session)  # another writer's commit, seen at once
        assert [r for r in _log_requests(requests) if r.startswith("LIST")]


def test_a_write_that_skipped_its_look_and_was_overtaken_runs_again_on_the_new_head(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The rival's commits land between two writes of the session: each
    write's first run is made on the old head, its look finds the log moved,
    and it runs again on the head; its result is what it would have been had
    it been sent after the rival's."""
    with connect(url) as session, connect(url) as rival:
        session.sql("INSERT INTO t VALUES (3, 30)")
        rival.sql("UPDATE t SET v = v * 100 WHERE id = 1")
        rival.sql("DELETE FROM t WHERE id = 2")
        _runs_again(session, "UPDATE t SET v = v + 1", caplog)  # made on a head without the rival's
        assert _rows(session) == [(1, 1001), (3, 31)]
        rival.sql("INSERT INTO t VALUES (5, 50)")
        session.sql("INSERT INTO t SELECT id + 10, v FROM t")
        assert _rows(session) == [(1, 1001), (3, 31), (5, 50), (11, 1001), (13, 31), (15, 50)]
    with connect(url, read_only=True) as fresh:
        assert fresh.sql("SELECT count(*), sum(v) FROM t").fetchone() == (6, 2164)


def test_a_write_after_a_pause_looks_at_the_log_first(
    url: str, requests: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(copy_view, "FRESH_S", 0.0)  # every write comes after a pause
    with connect(url) as session:
        session.sql("INSERT INTO t VALUES (3, 30)")
        requests.clear()
        session.sql("INSERT INTO t VALUES (4, 40)")
        assert _log_requests(requests)[0] == "LIST slot"


def test_a_write_that_failed_on_a_head_the_log_moved_past_runs_again_on_the_new_head(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The look finds the table another writer created: the write's error on
    the old head (no such table) is not the caller's."""
    with connect(url) as session, connect(url) as rival:
        session.sql("INSERT INTO t VALUES (3, 30)")
        rival.sql("CREATE TABLE u (id INTEGER)")
        _runs_again(session, "INSERT INTO u VALUES (7)", caplog)
        assert session.sql("SELECT id FROM u").fetchall() == [(7,)]
        rival.sql("DROP TABLE u")
        session.sql("DROP TABLE t")  # made on a head that still holds u: no error
        assert session.sql("SHOW TABLES").fetchall() == []


def test_a_write_that_fails_on_the_log_head_fails_once_with_duckdbs_error(
    url: str, requests: list[tuple[str, str]]
) -> None:
    with connect(url) as session:
        session.sql("INSERT INTO t VALUES (3, 30)")
        requests.clear()
        with pytest.raises(duckdb.CatalogException, match="nope does not exist"):
            session.sql("INSERT INTO nope VALUES (1)")
        # one look after the failure found nothing new: no second run
        assert _log_requests(requests) == ["LIST slot"]
        assert _rows(session)[-1] == (3, 30)


def test_a_write_that_changed_nothing_on_a_head_the_log_moved_past_runs_again(
    url: str,
) -> None:
    """No slot would tell such a write that its head was stale; its look
    does: the row another writer added is found, and a DuckLake function
    read (treated as a write) answers at the log's head."""
    with connect(url) as session, connect(url) as rival:
        session.sql("INSERT INTO t VALUES (3, 30)")
        rival.sql("INSERT INTO t VALUES (4, 40)")
        assert session.execute("DELETE FROM t WHERE id = 4").fetchall() == [(1,)]
        session.sql("INSERT INTO t VALUES (5, 50)")
        rival.sql("INSERT INTO t VALUES (6, 60)")
        (snapshot,) = session.sql("FROM ducklake_current_snapshot('lake')").fetchone()
        (head,) = rival.sql("FROM ducklake_current_snapshot('lake')").fetchone()
        assert snapshot == head
        assert _rows(session)[-2:] == [(5, 50), (6, 60)]


def test_a_write_with_effects_outside_the_lake_runs_once_when_the_log_moved(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The run on the old head is rolled back before anything commits, so an
    insert into another attached database lands once, with the fresh count."""
    with connect(url) as session, connect(url) as rival:
        session.sql("ATTACH ':memory:' AS side")
        session.sql("CREATE TABLE side.counts (n BIGINT)")
        session.sql("INSERT INTO t VALUES (3, 30)")
        rival.sql("INSERT INTO t VALUES (4, 40)")
        _runs_again(session, "INSERT INTO side.counts SELECT count(*) FROM t", caplog)
        assert session.sql("SELECT n FROM side.counts").fetchall() == [(4,)]


def test_a_write_behind_the_sessions_back_lands_before_the_write_that_found_it(
    url: str, requests: list[tuple[str, str]], caplog: pytest.LogCaptureFixture
) -> None:
    """Whether DuckDB committed a write to DuckLake's copy behind the
    session's back (a relation's ``insert_into``) is asked while a write runs
    beside its look, as a read asks it first: the write finds it, is rolled
    back, and runs again after that write is committed in a slot of its own."""
    with connect(url) as session:
        session.sql("INSERT INTO t VALUES (3, 30)")  # its slot landed: the next write looks beside
        session.sql("SELECT 4 AS id, 40 AS v").insert_into("t")
        requests.clear()
        with caplog.at_level(logging.INFO, "slatelake.session"):
            session.sql("UPDATE t SET v = v + 1 WHERE id = 4")
        assert "a write outside session.sql was waiting while it ran" in caplog.text
        # the insert's slots (under the commit lock) and then the update's,
        # not one slot carrying both snapshots
        assert _log_requests(requests).count("PUT slot") > 1
        (newest,) = session.sql("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()
    with connect(url) as fresh:
        assert _rows(fresh) == [(1, 10), (2, 20), (3, 30), (4, 41)]
        before = fresh.sql(f"SELECT v FROM t AT (VERSION => {int(newest) - 1}) WHERE id = 4")
        assert before.fetchall() == [(40,)]  # the insert's own snapshot, before the update's


def test_a_write_beside_its_look_with_nothing_behind_its_back_runs_once(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    with connect(url) as session:
        session.sql("INSERT INTO t VALUES (3, 30)")
        with caplog.at_level(logging.INFO, "slatelake.session"):
            session.sql("UPDATE t SET v = v + 1 WHERE id = 3")
        assert "re-running" not in caplog.text
        assert _rows(session)[-1] == (3, 31)
