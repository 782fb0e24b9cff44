"""Capture trusts DuckDB's query log only where it can vouch for every write.

A session reads only the metadata tables the log says DuckLake wrote. These
tests write DuckLake's copy in the ways the log could miss or misread (logging
turned off or filtered, the metadata database made the default so a write is
unqualified, a table slatelake does not know, a lake table named like a
metadata table) and check after each statement that DuckLake's copy still
equals the committed state and that a fresh session sees the same catalog.
Sessions refuse such writes unless told otherwise (``metadata_writes``,
tests/ducklake/test_metadata_writes.py); these tests allow them.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from slatelake.ducklake import extensions
from slatelake.ducklake.session import META_DB, Session, connect
from slatelake.ducklake.write_log import WRITES_PER_TRUNCATE
from slatelake.errors import UnsupportedError


@pytest.fixture
def session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Session:
    monkeypatch.setenv("SLATELAKE_VERIFY_CAPTURE", "1")
    s = Session((tmp_path / "lake").as_uri(), data_path=f"{tmp_path / 'data'}/")
    s.metadata_writes = True
    s.sql("CREATE TABLE t (id INTEGER, v VARCHAR)")
    s.sql("INSERT INTO t VALUES (1, 'a')")
    yield s
    s.close()


def _options(url: str) -> dict[str, str]:
    with Session(url, read_only=True) as fresh:
        rows = fresh.sql(
            f"SELECT key, value FROM {META_DB}.ducklake_metadata WHERE scope IS NULL"
        ).fetchall()
    return dict(rows)


def _rows(url: str) -> list[tuple]:
    with Session(url, read_only=True) as fresh:
        return sorted(fresh.sql("SELECT * FROM t").fetchall())


def test_a_write_with_logging_turned_off_is_still_captured(session: Session) -> None:
    session.sql("CALL disable_logging()")
    session.sql("INSERT INTO t VALUES (2, 'b')")
    session.capture.verify(session.state)
    session.sql("INSERT INTO t VALUES (3, 'c')")  # the log is back on for this one
    session.capture.verify(session.state)
    assert _rows(session.url) == [(1, "a"), (2, "b"), (3, "c")]


def test_a_write_with_the_query_log_filtered_away_is_still_captured(session: Session) -> None:
    session.sql("CALL enable_logging(['HTTP'])")  # every type but the one capture reads
    session.sql("DELETE FROM t WHERE id = 1")
    session.capture.verify(session.state)
    assert _rows(session.url) == []


def test_an_unqualified_write_into_the_metadata_database_made_default_is_captured(
    session: Session,
) -> None:
    session.sql(f"USE {META_DB}")
    session.sql("INSERT INTO ducklake_metadata VALUES ('slatelake_probe', 'x', NULL, NULL)")
    session.capture.verify(session.state)
    session.sql("USE lake")
    assert _options(session.url)["slatelake_probe"] == "x"


def test_a_qualified_write_into_the_metadata_database_is_captured(session: Session) -> None:
    session.sql(
        f'UPDATE "{META_DB}"."main".ducklake_metadata SET value = value WHERE key = \'data_path\''
    )
    session.sql(
        f"INSERT INTO {META_DB}.main.ducklake_metadata VALUES ('slatelake_probe', 'y', NULL, NULL)"
    )
    session.capture.verify(session.state)
    assert _options(session.url)["slatelake_probe"] == "y"


def test_a_table_slatelake_does_not_know_in_the_metadata_database_is_refused(
    session: Session,
) -> None:
    with pytest.raises(UnsupportedError, match="ducklake_evil"):
        session.sql(f"CREATE TABLE {META_DB}.ducklake_evil (i INTEGER)")
    session.sql("INSERT INTO t VALUES (4, 'd')")  # the session reloaded from the log
    assert _rows(session.url) == [(1, "a"), (4, "d")]


def test_a_lake_table_named_like_a_metadata_table_reads_and_writes_as_any_table(
    session: Session,
) -> None:
    session.sql("CREATE TABLE ducklake_snapshot (x INTEGER)")
    session.sql("INSERT INTO ducklake_snapshot VALUES (7)")
    session.sql("UPDATE ducklake_snapshot SET x = 8")
    session.capture.verify(session.state)
    with Session(session.url, read_only=True) as fresh:
        assert fresh.sql("SELECT x FROM lake.main.ducklake_snapshot").fetchall() == [(8,)]


def test_write_verbs_inside_a_string_change_nothing(session: Session) -> None:
    text = f"insert into {META_DB}.ducklake_snapshot values (1); drop table ducklake_table"
    session.sql("INSERT INTO t VALUES (5, ?)", [text])
    session.capture.verify(session.state)
    assert (5, text) in _rows(session.url)


def test_a_flush_dropping_an_old_inlined_table_of_a_table_it_does_not_name_is_captured(
    session: Session,
) -> None:
    """After its commit a flush drops every empty older schema version's
    inlined table, also for tables its snapshot's changes do not name."""
    session.sql("CREATE TABLE b (id INTEGER)")
    session.sql(
        "INSERT INTO b SELECT i FROM range(100) r(i)"
    )  # Parquet: b's inlined table stays empty
    session.sql("ALTER TABLE b ADD COLUMN x INTEGER")
    session.sql("CALL ducklake_flush_inlined_data('lake')")  # names only t
    session.capture.verify(session.state)
    with Session(session.url, read_only=True) as fresh:
        fresh.capture.verify(fresh.state)
        assert fresh.sql("SELECT count(*) FROM b").fetchall() == [(100,)]


