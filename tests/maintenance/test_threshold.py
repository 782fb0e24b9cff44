"""The threshold trigger: a table with enough small files gets a run of its
own (flush, merge, rewrite); nothing lake-wide is expired or deleted, and
the other tables are untouched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import slatelake
from slatelake import maintenance
from slatelake.cli import main

# An aggressive policy, so a threshold run that expired or cleaned anything would show it.
POLICY = {
    "enabled": "true",
    "small_file_min_count": "4",
    "retention": "0s",
    "cleanup_grace": "0s",
    "orphan_min_age": "0s",
    "orphan_age_floor_override": "true",
}


def _lake(tmp_path: Path) -> str:
    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path / 'data'}/") as s:
        s.sql("CREATE TABLE busy (id INTEGER)")
        s.sql("CREATE TABLE quiet (id INTEGER)")
        for n in range(6):
            s.sql(f"INSERT INTO busy SELECT range FROM range({n * 200}, {n * 200 + 200})")
        s.sql("INSERT INTO quiet SELECT range FROM range(200)")
        s.sql("DELETE FROM quiet WHERE id < 50")
    return url


def _files(url: str, table: str) -> int:
    with slatelake.connect(url, read_only=True) as s:
        sql = "SELECT count(*) FROM ducklake_list_files('lake', ?)"
        return s.sql(sql, params=[table]).fetchone()[0]


def _snapshots(url: str) -> set[int]:
    with slatelake.connect(url, read_only=True) as s:
        return {r[0] for r in s.sql("SELECT snapshot_id FROM lake.snapshots()").fetchall()}


def _rows(url: str) -> dict[str, list[tuple[int]]]:
    with slatelake.connect(url, read_only=True) as s:
        return {t: sorted(s.sql(f"SELECT * FROM {t}").fetchall()) for t in ("busy", "quiet")}


def test_a_table_with_many_small_files_gets_a_table_run_that_expires_nothing(
    tmp_path: Path,
) -> None:
    url = _lake(tmp_path)
    maintenance.set_policy(url, POLICY)
    before_snapshots, before_rows, quiet_files = _snapshots(url), _rows(url), _files(url, "quiet")
    assert _files(url, "busy") == 6
    found = maintenance.run_threshold(url, by="test")
    assert [(d.name, d.small_files, d.min_count) for d in found.due] == [("main.busy", 6, 4)]
    (run,) = found.runs
    assert (run.trigger, run.table) == ("threshold", "main.busy")
    assert run.operations == ["flush", "merge", "rewrite"]
    ran = {s.step for s in run.steps if s.status == "ran"}
    assert ran == {"flush_inlined_data", "merge_adjacent_files", "rewrite_data_files"}
    assert run.step("merge_adjacent_files").counts["files_processed"] == 6
    assert _files(url, "busy") == 1
    assert _files(url, "quiet") == quiet_files
    assert before_snapshots <= _snapshots(url)  # nothing expired
    assert _rows(url) == before_rows
    history = maintenance.runs(url, limit=1).items[0]
    assert (history.trigger, history.table, history.by) == ("threshold", "main.busy", "test")
    # merged now: the next check finds nothing due
    assert maintenance.run_threshold(url).due == []


def test_nothing_is_due_without_an_enabled_lake_policy(tmp_path: Path) -> None:
    url = _lake(tmp_path)
    maintenance.set_policy(url, {**POLICY, "enabled": "false"})
    assert maintenance.run_threshold(url).due == []
    assert _files(url, "busy") == 6


def test_a_table_whose_policy_turns_compaction_off_is_never_due(tmp_path: Path) -> None:
    url = _lake(tmp_path)
    maintenance.set_policy(url, POLICY)
    maintenance.set_policy(url, {"compaction": "false"}, table="busy")
    assert maintenance.run_threshold(url).due == []
    maintenance.set_policy(url, {"small_file_min_count": "7", "compaction": "true"}, table="busy")
    assert maintenance.run_threshold(url).due == []  # six files, seven wanted


def test_the_cli_runs_the_threshold_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _lake(tmp_path)
    maintenance.set_policy(url, POLICY)
    flush = "MAINTENANCE_FLUSH_INLINED_DATA=true"
    assert main(["maintain", url, "--threshold", "--option", flush]) == 2
    assert "--threshold takes its steps and tables from the lake" in capsys.readouterr().err
    assert main(["maintain", url, "--threshold", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [d["table"] for d in doc["due"]] == ["busy"]
    assert doc["runs"][0]["table"] == "main.busy" and doc["runs"][0]["status"] == "succeeded"
    assert main(["maintain", url, "--threshold"]) == 0
    assert "no table is due a threshold run" in capsys.readouterr().out
