"""Bytes a pass reclaims: what storage lost is what the report says cleanup
deleted, and the catalog's figure is its file bytes before less after."""

from __future__ import annotations

import uuid
from pathlib import Path

import boto3
import pytest

import slatelake
from slatelake import maintenance
from slatelake.ducklake.commit_flow import META_DB

EXPIRE_AND_CLEAN = {
    "MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN": "0 seconds",
    "MAINTENANCE_CLEANUP_OLD_FILES_OLDER_THAN": "0 seconds",
}


@pytest.fixture(params=["file", "s3"])
def lake(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    if request.param == "file":
        url, data = (tmp_path / "lake").as_uri(), f"{tmp_path / 'data'}/"
    else:
        bucket = request.getfixturevalue("s3_bucket")
        root = uuid.uuid4().hex[:8]
        url, data = f"s3://{bucket}/{root}/lake", f"s3://{bucket}/{root}/data/"
    with slatelake.connect(url, data_path=data) as s:
        s.sql("CREATE TABLE t (id INTEGER, v VARCHAR)")
        for lo in range(0, 3000, 1000):
            s.sql(f"INSERT INTO t SELECT i, repeat('x', 50) FROM range({lo}, {lo + 1000}) r(i)")
        s.sql("DELETE FROM t WHERE id % 3 = 0")
        s.sql("UPDATE t SET v = 'changed' WHERE id < 500")
        s.sql("DROP TABLE t")
        s.sql("CREATE TABLE t (id INTEGER)")
    return url, data


def _stored_bytes(data: str) -> int:
    if data.startswith("s3://"):
        bucket, _, prefix = data.removeprefix("s3://").partition("/")
        pages = boto3.client("s3").get_paginator("list_objects_v2")
        return sum(
            o["Size"]
            for page in pages.paginate(Bucket=bucket, Prefix=prefix)
            for o in page.get("Contents", [])
        )
    return sum(p.stat().st_size for p in Path(data).rglob("*") if p.is_file())


def _catalog_bytes(url: str) -> int:
    """The catalog's file bytes, summed here from its tables."""
    with slatelake.connect(url, read_only=True) as s:
        return sum(
            s.sql(f"SELECT coalesce(sum(file_size_bytes), 0) FROM {META_DB}.{t}").fetchone()[0]
            for t in ("ducklake_data_file", "ducklake_delete_file")
        )


def test_bytes_deleted_is_what_storage_lost_and_the_catalog_figure_its_drop(
    lake: tuple[str, str],
) -> None:
    url, data = lake
    stored, catalog = _stored_bytes(data), _catalog_bytes(url)
    report = maintenance.run(url, EXPIRE_AND_CLEAN)
    lost = stored - _stored_bytes(data)
    assert lost > 0
    assert report.bytes_deleted == lost
    assert report.step("cleanup_old_files").counts["bytes_deleted"] == lost
    assert report.catalog_bytes_reclaimed == catalog - _catalog_bytes(url) > 0
    (kept,) = maintenance.runs(url, limit=1).items
    assert (kept.bytes_deleted, kept.catalog_bytes_reclaimed) == (
        report.bytes_deleted,
        report.catalog_bytes_reclaimed,
    )


def test_a_pass_that_deletes_nothing_reports_no_bytes_deleted(tmp_path: Path) -> None:
    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path / 'data'}/") as s:
        s.sql("CREATE TABLE t (id INTEGER)")
    report = maintenance.run(url, {"MAINTENANCE_FLUSH_INLINED_DATA": "true"})
    assert report.bytes_deleted is None  # no deleting step ran
    assert report.catalog_bytes_reclaimed == 0
