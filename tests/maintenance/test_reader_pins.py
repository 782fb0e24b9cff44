"""Reader pins: a snapshot a live reader pins outlives zero-retention passes
and keeps reading the same rows; its pin ends with the reader (closed, or
killed and its lease lapsed) and the next pass reclaims; no commit may expire
a pinned snapshot, and a pin never lands on a snapshot already expiring."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import boto3
import pytest

import slatelake
from slatelake import HeldSnapshotError, NotFoundError, PinnedSnapshotError, maintenance
from slatelake.catalog.commit_lock import LOCK_KEY
from slatelake.cli import main
from slatelake.ducklake.catalog_files import files_at
from slatelake.ducklake.session import META_DB
from slatelake.maintenance.pins import reader_pins
from slatelake.store.location import LakeLocation
from tests.conftest import subprocess_env

EXPIRE_ALL = {
    "MAINTENANCE_EXPIRE_SNAPSHOTS": "true",
    "MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN": "1 second",
    "MAINTENANCE_CLEANUP_OLD_FILES": "true",
    "MAINTENANCE_CLEANUP_OLD_FILES_OLDER_THAN": "0s",
    "MAINTENANCE_DELETE_ORPHANED_FILES": "true",
    "MAINTENANCE_DELETE_ORPHANED_FILES_OLDER_THAN": "0s",
    "MAINTENANCE_ORPHAN_AGE_FLOOR_OVERRIDE": "true",
}


@pytest.fixture(params=["file", "s3"])
def lake(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    if request.param == "file":
        return (tmp_path / "lake").as_uri(), f"{tmp_path / 'data'}/"
    bucket = request.getfixturevalue("s3_bucket")
    root = uuid.uuid4().hex[:8]
    return f"s3://{bucket}/{root}/lake", f"s3://{bucket}/{root}/data/"


def _build(url: str, data: str) -> tuple[int, list[tuple[Any, ...]]]:
    """A lake with Parquet files; the snapshot after the first insert and its rows."""
    with slatelake.connect(url, data_path=data) as s:
        s.sql("CREATE TABLE t (id INTEGER, v VARCHAR)")
        s.sql("INSERT INTO t SELECT i, 'v' || i FROM range(0, 3000) r(i)")
        return _newest(s), sorted(s.sql("SELECT * FROM t").fetchall())


def _newest(session: Any) -> int:
    return int(session.sql("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0])


def _churn(url: str, n: int) -> None:
    """Replace every row, so the pinned snapshot's files leave the head."""
    with slatelake.connect(url) as s:
        s.sql("DELETE FROM t")
        s.sql(f"INSERT INTO t SELECT i, 'r{n}_' || i FROM range(0, 3000) r(i)")


def _snapshots(url: str) -> set[int]:
    with slatelake.connect(url, read_only=True) as s:
        return {r[0] for r in s.sql("SELECT snapshot_id FROM lake.snapshots()").fetchall()}


def _files_of(url: str, snapshot: int) -> list[str]:
    with slatelake.connect(url, read_only=True) as s, s.con.cursor() as con:
        return files_at(con, snapshot)


def _exists(path: str) -> bool:
    if path.startswith("s3://"):
        bucket, _, key = path.removeprefix("s3://").partition("/")
        listed = boto3.client("s3").list_objects_v2(Bucket=bucket, Prefix=key)
        return any(o["Key"] == key for o in listed.get("Contents", []))
    return Path(path).exists()


def _pass(url: str, options: dict[str, str] | None = None) -> maintenance.PassReport:
    time.sleep(1.1)  # past the 1-second retention
    return maintenance.run(url, options or EXPIRE_ALL)


def test_a_pinned_snapshot_outlives_zero_retention_passes_and_reads_the_same(
    lake: tuple[str, str],
) -> None:
    url, data = lake
    pinned, rows = _build(url, data)
    files = _files_of(url, pinned)
    assert files
    with slatelake.connect(url, snapshot_version=pinned, pin=True) as reader:
        assert [p.snapshot_id for p in reader.pins] == [pinned]
        for n in range(2):
            _churn(url, n)
            report = _pass(url)
            expire = report.step("expire_snapshots")
            assert expire.counts["snapshots_kept_by_pins"] == 1, expire.detail
            assert expire.counts["snapshots_expired"] >= 1
            assert "1 kept by reader pins" in expire.detail
            assert sorted(reader.sql("SELECT * FROM t").fetchall()) == rows
            assert pinned in _snapshots(url)
            assert all(_exists(f) for f in files)
    # closed: the pin went with the lease; the next pass reclaims
    assert reader_pins(LakeLocation.parse(url)) == []
    _pass(url)
    assert pinned not in _snapshots(url)
    assert not any(_exists(f) for f in files)


