"""A session's cursors are connections to its database, as DuckDB's are: one
DuckLake catalog instance, transactions of their own, and every commit in the
log once, on the head it was made on (``ducklake/session_cursor.py``)."""

from __future__ import annotations

import threading
from pathlib import Path

import duckdb
import pytest

import slatelake
from slatelake.ducklake import extensions
from slatelake.ducklake.session_cursor import SessionCursor
from slatelake.ducklake.write_log import READS_PER_TRUNCATE
from slatelake.errors import ConflictError

INLINED = 1000  # rows DuckLake keeps in its catalog (the lake's inlining limit is higher)


@pytest.fixture
def url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A lake whose table ``t`` holds INLINED rows inlined in the catalog."""
    monkeypatch.setenv("SLATELAKE_VERIFY_CAPTURE", "1")  # every capture checked against a diff
    lake = (tmp_path / "lake").as_uri()
    with slatelake.connect(lake, data_path=f"{tmp_path / 'data'}/") as s:
        s.sql("CALL lake.set_option('data_inlining_row_limit', 10000)")
        s.sql("CREATE TABLE t (i INTEGER)")
        s.sql(f"INSERT INTO t SELECT i FROM range({INLINED}) r(i)")
        s.sql("CREATE TABLE u (i INTEGER)")
    return lake


def _fresh(url: str, sql: str) -> list[tuple[object, ...]]:
    """What a new process sees: the log, not this session's copy."""
    with slatelake.connect(url, read_only=True) as other:
        return other.sql(sql).fetchall()


def _inlined(url: str) -> int:
    """Rows of ``t`` still inlined in the catalog, as a new reader finds them."""
    with slatelake.connect(url, read_only=True) as other:
        (table_id,) = other.sql(
            "SELECT table_id FROM __slatelake_meta.ducklake_table "
            "WHERE table_name = 't' AND end_snapshot IS NULL"
        ).fetchone()
        names = other.sql(
            "SELECT table_name FROM __slatelake_meta.ducklake_inlined_data_tables "
            "WHERE table_id = ?",
            [table_id],
        ).fetchall()
        return sum(
            other.sql(
                f'SELECT count(*) FROM __slatelake_meta."{name}" WHERE end_snapshot IS NULL'
            ).fetchone()[0]
            for (name,) in names
        )


def test_cursors_share_one_ducklake_instance_as_stocks_connections_do(
    url: str, tmp_path: Path
) -> None:
    stock = extensions.connect()
    stock.execute(f"ATTACH 'ducklake:{tmp_path / 's.db'}' AS lake (DATA_PATH '{tmp_path}/s/')")
    stock.execute("USE lake")
    with slatelake.connect(url) as session:
        for con in (stock, session):
            con.execute("CREATE TABLE n (i INTEGER)")
            con.execute("CREATE TABLE memory.main.scratch AS SELECT 7 AS x")
        answers = []
        for con in (stock, session):
            cursor = con.cursor()
            cursor.execute("BEGIN")
            cursor.execute("INSERT INTO lake.n VALUES (1)")
            con.execute("INSERT INTO lake.n VALUES (2)")
            answers.append(
                (
                    cursor.execute("FROM ducklake_last_committed_snapshot('lake')").fetchall()
                    == con.execute("FROM ducklake_last_committed_snapshot('lake')").fetchall(),
                    cursor.execute("SELECT x FROM memory.main.scratch").fetchall(),
                    cursor.execute("SELECT count(*) FROM lake.n").fetchall(),  # its own view
                )
            )
            cursor.execute("COMMIT")
        assert answers[0] == answers[1] == (True, [(7,)], [(1,)])
        assert isinstance(session.cursor(), SessionCursor)
    assert _fresh(url, "SELECT i FROM n ORDER BY i") == [(1,), (2,)]
    stock.close()


def test_a_flush_racing_a_cursors_open_flush_is_refused_at_the_statement(url: str) -> None:
    with slatelake.connect(url) as session:
        first, second = session.cursor(), session.cursor()
        first.begin()
        second.begin()
        first.execute("CALL ducklake_flush_inlined_data('lake')")
        with pytest.raises(duckdb.TransactionException, match="Conflict"):
            second.execute("CALL ducklake_flush_inlined_data('lake')")
        first.commit()
        second.rollback()
        assert session.sql("SELECT count(*) FROM t").fetchone() == (INLINED,)
    assert _fresh(url, "SELECT count(*), sum(i) FROM t") == [(INLINED, sum(range(INLINED)))]
    assert _inlined(url) == 0  # the flush landed in the log, whole


def test_two_cursors_transactions_land_once_each_in_either_order(url: str) -> None:
    with slatelake.connect(url) as session:
        before = session.sql("SELECT count(*) FROM ducklake_snapshots('lake')").fetchone()[0]
        a, b = session.cursor(), session.cursor()
        a.begin()
        b.begin()
        a.execute("INSERT INTO u VALUES (1), (2)")
        b.execute("INSERT INTO u VALUES (10)")
        b.execute("DELETE FROM t WHERE i < 10")
        assert a.execute("SELECT count(*) FROM u").fetchone() == (2,)  # not b's
        b.commit()
        a.execute("INSERT INTO u VALUES (3)")
        a.commit()
        after = session.sql("SELECT count(*) FROM ducklake_snapshots('lake')").fetchone()[0]
        assert after == before + 2
    assert _fresh(url, "SELECT i FROM u ORDER BY i") == [(1,), (2,), (3,), (10,)]
    assert _fresh(url, "SELECT count(*) FROM t") == [(INLINED - 10,)]


