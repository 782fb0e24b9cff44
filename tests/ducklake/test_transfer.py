"""Leaving and arriving: ``export`` and ``import`` round trips against stock DuckLake.

A round trip import -> export -> import must keep every row of every
``ducklake_*`` table (compared as multisets), every snapshot, every file
reference, and what time travel reads at every retained snapshot; the
exported file must be a stock catalog that stock DuckLake reads and writes.
Sources: a DuckDB-file catalog and a SQLite one, on local files and with
the lake and data on moto's S3.
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import duckdb
import pytest

from slatelake.ducklake import extensions, transfer
from slatelake.ducklake.catalog_file import load_sqlite
from slatelake.ducklake.session import connect
from slatelake.errors import MisconfigurationError
from tests.ducklake.transfer_oracle import (
    WORKLOAD,
    attach_stock,
    build_stock,
    dump,
    dump_lake,
    dump_stock,
    meta_rows,
    raw_file,
    rows_only,
)


@pytest.fixture(scope="module")
def stock(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A stock DuckLake catalog in a DuckDB file (data beside it); read-only here."""
    root = tmp_path_factory.mktemp("stock")
    build_stock(str(root / "stock.duckdb"), f"{root}/data/")
    return root / "stock.duckdb"


# -- the round trip --------------------------------------------------------------------
def test_round_trip_import_export_import_keeps_every_row_snapshot_and_time_travel(
    stock: Path, tmp_path: Path
) -> None:
    lake1, lake2 = (tmp_path / "lake1").as_uri(), (tmp_path / "lake2").as_uri()
    exported, again = tmp_path / "export.duckdb", tmp_path / "again.duckdb"
    imported = transfer.import_catalog(stock, lake1)
    transfer.export_catalog(lake1, exported)
    transfer.import_catalog(exported, lake2)
    transfer.export_catalog(lake2, again)

    source = raw_file(stock)
    assert source["ducklake_files_scheduled_for_deletion"][1], "expiry scheduled a file"
    assert source["ducklake_inlined_delete_2"][1] and source["ducklake_delete_file"][1]
    assert raw_file(exported) == source  # tables, column types, rows, constraints
    assert raw_file(again) == source
    assert meta_rows(lake1) == rows_only(source) == meta_rows(lake2)
    assert imported.rows == sum(len(rows) for rows in rows_only(source).values())

    expected = dump_stock(str(stock))
    assert len(expected["snapshots"]) == 20  # 24 minted, 4 expired
    assert dump_stock(str(exported)) == expected
    assert dump_lake(lake2) == expected


