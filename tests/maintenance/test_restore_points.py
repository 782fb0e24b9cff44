"""Restore points: a point keeps every file its catalog names through expiry,
cleanup and orphan deletion; a restore reads as the lake read at its point
(rows and snapshots); a deleted or lapsed point keeps nothing, so the next
pass reclaims; a restore never lands on an occupied location."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest

import slatelake
from slatelake import (
    AlreadyRunningError,
    CorruptionError,
    MisconfigurationError,
    NotFoundError,
)
from slatelake.catalog.borrowed import normalize_path
from slatelake.log.restore_points import POINTS_DIR
from slatelake.maintenance.flight import PassLease
from slatelake.maintenance.report import SUCCEEDED
from slatelake.store.db import open_admin
from slatelake.store.location import LakeLocation
from slatelake.store.objects import ObjectClient
from tests.catalog.helpers import fold_all
from tests.maintenance.test_holds import EXPIRE_ALL, _build, _data_files, _newest, _snapshots

# Orphans only (expiry and cleanup off): what orphan deletion alone would take.
ORPHANS_ONLY = {
    "MAINTENANCE_DELETE_ORPHANED_FILES": "true",
    "MAINTENANCE_DELETE_ORPHANED_FILES_OLDER_THAN": "0s",
    "MAINTENANCE_ORPHAN_AGE_FLOOR_OVERRIDE": "true",
}


@pytest.fixture(params=["file", "s3"])
def lake(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str, str]:
    """A lake URL, its data path, and a fresh URL beside it to restore to."""
    if request.param == "file":
        return (tmp_path / "lake").as_uri(), f"{tmp_path / 'data'}/", (tmp_path / "back").as_uri()
    bucket = request.getfixturevalue("s3_bucket")
    root = uuid.uuid4().hex[:8]
    return f"s3://{bucket}/{root}/lake", f"s3://{bucket}/{root}/data/", f"s3://{bucket}/{root}/back"


def _churn(url: str) -> None:
    """Replace every row: once expired, no snapshot of the lake reads the old files."""
    with slatelake.connect(url) as s:
        s.sql("DELETE FROM t")
        s.sql("INSERT INTO t SELECT i, 'new' || i FROM range(0, 3000) r(i)")


def _local(tmp_path: Path) -> tuple[str, str]:
    return (tmp_path / "lake").as_uri(), f"{tmp_path / 'data'}/"


def _history(url: str) -> dict[int, list[tuple[Any, ...]]]:
    """The rows of ``t`` at every snapshot the lake has."""
    with slatelake.connect(url, read_only=True) as s:
        ids = [
            r[0] for r in s.sql("SELECT snapshot_id FROM lake.snapshots() ORDER BY 1").fetchall()
        ]
        out = {}
        for snap in ids:
            try:
                out[snap] = sorted(s.sql(f"SELECT * FROM t AT (VERSION => {int(snap)})").fetchall())
            except Exception:  # noqa: BLE001 - a snapshot from before t existed
                out[snap] = []
        return out


def _present(data: str, paths: tuple[str, ...]) -> set[str]:
    """Which of ``paths`` (as a restore point records them) still exist."""
    on_disk = _data_files(data)
    if data.startswith("s3://"):
        bucket = data.removeprefix("s3://").partition("/")[0]
        return {p for p in paths if p.removeprefix(f"s3://{bucket}/") in on_disk}
    return {p for p in paths if normalize_path(p) in {normalize_path(f) for f in on_disk}}


def test_a_restore_point_survives_expiry_cleanup_and_orphans(
    lake: tuple[str, str, str],
) -> None:
    url, data, back = lake
    seen = _build(url, data)
    handle = slatelake.open(url)
    before = _history(url)
    point = handle.restore_points.create("before-churn").point
    assert point.snapshot_id == max(seen) and len(point.files) >= 3
    assert _present(data, point.files) == set(point.files)
    _churn(url)

    report = slatelake.maintenance.run(url, EXPIRE_ALL)
    assert report.status == SUCCEEDED, report.to_dict()
    cleanup = report.step("cleanup_old_files")
    assert cleanup.counts["files_spared"] >= 1
    assert "kept by restore points" in cleanup.detail
    assert len(_snapshots(url)) == 1  # the lake itself kept only its newest snapshot
    assert _present(data, point.files) == set(point.files)

    handle.restore_points.restore("before-churn", back, share_data=True)
    assert _history(back) == before


def test_a_restore_reads_as_the_lake_read_at_its_point(tmp_path: Path) -> None:
    """Folded and unfolded commits alike: the point is the head, not the fold."""
    url, data = _local(tmp_path)
    _build(url, data)
    fold_all(url)  # the first commits are in the store, the last ones only in the log
    with slatelake.connect(url) as s:
        s.sql("INSERT INTO t VALUES (-1, 'after the fold')")
        s.sql("CREATE TABLE u AS SELECT 1 AS one")
    before = _history(url)
    with slatelake.connect(url, read_only=True) as s:
        u_rows = s.sql("SELECT * FROM u").fetchall()
    handle = slatelake.open(url)
    handle.restore_points.create("at-head", ttl="1h")
    with slatelake.connect(url) as s:  # the lake goes on after the point
        s.sql("INSERT INTO t VALUES (-2, 'after the point')")
        s.sql("DROP TABLE u")
    back = (tmp_path / "back").as_uri()
    report = handle.restore_points.restore("at-head", back, share_data=True)
    assert report.borrowed_files >= 3 and report.warning is not None
    assert _history(back) == before
    with slatelake.connect(back, read_only=True) as s:
        assert s.sql("SELECT * FROM u").fetchall() == u_rows
        assert s.sql("SELECT count(*) FROM t WHERE id = -2").fetchone() == (0,)
    with slatelake.connect(back) as s:  # a lake of its own: it takes commits
        s.sql("INSERT INTO t VALUES (-3, 'restored')")
        assert _newest(s) == max(before) + 1
    assert _history(url)[max(_snapshots(url))] != _history(back)[max(before) + 1]


def test_a_restore_can_copy_the_files_to_a_data_path_of_its_own(tmp_path: Path) -> None:
    url, data = _local(tmp_path)
    _build(url, data)
    before = _history(url)
    handle = slatelake.open(url)
    handle.restore_points.create("copied")
    _churn(url)
    back, own = (tmp_path / "back").as_uri(), f"{tmp_path / 'own'}/"
    report = handle.restore_points.restore("copied", back, copy_data=own)
    assert report.copied_files >= 3 and report.borrowed_files == 0 and report.warning is None
    handle.restore_points.delete("copied")
    slatelake.maintenance.run(url, EXPIRE_ALL)  # the source reclaims its files
    assert _history(back) == before


def test_deleting_a_restore_point_lets_the_next_pass_reclaim(tmp_path: Path) -> None:
    url, data = _local(tmp_path)
    _build(url, data)
    handle = slatelake.open(url)
    point = handle.restore_points.create("temp").point
    location = LakeLocation.parse(url)
    named = "slatelake-restore-point:temp"
    assert [c.id for c in open_admin(location).list_checkpoints(named)] == [point.checkpoint_id]
    _churn(url)

    first = slatelake.maintenance.run(url, EXPIRE_ALL)
    spared = first.step("cleanup_old_files").counts["files_spared"]
    assert spared >= 1 and _present(data, point.files) == set(point.files)

    change = handle.restore_points.delete("temp")
    assert change.checkpoint == "deleted"
    assert open_admin(location).list_checkpoints(named) == []
    assert handle.restore_points.list() == []
    assert not ObjectClient(location).any_under(location.path(POINTS_DIR) + "/")

    second = slatelake.maintenance.run(url, EXPIRE_ALL)
    cleanup = second.step("cleanup_old_files")
    assert cleanup.counts["files_deleted"] == spared and cleanup.counts["files_spared"] == 0
    assert len(point.files) - len(_present(data, point.files)) == spared
    with pytest.raises(NotFoundError, match="no restore point 'temp'"):
        handle.restore_points.restore("temp", (tmp_path / "back").as_uri(), share_data=True)


def test_a_lapsed_restore_point_keeps_nothing(tmp_path: Path) -> None:
    url, data = _local(tmp_path)
    _build(url, data)
    handle = slatelake.open(url)
    point = handle.restore_points.create("brief", ttl="1s").point
    assert point.expires_at_us is not None
    time.sleep(max(0.0, point.expires_at_us / 1e6 - time.time()) + 0.2)
    assert [p.lapsed() for p in handle.restore_points.list()] == [True]
    _churn(url)

    cleanup = slatelake.maintenance.run(url, EXPIRE_ALL).step("cleanup_old_files")
    assert cleanup.counts["files_deleted"] >= 1 and cleanup.counts["files_spared"] == 0
    assert "kept by restore points" not in cleanup.detail
    assert _present(data, point.files) != set(point.files)
    with pytest.raises(MisconfigurationError, match="lapsed at .* cannot be restored"):
        handle.restore_points.restore("brief", (tmp_path / "back").as_uri(), share_data=True)


def test_orphan_deletion_spares_a_file_only_a_restore_point_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file the catalog no longer names at all (its rows written around)
    is an orphan to DuckLake; the point's record still keeps it."""
    monkeypatch.setenv("SLATELAKE_ORPHAN_SKEW_S", "0")  # files a second old are orphans
    url, data = _local(tmp_path)
    _build(url, data)
    handle = slatelake.open(url)
    point = handle.restore_points.create("orphans").point
    _churn(url)
    slatelake.maintenance.run(url, EXPIRE_ALL)  # the old files stay scheduled, spared
    with slatelake.connect(url) as s:  # forget the schedule: the files become orphans
        s.metadata_writes = True
        s.sql("DELETE FROM __slatelake_meta.ducklake_files_scheduled_for_deletion")
    time.sleep(1.5)  # DuckLake compares file times to the whole second
    orphans = slatelake.maintenance.run(url, ORPHANS_ONLY).step("delete_orphaned_files")
    assert orphans.counts["files_deleted"] == 0 and orphans.counts["files_spared"] >= 1
    assert "kept by restore points" in orphans.detail
    assert _present(data, point.files) == set(point.files)


