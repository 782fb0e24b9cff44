"""Catalog images are stock DuckLake catalogs of the store at its fold cursor.

A stock DuckDB process (duckdb and the extension binaries, no slatelake)
attaches an image read-only, locally and over moto's S3, and reads what a
slatelake session reads at the image's head, data files included; every
``ducklake_*`` table of the image equals the session's catalog row for row.
An image holds the fold cursor's seq, never an unfolded slot; its record
refuses a newer format; a fold that moves during the read is never half in it.
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest

import slatelake
from slatelake.catalog.folder import Folder
from slatelake.catalog.lake import Lake
from slatelake.catalog.state import SYS_FOLD, decode_fold
from slatelake.ducklake import extensions
from slatelake.ducklake.image_writer import (
    IMAGE_FORMAT,
    check_image,
    read_image_record,
    write_image,
    write_image_file,
)
from slatelake.ducklake.session import META_DB
from slatelake.errors import CorruptionError, FormatError, NotFoundError
from slatelake.log.images import ImageBook, ImageInfo
from slatelake.store.keys import Subspace
from slatelake.store.location import LakeLocation
from tests.catalog.helpers import commit_inserts
from tests.ducklake.test_hidden_catalogs import listed_tables

STOCK_READER = Path(__file__).with_name("stock_reader.py")
QUERIES = {
    "t": "SELECT id, v, ts::VARCHAR, extra FROM {a}.t ORDER BY id",
    "view": "SELECT id, v FROM {a}.vw ORDER BY id",
    "t_at_3": "SELECT count(*), sum(id) FROM {a}.t AT (VERSION => 3)",
    "snapshots": "SELECT snapshot_id FROM {a}.snapshots() ORDER BY 1",
    "tables": "SELECT table_name FROM duckdb_tables() WHERE database_name = '{a}' ORDER BY 1",
}


@dataclass(frozen=True)
class Imaged:
    url: str
    info: ImageInfo
    local: Path  # a verified local copy of the image


def _history(session: slatelake.Session) -> None:
    """Inlined rows and deletes, a Parquet file, a delete from it, an update,
    a schema change, a dropped table, a view, an index."""
    sql = session.sql
    sql("CREATE TABLE t (id INTEGER, v VARCHAR, ts TIMESTAMPTZ)")
    sql("INSERT INTO t VALUES (1, 'a', TIMESTAMPTZ '2024-01-02 03:04:05+00'), (2, 'b', NULL)")
    sql("INSERT INTO t SELECT i, 'x' || i, NULL FROM range(10, 2000) r(i)")
    sql("DELETE FROM t WHERE id = 1")
    sql("DELETE FROM t WHERE id = 15")
    sql("UPDATE t SET v = 'upd' WHERE id = 2")
    sql("ALTER TABLE t ADD COLUMN extra INTEGER")
    sql("INSERT INTO t VALUES (3, 'c', NULL, 7)")
    sql("CREATE TABLE u (k BIGINT)")
    sql("INSERT INTO u VALUES (1)")
    sql("DROP TABLE u")
    sql("CREATE VIEW vw AS SELECT id, v FROM t WHERE id < 12")
    session.create_index("t", "id", "t_id")


def _fold(url: str) -> None:
    folder = Folder(LakeLocation.parse(url), margin_s=0)
    try:
        folder.fold_once()
    finally:
        folder.close()


@pytest.fixture(scope="module", params=["file", "s3"])
def imaged(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Imaged:
    """A lake with the whole history above, folded, and its image (module-wide:
    the tests below only read it)."""
    tmp = tmp_path_factory.mktemp("imaged")
    if request.param == "file":
        url, data = (tmp / "lake").as_uri(), str(tmp / "data")
    else:
        import boto3

        endpoint = request.getfixturevalue("moto_endpoint")
        bucket = f"img-{uuid.uuid4().hex[:12]}"
        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=bucket)
        url, data = f"s3://{bucket}/lake", f"s3://{bucket}/data/"
    with slatelake.connect(url, data_path=data) as session:
        _history(session)
    _fold(url)
    result = write_image(LakeLocation.parse(url))
    assert result.written and result.info is not None
    local = ImageBook(LakeLocation.parse(url)).fetch(result.info, tmp)
    return Imaged(url, result.info, local)


def _stock(attach: str, alias: str) -> dict:
    doc = {
        "extensions": [str(extensions.extension_path(n)) for n in ("ducklake", "httpfs")],
        "attach": attach,
        "queries": {k: q.format(a=alias) for k, q in QUERIES.items()},
    }
    proc = subprocess.run(
        [sys.executable, str(STOCK_READER), json.dumps(doc)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _session_rows(url: str) -> dict:
    with slatelake.connect(url, read_only=True) as session:
        out = {}
        for name, query in QUERIES.items():
            if name == "tables":
                continue
            out[name] = [list(r) for r in session.sql(query.format(a="lake")).fetchall()]
        return json.loads(json.dumps(out, default=str))


def test_stock_duckdb_reads_the_image_as_a_session_reads_the_lake_at_its_head(
    imaged: Imaged,
) -> None:
    attach = f"ATTACH 'ducklake:{imaged.info.url}' AS l (READ_ONLY)"
    stock = _stock(attach, "l")
    assert stock.pop("slatelake_loaded") is False
    assert stock.pop("tables") == [["t"]]  # data files included: the rows are read
    mine = _session_rows(imaged.url)
    assert stock == mine
    assert len(mine["t"]) == 1991 and mine["view"][:3] == [[2, "upd"], [3, "c"], [10, "x10"]]


def _tables(con: duckdb.DuckDBPyConnection, db: str, schema: str = "main") -> list[str]:
    return [
        name
        for (name,) in con.execute(
            "SELECT DISTINCT table_name FROM duckdb_columns() "
            "WHERE database_name = ? AND schema_name = ? ORDER BY 1",
            [db, schema],
        ).fetchall()
    ]


def _rows(con: duckdb.DuckDBPyConnection, db: str, table: str) -> list[tuple]:
    return con.execute(f'SELECT COLUMNS(*)::VARCHAR FROM "{db}"."{table}" ORDER BY ALL').fetchall()


def test_every_ducklake_table_of_the_image_equals_the_session_catalog_row_for_row(
    imaged: Imaged,
) -> None:
    with slatelake.connect(imaged.url, read_only=True) as session:
        con = session.con
        con.execute(f"ATTACH '{imaged.local}' AS img (READ_ONLY)")
        try:
            mine = sorted(listed_tables(con, META_DB))  # the session's copy is hidden
            assert _tables(con, "img") == mine  # main holds DuckLake's tables, nothing else
            assert all(name.startswith("ducklake_") for name in mine)
            assert any(name.startswith("ducklake_inlined_data_") for name in mine)
            assert any(name.startswith("ducklake_inlined_delete_") for name in mine)
            for table in mine:
                assert _rows(con, "img", table) == _rows(con, META_DB, table), table
            assert _tables(con, "img", "slatelake") == ["image", "index"]
            index = con.execute('SELECT index_name, end_snapshot FROM img.slatelake."index"')
            assert index.fetchall() == [("t_id", None)]
            record = read_image_record(con, "img")
        finally:
            con.execute("DETACH img")
    assert record.format == IMAGE_FORMAT and record.seq == imaged.info.seq
    assert record.lake == LakeLocation.parse(imaged.url).url


def _copy_with(imaged: Imaged, tmp_path: Path, statement: str) -> Path:
    copy = tmp_path / "copy.duckdb"
    shutil.copyfile(imaged.local, copy)
    con = duckdb.connect(str(copy))
    con.execute(statement)
    con.close()
    return copy


def test_an_image_of_a_newer_format_is_refused_and_discovery_falls_back(
    imaged: Imaged, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    newer = _copy_with(imaged, tmp_path, "UPDATE slatelake.image SET format = format + 1")
    con = duckdb.connect()
    con.execute(f"ATTACH '{newer}' AS img (READ_ONLY)")
    with pytest.raises(FormatError, match="format 2 is newer.*upgrade slatelake"):
        read_image_record(con, "img")
    con.close()
    location = LakeLocation.parse(imaged.url)
    book = ImageBook(location)
    stored = book.put(imaged.info.seq + 1, newer)
    try:
        with caplog.at_level(logging.WARNING, logger="slatelake.images"):
            found = book.newest_valid(tmp_path, check=check_image)
        assert found is not None and found[0].path == imaged.info.path
        assert any(
            stored.url in r.getMessage() and "FormatError" in r.getMessage() for r in caplog.records
        )
    finally:
        book.client.delete(stored.path)


def test_an_image_without_its_record_or_not_duckdb_is_corruption_naming_it(
    imaged: Imaged, tmp_path: Path
) -> None:
    bare = _copy_with(imaged, tmp_path, "DROP TABLE slatelake.image")
    with pytest.raises(CorruptionError, match=f"catalog image {imaged.info.url}.*no slatelake"):
        check_image(imaged.info, bare)
    junk = tmp_path / "junk.duckdb"
    junk.write_bytes(b"not a database" * 100)
    with pytest.raises(CorruptionError, match=f"catalog image {imaged.info.url} is not a DuckDB"):
        check_image(imaged.info, junk)
    other = ImageInfo(imaged.info.seq + 5, imaged.info.digest, 0, "x", "s3://b/x")
    with pytest.raises(CorruptionError, match=f"records slot {imaged.info.seq} but is named"):
        check_image(other, imaged.local)


def test_an_image_holds_the_fold_cursor_never_an_unfolded_slot(shared_lake_url: str) -> None:
    url = shared_lake_url
    data = f"{url}-data" if url.startswith("s3://") else url.replace("/lake", "/data")
    with slatelake.connect(url, data_path=data) as session:
        session.sql("CREATE TABLE t (id INTEGER)")
        session.sql("INSERT INTO t VALUES (1), (2)")
        _fold(url)
        session.sql("INSERT INTO t VALUES (3)")  # committed, not folded
        head = session.sql("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
    location = LakeLocation.parse(url)
    with Lake.open(url, read_only=True) as lake:
        fold_seq, fold_head = decode_fold(lake.reader().get(SYS_FOLD))
    result = write_image(location)
    assert result.written and (result.seq, result.head) == (fold_seq, fold_head)
    assert result.info is not None and result.info.seq == fold_seq
    assert fold_head.snapshot_id == head - 1
    again = write_image(location)
    assert not again.written and "already at the fold cursor" in again.reason
    assert again.info == ImageBook(location).newest()


def test_a_lake_with_nothing_folded_gets_no_image(lake_url: str) -> None:
    Lake.create(lake_url).close()
    result = write_image(LakeLocation.parse(lake_url))
    assert not result.written and result.reason.startswith(
        "nothing is folded yet: `slatelake fold "
    )
    assert ImageBook(LakeLocation.parse(lake_url)).list() == []


def test_writing_an_image_of_no_lake_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="no slatelake lake"):
        write_image(LakeLocation.parse((tmp_path / "none").as_uri()))


class FoldsDuringRead:
    """The holder's writer, with a fold landing while its snapshot rows are read."""

    def __init__(self, folder: Folder, url: str) -> None:
        self.folder, self.url, self.folds = folder, url, 0

    def get(self, key: bytes) -> bytes | None:
        return self.folder.writer.get(key)

    def scan_prefix_batches(self, key_prefix: bytes):  # noqa: ANN201
        for batch in self.folder.writer.scan_prefix_batches(key_prefix):
            yield batch
            if key_prefix == bytes((Subspace.SNAPSHOT,)) and self.folds == 0:
                self.folds += 1
                commit_inserts(self.url, 2, 1)
                self.folder.fold_once()


def test_a_fold_during_the_read_rebuilds_the_image_at_the_new_cursor(
    lake_url: str, tmp_path: Path
) -> None:
    Lake.create(lake_url).close()
    commit_inserts(lake_url, 3, 1)
    folder = Folder(LakeLocation.parse(lake_url), margin_s=0)
    try:
        folder.fold_once()
        source = FoldsDuringRead(folder, lake_url)
        record, _ = write_image_file(tmp_path / "i.duckdb", source, lake_url)
        assert source.folds == 1 and record.seq == folder.seq == 5
        con = duckdb.connect()
        con.execute(f"ATTACH '{tmp_path / 'i.duckdb'}' AS img (READ_ONLY)")
        snaps = con.execute("SELECT max(snapshot_id) FROM img.ducklake_snapshot").fetchone()[0]
        assert snaps == record.head.snapshot_id == folder.head.snapshot_id
    finally:
        folder.close()
