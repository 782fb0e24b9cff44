"""Several slatelake lakes in one session (``ATTACH 'slatelake:<url>' AS name``),
beside stock DuckLake: each lake's writes land in its own log, on its head;
one transaction writes one lake; DETACH leaves nothing behind; every value
of the statement is parsed and quoted, never pasted."""

from __future__ import annotations

import threading
import time
from functools import partial
from pathlib import Path

import duckdb
import pytest

import slatelake
from slatelake import errors
from slatelake.ducklake import extensions
from slatelake.ducklake.attached_lakes import parse_attach


def _lake(tmp_path: Path, name: str) -> tuple[str, str]:
    return (tmp_path / name).as_uri(), f"{tmp_path / (name + '_data')}/"


def _count(url: str, sql: str) -> list[tuple[object, ...]]:
    with slatelake.connect(url, read_only=True) as other:
        return other.sql(sql).fetchall()


def _snapshots(url: str) -> int:
    with slatelake.connect(url, read_only=True) as other:
        return other.sql("SELECT count(*) FROM ducklake_snapshots('lake')").fetchone()[0]


@pytest.fixture
def two(tmp_path: Path) -> tuple[str, str, str]:
    """A lake with rows, and the URL and data path of a second, not yet made."""
    a, a_data = _lake(tmp_path, "a")
    with slatelake.connect(a, data_path=a_data) as s:
        s.sql("CREATE TABLE t (i INTEGER)")
        s.sql("INSERT INTO t VALUES (1), (2), (3)")
    b, b_data = _lake(tmp_path, "b")
    return a, b, b_data


def test_a_copy_between_two_lakes_lands_in_the_target_lakes_own_log(
    two: tuple[str, str, str],
) -> None:
    a, b, b_data = two
    before = _snapshots(a)
    with slatelake.connect(a) as s:
        s.sql(f"ATTACH 'slatelake:{b}' AS other (DATA_PATH '{b_data}')")
        s.sql("CREATE TABLE other.u (i INTEGER)")
        s.sql("INSERT INTO other.u SELECT i * 10 FROM lake.t")
        assert s.sql("SELECT sum(i) FROM other.u").fetchone() == (60,)
        s.sql("INSERT INTO t SELECT i + 100 FROM other.u")  # and back, unqualified
    assert _count(b, "SELECT i FROM u ORDER BY i") == [(10,), (20,), (30,)]
    assert _count(a, "SELECT count(*) FROM t") == [(6,)]
    assert _snapshots(a) == before + 1  # only the write back landed in a's log


def test_a_stock_ducklake_sits_beside_two_slatelake_lakes(
    two: tuple[str, str, str], tmp_path: Path
) -> None:
    a, b, b_data = two
    with slatelake.connect(a) as s:
        s.sql(f"ATTACH 'slatelake:{b}' AS other (DATA_PATH '{b_data}')")
        s.sql(f"ATTACH 'ducklake:{tmp_path / 'stock.db'}' AS stock (DATA_PATH '{tmp_path}/st/')")
        s.sql("CREATE TABLE stock.v AS SELECT * FROM lake.t")
        s.sql("CREATE TABLE other.v AS SELECT i + 1 AS i FROM stock.v")
        names = {r[0] for r in s.sql("SELECT database_name FROM duckdb_databases()").fetchall()}
        assert names == {"lake", "other", "stock", "memory", "system", "temp"}
    assert _count(b, "SELECT sum(i) FROM v") == [(9,)]


def test_a_transaction_writes_one_lake(two: tuple[str, str, str]) -> None:
    a, b, b_data = two
    with slatelake.connect(a) as s:
        other = s.attach(b, "other", data_path=b_data)
        s.sql("CREATE TABLE other.u (i INTEGER)")
        s.begin()
        s.sql("INSERT INTO t VALUES (4)")
        with pytest.raises(duckdb.Error, match="a write to the attached lake other runs in"):
            s.sql("INSERT INTO other.u VALUES (1)")
        s.rollback()
        # a transaction of the attached lake's own session, on the same database
        other.begin()
        other.sql("INSERT INTO other.u VALUES (5)")
        with pytest.raises(duckdb.TransactionException, match="single attached database"):
            other.sql("INSERT INTO lake.t VALUES (5)")  # DuckDB's own rule
        other.rollback()
        other.begin()
        other.sql("INSERT INTO other.u VALUES (6)")
        with pytest.raises(duckdb.Error, match="has a transaction open on its own session"):
            s.sql("INSERT INTO other.u VALUES (7)")
        other.commit()
    assert _count(b, "SELECT i FROM u") == [(6,)]
    assert _count(a, "SELECT count(*) FROM t") == [(3,)]