def test_statements_of_a_plain_begin_commit_block_are_captured_at_the_commit(
    session: Session,
) -> None:
    session.sql("BEGIN")
    session.sql("INSERT INTO t VALUES (6, 'f')")
    session.sql("SELECT count(*) FROM t").fetchall()  # a read between: the log is kept
    session.sql("CREATE TABLE u (k INTEGER)")
    session.sql("INSERT INTO u VALUES (1)")
    session.sql("COMMIT")
    session.capture.verify(session.state)
    assert (6, "f") in _rows(session.url)
    with Session(session.url, read_only=True) as fresh:
        assert fresh.sql("SELECT k FROM u").fetchall() == [(1,)]


def _metadata_log(con: duckdb.DuckDBPyConnection) -> list[str]:
    rows = con.execute("SELECT query FROM duckdb_logs_parsed('DuckLakeMetadata')").fetchall()
    return [r[0] for r in rows]


def test_log_types_a_user_enabled_before_connecting_survive_the_sessions_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DuckLake's own conformance file (general/ducklake_metadata_logging)
    turns DuckLakeMetadata logging on, then attaches: the session must keep
    the type on and the entries in the log, writes and all."""
    monkeypatch.setenv("SLATELAKE_VERIFY_CAPTURE", "1")
    con = extensions.connect()
    con.execute("CALL enable_logging('DuckLakeMetadata')")
    url = (tmp_path / "lake").as_uri()
    with connect(url, data_path=f"{tmp_path / 'data'}/", connection=con) as s:
        s.sql("CREATE TABLE t (id INTEGER)")
        first = _metadata_log(con)
        for i in range(3):
            s.sql(f"INSERT INTO t VALUES ({i})")
        kept = _metadata_log(con)
        types = con.execute("SELECT current_setting('enabled_log_types')").fetchone()[0]
        assert sorted(s.sql("SELECT * FROM t").fetchall()) == [(0,), (1,), (2,)]
    assert first, "DuckLake logged no metadata query for CREATE TABLE"
    assert kept[: len(first)] == first, "the user's earlier entries were truncated"
    assert len(kept) > len(first)
    assert "DuckLakeMetadata" in types.split(",")
    assert _rows(url) == [(0,), (1,), (2,)]


def test_log_types_a_user_enables_in_a_session_survive_its_writes(session: Session) -> None:
    session.sql("CALL enable_logging('DuckLakeMetadata')")
    session.sql("INSERT INTO t VALUES (2, 'b')")
    first = _metadata_log(session.con)
    session.sql("DELETE FROM t WHERE id = 1")
    session.sql("INSERT INTO t VALUES (3, 'c')")
    session.capture.verify(session.state)
    kept = _metadata_log(session.con)
    assert first and kept[: len(first)] == first and len(kept) > len(first)
    assert _rows(session.url) == [(2, "b"), (3, "c")]


def test_disabling_logging_hands_the_log_back_to_the_session(session: Session) -> None:
    """After the user's disable_logging the log is the session's again: its
    entries are truncated every ``WRITES_PER_TRUNCATE`` writes, and nothing
    of the user's type is logged any more."""
    session.sql("CALL enable_logging('DuckLakeMetadata')")
    session.sql("INSERT INTO t VALUES (2, 'b')")
    assert _metadata_log(session.con)
    session.sql("CALL disable_logging()")
    session.sql("INSERT INTO t VALUES (3, 'c')")  # compares every table once, logs again
    one = session.con.execute("SELECT count(*) FROM duckdb_logs()").fetchone()[0]
    writes = 3 * WRITES_PER_TRUNCATE
    for n in range(writes):
        session.sql(f"INSERT INTO t VALUES ({100 + n}, 'x')")
    session.capture.verify(session.state)
    assert _metadata_log(session.con) == []
    logged = session.con.execute("SELECT count(*) FROM duckdb_logs()").fetchone()[0]
    # kept, one write logs `one` entries or more: several times that many
    assert logged < (WRITES_PER_TRUNCATE + 1) * max(one, 1), (
        f"{logged} entries after {writes} writes: the log is no longer truncated"
    )
    assert _rows(session.url)[:4] == [(1, "a"), (2, "b"), (3, "c"), (100, "x")]


