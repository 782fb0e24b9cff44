"""Concurrent writers commit as DuckLake commits them.

Each session keeps its own copy of DuckLake's metadata. At COMMIT it takes
the lake's commit lock, brings that copy to the log's head, and DuckLake's
own commit rebases the transaction (fresh ids, its conflict rules). So two
transactions that DuckLake would both commit both land, and a real conflict
is a ConflictError in DuckLake's words.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import duckdb
import pytest

from slatelake.catalog.commit_lock import WAIT_ENV
from slatelake.ducklake.session import Session, connect
from slatelake.errors import ConflictError, OperationLimitError
from slatelake.log.changeset import ChangeSet
from slatelake.log.committer import MAX_OPERATIONS_ENV
from slatelake.maintenance.report import STATUS_KEY


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = (tmp_path / "lake").as_uri()
    with connect(url, data_path=f"{tmp_path / 'data'}/") as session:
        session.sql("CREATE TABLE t (id INTEGER)")
    return url


def _parquet(tmp_path: Path) -> set[str]:
    return {p.name for p in (tmp_path / "data").rglob("*.parquet")}


def test_sessions_creating_different_tables_in_overlapping_transactions_both_commit(
    url: str,
) -> None:
    with connect(url) as a, connect(url) as b:
        a.sql("BEGIN")
        b.sql("BEGIN")
        a.sql("CREATE TABLE ta (i INTEGER)")
        b.sql("CREATE TABLE tb (i INTEGER)")
        a.sql("COMMIT")
        b.sql("COMMIT")  # rebased onto a's snapshot, as DuckLake does
    with connect(url, read_only=True) as fresh:
        assert fresh.sql("SHOW TABLES").fetchall() == [("t",), ("ta",), ("tb",)]


def test_appends_to_one_table_from_overlapping_transactions_both_land(url: str) -> None:
    with connect(url) as a, connect(url) as b:
        with a.transaction():
            a.sql("INSERT INTO t VALUES (1)")
            with b.transaction():
                b.sql("INSERT INTO t SELECT range FROM range(100, 3100)")  # a Parquet file
        expected = (3001, sum(range(100, 3100)) + 1)
        assert a.sql("SELECT count(*), sum(id) FROM t").fetchone() == expected
    with connect(url, read_only=True) as fresh:
        assert fresh.sql("SELECT count(*) FROM t").fetchone() == (3001,)


def test_insert_into_a_table_another_transaction_dropped_is_refused_in_ducklakes_words(
    url: str, tmp_path: Path
) -> None:
    before = _parquet(tmp_path)
    with connect(url) as a, connect(url) as b:
        a.sql("BEGIN")
        b.sql("BEGIN")
        a.sql("DROP TABLE t")
        b.sql("INSERT INTO t SELECT range FROM range(5000)")  # writes a Parquet file
        assert len(_parquet(tmp_path)) == len(before) + 1
        a.sql("COMMIT")
        with pytest.raises(ConflictError, match="another transaction has dropped it"):
            b.sql("COMMIT")
        assert b.sql("SHOW TABLES").fetchall() == []
        b.sql("CREATE TABLE again (i INTEGER)")  # the loser's session carries on
    assert _parquet(tmp_path) == before  # the loser's file was removed


def test_raw_transaction_survives_another_writers_commit_in_the_middle(url: str) -> None:
    with connect(url) as a, connect(url) as b:
        a.sql("BEGIN TRANSACTION")
        a.sql("INSERT INTO t VALUES (1)")
        b.sql("INSERT INTO t VALUES (2)")
        assert a.sql("SELECT id FROM t ORDER BY id").fetchall() == [(1,)]  # its own snapshot
        a.sql("COMMIT")
        assert a.sql("SELECT id FROM t ORDER BY id").fetchall() == [(1,), (2,)]


def test_raw_transaction_whose_view_went_stale_surfaces_a_conflict_at_commit(url: str) -> None:
    """No reload inside an open transaction (DuckDB refuses to detach a
    catalog with outstanding work): the conflict comes at COMMIT, retryable."""
    with connect(url) as a, connect(url) as b:
        a.sql("BEGIN")
        a.sql("INSERT INTO t VALUES (1)")
        a._view.stale = True  # its view must be rebuilt (a lapsed lease)
        b.sql("INSERT INTO t VALUES (2)")
        assert a.sql("SELECT id FROM t").fetchall() == [(1,)]
        with pytest.raises(ConflictError, match="re-run the transaction"):
            a.sql("COMMIT")
        a.sql("INSERT INTO t VALUES (1)")
        assert a.sql("SELECT id FROM t ORDER BY id").fetchall() == [(1,), (2,)]


def test_schema_in_use_survives_a_reload(url: str) -> None:
    with connect(url) as a:
        a.sql("CREATE SCHEMA s1")
        a.sql("USE lake.s1")
        a._view.stale = True  # the view must be rebuilt (a lapsed lease, a failed commit)
        a.sql("CREATE TABLE u (i INTEGER)")  # unqualified: lands in s1
        assert a.sql("SELECT current_schema()").fetchone() == ("s1",)
        a.sql("USE memory")
        a._view.stale = True
        a.sql("CREATE TABLE scratch (i INTEGER)")  # DuckDB's own in-memory catalog
        assert a.sql("SELECT current_database()").fetchone() == ("memory",)
    with connect(url, read_only=True) as fresh:
        tables = fresh.sql(
            "SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = 'lake' "
            "ORDER BY ALL"
        ).fetchall()
    assert tables == [("main", "t"), ("s1", "u")]


def test_immediate_transaction_mode_survives_a_reload(url: str) -> None:
    with connect(url) as a:
        a.sql("SET immediate_transaction_mode = true")
        a._view.stale = True
        a.sql("INSERT INTO t VALUES (1)")
        assert a.sql("SELECT current_setting('immediate_transaction_mode')").fetchone() == (True,)
        a.sql("SET immediate_transaction_mode = false")
        assert a.sql("SELECT count(*) FROM t").fetchone() == (1,)


def test_timestamptz_results_come_back_as_aware_datetimes(url: str) -> None:
    with connect(url, read_only=True) as session:
        (when,) = session.sql(
            "SELECT snapshot_time FROM lake.snapshots() ORDER BY snapshot_id LIMIT 1"
        ).fetchone()
    assert when.tzinfo is not None


def _status_writer(session: Session, stop: threading.Event, errors: list[BaseException]) -> None:
    n = 0
    while not stop.is_set():
        n += 1
        try:
            session.refresh()
            cs = ChangeSet(
                base=session.state.head,
                puts=((STATUS_KEY, f"status {n}".encode()),),
                tables=("sys/maintenance_status",),
            )
            session.commit_change_set(cs)
        except ConflictError:
            pass  # a status record may lose to another status record; never a writer
        except BaseException as exc:
            errors.append(exc)
            return
        stop.wait(0.02)  # a busy recorder: fifty records a second


def _writer(url: str, name: str, rows: int, errors: list[BaseException]) -> None:
    try:
        with connect(url) as session:
            session.sql(f"CREATE TABLE {name} (i INTEGER)")
            for i in range(rows):
                session.sql(f"INSERT INTO {name} VALUES ({i})")
                session.sql(f"INSERT INTO t VALUES ({i})")
    except BaseException as exc:
        errors.append(exc)


ROWS = 4  # per writer: two commits each, interleaved with the others and the status writer


def test_writers_and_head_preserving_records_never_bounce_each_other(url: str) -> None:
    errors: list[BaseException] = []
    stop = threading.Event()
    with connect(url) as status:
        recorder = threading.Thread(target=_status_writer, args=(status, stop, errors))
        recorder.start()
        writers = [
            threading.Thread(target=_writer, args=(url, f"w{i}", ROWS, errors)) for i in range(3)
        ]
        for w in writers:
            w.start()
        for w in writers:
            w.join(timeout=240)
        stop.set()
        recorder.join(timeout=60)
    assert errors == []
    with connect(url, read_only=True) as fresh:
        assert fresh.sql("SELECT count(*) FROM t").fetchone() == (3 * ROWS,)
        for i in range(3):
            assert fresh.sql(f"SELECT sum(i) FROM w{i}").fetchone() == (sum(range(ROWS)),)


def _table_with_an_inlined_delete(session: Session) -> None:
    session.sql("CREATE TABLE d (id INTEGER)")
    session.sql("INSERT INTO d SELECT range FROM range(3801)")  # one Parquet file
    session.sql("DELETE FROM d WHERE id < 3")  # few rows: an inlined delete


def test_delete_over_a_flush_of_inlined_deletes_is_refused_and_its_file_removed(
    url: str, tmp_path: Path
) -> None:
    """Stock DuckLake 1.5.5 commits both and reads every row of the file twice."""
    with connect(url) as a, connect(url) as b:
        _table_with_an_inlined_delete(a)
        before = _parquet(tmp_path)
        a.sql("BEGIN")
        a.sql("DELETE FROM d WHERE id >= 602 AND id < 944")  # a delete file
        b.sql("CALL ducklake_flush_inlined_data('lake')")  # the inlined delete's own file
        with pytest.raises(ConflictError, match="since this one began"):
            a.sql("COMMIT")
        assert a.sql("SELECT count(*), count(DISTINCT id) FROM d").fetchone() == (3798, 3798)
    with connect(url, read_only=True) as fresh:
        assert fresh.sql("SELECT count(*), count(DISTINCT id) FROM d").fetchone() == (3798, 3798)
    added = _parquet(tmp_path) - before
    assert len(added) == 1  # the flush's delete file; the refused delete's file is gone


def test_inlined_delete_over_a_delete_file_is_refused(url: str) -> None:
    """Stock DuckLake 1.5.5 commits both and subtracts the rows both deleted twice."""
    with connect(url) as a, connect(url) as b:
        a.sql("CREATE TABLE d (id INTEGER)")
        a.sql("INSERT INTO d SELECT range FROM range(3000)")
        a.sql("BEGIN")
        a.sql("DELETE FROM d WHERE id < 10")  # inlined
        b.sql("DELETE FROM d WHERE id < 20")  # a delete file
        with pytest.raises(ConflictError, match="deleted from it"):
            a.sql("COMMIT")  # a raw transaction's conflict surfaces at its COMMIT
        assert not a.in_transaction
        assert a.sql("SELECT count(*) FROM d").fetchone() == (2980,)


def _file_with_inlined_deletes(session: Session) -> None:
    session.sql("CREATE TABLE f (id INTEGER)")
    session.sql("CREATE TABLE o (id INTEGER)")
    session.sql("INSERT INTO f SELECT range FROM range(613)")
    session.sql("DELETE FROM f WHERE id < 200")  # a delete file
    session.sql("DELETE FROM f WHERE id IN (450, 451)")  # inlined deletes of the same file


def _rewritten_count(url: str) -> tuple[int, int]:
    with connect(url) as fresh:
        before = fresh.sql("SELECT count(*) FROM f").fetchone()[0]
        fresh.sql("CALL ducklake_rewrite_data_files('lake', delete_threshold => 0.0)")
        return before, fresh.sql("SELECT count(*) FROM f").fetchone()[0]


def test_flush_in_a_transaction_overtaken_by_another_commit_is_refused(url: str) -> None:
    """Stock DuckLake 1.5.5 retries the flush, leaves the inlined deletes in
    place beside the delete file that now holds them, and a rewrite then
    brings the deleted rows back."""
    with connect(url) as a, connect(url) as b:
        _file_with_inlined_deletes(a)
        b.sql("BEGIN")
        b.sql("CALL ducklake_flush_inlined_data('lake')")
        a.sql("INSERT INTO o VALUES (1)")  # another table: DuckLake would rebase the flush
        with pytest.raises(ConflictError, match="maintenance function"):
            b.sql("COMMIT")
        b.sql("CALL ducklake_flush_inlined_data('lake')")  # in autocommit it lands
    assert _rewritten_count(url) == (411, 411)


def test_maintenance_call_runs_on_the_head_under_the_commit_lock(url: str) -> None:
    """A flush in autocommit waits for the lock before DuckLake reads the
    catalog, so a commit made meanwhile is under it, not rebased over."""
    with connect(url) as a, connect(url) as b:
        _file_with_inlined_deletes(a)
        b.refresh()
        b.commit_lock.acquire(b.state)  # another writer is committing
        flushed = threading.Event()
        errors: list[BaseException] = []

        def flush() -> None:
            try:
                a.sql("CALL ducklake_flush_inlined_data('lake')")
                flushed.set()
            except BaseException as exc:
                errors.append(exc)

        runner = threading.Thread(target=flush)
        runner.start()
        runner.join(timeout=1.0)
        assert not flushed.is_set()  # waiting for the lock, not yet run
        b.sql("INSERT INTO o VALUES (1)")  # commits under the held lock and releases it
        runner.join(timeout=120)
        assert errors == [] and flushed.is_set()
    assert _rewritten_count(url) == (411, 411)


def _slots(url: str) -> int:
    with connect(url, read_only=True) as fresh:
        return fresh.last_seq


@pytest.mark.parametrize("how", ["sql", "checked"])
def test_a_lone_maintenance_call_commits_in_one_slot(url: str, how: str) -> None:
    """A session alone on the lake (it just saw the log's end, the lock
    free) runs a flush as it commits a lone write: no lock slot, one slot
    for the call; a cleanup, which deletes files before its commit, still
    takes the lock first (two slots)."""
    with connect(url) as a:
        _file_with_inlined_deletes(a)
        before = _slots(url)
        flush = "CALL ducklake_flush_inlined_data('lake')"
        if how == "sql":
            a.sql(flush)
        else:
            result, why = a.run_maintenance_unless(flush, lambda: None)
            assert why is None and result is not None
        assert _slots(url) == before + 1
        a.sql("CALL ducklake_expire_snapshots('lake', older_than => now())")
        before = _slots(url)
        a.sql("CALL ducklake_cleanup_old_files('lake', cleanup_all => true)")
        assert _slots(url) in (before, before + 2)  # nothing to write, or the lock's and its own
        assert not a.commit_lock.held
    assert _rewritten_count(url) == (411, 411)


def test_a_maintenance_call_takes_the_lock_first_after_another_committer_was_seen(
    url: str,
) -> None:
    """Another session committed a moment ago: a flush, whose Parquet work
    would be wasted if it lost its slot, takes the lock before it runs
    (the lock's slot and its own)."""
    with connect(url) as a, connect(url) as b:
        _file_with_inlined_deletes(a)
        b.sql("INSERT INTO o VALUES (1)")
        before = _slots(url)
        a.sql("CALL ducklake_flush_inlined_data('lake')")
        assert _slots(url) == before + 2
    assert _rewritten_count(url) == (411, 411)


@pytest.mark.parametrize("how", ["sql", "checked"])
def test_a_lone_maintenance_call_overtaken_runs_again_under_the_lock_and_lands_once(
    url: str, tmp_path: Path, how: str
) -> None:
    """Another session commits while a flush runs alone: the flush's slot
    loses, its files are removed, and it runs again with the lock held on
    the new head (DuckLake never rebases it, decision 0006): the other
    commit and the flush both land, no row is lost or doubled."""
    with connect(url) as a, connect(url) as b:
        _file_with_inlined_deletes(a)
        b.refresh()
        results = a._runner.results
        real = results.write
        raced: list[int] = []

        def overtaken(query: str, *args: Any) -> Any:
            out = real(query, *args)
            if "flush" in query and not raced:  # the first attempt, before it commits
                b.sql("INSERT INTO o VALUES (1)")
                raced.append(b.last_seq)
            return out

        results.write = overtaken  # type: ignore[method-assign]
        flush = "CALL ducklake_flush_inlined_data('lake')"
        try:
            if how == "sql":
                flushed = a.sql(flush).fetchall()
            else:
                result, why = a.run_maintenance_unless(flush, lambda: None)
                assert why is None and result is not None
                flushed = result.fetchall()
        finally:
            results.write = real  # type: ignore[method-assign]
        assert raced and flushed, (raced, flushed)
        assert a.sql("SELECT count(*) FROM o").fetchone() == (1,)
    with connect(url, read_only=True) as fresh:
        named = {
            path.rsplit("/", 1)[-1]
            for (path,) in fresh.con.execute(
                "SELECT path FROM __slatelake_meta.ducklake_data_file UNION ALL "
                "SELECT path FROM __slatelake_meta.ducklake_delete_file UNION ALL "
                "SELECT path FROM __slatelake_meta.ducklake_files_scheduled_for_deletion"
            ).fetchall()
        }
    assert _parquet(tmp_path) == named  # the refused attempt's files were removed
    assert _rewritten_count(url) == (411, 411)


def test_a_commit_refused_by_the_operation_limit_gives_the_commit_lock_back(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MAX_OPERATIONS_ENV, "2")
    with connect(url) as refused, pytest.raises(OperationLimitError):
        refused.sql("INSERT INTO t SELECT * FROM range(10)")
    monkeypatch.delenv(MAX_OPERATIONS_ENV)
    monkeypatch.setenv(WAIT_ENV, "1s")  # a lock left standing: refused in a second, not 60
    with connect(url) as other:
        other.sql("INSERT INTO t VALUES (1)")
        assert other.sql("SELECT count(*) FROM t").fetchone() == (1,)


def test_a_write_after_a_commit_rebased_past_a_status_record_and_overtaken_is_not_refused(
    url: str,
) -> None:
    """A commit that found its slot taken by a head-preserving record lands
    one slot later; reading the log to pick that record up can also read a
    snapshot committed right after it. DuckLake's copy holds our snapshot,
    not that one: the next statement must not take the difference for a
    write made outside the session."""
    with connect(url) as a, connect(url) as b:
        a.sql("INSERT INTO t VALUES (0)")
        real = a.lake.committer.commit

        def raced(cs: ChangeSet, seq: int, **kw: object):  # noqa: ANN202
            if not cs.mints_snapshot:
                return real(cs, seq, **kw)  # the lock's own slot
            b.refresh()
            record = ChangeSet(
                base=b.state.head,
                puts=((STATUS_KEY, b"a status record"),),
                tables=("sys/maintenance_status",),
            )
            b.commit_change_set(record)  # takes the slot a's commit aims at
            committed = real(cs, seq, **kw)  # rebased one slot later
            b.sql("INSERT INTO t VALUES (2)")  # lands before a reads the log again
            return committed

        a.lake.committer.commit = raced
        try:
            a.sql("INSERT INTO t VALUES (1)")
        finally:
            a.lake.committer.commit = real
        a.sql("INSERT INTO t VALUES (3)")
        assert sorted(a.sql("SELECT id FROM t").fetchall()) == [(0,), (1,), (2,), (3,)]


def test_a_maintenance_call_whose_begin_fails_gives_the_commit_lock_back(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A maintenance call takes the lock before its BEGIN; a BEGIN DuckDB
    refuses (a transaction opened behind the session's back) must not leave
    the lock standing for its TTL."""
    with connect(url) as session:
        session.con.execute("BEGIN TRANSACTION")
        with pytest.raises(duckdb.TransactionException, match="transaction"):
            session.sql("CALL ducklake_flush_inlined_data('lake')")
        session.con.execute("ROLLBACK")
    monkeypatch.setenv(WAIT_ENV, "1s")  # a lock left standing: refused in a second
    with connect(url) as other:
        other.sql("INSERT INTO t VALUES (1)")
        assert other.sql("SELECT count(*) FROM t").fetchone() == (1,)
