"""What a session's statement raises is a ``duckdb.Error``: DuckDB's own
errors as DuckDB raises them, slatelake's as twins that are both our class
and the DuckDB class nearest in meaning, so one ``except duckdb.Error``
catches everything and ``except ConflictError`` still works."""

from __future__ import annotations

import inspect
import pickle
from pathlib import Path

import duckdb
import pytest

import slatelake
from slatelake import errors
from slatelake.ducklake.duck_errors import as_duckdb, nearest


@pytest.fixture
def lake(tmp_path: Path) -> str:
    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path / 'data'}/") as s:
        s.sql("CREATE TABLE t (id INTEGER, v VARCHAR)")
        s.sql("INSERT INTO t SELECT i, 'v' || i FROM range(100) r(i)")
    return url


def test_a_statement_duckdb_cannot_parse_raises_duckdbs_parser_exception(lake: str) -> None:
    with slatelake.connect(lake) as s:
        with pytest.raises(duckdb.ParserException, match="syntax error at or near") as caught:
            s.sql("SELEC 1")
        assert not isinstance(caught.value, errors.SlatelakeError)  # DuckDB's, untouched
        with pytest.raises(duckdb.CatalogException):
            s.sql("SELECT * FROM missing_table")
        with pytest.raises(duckdb.BinderException):
            s.execute("INSERT INTO t VALUES (1, 'a', 'too many')")


def test_a_write_on_a_read_only_session_is_duckdbs_invalid_input(lake: str) -> None:
    with slatelake.connect(lake, read_only=True) as s:
        with pytest.raises(duckdb.InvalidInputException) as caught:
            s.sql("CREATE TABLE u (a INTEGER)")
        assert isinstance(caught.value, errors.ReadOnlyError)
        assert "read-only" in str(caught.value)


def test_a_lost_commit_race_is_both_a_conflict_and_a_duckdb_transaction_exception(
    lake: str,
) -> None:
    with slatelake.connect(lake) as a, slatelake.connect(lake) as b:
        a.begin()
        a.sql("DELETE FROM t WHERE id < 10")
        b.sql("DELETE FROM t WHERE id < 10")
        with pytest.raises(duckdb.TransactionException) as caught:
            a.commit()
        assert isinstance(caught.value, errors.ConflictError)
        assert caught.value.retryable
        assert not a.in_transaction  # as in DuckDB, a failed COMMIT ends the transaction
        assert a.sql("SELECT count(*) FROM t").fetchone() == (90,)


def test_a_refused_transaction_block_is_a_duckdb_transaction_exception(lake: str) -> None:
    """After a statement fails at run time the block's transaction is
    aborted; DuckDB says so with a TransactionException, and so does the
    session (a bind error, as in DuckDB, aborts nothing)."""
    with slatelake.connect(lake) as s:
        with pytest.raises(duckdb.TransactionException, match="failed|aborted"), s.transaction():
            with pytest.raises(duckdb.CatalogException):
                s.sql("INSERT INTO missing_table VALUES (1)")
            s.sql("INSERT INTO t VALUES (1000, 'kept')")
            with pytest.raises(duckdb.ConversionException):
                s.sql("INSERT INTO t VALUES (CAST('x' AS INTEGER), 'y')")
            s.sql("INSERT INTO t VALUES (1001, 'z')")
        assert s.sql("SELECT count(*) FROM t").fetchone() == (100,)


def test_a_held_snapshot_refusal_is_caught_by_except_duckdb_error(lake: str) -> None:
    slatelake.maintenance.protect(lake, 1, "keep")
    with slatelake.connect(lake) as s:
        try:
            s.sql("CALL ducklake_expire_snapshots('lake', versions => [1])")
        except duckdb.Error as exc:
            assert isinstance(exc, errors.HeldSnapshotError)
        else:
            pytest.fail("expiring a held snapshot was not refused")


@pytest.mark.parametrize(
    "cls",
    [
        c
        for _, c in inspect.getmembers(errors, inspect.isclass)
        if issubclass(c, errors.SlatelakeError)
    ],
)
def test_every_slatelake_error_has_a_duckdb_twin_that_pickles_as_itself(
    cls: type[errors.SlatelakeError],
) -> None:
    original = cls.__new__(cls)
    original.args = ("detail",)
    twin = as_duckdb(original)
    assert isinstance(twin, cls) and isinstance(twin, duckdb.Error)
    assert isinstance(twin, nearest(cls))
    assert type(twin).__name__ == cls.__name__ and str(twin) == "detail"
    back = pickle.loads(pickle.dumps(twin))
    assert type(back) is type(twin) and back.args == twin.args
    assert as_duckdb(twin) is twin  # already DuckDB's: left alone
