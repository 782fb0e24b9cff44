"""`slatelake init --data-path` and `slatelake sql`, end to end from a shell."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import subprocess_env


def _cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "slatelake.cli", *args],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=300,
        input=stdin,
    )


def test_sql_end_to_end_from_a_shell(tmp_path: Path) -> None:
    url = (tmp_path / "lake").as_uri()
    init = _cli("init", url, "--data-path", f"{tmp_path}/data/")
    assert init.returncode == 0, init.stderr
    assert "snapshot 0" in init.stdout
    run = _cli(
        "sql",
        url,
        "-c",
        "CREATE TABLE t (a INTEGER, b VARCHAR)",
        "-c",
        "INSERT INTO t VALUES (1, 'x'), (2, NULL)",
        "-c",
        "SELECT * FROM lake.t ORDER BY a",
    )
    assert run.returncode == 0, run.stderr
    assert "1  x" in run.stdout and "2  NULL" in run.stdout
    as_json = _cli("sql", url, "--json", "-c", "SELECT a, b FROM t ORDER BY a")
    assert json.loads(as_json.stdout) == [{"a": 1, "b": "x"}, {"a": 2, "b": None}]
    shell = _cli("sql", url, stdin="SELECT count(*) AS n\nFROM t;\n")
    assert shell.returncode == 0 and "2" in shell.stdout


def test_sql_on_a_missing_lake_is_a_clear_error(tmp_path: Path) -> None:
    run = _cli("sql", (tmp_path / "none").as_uri(), "-c", "SELECT 1")
    assert run.returncode == 1
    assert "no slatelake lake at" in run.stderr and "Traceback" not in run.stderr


def test_sql_write_on_read_only_is_a_clear_error(tmp_path: Path) -> None:
    url = (tmp_path / "lake").as_uri()
    assert _cli("init", url, "--data-path", f"{tmp_path}/data/").returncode == 0
    assert _cli("sql", url, "-c", "CREATE TABLE t (a INTEGER)").returncode == 0
    run = _cli("sql", url, "--read-only", "-c", "INSERT INTO t VALUES (1)")
    assert run.returncode == 1
    assert "read-only" in run.stderr and "Traceback" not in run.stderr
    assert json.loads(_cli("sql", url, "--json", "-c", "SELECT count(*) AS n FROM t").stdout) == [
        {"n": 0}
    ]


def test_sql_statement_error_goes_to_stderr(tmp_path: Path) -> None:
    url = (tmp_path / "lake").as_uri()
    assert _cli("init", url, "--data-path", f"{tmp_path}/data/").returncode == 0
    run = _cli("sql", url, "-c", "SELECT * FROM no_such_table")
    assert run.returncode == 1 and "no_such_table" in run.stderr
