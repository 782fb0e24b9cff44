"""A statement that raised leaves no effect behind, not even on the next commit.

A write's rows stay in DuckDB until they are fetched, as DuckDB keeps them:
a write whose rows Python cannot hold (``to_days(2000000000)`` is beyond
Python's timedelta) commits, as it commits on stock DuckLake, and only the
fetch fails. A statement that fails inside DuckDB leaves nothing, in
autocommit or in a transaction, and never reaches the log with the next,
unrelated commit.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from slatelake.ducklake.session import Session, connect
from slatelake.errors import MisconfigurationError

pytestmark = pytest.mark.fast

UNFETCHABLE = "to_days(2000000000)"
# one statement that writes (a flush of the inlined rows) and then fails at its rows
WRITE_THEN_UNFETCHABLE = f"SELECT {UNFETCHABLE} FROM ducklake_flush_inlined_data('lake')"
# one statement that writes (a flush) and then fails inside DuckDB
WRITE_THEN_BOOM = "SELECT error('boom') FROM ducklake_flush_inlined_data('lake')"


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = (tmp_path / "lake").as_uri()
    with connect(url, data_path=f"{tmp_path / 'data'}/") as session:
        session.sql("CREATE TABLE t (id INTEGER)")
        for i in range(3):
            session.sql(f"INSERT INTO t VALUES ({i})")
    return url


def _snapshots(session: Session) -> int:
    return session.sql("SELECT count(*) FROM ducklake_snapshots('lake')").fetchone()[0]


def _ids(session: Session) -> list[int]:
    return [r[0] for r in session.sql("SELECT id FROM t ORDER BY id").fetchall()]


def test_expiry_hands_back_its_timestamptz_rows_and_commits(url: str) -> None:
    """pytz is pinned: DuckDB converts the TIMESTAMPTZ column the expiry returns."""
    with connect(url) as session:
        before = _snapshots(session)
        rows = session.sql("CALL ducklake_expire_snapshots('lake', older_than => now())").fetchall()
        assert len(rows) == before - 1 and all(r[1].tzinfo is not None for r in rows)
        assert _snapshots(session) == 1
    with connect(url, read_only=True) as fresh:
        assert _snapshots(fresh) == 1
        assert _ids(fresh) == [0, 1, 2]


def test_expiry_whose_rows_python_cannot_hold_commits_and_fails_at_fetch(url: str) -> None:
    with connect(url) as session:
        result = session.sql(
            f"SELECT snapshot_id, {UNFETCHABLE} FROM "
            "ducklake_expire_snapshots('lake', older_than => now())"
        )
        assert _snapshots(session) == 1  # committed before the rows were asked for
        with pytest.raises(OverflowError):
            result.fetchall()
        assert result.count("*").fetchone() == (4,)  # the rows are DuckDB's, once
        session.sql("INSERT INTO t VALUES (100)")
    with connect(url, read_only=True) as fresh:
        assert _snapshots(fresh) == 2
        assert _ids(fresh) == [0, 1, 2, 100]


def test_flush_whose_rows_python_cannot_hold_commits_once(url: str) -> None:
    with connect(url) as session:
        before = _snapshots(session)
        result = session.sql(WRITE_THEN_UNFETCHABLE)
        with pytest.raises(OverflowError):
            result.fetchall()
        with pytest.raises(OverflowError):
            result.fetchall()  # fetching again does not flush again
        assert _snapshots(session) == before + 1
    with connect(url, read_only=True) as fresh:
        assert _snapshots(fresh) == before + 1
        assert _ids(fresh) == [0, 1, 2]


def test_script_commits_the_statements_before_the_one_that_failed(url: str) -> None:
    """Several statements in one string run one by one, each autocommitted,
    as DuckDB runs them: the INSERT before the failing SELECT stays."""
    with connect(url) as session:
        result = session.sql(f"INSERT INTO t VALUES (50); SELECT {UNFETCHABLE}")
        with pytest.raises(OverflowError):
            result.fetchall()
        assert _ids(session) == [0, 1, 2, 50]
    with connect(url, read_only=True) as fresh:
        assert _ids(fresh) == [0, 1, 2, 50]


def test_transaction_with_a_failed_statement_commits_nothing(url: str) -> None:
    with connect(url) as session:
        before = _snapshots(session)
        with (
            pytest.raises(MisconfigurationError, match="so the transaction was rolled back"),
            session.transaction(),
        ):
            session.sql("INSERT INTO t VALUES (10)")
            with pytest.raises(duckdb.Error, match="boom"):  # the caller swallows the failure
                session.sql(WRITE_THEN_BOOM)
            with pytest.raises(duckdb.TransactionException, match="aborted"):
                session.sql("INSERT INTO t VALUES (12)")  # DuckDB refuses, as on stock
        assert _ids(session) == [0, 1, 2]
        session.sql("INSERT INTO t VALUES (100)")
    with connect(url, read_only=True) as fresh:
        assert _ids(fresh) == [0, 1, 2, 100]
        assert _snapshots(fresh) == before + 1


def test_raw_transaction_with_a_failed_statement_cannot_commit_it(url: str) -> None:
    with connect(url) as session:
        session.sql("BEGIN TRANSACTION")
        session.sql("INSERT INTO t VALUES (10)")
        with pytest.raises(duckdb.Error, match="boom"):
            session.sql(WRITE_THEN_BOOM)
        with pytest.raises(duckdb.TransactionException):
            session.sql("COMMIT")  # the failure ended the transaction
        assert _ids(session) == [0, 1, 2]
        session.sql("INSERT INTO t VALUES (100)")
    with connect(url, read_only=True) as fresh:
        assert _ids(fresh) == [0, 1, 2, 100]


def test_statement_failing_inside_duckdb_leaves_the_session_usable(url: str) -> None:
    with connect(url) as session:
        with pytest.raises(Exception, match="boom"):
            session.sql("INSERT INTO t SELECT CASE WHEN 1 = 1 THEN error('boom') END")
        session.sql("INSERT INTO t VALUES (100)")
        assert _ids(session) == [0, 1, 2, 100]
    with connect(url, read_only=True) as fresh:
        assert _ids(fresh) == [0, 1, 2, 100]


def test_raw_transaction_whose_read_failed_at_fetch_refuses_its_commit(url: str) -> None:
    """A read's relation runs when it is fetched; if it fails there, DuckDB
    aborts the transaction behind the session's back, and its COMMIT must
    say that nothing was committed rather than return as if it had."""
    with connect(url) as session:
        session.sql("BEGIN TRANSACTION")
        session.sql("INSERT INTO t VALUES (10)")
        reading = session.sql("SELECT CAST('x' || id AS INTEGER) FROM t")
        with pytest.raises(duckdb.ConversionException):
            reading.fetchall()
        with pytest.raises(duckdb.TransactionException, match="nothing was committed"):
            session.sql("COMMIT")
        assert _ids(session) == [0, 1, 2]


def test_transaction_block_whose_read_failed_at_fetch_commits_nothing(url: str) -> None:
    with connect(url) as session:
        with pytest.raises(MisconfigurationError, match="rolled back"), session.transaction():
            session.sql("INSERT INTO t VALUES (10)")
            with pytest.raises(duckdb.ConversionException):
                session.sql("SELECT CAST('x' || id AS INTEGER) FROM t").fetchall()
        assert _ids(session) == [0, 1, 2]
    with connect(url, read_only=True) as fresh:
        assert _ids(fresh) == [0, 1, 2]
