"""Reads on the session's worker cursor, beside the helper cursor."""

from __future__ import annotations

import duckdb
import pytest

from slatelake.ducklake.read_ahead import ReadAhead


@pytest.fixture
def con() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT range AS i FROM range(5)")
    yield con
    con.close()


def test_a_read_ahead_answers_once_where_it_is_taken(con: duckdb.DuckDBPyConnection) -> None:
    ahead = ReadAhead()
    sql = "SELECT i FROM t WHERE i >= 3 ORDER BY i"
    ahead.submit(con, "t", sql)
    assert ahead.take(sql) == [(3,), (4,)]
    assert ahead.take(sql) is None  # taken: the caller reads it itself from now on
    ahead.close()


def test_a_read_ahead_that_failed_raises_where_it_is_taken(
    con: duckdb.DuckDBPyConnection,
) -> None:
    """The worker's error is the capture's, raised when the loop reaches the
    read, as it would have been on the helper cursor."""
    ahead = ReadAhead()
    missing = "SELECT * FROM no_such_table"
    ahead.submit(con, "t", missing)
    with pytest.raises(duckdb.CatalogException, match="no_such_table"):
        ahead.take(missing)
    ahead.close()


def test_reads_never_taken_are_waited_for_and_the_worker_ends_at_close(
    con: duckdb.DuckDBPyConnection,
) -> None:
    """A capture that failed part way leaves its reads untaken: they are
    waited for (errors and all) and dropped, another caller's read stays for
    it, and the close ends the worker's thread and cursor."""
    ahead = ReadAhead()
    slow = "SELECT count(*) FROM range(20000000) r(i) WHERE i % 7 = 3"
    failing = "SELECT * FROM no_such_table"
    theirs = "SELECT max(i) FROM t"
    ahead.submit(con, "t", slow)
    ahead.submit(con, "t", failing)
    ahead.submit(con, "t", theirs)
    ahead.drain([slow, failing])
    assert ahead.take(slow) is None and ahead.take(failing) is None
    assert ahead.take(theirs) == [(4,)]
    pool = ahead._pool
    ahead.close()
    assert ahead._pool is None and ahead._cursor is None
    assert pool is not None and pool._shutdown


def test_an_answer_never_taken_is_asked_again_not_reused(
    con: duckdb.DuckDBPyConnection,
) -> None:
    """A caller that never took its answer (interrupted) leaves it behind; the
    same question asked later is read again, not answered from then."""
    ahead = ReadAhead()
    sql = "SELECT count(*) FROM t"
    ahead.submit(con, "t", sql)
    assert ahead._ahead[sql].result() == [(5,)]  # answered, and left behind
    con.execute("INSERT INTO t VALUES (5)")
    ahead.submit(con, "t", sql)
    assert ahead.take(sql) == [(6,)]
    ahead.close()