def test_imported_lake_takes_commits_and_its_export_keeps_taking_stock_ones(
    stock: Path, tmp_path: Path
) -> None:
    url = (tmp_path / "lake").as_uri()
    report = transfer.import_catalog(stock, url)
    assert report.snapshot_id == 23 and report.kind == "duckdb"
    with connect(url) as session:
        assert session.sql("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone() == (23,)
        session.sql("INSERT INTO t1 VALUES (700, 'from slatelake', NULL, NULL)")
        assert session.sql("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone() == (24,)
    out = tmp_path / "left.duckdb"
    assert transfer.export_catalog(url, out).snapshot_id == 24
    con = extensions.connect()
    try:
        con.execute(f"ATTACH 'ducklake:{out}' AS lake")  # read-write, stock DuckLake
        con.execute("INSERT INTO lake.t1 VALUES (800, 'from stock', NULL, NULL)")
        rows = con.execute("SELECT id, label FROM lake.t1 WHERE id >= 700 ORDER BY 1").fetchall()
        assert rows == [(700, "from slatelake"), (800, "from stock")]
        assert con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone() == (25,)
    finally:
        con.close()


def test_import_with_a_data_path_reads_the_files_where_they_moved(
    stock: Path, tmp_path: Path
) -> None:
    moved = tmp_path / "moved"
    shutil.copytree(stock.parent / "data", moved)
    url = (tmp_path / "lake").as_uri()
    report = transfer.import_catalog(stock, url, data_path=str(moved))
    assert report.data_path == f"{moved}/"
    with connect(url, read_only=True) as session:
        stored = session.sql(
            "SELECT value FROM __slatelake_meta.ducklake_metadata WHERE key = 'data_path'"
        ).fetchone()
        assert stored == (f"{moved}/",)
    expected = dump_stock(str(stock))["now"]
    hidden = stock.parent / "data.hidden"
    (stock.parent / "data").rename(hidden)  # the old place is gone
    try:
        with connect(url, read_only=True) as session:
            assert dump(session.con, snapshots=False)["now"] == expected
    finally:
        hidden.rename(stock.parent / "data")


def test_export_writes_a_file_url_data_path_as_the_plain_path_stock_ducklake_finds(
    tmp_path: Path,
) -> None:
    catalog, data = tmp_path / "stock.duckdb", tmp_path / "data"
    con = extensions.connect()
    try:
        attach_stock(con, str(catalog), f"{data.as_uri()}/")
        con.execute(WORKLOAD[1])
        con.execute(WORKLOAD[4])  # Parquet rows
        expected = dump(con)
    finally:
        con.close()
    url, out = (tmp_path / "lake").as_uri(), tmp_path / "out.duckdb"
    # stored plain: DuckLake then names files as the borrowed record holds them
    assert transfer.import_catalog(catalog, url).data_path == f"{data}/"
    with connect(url, read_only=True) as session:
        stored = session.sql(
            "SELECT value FROM __slatelake_meta.ducklake_metadata WHERE key = 'data_path'"
        )
        assert stored.fetchall() == [(f"{data}/",)]
    assert transfer.export_catalog(url, out).data_path == f"{data}/"
    con = duckdb.connect()
    try:
        con.execute(f"ATTACH '{out}' AS f (READ_ONLY)")
        stored = con.execute("SELECT value FROM f.ducklake_metadata WHERE key = 'data_path'")
        assert stored.fetchall() == [(f"{data}/",)]
    finally:
        con.close()
    assert dump_stock(str(out)) == expected


# -- SQLite -----------------------------------------------------------------------------
SQLITE_WORKLOAD = [
    "CREATE TABLE n (id INTEGER, s STRUCT(a INTEGER, b VARCHAR), l INTEGER[], m MAP(VARCHAR, "
    "INTEGER), u UUID, d DECIMAL(10, 2), ts TIMESTAMPTZ, ok BOOLEAN, bl BLOB)",
    "INSERT INTO n VALUES (1, {'a': 1, 'b': 'x'}, [1, 2], MAP {'k': 1}, "
    "'00000000-0000-0000-0000-000000000001', 1.25, TIMESTAMPTZ '2026-01-01 00:00:00+00', true, "
    "'\\xAA'::BLOB), (2, NULL, [], NULL, NULL, NULL, NULL, false, NULL)",
    "INSERT INTO n SELECT i, {'a': i, 'b': 'p'}, [i], MAP {'k': i}, NULL, i / 4, "
    "TIMESTAMPTZ '2026-01-02 00:00:00+00', i % 2 = 0, NULL FROM range(10, 60) r(i)",
    "UPDATE n SET d = 9.5 WHERE id = 2",
    "DELETE FROM n WHERE id IN (1, 12)",
    "ALTER TABLE n RENAME COLUMN d TO amount",
    "INSERT INTO n (id, amount) VALUES (3, 3.5)",
    "DELETE FROM n WHERE id % 5 = 0",
]


def test_sqlite_catalog_imports_with_every_snapshot_and_exports_as_a_duckdb_catalog(
    tmp_path: Path,
) -> None:
    catalog = tmp_path / "stock.sqlite"
    con = extensions.connect()
    try:
        load_sqlite(con)
        attach_stock(con, f"sqlite:{catalog}", f"{tmp_path}/data/")
        for statement in SQLITE_WORKLOAD:
            con.execute(statement)
        assert con.execute(
            "SELECT count(*) FROM ducklake_expire_snapshots('lake', versions => [2])"
        ).fetchall() == [(1,)]
        expected = dump(con, snapshots=True)
        expected_now = con.execute("SELECT * EXCLUDE (ts) FROM n ORDER BY id").fetchall()
    finally:
        con.close()
    url, out = (tmp_path / "lake").as_uri(), tmp_path / "out.duckdb"
    report = transfer.import_catalog(catalog, url)
    assert report.kind == "sqlite" and report.snapshot_id == expected["snapshots"][-1][0]
    with connect(url, read_only=True) as session:
        assert dump(session.con) == expected
        typed = session.sql("SELECT * EXCLUDE (ts) FROM n ORDER BY id").fetchall()
        assert typed == expected_now  # typed values, not SQLite's text
    transfer.export_catalog(url, out)
    assert dump_stock(str(out)) == expected


# -- moto S3 ---------------------------------------------------------------------------
def test_round_trip_through_a_lake_on_s3_with_data_on_s3(s3_bucket: str, tmp_path: Path) -> None:
    run = uuid.uuid4().hex[:8]
    data = f"s3://{s3_bucket}/data/{run}/"
    catalog = tmp_path / "stock.duckdb"
    con = extensions.connect()
    try:
        attach_stock(con, str(catalog), data)
        for statement in WORKLOAD[:9]:  # inlined and Parquet rows, deletes, an update
            con.execute(statement)
        con.execute("ALTER TABLE t1 ADD COLUMN extra INTEGER")
        con.execute("USE memory")
        con.execute("DETACH lake")
    finally:
        con.close()
    expected = dump_stock(str(catalog))
    url, out = f"s3://{s3_bucket}/lakes/{run}", tmp_path / "out.duckdb"
    report = transfer.import_catalog(catalog, url)
    assert report.data_path == data
    with pytest.raises(MisconfigurationError, match="a lake already exists"):
        transfer.import_catalog(catalog, url)
    assert dump_lake(url) == expected
    assert transfer.export_catalog(url, out).data_path == data
    assert raw_file(out) == raw_file(catalog)
    assert dump_stock(str(out)) == expected


def test_import_reports_the_lakes_own_tables_and_rows_as_a_user_counts_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two user tables are two tables, not DuckLake's thirty metadata tables."""
    from slatelake.cli import main

    catalog, data = tmp_path / "two.duckdb", f"{tmp_path / 'data'}/"
    con = extensions.connect()
    con.execute(f"ATTACH 'ducklake:{catalog}' AS s (DATA_PATH '{data}')")
    con.execute("CREATE TABLE s.a AS SELECT range AS i FROM range(3)")
    con.execute("CREATE TABLE s.b AS SELECT range AS i FROM range(5)")
    con.execute("DELETE FROM s.b WHERE i = 0")
    con.close()
    url = (tmp_path / "lake").as_uri()
    assert main(["import", str(catalog), url]) == 0
    out = capsys.readouterr().out
    assert "at snapshot" in out and ": 2 tables, 7 rows (" in out
    assert "  main.a: 3 rows" in out and "  main.b: 4 rows" in out
    with connect(url, read_only=True) as session:
        counts = {t: session.sql(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("a", "b")}
    assert counts == {"a": 3, "b": 4}
    report = transfer.import_catalog(catalog, (tmp_path / "again").as_uri())
    assert report.lake_tables == {"main.a": 3, "main.b": 4} and report.lake_rows == 7
    assert report.to_dict()["lake_rows"] == 7 and len(report.tables) > 2  # metadata tables
