"""The orphan step beside live writers: a write's files are spared while it
runs, whatever age the pass was given.

The attack this pins: ``MAINTENANCE_DELETE_ORPHANED_FILES_OLDER_THAN='0
seconds'`` (now behind the age floor's override) with three writer processes
committing deleted their Parquet files before they were committed, and reads
then failed "Cannot open file". Each writer's reader lease now says when its
write began; the pass's orphan window ends before the oldest such start.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

import slatelake
from slatelake import maintenance
from slatelake.log.leases import LeaseBook
from slatelake.maintenance.delete_boundary import SKEW_ENV
from slatelake.store.location import LakeLocation
from tests.conftest import subprocess_env

WRITER = "tests.maintenance.writer_proc"
WRITERS = 3
ROWS = 60_000  # a Parquet file of a few hundred kB: long enough to race
# the default tier runs the race this long; SLATELAKE_ORPHAN_RACE_S (the
# acceptance run: 60) makes it longer
SECONDS = float(os.environ.get("SLATELAKE_ORPHAN_RACE_S", "8"))
ORPHANS_AT_ZERO = {
    "MAINTENANCE_DELETE_ORPHANED_FILES_CLEANUP_ALL": "true",
    "MAINTENANCE_ORPHAN_AGE_FLOOR_OVERRIDE": "true",
}


def _data_path(kind: str, tmp_path: Path, bucket: str | None) -> str:
    if kind == "file":
        return f"{tmp_path / 'data'}/"
    return f"s3://{bucket}/data-{uuid.uuid4().hex[:8]}/"


@pytest.fixture(autouse=True)
def _one_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """Writers, passes and the store share this host's clock: the window's
    skew allowance (2 minutes by default) shrinks to none, so a true orphan
    goes within the test's time."""
    monkeypatch.setenv(SKEW_ENV, "0")


@pytest.mark.slow
@pytest.mark.timeout(SECONDS + 240)
@pytest.mark.parametrize("kind", ["file", "s3"])
def test_orphan_deletion_at_age_zero_spares_the_files_of_writes_in_flight(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    bucket = request.getfixturevalue("s3_bucket") if kind == "s3" else None
    url = (tmp_path / "lake").as_uri() if kind == "file" else f"s3://{bucket}/lake"
    data = _data_path(kind, tmp_path, bucket)
    tables = [f"w{n}" for n in range(WRITERS)]
    with slatelake.connect(url, data_path=data) as s:
        s.sql("CALL lake.set_option('data_inlining_row_limit', '0')")
        for table in tables:
            s.sql(f"CREATE TABLE {table} (i BIGINT, v VARCHAR)")
        s.sql("CREATE TABLE stray_home (i BIGINT)")
        s.sql("INSERT INTO stray_home VALUES (1)")
        (home,) = s.sql(
            "SELECT data_file FROM ducklake_list_files('lake', 'stray_home')"
        ).fetchone()
    stray = home.rsplit("/", 1)[0] + "/never-committed.parquet"

    procs = [
        subprocess.Popen(
            [sys.executable, "-m", WRITER, url, t, str(SECONDS), str(ROWS)],
            env=subprocess_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for t in tables
    ]
    passes = 0
    try:
        _until_writing(url, WRITERS)
        _put(stray, b"PAR1 not a real file")  # newer than every writer's start
        while any(p.poll() is None for p in procs):
            report = maintenance.run(url, ORPHANS_AT_ZERO, operations="orphans")
            assert report.status == "succeeded", [(x.step, x.detail) for x in report.steps]
            passes += 1
        outs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, (_out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-2000:]
    acknowledged = [int(out.strip()) for out, _ in outs]
    assert passes >= 3, f"only {passes} passes ran beside the writers"

    _every_row_reads(url, tables, acknowledged)
    # a true orphan goes, beside the writers or after them
    time.sleep(1.1)
    maintenance.run(url, ORPHANS_AT_ZERO, operations="orphans")
    assert not _exists(stray)
    _every_row_reads(url, tables, acknowledged)


def _every_row_reads(url: str, tables: list[str], acknowledged: list[int]) -> None:
    """Every acknowledged row reads back from its file (a count alone comes
    from the catalog and opens no file)."""
    with slatelake.connect(url) as s:
        for table, rows in zip(tables, acknowledged, strict=True):
            got = s.sql(f"SELECT count(v), sum(length(v)) FROM {table}").fetchone()
            assert got == (rows, 20 * rows), table


def _until_writing(url: str, writers: int) -> None:
    """Until ``writers`` live reader leases say they are writing."""
    book = LeaseBook(LakeLocation.parse(url))
    deadline = time.monotonic() + 60
    while sum(1 for lease in book.live() if lease.writing_since_us) < writers:
        assert time.monotonic() < deadline, "the writers never started writing"
        time.sleep(0.1)


def _put(path: str, body: bytes) -> None:
    if path.startswith("s3://"):
        import boto3

        bucket, key = path[5:].split("/", 1)
        boto3.client("s3").put_object(Bucket=bucket, Key=key, Body=body)
        return
    Path(path).write_bytes(body)


def _exists(path: str) -> bool:
    if path.startswith("s3://"):
        import boto3

        bucket, key = path[5:].split("/", 1)
        listed = boto3.client("s3").list_objects_v2(Bucket=bucket, Prefix=key)
        return listed.get("KeyCount", 0) > 0
    return Path(path).exists()


def test_the_stray_file_counts_as_an_orphan_when_no_writer_is_live(tmp_path: Path) -> None:
    """The other side: with no live writer the window is the one given."""
    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path / 'data'}/") as s:
        s.sql("CREATE TABLE t (i INTEGER)")
        s.sql("INSERT INTO t SELECT * FROM range(100)")
    stray = tmp_path / "data" / "main" / "t" / "stray.parquet"
    stray.write_bytes(b"x")
    time.sleep(1.1)  # past the skew allowance
    started = time.time()
    report = maintenance.run(url, ORPHANS_AT_ZERO, operations="orphans")
    assert report.step("delete_orphaned_files").counts["files_deleted"] == 1
    assert not stray.exists() and time.time() - started < 30