def test_a_write_to_an_attached_lake_lands_on_its_head_after_another_writer(
    two: tuple[str, str, str],
) -> None:
    a, b, b_data = two
    with slatelake.connect(a) as s:
        s.sql(f"ATTACH 'slatelake:{b}' AS other (DATA_PATH '{b_data}')")
        s.sql("CREATE TABLE other.u (i INTEGER)")
        for round_ in range(3):
            with slatelake.connect(b) as writer:  # another process's commit, between ours
                writer.sql(f"INSERT INTO u VALUES ({100 + round_})")
            s.sql(f"INSERT INTO other.u VALUES ({round_})")
            assert s.sql("SELECT count(*) FROM other.u").fetchone() == (2 * (round_ + 1),)
    assert _count(b, "SELECT i FROM u ORDER BY i") == [(0,), (1,), (2,), (100,), (101,), (102,)]


def test_attach_options_read_only_snapshot_and_create_if_not_exists(
    two: tuple[str, str, str], tmp_path: Path
) -> None:
    a, b, b_data = two
    with slatelake.connect(b, data_path=b_data) as made:
        made.sql("CREATE TABLE u (i INTEGER)")
        made.sql("INSERT INTO u VALUES (1)")
        made.sql("INSERT INTO u VALUES (2)")
    with slatelake.connect(a) as s:
        s.sql(f"ATTACH 'slatelake:{b}' AS ro (READ_ONLY)")
        with pytest.raises(duckdb.Error, match="read-only"):
            s.sql("INSERT INTO ro.u VALUES (3)")
        s.sql(f"ATTACH 'slatelake:{b}' AS past (SNAPSHOT_VERSION 2)")
        assert s.sql("SELECT i FROM past.u").fetchall() == [(1,)]
        with pytest.raises(duckdb.Error, match="can only be used in read-only mode"):
            s.sql(f"ATTACH 'slatelake:{b}' AS rw (SNAPSHOT_VERSION 2, READ_WRITE)")
        with pytest.raises(duckdb.Error, match="Cannot specify both VERSION and TIMESTAMP"):
            s.sql(f"ATTACH 'slatelake:{b}' AS tw (SNAPSHOT_VERSION 2, SNAPSHOT_TIME '2026-01-01')")
        missing = (tmp_path / "missing").as_uri()
        with pytest.raises(errors.NotFoundError, match="CREATE_IF_NOT_EXISTS is false"):
            s.sql(f"ATTACH 'slatelake:{missing}' AS m (CREATE_IF_NOT_EXISTS false)")
        with pytest.raises(duckdb.Error, match="create it by connecting with a data path"):
            s.sql(f"ATTACH 'slatelake:{missing}' AS m")
        s.sql(f"ATTACH IF NOT EXISTS 'slatelake:{b}' AS ro")  # already there: nothing
        with pytest.raises(duckdb.BinderException, match='database with name "ro" already'):
            s.sql(f"ATTACH 'slatelake:{b}' AS ro")
        with pytest.raises(duckdb.BinderException, match='database with name "lake" already'):
            s.sql(f"ATTACH 'slatelake:{b}' AS lake")
        for own in ("__slatelake_meta", "__SLATELAKE_base", "__slatelake_meta_1"):
            with pytest.raises(errors.MisconfigurationError, match="are the session's own"):
                s.sql(f"ATTACH 'slatelake:{b}' AS {own}")
        s.sql(f"ATTACH IF NOT EXISTS 'slatelake:{b}' AS memory")  # DuckDB's: nothing to do
        assert s.sql("SELECT count(*) FROM lake.t").fetchone() == (3,)  # the lake intact
    assert _count(b, "SELECT count(*) FROM u") == [(2,)]


def test_detach_closes_the_lake_and_leaves_no_database_behind(two: tuple[str, str, str]) -> None:
    a, b, b_data = two
    with slatelake.connect(a) as s:
        every = "SELECT count(*) FROM duckdb_databases() WHERE NOT internal"
        before = s.sql(every).fetchone()
        other = s.attach(b, "other", data_path=b_data)
        s.sql("USE other")
        s.sql("CREATE TABLE u (i INTEGER)")  # unqualified, in USE: still other's log
        s.sql("INSERT INTO u VALUES (1)")
        s.sql("USE lake")
        s.sql("DETACH other")
        assert s.sql(every).fetchone() == before
        with pytest.raises(duckdb.ConnectionException):
            other.con.execute("SELECT 1")
        with pytest.raises(duckdb.CatalogException):
            s.sql("SELECT * FROM other.u")
        s.sql(f"ATTACH 'slatelake:{b}' AS again")
        assert s.sql("SELECT i FROM again.u").fetchall() == [(1,)]
        s.detach("again")
        with pytest.raises(errors.MisconfigurationError, match="no slatelake lake is attached"):
            s.detach("again")
    assert _count(b, "SELECT i FROM u") == [(1,)]


