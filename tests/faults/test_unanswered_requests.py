"""A file step whose data-file requests got no answer says so.

DuckLake's orphan deletion absorbed a failed request (with every HEAD of
the data path failing it returned no rows, as for a data path without
orphans). The pass now reads DuckDB's own HTTP log around DuckLake's dry run
(its listing), and deletes itself (maintenance/delete_boundary.py): a
delete the store did not answer fails the step naming the object, typed as
the store's errors are, and leaves the file for the next pass; a refused
HEAD is no failure.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import boto3
import duckdb
import pytest

import slatelake
from slatelake.ducklake.request_log import RequestWatch
from slatelake.maintenance.delete_boundary import SKEW_ENV
from slatelake.maintenance.report import FAILED, RAN
from tests.faults.proxy import FaultProxy, FaultRule

ORPHANS = {
    "MAINTENANCE_DELETE_ORPHANED_FILES_CLEANUP_ALL": "true",
    "MAINTENANCE_ORPHAN_AGE_FLOOR_OVERRIDE": "true",
}
ORPHAN_KEY = "data/main/t/orphan.parquet"


@pytest.fixture
def lake_with_an_orphan(
    moto_endpoint: str, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, FaultProxy]]:
    """A lake on moto with one table and one orphan file, every client
    reaching moto through the fault proxy."""
    with FaultProxy(upstream=moto_endpoint) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
        monkeypatch.setenv(SKEW_ENV, "0")  # the orphan is a moment old, on this clock
        url = f"s3://{s3_bucket}/lake"
        with slatelake.connect(url, data_path=f"s3://{s3_bucket}/data/") as s:
            s.sql("CREATE TABLE t (i INTEGER)")
            s.sql("INSERT INTO t SELECT range FROM range(100)")
        s3 = boto3.client("s3", endpoint_url=moto_endpoint)
        s3.put_object(Bucket=s3_bucket, Key=ORPHAN_KEY, Body=b"not a parquet file")
        time.sleep(1.1)  # S3 keeps LastModified to the second: the orphan window allows it
        yield url, proxy


def _orphan_present(url: str) -> bool:
    bucket = url.split("/")[2]
    listed = boto3.client("s3").list_objects_v2(Bucket=bucket, Prefix=ORPHAN_KEY)
    return listed.get("KeyCount", 0) == 1


@pytest.mark.parametrize("kind", ["503", "drop_before"])
def test_orphan_deletion_that_got_no_answer_fails_naming_the_objects(
    kind: str, lake_with_an_orphan: tuple[str, FaultProxy]
) -> None:
    url, proxy = lake_with_an_orphan
    proxy.add(FaultRule(method="POST", prefix="data/", kind=kind, times=None))
    with slatelake.connect(url, options=ORPHANS) as s:
        report = s.maintenance()
    proxy.clear()
    step = report.step("delete_orphaned_files")
    assert step.status == FAILED, step.detail
    assert step.detail.startswith(
        "StoreUnavailableError: delete_orphaned_files deleted 0 files, but 1 were not deleted"
    )
    assert "orphan.parquet" in step.detail
    assert report.work_pending
    assert _orphan_present(url)
    with slatelake.connect(url, options=ORPHANS) as s:  # the faults gone, the next pass
        again = s.maintenance().step("delete_orphaned_files")
    assert (again.status, again.detail) == (RAN, "deleted 1 files")
    assert not _orphan_present(url)


def test_a_refused_head_that_a_ranged_get_answers_is_no_failure(
    lake_with_an_orphan: tuple[str, FaultProxy],
) -> None:
    url, proxy = lake_with_an_orphan
    proxy.add(FaultRule(method="HEAD", prefix="data/", kind="403", times=None))
    with slatelake.connect(url, options=ORPHANS) as s:
        step = s.maintenance().step("delete_orphaned_files")
    assert proxy.injected >= 1
    assert (step.status, step.detail) == (RAN, "deleted 1 files")
    assert not _orphan_present(url)


def test_the_watch_counts_an_object_failed_only_when_no_try_was_answered(
    lake_with_an_orphan: tuple[str, FaultProxy],
) -> None:
    """From DuckDB's own HTTP log: a 404 is an answer (the object is gone), a
    refused connection on every try is a failure."""
    url, _ = lake_with_an_orphan
    bucket = url.split("/")[2]
    with slatelake.connect(url) as s:
        con = s.con.cursor()
        con.execute("SET http_retries = 1")
        con.execute("CALL enable_logging('HTTP')")
        watch = RequestWatch(con)
        for missing in (f"s3://{bucket}/data/absent.parquet", "http://127.0.0.1:9/absent.parquet"):
            with pytest.raises(duckdb.Error):
                con.execute(f"SELECT * FROM read_blob('{missing}')").fetchall()
        watch.harvest()
        failed = watch.failed()
    assert any(o.endswith(f"/{bucket}/data/absent.parquet") for o in watch.objects), watch.objects
    assert [f.url for f in failed] == ["http://127.0.0.1:9/absent.parquet"]
    assert failed[0].status is None and not failed[0].refused
    assert str(failed[0]).startswith("HEAD http://127.0.0.1:9/absent.parquet: ")