def test_a_transaction_sharing_the_copy_lands_what_the_query_log_lost_meanwhile(
    url: str,
) -> None:
    """DuckLake's expiry writes its catalog before COMMIT (the snapshots'
    rows go at once); reads on a sibling connection meanwhile truncate
    DuckDB's query log, where capture would look for those writes. The
    COMMIT must still land the expiry: a new reader sees what the session sees."""
    with slatelake.connect(url) as session:
        for i in range(4):
            session.sql(f"INSERT INTO u VALUES ({i})")
        expirer = session.cursor()
        expirer.begin()
        expirer.execute("CALL ducklake_expire_snapshots('lake', older_than => now())")
        for _ in range(READS_PER_TRUNCATE + 1):
            session.sql("SELECT count(*) FROM u").fetchall()
        expirer.commit()
        left = session.sql("SELECT count(*) FROM ducklake_snapshots('lake')").fetchall()
    assert left == [(1,)]
    assert _fresh(url, "SELECT count(*) FROM ducklake_snapshots('lake')") == left


def test_a_commit_is_checked_against_a_siblings_commit_it_rebases_over(url: str) -> None:
    """DuckLake 1.5.5 redoes a flush wrongly when its commit retries over
    another's snapshot: a flush whose transaction a sibling's commit overtook
    is refused, as one overtaken by another process is, and nothing of it lands."""
    with slatelake.connect(url) as session:
        flusher = session.cursor()
        flusher.begin()
        flusher.execute("CALL ducklake_flush_inlined_data('lake', table_name => 't')")
        session.sql("INSERT INTO t VALUES (-1)")  # a sibling's commit, into the same table
        with pytest.raises(ConflictError, match="another transaction has committed"):
            flusher.commit()
        assert session.sql("SELECT count(*) FROM t").fetchone() == (INLINED + 1,)
    assert _fresh(url, "SELECT count(*) FROM t") == [(INLINED + 1,)]
    assert _inlined(url) == INLINED + 1  # the refused flush moved nothing


def test_a_cursors_transaction_open_across_a_reload_is_refused_at_commit(url: str) -> None:
    """A reload rebuilds DuckLake's copy (DuckDB detaches the old one, and an
    open transaction would commit into it unseen): the cursor's COMMIT is
    refused and its rows land nowhere."""
    with slatelake.connect(url) as session:
        cursor = session.cursor()
        cursor.begin()
        cursor.execute("INSERT INTO u VALUES (1)")
        session.con.execute("INSERT INTO lake.u VALUES (2)")  # a write outside session.sql
        with slatelake.connect(url) as other:
            other.sql("INSERT INTO u VALUES (3)")  # lands first: that write cannot rebase
        with pytest.raises(ConflictError, match="outside session.sql"):
            session.sql("SELECT 1")
        assert session.sql("SELECT i FROM u").fetchall() == [(3,)]  # reloaded from the log
        with pytest.raises(ConflictError, match="rebuilt while a transaction was open"):
            cursor.commit()
        assert not cursor.in_transaction
        cursor.execute("INSERT INTO u VALUES (4)")  # the cursor goes on, on the new copy
    assert _fresh(url, "SELECT i FROM u ORDER BY i") == [(3,), (4,)]


def test_cursors_in_threads_commit_every_row_once(url: str) -> None:
    rows, threads = 15, 3
    with slatelake.connect(url) as session:
        failures: list[BaseException] = []

        def write(n: int) -> None:
            try:
                with session.cursor() as cursor:
                    for i in range(rows):
                        cursor.execute("INSERT INTO u VALUES (?)", [n * 100 + i])
            except BaseException as exc:  # noqa: BLE001 - reported below
                failures.append(exc)

        workers = [threading.Thread(target=write, args=(n,)) for n in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        assert not failures, failures
    expected = sorted((n * 100 + i,) for n in range(threads) for i in range(rows))
    assert _fresh(url, "SELECT i FROM u ORDER BY i") == expected


def test_closing_a_cursor_rolls_back_its_transaction_and_leaves_the_session(url: str) -> None:
    with slatelake.connect(url) as session:
        cursor = session.cursor()
        cursor.begin()
        cursor.execute("INSERT INTO u VALUES (1)")
        cursor.close()
        cursor.close()  # twice: nothing more
        with pytest.raises(duckdb.ConnectionException):
            cursor.con.execute("SELECT 1")
        session.sql("INSERT INTO u VALUES (2)")
        assert session.sql("SELECT i FROM u").fetchall() == [(2,)]
    assert _fresh(url, "SELECT i FROM u") == [(2,)]