def test_a_killed_readers_pin_lapses_with_its_lease(shared_lake_url: str, tmp_path: Path) -> None:
    url = shared_lake_url
    data = f"{tmp_path / 'data'}/" if url.startswith("file:") else url + "-data/"
    pinned, rows = _build(url, data)
    files = _files_of(url, pinned)
    env = {**subprocess_env(), "SLATELAKE_READER_LEASE_TTL": "3s"}
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time, slatelake\n"
            f"s = slatelake.connect({url!r}, snapshot_version={pinned}, pin=True)\n"
            "print(s.pins[0].snapshot_id, flush=True)\n"
            "time.sleep(600)\n",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == str(pinned)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
        _churn(url, 0)
        report = _pass(url)  # the lease is still live: the pin holds
        assert report.step("expire_snapshots").counts["snapshots_kept_by_pins"] == 1
        assert pinned in _snapshots(url) and all(_exists(f) for f in files)
        with slatelake.connect(url, snapshot_version=pinned) as s:
            assert sorted(s.sql("SELECT * FROM t").fetchall()) == rows
        time.sleep(3.5)  # the lease lapses: nobody renews it
        assert reader_pins(LakeLocation.parse(url)) == []
        report = _pass(url)
        assert report.step("expire_snapshots").counts["snapshots_kept_by_pins"] == 0
        assert pinned not in _snapshots(url)
        assert not any(_exists(f) for f in files)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_the_heartbeat_keeps_an_idle_readers_pin_past_its_lease_life(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, data = (tmp_path / "lake").as_uri(), f"{tmp_path / 'data'}/"
    pinned, _ = _build(url, data)
    monkeypatch.setenv("SLATELAKE_READER_LEASE_TTL", "1s")
    with slatelake.connect(url, snapshot_version=pinned, pin=True):
        time.sleep(2.5)  # idle: no statement renews the lease, the heartbeat does
        _churn(url, 0)
        report = _pass(url)
        assert report.step("expire_snapshots").counts["snapshots_kept_by_pins"] == 1
        assert pinned in _snapshots(url)


def test_a_commit_that_would_expire_a_pinned_snapshot_is_refused_whoever_makes_it(
    tmp_path: Path,
) -> None:
    url, data = (tmp_path / "lake").as_uri(), f"{tmp_path / 'data'}/"
    pinned, _ = _build(url, data)
    _churn(url, 0)
    with slatelake.connect(url, snapshot_version=pinned, pin=True), slatelake.connect(url) as s:
        with pytest.raises(PinnedSnapshotError, match=rf"live readers pin \({pinned}\)"):
            s.sql(f"CALL ducklake_expire_snapshots('lake', versions => [{pinned}])")
        assert issubclass(PinnedSnapshotError, HeldSnapshotError)
        assert pinned in _snapshots(url)


def test_pinning_a_snapshot_the_catalog_no_longer_has_is_refused(tmp_path: Path) -> None:
    url, data = (tmp_path / "lake").as_uri(), f"{tmp_path / 'data'}/"
    first, _ = _build(url, data)
    _churn(url, 0)
    _pass(url)
    with slatelake.connect(url, read_only=True) as reader:
        with pytest.raises(NotFoundError, match=rf"snapshot {first} is not in the catalog"):
            reader.pin(first)
        assert reader.pins == ()  # the refused pin left nothing in the lease
        assert reader_pins(LakeLocation.parse(url)) == []
        for bad in (-1, True, "3", 2**63):
            with pytest.raises(slatelake.MisconfigurationError):
                reader.pin(bad)  # type: ignore[arg-type]


def test_an_onward_pin_keeps_every_later_snapshot_for_a_change_feed(tmp_path: Path) -> None:
    url, data = (tmp_path / "lake").as_uri(), f"{tmp_path / 'data'}/"
    start, _ = _build(url, data)
    with slatelake.connect(url, read_only=True) as feed:
        assert feed.pin(start, onward=True) == start
        for n in range(2):
            _churn(url, n)
        before = _snapshots(url)
        report = _pass(url)
        kept = {s for s in before if s >= start}
        assert kept <= _snapshots(url)
        assert report.step("expire_snapshots").counts["snapshots_kept_by_pins"] == len(
            kept - {max(before)}
        )
        feed.refresh()
        head = _newest(feed)
        changes = feed.sql(f"SELECT count(*) FROM table_changes('t', {start}, {head})").fetchone()[
            0
        ]
        # the start's own 3000 inserts, then two rounds of 3000 deletes and 3000 inserts
        assert changes == 3000 + 2 * (3000 + 3000)
        assert feed.unpin() == 1 and feed.pins == ()
    _pass(url)
    assert not any(s in _snapshots(url) for s in kept - {max(before)})


def test_a_pin_waits_out_a_commit_lock_standing_at_the_head(tmp_path: Path) -> None:
    """A lock holder may have read the leases before the pin landed (an
    expiry reads them under the lock): the pin returns only once that lock
    is gone, and then checks its snapshot is still there."""
    url, data = (tmp_path / "lake").as_uri(), f"{tmp_path / 'data'}/"
    target, _ = _build(url, data)
    outcome: dict[str, Any] = {}
    with slatelake.connect(url) as holder, slatelake.connect(url, read_only=True) as reader:

        def pin() -> None:
            outcome["pinned"] = reader.pin(target)
            outcome["at"] = time.monotonic()

        pinner = threading.Thread(target=pin)

        def build() -> None:
            assert holder.lake.read_sys(holder.state, LOCK_KEY) is not None
            pinner.start()
            time.sleep(1.0)
            assert pinner.is_alive()  # its lease is written; it waits for the lock
            assert reader_pins(LakeLocation.parse(url))  # the pin is visible already
            outcome["released_at"] = time.monotonic()
            return None  # commit nothing: the lock is given back

        holder.commit_under_lock(build)
        pinner.join(timeout=60)
    assert outcome["pinned"] == target and outcome["at"] >= outcome["released_at"]


def test_pins_are_listed_with_owner_snapshot_and_age(tmp_path: Path) -> None:
    url, data = (tmp_path / "lake").as_uri(), f"{tmp_path / 'data'}/"
    pinned, _ = _build(url, data)
    with slatelake.connect(url, snapshot_version=pinned, pin=True) as reader:
        time.sleep(0.2)
        (listed,) = reader_pins(LakeLocation.parse(url))
        assert listed.snapshot_id == pinned and not listed.onward
        assert listed.reader_id == reader.lake.lease.reader_id
        assert f"pid {os.getpid()}" in listed.owner
        assert 0.2 <= listed.age_s() < 60
        assert listed.to_dict()["snapshot_id"] == pinned


def test_a_dry_run_names_the_snapshots_pins_keep_and_writes_nothing(tmp_path: Path) -> None:
    url, data = (tmp_path / "lake").as_uri(), f"{tmp_path / 'data'}/"
    pinned, _ = _build(url, data)
    _churn(url, 0)
    with slatelake.connect(url, snapshot_version=pinned, pin=True):
        time.sleep(1.1)
        before = _snapshots(url)
        dry = maintenance.run(url, EXPIRE_ALL, dry_run=True)
        plan = dry.plan
        assert plan is not None
        assert plan["expire_snapshots"].details["kept_by_pins"] == [pinned]
        assert pinned not in plan["expire_snapshots"].items
        assert _snapshots(url) == before


def test_the_pins_command_lists_them_as_text_and_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, data = (tmp_path / "lake").as_uri(), f"{tmp_path / 'data'}/"
    pinned, _ = _build(url, data)
    assert main(["pins", url]) == 0
    assert capsys.readouterr().out.strip() == "no reader pins"
    with slatelake.connect(url, read_only=True) as feed:
        feed.pin(pinned, onward=True)
        assert main(["pins", url]) == 0
        text = capsys.readouterr().out
        assert f"{pinned} onward" in text and f"pid {os.getpid()}" in text and " UTC" in text
        assert main(["pins", url, "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["lake"] == url
        assert [(p["snapshot_id"], p["onward"]) for p in doc["pins"]] == [(pinned, True)]


def test_cleanup_keeps_a_file_a_pinned_snapshot_reads_whatever_the_schedule_says(
    tmp_path: Path,
) -> None:
    """A deletion scheduled by hand (or by a process that ignores pins) for a
    file only the pinned snapshot reads: spared, counted as kept by pins."""
    url, data = (tmp_path / "lake").as_uri(), f"{tmp_path / 'data'}/"
    pinned, rows = _build(url, data)
    _churn(url, 0)
    with slatelake.connect(url, snapshot_version=pinned, pin=True) as reader:
        with slatelake.connect(url) as s:
            s.metadata_writes = True
            file_id, path = s.sql(
                f"SELECT data_file_id, path FROM {META_DB}.ducklake_data_file "
                f"WHERE end_snapshot IS NOT NULL"
            ).fetchone()
            s.sql(
                f"INSERT INTO {META_DB}.ducklake_files_scheduled_for_deletion "
                "VALUES (?, ?, true, now() - INTERVAL 1 DAY)",
                [file_id, f"main/t/{path}"],
            )
        report = maintenance.run(
            url,
            {
                "MAINTENANCE_CLEANUP_OLD_FILES": "true",
                "MAINTENANCE_CLEANUP_OLD_FILES_CLEANUP_ALL": "true",
            },
        )
        cleanup = report.step("cleanup_old_files")
        assert cleanup.counts["files_kept_by_pins"] == 1, cleanup.detail
        assert cleanup.counts["files_deleted"] == 0
        assert "kept by reader pins" in cleanup.detail
        assert sorted(reader.sql("SELECT * FROM t").fetchall()) == rows


def test_a_read_planned_before_a_merge_still_finds_the_pinned_snapshots_files(
    tmp_path: Path,
) -> None:
    """A merge rewrites the pinned snapshot's files into one that still
    serves it; a relation made before the pass and the session's own DuckDB
    connection read the old ones, which the pin keeps until it ends."""
    url, data = (tmp_path / "lake").as_uri(), f"{tmp_path / 'data'}/"
    with slatelake.connect(url, data_path=data) as s:
        s.sql("CREATE TABLE t (id INTEGER, v VARCHAR)")
        for lo in range(0, 4000, 1000):
            s.sql(f"INSERT INTO t SELECT i, 'v' || i FROM range({lo}, {lo + 1000}) r(i)")
        pinned = _newest(s)
        s.sql("INSERT INTO t SELECT i, 'w' || i FROM range(5000, 6000) r(i)")
    options = {**EXPIRE_ALL, "MAINTENANCE_MERGE_ADJACENT_FILES": "true"}
    query = "SELECT count(*), sum(id) FROM t"
    with slatelake.connect(url, snapshot_version=pinned, pin=True) as reader:
        expected = reader.sql(query).fetchone()
        planned = reader.sql(query)  # lazy: run after the pass
        report = _pass(url, options)
        assert report.step("merge_adjacent_files").counts["files_processed"] >= 4
        cleanup = report.step("cleanup_old_files")
        assert cleanup.counts["files_kept_by_pins"] >= 4, cleanup.detail
        assert planned.fetchone() == expected
        assert reader.con.execute("SELECT count(*), sum(id) FROM lake.t").fetchone() == expected
        assert reader.sql(query).fetchone() == expected
        recorded = reader.lake.lease.book.pin_files(reader.lake.lease.reader_id)
        assert recorded and all(_exists(p) for p in recorded)
    report = _pass(url, options)  # the pin ended with the session: its files go
    assert report.step("cleanup_old_files").counts["files_kept_by_pins"] == 0
    assert not any(_exists(p) for p in recorded if p not in _files_of(url, _head(url)))
    left = tmp_path / "lake" / "pins"
    assert not left.exists() or not any(left.iterdir())  # the record went with the reader


def _head(url: str) -> int:
    with slatelake.connect(url, read_only=True) as s:
        return _newest(s)
