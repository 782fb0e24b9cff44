"""The lake handle: every verb reached from ``slatelake.open(url)``, each
opening what it needs and closing it, on a real lake (SlateDB on files, real
DuckDB and DuckLake)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import slatelake
from slatelake import NotFoundError, PassRequest, PassStatus, StepStatus
from tests.conftest import subprocess_env


@pytest.fixture
def lake(tmp_path: Path) -> slatelake.LakeHandle:
    handle = slatelake.open((tmp_path / "lake").as_uri(), data_path=str(tmp_path / "data"))
    handle.create()
    with handle.connect() as s:
        s.sql("CREATE TABLE t (i INTEGER)")
        for i in range(3):
            s.sql(f"INSERT INTO t VALUES ({i})")
    return handle


def test_a_pass_through_the_handle_is_recorded_and_read_back(
    lake: slatelake.LakeHandle,
) -> None:
    options = {"MAINTENANCE_MERGE_ADJACENT_FILES": "true"}
    report = lake.maintenance.run(PassRequest(options=options, by="handle-test"))
    assert report.status is PassStatus.SUCCEEDED
    assert report.step("merge_adjacent_files").status is StepStatus.RAN
    (latest, *_) = lake.maintenance.status()
    assert latest.run_id == report.run_id and latest.by == "handle-test"
    page = lake.maintenance.runs(limit=1)
    assert [r.run_id for r in page.items] == [report.run_id]
    assert lake.maintenance.audit().items[0].kind == "run.manual"


def test_a_dry_run_through_the_handle_writes_nothing(lake: slatelake.LakeHandle) -> None:
    before = lake.log_summary()
    report = lake.maintenance.run(
        PassRequest.from_mapping(
            {"options": {"MAINTENANCE_FLUSH_INLINED_DATA": "true"}, "dry_run": "true"}
        )
    )
    assert report.plan is not None
    assert report.plan["flush_inlined_data"].details["rows"] == 3  # the three inlined INSERTs
    assert lake.log_summary() == before and lake.maintenance.status() == []


def test_holds_policy_and_store_hang_off_the_handle(lake: slatelake.LakeHandle) -> None:
    with lake.connect() as s:
        head = s.sql("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
    change = lake.holds.protect(head, "before-backup", by="ops")
    assert change.changed and [h.name for h in lake.holds.list()] == ["before-backup"]
    lake.policy.set({"retention": "30d"}, by="ops")
    assert lake.policy.show().lake.to_dict()["retention"]["value"] == 30 * 86400
    census = lake.store.census(objects=False).to_dict()
    assert {r["subspace"] for r in census["subspaces"]} >= {"sys", "current"}
    assert lake.holds.unprotect("before-backup").changed and lake.holds.list() == []


def test_a_handle_on_no_lake_names_the_url(tmp_path: Path) -> None:
    missing = slatelake.open((tmp_path / "none").as_uri())
    assert not missing.exists()
    for verb in (missing.maintenance.status, missing.store.census, missing.holds.list):
        with pytest.raises(NotFoundError, match="none"):
            verb()
    assert not (tmp_path / "none").exists()  # nothing was created by asking


def test_a_malformed_url_or_data_path_is_refused_when_the_handle_is_made() -> None:
    with pytest.raises(slatelake.MisconfigurationError):
        slatelake.open("ftp://bucket/lake")
    with pytest.raises(slatelake.MisconfigurationError, match="data path"):
        slatelake.open("memory://x", data_path="s3:/bucket/typo")


def test_a_handles_relative_data_path_is_resolved_as_a_sessions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    handle = slatelake.open((tmp_path / "lake").as_uri(), data_path="files/")
    assert handle.data_path == f"{tmp_path / 'files'}/"


def test_opening_a_handle_imports_no_duckdb() -> None:
    """The Lambda's cold start and a CLI's --help pay for DuckDB only when a
    verb needs it."""
    code = (
        "import sys, slatelake; lake = slatelake.open('s3://b/lake'); "
        "slatelake.PassRequest; print('duckdb' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=subprocess_env()
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
