"""The command line: --help everywhere, the substrate verbs, clear errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from slatelake.cli import build_parser, main
from tests.conftest import subprocess_env

COMMANDS = [
    "init",
    "fold",
    "hold",
    "log",
    "demo",
    "sql",
    "maintain",
    "status",
    "census",
    "compact-store",
    "index",
]


def test_every_subcommand_is_registered_with_help() -> None:
    parser = build_parser()
    actions = [a for a in parser._actions if a.dest == "command"]
    assert sorted(actions[0].choices) == sorted(COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_help_on_every_subcommand(command: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "slatelake.cli", command, "--help"],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0
    assert f"usage: slatelake {command}" in proc.stdout


def test_init_fold_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = (tmp_path / "lake").as_uri()
    assert main(["init", url]) == 0
    assert main(["fold", url, "--json"]) == 0
    assert main(["log", url, "--json"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith(f"created lake {url}")
    assert json.loads(lines[1])["slots"] == 0
    doc = json.loads(lines[2])
    assert doc["head"] == {"snapshot_id": -1, "batch_seq": 0}
    assert doc["fold_cursor"] == 0 and doc["catalog_rows"] == 0


def test_errors_go_to_stderr_with_status_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = (tmp_path / "missing").as_uri()
    assert main(["log", missing]) == 1
    err = capsys.readouterr().err
    assert "NotFoundError" in err and "slatelake init" in err
    assert main(["init", "ftp://nope"]) == 1
    assert "unsupported scheme" in capsys.readouterr().err


def test_init_twice_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = (tmp_path / "lake").as_uri()
    assert main(["init", url]) == 0
    assert main(["init", url]) == 1
    assert "already exists" in capsys.readouterr().err


def test_demo_runs_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", str(tmp_path / "demo"), "--commits", "5"]) == 0
    out = capsys.readouterr().out
    assert "two committers landed 10 commits" in out
    assert "are identical" in out
    assert "lookup id=42: [(42, 'Oslo', 63.0)]" in out
    sweep = next(line for line in out.splitlines() if line.strip().startswith("sweep_indexes"))
    assert "ran" in sweep and "of 1 dropped indexes" in sweep and "reclaimed 0 " not in sweep