def test_restore_refuses_an_occupied_target(tmp_path: Path) -> None:
    url, data = _local(tmp_path)
    _build(url, data)
    handle = slatelake.open(url)
    handle.restore_points.create("p")
    other = (tmp_path / "other").as_uri()
    slatelake.open(other, f"{tmp_path / 'other-data'}/").create()
    with pytest.raises(MisconfigurationError, match=rf"restore target {other} is not empty"):
        handle.restore_points.restore("p", other, share_data=True)
    stray = tmp_path / "stray"
    stray.mkdir()
    (stray / "notes.txt").write_text("mine")
    with pytest.raises(MisconfigurationError, match=r"is not empty \(it holds .*notes.txt\)"):
        handle.restore_points.restore("p", stray.as_uri(), share_data=True)
    with pytest.raises(MisconfigurationError, match="overlaps the lake"):
        handle.restore_points.restore("p", (tmp_path / "lake" / "inside").as_uri(), share_data=True)
    assert (stray / "notes.txt").read_text() == "mine"


def test_a_restore_must_say_whether_it_copies_or_shares_the_data_files(tmp_path: Path) -> None:
    """A restored lake writing into the source's data path would lose its new
    files to the source's orphan step: sharing is asked for by name."""
    url, data = _local(tmp_path)
    _build(url, data)
    handle = slatelake.open(url)
    handle.restore_points.create("p")
    back = (tmp_path / "back").as_uri()
    for given in ({}, {"copy_data": f"{tmp_path / 'own'}/", "share_data": True}):
        with pytest.raises(MisconfigurationError, match="restore needs copy_data .* or share_data"):
            handle.restore_points.restore("p", back, **given)
    assert not (tmp_path / "back").exists()


