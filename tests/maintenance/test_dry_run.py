"""A dry run: the plan a pass would carry out, checked against the pass that
follows it, and that making the plan writes nothing, on local files and on S3."""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest

import slatelake
from slatelake import maintenance
from slatelake.cli import main
from slatelake.maintenance import SKIPPED
from slatelake.maintenance.delete_boundary import SKEW_ENV
from slatelake.maintenance.health import health as lake_health

HOLD_NAME = "audit-2026"


@pytest.fixture(autouse=True)
def _one_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Strays planted a moment before a pass, on this host's clock: the
    orphan window's skew allowance off (maintenance/delete_boundary.py)."""
    monkeypatch.setenv(SKEW_ENV, "0")


def _options() -> dict[str, str]:
    """Every DuckLake step, with windows that are points in time or cleanup_all,
    so the plan and the pass that follows select the same things."""
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f+00")
    return {
        "MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN": now,
        "MAINTENANCE_FLUSH_INLINED_DATA": "true",
        "MAINTENANCE_MERGE_ADJACENT_FILES": "true",
        "MAINTENANCE_REWRITE_DATA_FILES_DELETE_THRESHOLD": "0.3",
        "MAINTENANCE_CLEANUP_OLD_FILES_CLEANUP_ALL": "true",
        "MAINTENANCE_DELETE_ORPHANED_FILES_CLEANUP_ALL": "true",
        "MAINTENANCE_ORPHAN_AGE_FLOOR_OVERRIDE": "true",
    }


