"""What a shell user expects of any command: a version, a quiet end when the
reader of its output goes away, and no Python repr in its text."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

import slatelake
from slatelake.cli import main
from tests.conftest import subprocess_env

pytestmark = pytest.mark.fast


@pytest.fixture
def lake(tmp_path: Path) -> str:
    url = (tmp_path / "lake").as_uri()
    slatelake.open(url, f"{tmp_path / 'data'}/").create()
    return url


def test_version_names_slatelake_and_the_engines_it_is_pinned_to(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    expected = (
        f"slatelake {slatelake.__version__} (duckdb {metadata.version('duckdb')}, "
        f"slatedb {metadata.version('slatedb')})"
    )
    assert capsys.readouterr().out.strip() == expected


def test_a_reader_that_closes_the_pipe_ends_the_command_quietly(lake: str) -> None:
    """`slatelake status --json | head -c 0`: no traceback, a SIGPIPE status."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "from slatelake.cli import run; run()", "log", lake, "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=subprocess_env(),
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the command writes
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141, err
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


def test_log_shows_the_head_in_words(lake: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["log", lake]) == 0
    out = capsys.readouterr().out
    assert "head: snapshot 0, slot 1" in out and "{" not in out, out


def test_policy_unset_takes_its_fields_after_its_options(
    lake: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`policy unset LAKE --table t retention`, as people type it; an unknown
    option after the fields is still refused."""
    with slatelake.connect(lake) as s:
        s.sql("CREATE TABLE t (i INTEGER)")
    assert main(["policy", "set", lake, "--table", "t", "--retention", "7d"]) == 0
    assert main(["policy", "unset", lake, "--table", "t", "retention"]) == 0
    assert "no policy left for the table main.t" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_:
        main(["policy", "unset", lake, "--table", "t", "retention", "--bogus"])
    assert exit_.value.code == 2
    assert "unrecognized arguments: retention --bogus" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["status", lake, "stray"])
    assert "unrecognized arguments: stray" in capsys.readouterr().err