def test_a_name_holds_one_restore_point(tmp_path: Path) -> None:
    url, data = _local(tmp_path)
    _build(url, data)
    handle = slatelake.open(url)
    handle.restore_points.create("once")
    with pytest.raises(MisconfigurationError, match="'once' already exists"):
        handle.restore_points.create("once")
    assert [p.name for p in handle.restore_points.list()] == ["once"]


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("", "needs a name"),
        ("a/b", "use letters, digits"),
        (".hidden", "use letters, digits"),
        ("x" * 129, "at most 128"),
        ("bell\x07", "use letters, digits"),
    ],
)
def test_a_bad_name_is_refused_before_anything_is_read(name: str, why: str) -> None:
    handle = slatelake.open(f"memory://{uuid.uuid4().hex}")  # no lake there: nothing is read
    with pytest.raises(MisconfigurationError, match=why):
        handle.restore_points.create(name)


def test_a_bad_ttl_is_refused(tmp_path: Path) -> None:
    url, data = _local(tmp_path)
    _build(url, data)
    with pytest.raises(MisconfigurationError, match="restore point ttl"):
        slatelake.open(url).restore_points.create("x", ttl="soon")
    assert slatelake.open(url).restore_points.list() == []


def test_a_running_pass_makes_create_wait_then_refuse(tmp_path: Path) -> None:
    url, data = _local(tmp_path)
    _build(url, data)
    lease = PassLease(LakeLocation.parse(url))
    lease.acquire()
    try:
        with pytest.raises(AlreadyRunningError, match="maintenance already running"):
            slatelake.open(url).restore_points.create("blocked", wait_s=0)
    finally:
        lease.release()
    assert slatelake.open(url).restore_points.list() == []


def test_a_damaged_record_stops_every_delete(tmp_path: Path) -> None:
    url, data = _local(tmp_path)
    _build(url, data)
    location = LakeLocation.parse(url)
    ObjectClient(location).put_if_absent(f"{location.path(POINTS_DIR)}/bad.point", b"junk")
    files = _data_files(data)
    report = slatelake.maintenance.run(url, EXPIRE_ALL)
    assert report.status != SUCCEEDED
    assert _data_files(data) == files
    with pytest.raises(CorruptionError, match="bad.point does not decode"):
        slatelake.open(url).restore_points.list()
    slatelake.open(url).restore_points.delete("bad")
    assert slatelake.maintenance.run(url, EXPIRE_ALL).status == SUCCEEDED


def test_no_lake_no_restore_point(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="no slatelake lake at"):
        slatelake.open((tmp_path / "none").as_uri()).restore_points.create("x")