@pytest.fixture(params=["file", "s3"])
def lake(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    if request.param == "file":
        return (tmp_path / "lake").as_uri(), f"{tmp_path / 'data'}/"
    bucket = request.getfixturevalue("s3_bucket")
    root = uuid.uuid4().hex[:8]
    return f"s3://{bucket}/{root}/lake", f"s3://{bucket}/{root}/data/"


def _churn(url: str, data: str) -> int:
    """History with something for every step: small files to merge, a file
    mostly deleted, replaced delete files, a dropped table, inlined rows, an
    orphan in the data path and a held snapshot (returned)."""
    with slatelake.connect(url, data_path=data) as s:
        s.sql("CREATE SCHEMA s1")
        s.sql("CREATE TABLE t (id INTEGER, v VARCHAR)")
        s.sql("CREATE TABLE s1.small (x INTEGER)")
        s.sql("CREATE TABLE gone (x INTEGER)")
        for lo in (0, 2000):
            s.sql(f"INSERT INTO t SELECT i, 'v' || i FROM range({lo}, {lo + 2000}) r(i)")
        held = s.sql("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
        for lo in range(0, 4000, 1000):
            s.sql(f"INSERT INTO s1.small SELECT range FROM range({lo}, {lo + 1000})")
        s.sql("INSERT INTO gone SELECT range FROM range(3000)")
        s.sql("DELETE FROM t WHERE id < 1500")
        s.sql("DELETE FROM t WHERE id % 2 = 0")
        s.sql("INSERT INTO t VALUES (-1, 'inlined')")
        s.sql("DROP TABLE gone")
    maintenance.protect(url, held, HOLD_NAME)
    _put(f"{data}stray/orphan.parquet", b"not referenced by the catalog")
    time.sleep(1.1)  # file times reach the orphan filter in whole seconds
    return held


def _put(url: str, body: bytes) -> None:
    if url.startswith("s3://"):
        bucket, _, key = url.removeprefix("s3://").partition("/")
        boto3.client("s3").put_object(Bucket=bucket, Key=key, Body=body)
        return
    Path(url).parent.mkdir(parents=True, exist_ok=True)
    Path(url).write_bytes(body)


def _listing(root: str) -> dict[str, tuple[Any, ...]]:
    """Every object under ``root``, by full path, with what would show a rewrite."""
    if root.startswith("s3://"):
        bucket, _, prefix = root.removeprefix("s3://").partition("/")
        pages = boto3.client("s3").get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix=prefix
        )  # fmt: skip
        return {
            f"s3://{bucket}/{o['Key']}": (o["Size"], o["ETag"], o["LastModified"])
            for page in pages
            for o in page.get("Contents", [])
        }
    base = Path(root.removeprefix("file://"))
    return {
        str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in base.rglob("*") if p.is_file()
    }


def _snapshots(url: str) -> set[int]:
    with slatelake.connect(url, read_only=True) as s:
        return {r[0] for r in s.sql("SELECT snapshot_id FROM lake.snapshots()").fetchall()}


def test_the_plan_is_what_the_following_pass_does_and_making_it_writes_nothing(
    lake: tuple[str, str],
) -> None:
    url, data = lake
    held = _churn(url, data)
    options = _options()
    status_before = maintenance.status(url)
    before = {**_listing(url), **_listing(data)}
    snapshots = _snapshots(url)

    dry = maintenance.run(url, options, dry_run=True)

    assert {**_listing(url), **_listing(data)} == before  # no slot, object or file
    assert maintenance.pass_lease(url) is None
    assert [p.started_at for p in maintenance.status(url)] == [p.started_at for p in status_before]
    plan = dry.plan
    assert plan is not None and all(s.dry_run for s in dry.steps)
    assert all(not s.counts for s in dry.steps)  # nothing counted as done
    assert plan["expire_snapshots"].details["kept_by_holds"] == [held]

    data_before = _listing(data)
    real = maintenance.run(url, options)

    expired = snapshots - _snapshots(url)
    assert sorted(expired) == plan["expire_snapshots"].items
    assert held not in expired and real.step("expire_snapshots").counts == {
        "snapshots_expired": len(expired),
        "snapshots_kept_by_thinning": 0,
        "snapshots_kept_by_holds": 1,
        "snapshots_kept_by_pins": 0,
    }
    deleted = set(data_before) - set(_listing(data))
    planned = {*plan["cleanup_old_files"].items, *plan["delete_orphaned_files"].items}
    assert planned == deleted
    assert plan["cleanup_old_files"].details["scheduled_by_expiry"] > 0
    assert any(p.endswith("stray/orphan.parquet") for p in plan["delete_orphaned_files"].items)
    assert real.step("cleanup_old_files").counts["files_deleted"] == plan["cleanup_old_files"].total
    assert plan["flush_inlined_data"].details["rows"] == real.step("flush_inlined_data").counts[
        "rows_flushed"
    ] == 1  # fmt: skip
    for step in ("merge_adjacent_files", "rewrite_data_files"):
        assert plan[step].details["files"] == real.step(step).counts["files_processed"] > 0, step


def test_a_dry_run_follows_the_scope_and_the_policy(tmp_path: Path) -> None:
    url, data = (tmp_path / "lake").as_uri(), f"{tmp_path / 'data'}/"
    _churn(url, data)
    maintenance.set_policy(url, {"enabled": "true", "retention": "0s", "cleanup_grace": "0s"})
    dry = maintenance.run(url, {}, dry_run=True, table="s1.small", operations="merge")
    assert dry.operations == ["merge"] and dry.table == "s1.small"
    assert list(dry.plan) == ["merge_adjacent_files"]
    (entry,) = dry.plan["merge_adjacent_files"].items
    assert (entry["table"], entry["files"], len(entry["paths"])) == ("s1.small", 4, 4)
    assert all(p.startswith(f"{data}s1/small/") for p in entry["paths"])
    # the plan's merge choice and `slatelake health`'s estimate agree
    (small,) = [t for t in lake_health(url).tables if t.table == "small"]
    assert small.merge_candidate_files == 4
    assert dry.step("expire_snapshots").status == SKIPPED
    assert dry.step("expire_snapshots").detail == "left out: this run's operations are merge"


def test_a_dry_run_refuses_a_url_with_no_lake_and_creates_none(tmp_path: Path) -> None:
    with pytest.raises(slatelake.NotFoundError, match="no slatelake lake"):
        maintenance.run((tmp_path / "nothing").as_uri(), {}, dry_run=True)
    assert not (tmp_path / "nothing").exists()


def test_the_cli_prints_the_plan_and_its_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, data = (tmp_path / "lake").as_uri(), f"{tmp_path / 'data'}/"
    _churn(url, data)
    before = _listing(str(tmp_path))
    args = ["maintain", url, "--dry-run"]
    for key, value in _options().items():
        args += ["--option", f"{key}={value}"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert out.startswith("dry run: what a pass would do; nothing was written\n")
    assert "\nplan:\n" in out and "s1.small (4 files)" in out
    assert "kept by retention holds: " in out and "stray/orphan.parquet" in out
    assert main([*args, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["plan"]["delete_orphaned_files"]["total"] == 1
    assert all(s["dry_run"] for s in doc["steps"])
    assert _listing(str(tmp_path)) == before


def test_a_rewrite_at_ducklakes_default_threshold_is_planned_as_it_decides(
    tmp_path: Path,
) -> None:
    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path / 'data'}/") as s:
        for name, deleted in (("most", 1800), ("nearly_all", 1920)):  # 90% and 96% of 2000
            s.sql(f"CREATE TABLE {name} (x INTEGER)")
            s.sql(f"INSERT INTO {name} SELECT range FROM range(2000)")
            s.sql(f"DELETE FROM {name} WHERE x < {deleted}")
    options = {"MAINTENANCE_REWRITE_DATA_FILES": "true"}
    dry = maintenance.run(url, options, dry_run=True)
    assert dry.plan["rewrite_data_files"].items == [{"table": "main.nearly_all", "files": 1}]
    real = maintenance.run(url, options)
    assert real.step("rewrite_data_files").counts["files_processed"] == 1


def test_a_dry_run_on_an_open_read_write_session_writes_no_slot(tmp_path: Path) -> None:
    """The Lambda's warm session is read-write: a plan made on it must not take
    the commit lock (a slot) for DuckLake's dry-run calls, nor the pass lease."""
    url, data = (tmp_path / "lake").as_uri(), f"{tmp_path / 'data'}/"
    _churn(url, data)
    with slatelake.connect(url) as s:
        s.sql("SELECT count(*) FROM t").fetchall()
        before = _listing(str(tmp_path))
        dry = maintenance.run(s, _options(), dry_run=True)
        assert _listing(str(tmp_path)) == before
    assert dry.plan["delete_orphaned_files"].total == 1
