"""``slatelake policy set --cron`` and the maintenance switch from the shell:
a cron is stored and shown, a refused one exits 2 naming the field, and
while ``SLATELAKE_MAINTENANCE_ENABLED`` is false ``maintain`` (but
``--dry-run``), ``maintain --threshold`` and ``backup --option`` exit 2
naming the variable, before the lake is touched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import slatelake
from slatelake.cli import main

ENV = "SLATELAKE_MAINTENANCE_ENABLED"


@pytest.fixture
def lake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.delenv(ENV, raising=False)
    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path / 'data'}/") as s:
        s.sql("CREATE TABLE t (x INTEGER)")
        s.sql("INSERT INTO t VALUES (1)")
    return url


def test_policy_set_cron_is_stored_and_shown(lake: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policy", "set", lake, "--cron", "*/30  2-4 * * 1-5", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert row["fields"] == {"cron": "*/30 2-4 * * 1-5"}
    assert main(["policy", "show", lake]) == 0
    assert "*/30 2-4 * * 1-5" in capsys.readouterr().out
    assert main(["policy", "unset", lake, "cron"]) == 0
    assert slatelake.open(lake).policy.show().rows == []


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (
            ["--cron", "0 3 * * 8"],
            "policy cron='0 3 * * 8': field 5 (day of week) '8' at character 9",
        ),
        (["--cron", "0 3 * * MON"], "names are not in slatelake's cron subset"),
        (["--cron", "@daily"], "@-macros"),
        (["--cron", "0 3 * *"], "expected 5 fields"),
        (["--table", "t", "--cron", "0 3 * * *"], "cron is the lake's own"),
    ],
)
def test_a_refused_cron_exits_2_naming_what_is_wrong(
    lake: str, argv: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["policy", "set", lake, *argv]) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err, err
    assert slatelake.open(lake).policy.show().rows == []


def test_switched_off_maintain_exits_2_before_the_lake_is_touched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(ENV, "false")
    root = tmp_path / "new-lake"
    argv = ["maintain", root.as_uri(), "--data-path", f"{tmp_path / 'data'}/"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{ENV}='false'" in err and f"set {ENV}=true" in err and "dry run" in err, err
    assert not root.exists()


def test_switched_off_the_other_maintenance_verbs_exit_2_and_a_dry_run_plans(
    lake: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(ENV, "0")
    for argv in (
        ["maintain", lake, "--threshold"],
        ["maintain", lake, "--option", "MAINTENANCE_FLUSH_INLINED_DATA=true"],
        ["backup", lake, "--option", "MAINTENANCE_FLUSH_INLINED_DATA=true"],
    ):
        assert main(argv) == 2, argv
        assert "refused: maintenance is switched off" in capsys.readouterr().err
    dry = ["maintain", lake, "--dry-run", "--option", "MAINTENANCE_FLUSH_INLINED_DATA=true"]
    assert main([*dry, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["plan"]["flush_inlined_data"]["rows"] == 1
    assert main(["status", lake, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []  # nothing ran
    monkeypatch.setenv(ENV, "maybe")
    assert main(["maintain", lake]) == 2
    assert f"{ENV}='maybe': expected true or false" in capsys.readouterr().err