def test_closing_the_session_closes_its_attached_lakes(two: tuple[str, str, str]) -> None:
    a, b, b_data = two
    s = slatelake.connect(a)
    other = s.attach(b, "other", data_path=b_data)
    s.sql("CREATE TABLE other.u AS SELECT 1 AS i")
    s.close()
    with pytest.raises(duckdb.ConnectionException):
        other.con.execute("SELECT 1")
    assert _count(b, "SELECT i FROM u") == [(1,)]


def test_a_relation_write_to_an_attached_lake_is_committed_by_the_next_statement(
    two: tuple[str, str, str],
) -> None:
    a, b, b_data = two
    with slatelake.connect(a) as s:
        s.attach(b, "other", data_path=b_data)
        s.sql("CREATE TABLE other.u (i INTEGER)")
        s.table("lake.t").insert_into("other.u")  # DuckDB's relation API, on its own
        s.sql("SELECT 1")
        assert _count(b, "SELECT count(*) FROM u") == [(3,)]


def test_many_writes_across_attached_lakes_lose_nothing_past_a_log_truncation(
    two: tuple[str, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLATELAKE_VERIFY_CAPTURE", "1")  # every capture checked in full
    monkeypatch.setattr("slatelake.ducklake.write_log.READS_PER_TRUNCATE", 5)
    a, b, b_data = two
    with slatelake.connect(a) as s:
        s.sql(f"ATTACH 'slatelake:{b}' AS other (DATA_PATH '{b_data}')")
        s.sql("CREATE TABLE other.u (i INTEGER)")
        for i in range(12):
            s.sql(f"INSERT INTO other.u VALUES ({i})")
            s.sql(f"INSERT INTO t VALUES ({i + 10})")
            s.sql("SELECT count(*) FROM other.u JOIN t USING (i)").fetchall()
    assert _count(b, "SELECT count(*), sum(i) FROM u") == [(12, 66)]
    assert _count(a, "SELECT count(*) FROM t") == [(15,)]


def test_the_attached_lakes_own_catalogs_are_hidden_and_never_written(
    two: tuple[str, str, str],
) -> None:
    a, b, b_data = two
    with slatelake.connect(a) as s:
        other = s.attach(b, "other", data_path=b_data)
        s.sql("CREATE TABLE other.u (i INTEGER)")
        listed = s.sql("SELECT database_name FROM duckdb_databases()").fetchall()
        assert not [name for (name,) in listed if name.startswith("__slatelake")]
        with pytest.raises(errors.ReadOnlyError, match=other.meta_db):
            s.sql(f'DELETE FROM "{other.meta_db}".ducklake_snapshot')


@pytest.mark.parametrize(
    ("statement", "refusal"),
    [
        ("ATTACH 'slatelake:' AS x", "names no lake"),
        ("ATTACH 'slatelake:file:///x/y' AS x (SNAPSHOT_VERSION '1; DROP TABLE t')", "snapshot id"),
        (
            "ATTACH 'slatelake:file:///x/y' AS x (METADATA_SCHEMA 'x')",
            "attach option METADATA_SCHEMA",
        ),
        ("ATTACH 'slatelake:file:///x/y' AS x (READ_ONLY maybe)", "true or false"),
        ("ATTACH 'slatelake:file:///x/y-z'", "needs a name"),
        ("ATTACH 'slatelake:file:///x/y' AS x (READ_ONLY, READ_WRITE)", "contradict"),
    ],
)
def test_an_attach_is_parsed_strictly(statement: str, refusal: str) -> None:
    with pytest.raises(errors.MisconfigurationError, match=refusal):
        parse_attach(statement)


def test_an_attach_reads_quoted_values_as_duckdb_does() -> None:
    request = parse_attach(
        "attach database if not exists 'slatelake:file:///l/it''s' as \"we\"\"ird\" "
        "(data_path '/d/it''s/', read_only false, snapshot_time '2026-01-01 00:00:00')"
    )
    assert request is not None
    assert request.url == "file:///l/it's" and request.alias == 'we"ird'
    assert request.data_path == "/d/it's/" and not request.read_only and request.if_not_exists
    assert request.snapshot_time == "2026-01-01 00:00:00"
    assert parse_attach("ATTACH 'ducklake:x.db' AS y") is None  # DuckDB's to run


def test_a_hostile_alias_is_quoted_wherever_it_is_used(two: tuple[str, str, str]) -> None:
    a, b, b_data = two
    alias = 'x"; DROP TABLE t; --'
    quoted = '"' + alias.replace('"', '""') + '"'
    with slatelake.connect(a) as s:
        s.sql(f"ATTACH 'slatelake:{b}' AS {quoted} (DATA_PATH '{b_data}')")
        s.sql(f"CREATE TABLE {quoted}.u AS SELECT 1 AS i")
        s.sql(f"DETACH {quoted}")
        assert s.sql("SELECT count(*) FROM t").fetchone() == (3,)
    assert _count(b, "SELECT i FROM u") == [(1,)]


def test_an_encrypted_lake_writes_files_only_its_catalog_can_read(tmp_path: Path) -> None:
    url, data = _lake(tmp_path, "enc")
    with slatelake.connect(url, data_path=data, encrypted=True) as s:
        s.sql("CREATE TABLE t AS SELECT range AS i FROM range(1000)")
        s.sql("CALL ducklake_flush_inlined_data('lake')")
        files = [
            r[0] for r in s.sql("SELECT data_file FROM ducklake_list_files('lake', 't')").fetchall()
        ]
    assert files
    with pytest.raises(duckdb.Error):  # a plain reader has no key
        duckdb.connect().sql(f"SELECT count(*) FROM read_parquet('{files[0]}')").fetchall()
    with slatelake.connect(url) as again:  # the flag is the catalog's: no need to repeat it
        again.sql("INSERT INTO t SELECT range FROM range(1000)")
        assert again.sql("SELECT count(*), sum(i) FROM t").fetchone() == (2000, 999000)
    b, b_data = _lake(tmp_path, "plain")
    with slatelake.connect(b, data_path=b_data) as made:
        made.sql("CREATE TABLE u (i INTEGER)")
    with slatelake.connect(url) as s:
        with pytest.raises(duckdb.Error, match="not encrypted but we requested an encrypted"):
            s.sql(f"ATTACH 'slatelake:{b}' AS other (ENCRYPTED)")
        s.sql(f"ATTACH 'slatelake:{b}' AS other")
        s.sql("INSERT INTO other.u SELECT i FROM t LIMIT 3")
    assert _count(b, "SELECT count(*) FROM u") == [(3,)]


def test_writes_to_an_attached_lake_race_another_writer_and_lose_nothing(
    two: tuple[str, str, str],
) -> None:
    a, b, b_data = two
    with slatelake.connect(b, data_path=b_data) as made:
        made.sql("CREATE TABLE u (who VARCHAR, i INTEGER)")
    stop = threading.Event()
    theirs: list[int] = []
    failures: list[BaseException] = []

    def other_writer() -> None:
        try:
            with slatelake.connect(b) as writer:
                i = 0
                while not stop.is_set():
                    slatelake.retry(partial(writer.sql, f"INSERT INTO u VALUES ('them', {i})"))
                    theirs.append(i)
                    i += 1
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    thread = threading.Thread(target=other_writer)
    thread.start()
    try:
        with slatelake.connect(a) as s:
            s.sql(f"ATTACH 'slatelake:{b}' AS other")
            for i in range(15):
                s.sql(f"INSERT INTO other.u SELECT 'us', i + {100 * i} FROM lake.t")
    finally:
        stop.set()
        thread.join()
    assert not failures, failures
    assert theirs, "the other writer never committed: no race was run"
    assert _count(b, "SELECT who, count(*) FROM u GROUP BY who ORDER BY who") == [
        ("them", len(theirs)),
        ("us", 45),
    ]


def test_a_lake_on_s3_attached_beside_a_local_one_commits_through_its_own_log(
    two: tuple[str, str, str], s3_bucket: str
) -> None:
    a, _, _ = two
    remote = f"s3://{s3_bucket}/lakes/remote"
    with slatelake.connect(a) as s:
        s.sql(f"ATTACH 'slatelake:{remote}' AS remote (DATA_PATH 's3://{s3_bucket}/data/')")
        s.sql("CREATE TABLE remote.copied AS SELECT i, i * i AS sq FROM lake.t")
        s.sql("INSERT INTO remote.copied SELECT i + 3, 0 FROM lake.t WHERE i = 1")
        s.sql("DETACH remote")
    assert _count(remote, "SELECT count(*), sum(sq) FROM copied") == [(4, 14)]
    assert _count(a, "SELECT count(*) FROM t") == [(3,)]


def test_a_failed_write_to_an_attached_lake_gives_its_lock_back(
    two: tuple[str, str, str],
) -> None:
    a, b, b_data = two
    with slatelake.connect(a) as s:
        s.attach(b, "other", data_path=b_data)
        s.sql("CREATE TABLE other.u (i INTEGER)")
        with pytest.raises(duckdb.ConversionException):
            s.sql("INSERT INTO other.u VALUES ('not a number')")
        with slatelake.connect(b) as writer:  # would wait out a lock left behind
            started = time.monotonic()
            writer.sql("INSERT INTO u VALUES (1)")
            assert time.monotonic() - started < 5
        s.sql("INSERT INTO other.u VALUES (2)")
    assert _count(b, "SELECT i FROM u ORDER BY i") == [(1,), (2,)]


def test_a_snapshot_time_reads_as_stock_reads_it_in_another_time_zone(
    two: tuple[str, str, str], tmp_path: Path
) -> None:
    """DuckLake reads a SNAPSHOT_TIME without an offset as UTC, whatever the
    session's TimeZone; an attached lake reads it the same way."""
    a, b, b_data = two
    stock = extensions.connect()
    stock.execute("SET TimeZone = 'America/New_York'")
    stock.execute(f"ATTACH 'ducklake:{tmp_path / 's.db'}' AS s (DATA_PATH '{tmp_path}/s/')")
    with slatelake.connect(b, data_path=b_data) as made:
        for con, table in ((stock, "s.u"), (made, "u")):
            con.execute(f"CREATE TABLE {table} (i INTEGER)")
            con.execute(f"INSERT INTO {table} VALUES (1)")
        time.sleep(1.1)
        between = made.sql("SELECT strftime(now() AT TIME ZONE 'UTC', '%Y-%m-%d %H:%M:%S')")
        utc_wall = between.fetchone()[0]
        time.sleep(1.1)
        for con, table in ((stock, "s.u"), (made, "u")):
            con.execute(f"INSERT INTO {table} VALUES (2)")
    stock.execute("DETACH s")
    stock.execute(f"ATTACH 'ducklake:{tmp_path / 's.db'}' AS s (SNAPSHOT_TIME '{utc_wall}')")
    with slatelake.connect(a) as s:
        s.sql("SET TimeZone = 'America/New_York'")
        s.sql(f"ATTACH 'slatelake:{b}' AS past (SNAPSHOT_TIME '{utc_wall}')")
        seen = s.sql("SELECT count(*) FROM past.u").fetchone()
    assert seen == stock.execute("SELECT count(*) FROM s.u").fetchone() == (1,)
    stock.close()


def test_an_option_set_on_an_attached_lake_lands_in_its_log(two: tuple[str, str, str]) -> None:
    """DuckLake's ``set_option`` writes the catalog without minting a snapshot:
    what it wrote to an attached lake still lands in that lake's log."""
    a, b, b_data = two
    with slatelake.connect(a) as s:
        s.sql(f"ATTACH 'slatelake:{b}' AS other (DATA_PATH '{b_data}')")
        s.sql("CALL other.set_option('data_inlining_row_limit', 0)")
        s.sql("CREATE TABLE other.u AS SELECT i FROM range(5) r(i)")  # checked against the log
    option = "SELECT value FROM __slatelake_meta.ducklake_metadata WHERE key = ?"
    with slatelake.connect(b, read_only=True) as other:
        assert other.sql(option, params=["data_inlining_row_limit"]).fetchall() == [("0",)]
    files = "SELECT count(*) FROM __slatelake_meta.ducklake_data_file WHERE end_snapshot IS NULL"
    assert _count(b, files) == [(1,)]  # written to Parquet, as the option says


def test_attach_takes_meta_type_duckdb_and_refuses_any_other_naming_it(
    two: tuple[str, str, str],
) -> None:
    a, b, b_data = two
    with slatelake.connect(a) as s:
        with pytest.raises(errors.MisconfigurationError, match="'sqlite'"):
            s.sql(f"ATTACH 'slatelake:{b}' AS other (DATA_PATH '{b_data}', META_TYPE 'SQLite')")
        assert s.sql(
            "SELECT count(*) FROM duckdb_databases() WHERE database_name = 'other'"
        ).fetchone() == (0,)
        s.sql(f"ATTACH 'slatelake:{b}' AS other (DATA_PATH '{b_data}', META_TYPE 'DUCKDB')")
        s.sql("CREATE TABLE other.u AS SELECT 1 AS i")
    assert _count(b, "SELECT i FROM u") == [(1,)]
