"""``slatelake census`` and ``slatelake compact-store``: output shapes and
exit statuses, through the real CLI entry point on real lakes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from slatelake.catalog.folder import Folder
from slatelake.catalog.lake import Lake
from slatelake.cli import EXIT_ERROR, EXIT_USAGE, main
from slatelake.store.census import SUBSPACE_NAMES
from slatelake.store.location import LakeLocation
from tests.catalog.test_census import churn, fast_compactor, settled, wait_for

pytestmark = pytest.mark.fast

__all__ = ["fast_compactor"]  # a fixture, used by name
ROW_KEYS = {
    "subspace",
    "bytes",
    "l0_ssts",
    "sorted_runs",
    "sorted_run_ssts",
    "manifest_id",
    "live_keys",
    "live_bytes",
    "live_split",
}


@pytest.fixture
def runs_lake(tmp_path: Path, fast_compactor: None) -> Iterator[str]:
    """A lake with sorted runs in current and no holder running."""
    url = (tmp_path / "lake").as_uri()
    Lake.create(url).close()
    folder = Folder(LakeLocation.parse(url), margin_s=0)
    try:
        churn(url, folder, folds=4)
        wait_for("a run in current", settled(url, "current", 1))
    finally:
        folder.close()
    yield url


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_census_json_holds_one_row_per_subspace_live_null_unless_asked(
    runs_lake: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(capsys, "census", runs_lake, "--json")
    doc = json.loads(out)
    rows = doc["subspaces"]
    assert doc["objects"]["total"]["objects"] > 0 and doc["objects_error"] is None
    assert code == 0 and [r["subspace"] for r in rows] == list(SUBSPACE_NAMES)
    assert all(set(r) == ROW_KEYS and r["live_keys"] is None for r in rows)
    assert {r["subspace"] for r in rows if r["bytes"]} == {"sys", "snapshot", "current"}
    code, out, _ = _run(capsys, "census", runs_lake, "--live", "--json")
    live = {r["subspace"]: r for r in json.loads(out)["subspaces"]}
    assert code == 0 and live["current"]["live_keys"] > 0 and live["index"]["live_keys"] == 0
    assert live["current"]["live_split"]["entity"]["keys"] == live["current"]["live_keys"]


def test_census_table_ends_with_object_totals_and_objects_view_sums(
    runs_lake: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(capsys, "census", runs_lake)
    lines = out.splitlines()
    assert code == 0 and lines[0].split()[:2] == ["subspace", "bytes"]
    assert lines[-1].startswith("objects: ") and "sst " in lines[-1]
    code, out, _ = _run(capsys, "census", runs_lake, "--objects", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["objects_error"] is None  # the census's own to_dict()
    kinds = {k: v for k, v in doc["objects"].items() if k != "total"}
    assert sum(v["bytes"] for v in kinds.values()) == doc["objects"]["total"]["bytes"]


def test_census_of_a_missing_lake_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(capsys, "census", (tmp_path / "none").as_uri())
    assert code == EXIT_ERROR and "NotFoundError" in err


def test_compact_store_usage_errors_exit_2(
    runs_lake: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(capsys, "compact-store", runs_lake, "--require-completed")
    assert code == EXIT_USAGE and "needs --timeout" in err
    code, _, err = _run(capsys, "compact-store", runs_lake, "--subspace", "indexes")
    assert code == EXIT_USAGE and "unknown subspace 'indexes'" in err


def test_compact_store_require_completed_fails_when_pending_succeeds_with_a_holder(
    runs_lake: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ("compact-store", runs_lake, "--subspace", "current", "--require-completed")
    code, out, err = _run(capsys, *args, "--timeout", "1")
    assert code == EXIT_ERROR and "not completed: current pending" in err
    assert "pending" in out
    folder = Folder(LakeLocation.parse(runs_lake), margin_s=0)
    try:
        code, out, err = _run(capsys, *args, "--timeout", "30", "--json")
    finally:
        folder.close()
    doc = json.loads(out)
    assert code == 0, err
    assert doc["outcome"] == "completed" and doc["merges"][0]["adopted"]  # the pending one
    assert doc["merges"][0]["sorted_runs_after"] == 1


def test_compact_store_with_nothing_to_merge_is_a_verified_no_op(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = (tmp_path / "lake").as_uri()
    Lake.create(url).close()
    code, out, _ = _run(
        capsys, "compact-store", url, "--timeout", "1", "--require-completed", "--json"
    )
    doc = json.loads(out)
    assert code == 0 and doc["outcome"] == "skipped"
    assert all(m["outcome"] == "skipped" and m["reason"] for m in doc["merges"])
