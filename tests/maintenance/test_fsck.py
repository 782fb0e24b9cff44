"""fsck (maintenance/fsck.py): each kind of damage found and named, nothing
on a healthy lake, nothing repaired, and orphan deletion refused while
referenced files are missing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import slatelake
from slatelake.cli import main
from slatelake.ducklake.commit_flow import META_DB
from slatelake.log.images import ImageBook
from slatelake.store.location import LakeLocation
from slatelake.store.objects import ObjectClient

META = f'"{META_DB}"'


@pytest.fixture
def lake(tmp_path: Path) -> tuple[str, Path]:
    url, data = (tmp_path / "lake").as_uri(), tmp_path / "data"
    with slatelake.connect(url, data_path=f"{data}/") as s:
        s.sql("CREATE TABLE t AS SELECT range AS i FROM range(1000)")
        s.sql("INSERT INTO t SELECT range FROM range(1000, 3000)")
        s.sql("CREATE TABLE u AS SELECT range AS j FROM range(500)")
        s.sql("DELETE FROM t WHERE i % 7 = 0")
    return url, data


def _parquet(data: Path) -> list[Path]:
    return sorted(p for p in data.rglob("*.parquet") if "delete" not in p.name)


def _meta(url: str, *statements: str) -> None:
    """Damage the catalog's own rows, committed as any write (what a bug or a
    hand edit outside slatelake's steps would leave)."""
    with slatelake.connect(url) as s, s.session.writing_metadata():
        for sql in statements:
            s.session.sql(sql, writes=True)


def test_fsck_finds_nothing_on_a_healthy_lake_before_and_after_a_pass(
    lake: tuple[str, Path],
) -> None:
    url, _ = lake
    handle = slatelake.open(url)
    report = handle.maintenance.fsck()
    assert report.ok and report.files_checked == 5 and report.recorded, report.to_dict()
    options = {
        "MAINTENANCE_FLUSH_INLINED_DATA": "true",
        "MAINTENANCE_MERGE_ADJACENT_FILES": "true",
        "MAINTENANCE_REWRITE_DATA_FILES_DELETE_THRESHOLD": "0.01",
        "MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN": "0s",
        "MAINTENANCE_CLEANUP_OLD_FILES_CLEANUP_ALL": "true",
    }
    assert handle.maintenance.run(slatelake.PassRequest(options=options)).status == "succeeded"
    after = handle.maintenance.fsck()
    assert after.ok, after.to_dict()


def test_fsck_finds_a_missing_and_a_truncated_file_and_repairs_nothing(
    lake: tuple[str, Path],
) -> None:
    url, data = lake
    gone, cut = _parquet(data)[:2]
    gone.unlink()
    with cut.open("r+b") as f:
        f.truncate(64)
    report = slatelake.open(url).maintenance.fsck()
    assert report.counts == {"missing_file": 1, "size_mismatch": 1}
    by_kind = {f.kind: f for f in report.findings}
    assert by_kind["missing_file"].subject.endswith(gone.name)
    assert by_kind["size_mismatch"].subject.endswith(cut.name)
    assert "the file has 64" in by_kind["size_mismatch"].detail
    assert report.orphans_blocked and not gone.exists() and cut.stat().st_size == 64
    plan = report.repair_plan()
    assert [p["kind"] for p in plan] == ["missing_file", "size_mismatch"]
    assert all("restore the file" in p["repair"] for p in plan)


def test_fsck_finds_a_file_scheduled_twice_and_one_scheduled_while_read(
    lake: tuple[str, Path],
) -> None:
    url, data = lake
    live = _parquet(data)[0]
    path = str(live)
    _meta(
        url,
        f"INSERT INTO {META}.ducklake_files_scheduled_for_deletion VALUES "
        f"(900001, '{data}/gone.parquet', false, now()), "
        f"(900002, '{data}/gone.parquet', false, now()), "
        f"(900003, '{path}', false, now())",
    )
    report = slatelake.open(url).maintenance.fsck()
    assert report.counts == {"scheduled_twice": 1, "scheduled_while_referenced": 1}
    subjects = {f.kind: f.subject for f in report.findings}
    assert subjects["scheduled_twice"].endswith("gone.parquet")
    assert subjects["scheduled_while_referenced"] == path
    assert not report.orphans_blocked


def test_fsck_finds_stranded_statistics_and_inlined_tables(lake: tuple[str, Path]) -> None:
    url, _ = lake
    _meta(
        url,
        f"INSERT INTO {META}.ducklake_file_column_stats SELECT * REPLACE (987654 AS "
        f"data_file_id) FROM {META}.ducklake_file_column_stats LIMIT 1",
        f"INSERT INTO {META}.ducklake_inlined_data_tables VALUES "
        "(424242, 'ducklake_inlined_data_424242_1', 1)",
    )
    report = slatelake.open(url).maintenance.fsck()
    assert report.counts == {"stranded_stats": 1, "stranded_inlined_table": 1}
    repairs = {p["kind"]: p["repair"] for p in report.repair_plan()}
    assert "sweep_file_stats" in repairs["stranded_stats"]
    assert "sweep_inlined_tables" in repairs["stranded_inlined_table"]


def test_fsck_finds_an_image_ahead_of_the_log(lake: tuple[str, Path]) -> None:
    url, _ = lake
    location = LakeLocation.parse(url)
    book = ImageBook(location)
    with slatelake.connect(url, read_only=True) as s:
        head = s.state.head.batch_seq
    ObjectClient(location).put(book.path(head + 50, "0" * 32), b"not an image")
    report = slatelake.open(url).maintenance.fsck()
    assert report.counts == {"image_ahead": 1}
    assert f"covers slot {head + 50}, beyond the log's head {head}" in report.findings[0].detail


def test_orphan_deletion_waits_for_a_clean_fsck_after_missing_files(
    lake: tuple[str, Path], tmp_path: Path
) -> None:
    url, data = lake
    victim = _parquet(data)[0]
    kept = tmp_path / "kept.parquet"
    shutil.copy(victim, kept)
    victim.unlink()
    handle = slatelake.open(url)
    assert handle.maintenance.fsck().orphans_blocked
    options = {
        "MAINTENANCE_DELETE_ORPHANED_FILES_CLEANUP_ALL": "true",
        "MAINTENANCE_ORPHAN_AGE_FLOOR_OVERRIDE": "true",
    }
    refused = handle.maintenance.run(slatelake.PassRequest(options=options))
    orphans = refused.step("delete_orphaned_files")
    assert orphans.status == "failed" and "the last fsck found referenced files" in orphans.detail
    shutil.copy(kept, victim)  # repaired
    assert handle.maintenance.fsck().ok
    again = handle.maintenance.run(slatelake.PassRequest(options=options))
    assert again.step("delete_orphaned_files").status == "ran"


def test_fsck_from_the_shell(lake: tuple[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    url, data = lake
    assert main(["fsck", url]) == 0
    assert "5 files checked" in capsys.readouterr().out
    _parquet(data)[0].unlink()
    assert main(["fsck", url, "--json", "--repair-plan"]) == 4
    doc = json.loads(capsys.readouterr().out)
    assert doc["counts"] == {"missing_file": 1} and doc["orphans_blocked"] is True
    assert doc["repair_plan"][0]["kind"] == "missing_file"
    assert main(["fsck", url]) == 4
    out = capsys.readouterr().out
    assert "missing_file: 1" in out and "orphan deletion is refused" in out