@pytest.mark.parametrize(
    "target",
    [
        '"__slatelake_meta"."main".ducklake_inlined_data_1_1',  # as DuckLake spells it
        "__slatelake_meta.main.ducklake_inlined_data_1_1",  # as its appender does
        "__SLATELAKE_META.main.ducklake_inlined_data_1_1",
    ],
)
def test_a_hand_written_insert_dated_to_an_old_snapshot_is_captured(
    session: Session, target: str
) -> None:
    """A row DuckLake inserts carries the new snapshot's id, so capture reads
    what DuckLake only inserted into by that id without counting; a row a
    user inserts by hand can carry an old one. A statement that names the
    metadata database makes the next capture count, and the row is found."""
    (begin,) = session.sql(
        f"SELECT begin_snapshot FROM {META_DB}.ducklake_inlined_data_1_1 WHERE id = 1"
    ).fetchone()
    session.sql(f"INSERT INTO {target} VALUES (1000, ?, NULL, 9, 'hand')", [begin])
    session.capture.verify(session.state)
    assert _rows(session.url) == [(1, "a"), (9, "hand")]


def test_a_table_only_deleted_from_is_read_when_its_count_moved(session: Session) -> None:
    """Capture skips a table the log shows only deleted from while its count
    stands; a delete that took a row moves the count, and the row is gone."""
    session.sql(f"INSERT INTO {META_DB}.ducklake_metadata VALUES ('probe', 'x', NULL, NULL)")
    written = session.sql(f"DELETE FROM {META_DB}.ducklake_metadata WHERE key = 'probe'")
    assert written.fetchall() == [(1,)]
    session.capture.verify(session.state)
    assert "probe" not in _options(session.url)


def test_a_delete_and_an_insert_of_as_many_rows_are_captured(session: Session) -> None:
    """The count stands, but the table was also inserted into: not a table
    only deleted from, so its rows are read."""
    session.sql(f"INSERT INTO {META_DB}.ducklake_metadata VALUES ('before', 'x', NULL, NULL)")
    with session.transaction():
        session.sql(f"DELETE FROM {META_DB}.ducklake_metadata WHERE key = 'before'")
        session.sql(f"INSERT INTO {META_DB}.ducklake_metadata VALUES ('after', 'y', NULL, NULL)")
    session.capture.verify(session.state)
    options = _options(session.url)
    assert "before" not in options and options["after"] == "y"


def test_a_hand_written_update_of_a_file_row_in_place_is_captured(session: Session) -> None:
    """A data file's row changes only by a new id or an end snapshot when
    DuckLake writes it, and capture reads it by those; an UPDATE by hand
    (DuckLake's own tests model a legacy file so) changes it in place, with
    neither. A statement naming the metadata database makes the tables it
    wrote be compared whole, and a fresh session sees the change."""
    session.sql("CALL lake.set_option('data_inlining_row_limit', '0')")
    session.sql("INSERT INTO t VALUES (2, 'b')")
    session.sql(f"UPDATE {META_DB}.ducklake_data_file SET file_order = 7")
    session.capture.verify(session.state)
    session.sql("DELETE FROM t WHERE id = 2")  # a write after it, on the same rows
    session.capture.verify(session.state)
    with Session(session.url, read_only=True) as fresh:
        rows = fresh.sql(f"SELECT file_order FROM {META_DB}.ducklake_data_file").fetchall()
    assert rows and all(r == (7,) for r in rows)
    assert _rows(session.url) == [(1, "a")]
