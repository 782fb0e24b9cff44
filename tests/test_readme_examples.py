"""The README's Python example and its ``slatelake sql`` examples run as written.

The examples use ``/tmp/slatelake-readme`` as their lake; the test moves that
to a temporary directory, writes each ``sql`` block that names its file in a
first-line comment (``-- report.sql``), runs the Python example, then every
``slatelake sql`` line through the CLI in-process, in README order.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from slatelake.cli import main

README = Path(__file__).resolve().parents[1] / "README.md"
PLACEHOLDER = "/tmp/slatelake-readme"
_BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.DOTALL)


def _blocks(kind: str) -> list[str]:
    return [body for lang, body in _BLOCK.findall(README.read_text()) if lang == kind]


def _python_examples() -> list[str]:
    return [b for b in _blocks("python") if "import slatelake" in b and "connect(" in b]


def _sql_commands() -> list[list[str]]:
    lines = [ln for b in _blocks("bash") for ln in b.splitlines()]
    return [shlex.split(ln)[2:] for ln in lines if ln.startswith("slatelake sql ")]


def _sql_files() -> dict[str, str]:
    named = {}
    for body in _blocks("sql"):
        first = body.splitlines()[0] if body.strip() else ""
        if m := re.fullmatch(r"-- (\S+\.sql)", first.strip()):
            named[m.group(1)] = body
    return named


def test_the_readme_shows_the_examples_this_test_runs() -> None:
    assert len(_python_examples()) == 1
    assert len(_sql_commands()) >= 4
    assert "report.sql" in _sql_files()


def test_readme_examples_run_as_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = str(tmp_path / "readme")
    Path(root).mkdir()
    for name, body in _sql_files().items():
        (Path(root) / name).write_text(body)
    (example,) = _python_examples()
    exec(compile(example.replace(PLACEHOLDER, root), str(README), "exec"), {})
    printed = capsys.readouterr().out
    assert "Turku" in printed and "(2,)" in printed  # the DataFrame and the count
    for argv in _sql_commands():
        argv = [a.replace(PLACEHOLDER, root) for a in argv]
        code = main(["sql", *argv])
        out, err = capsys.readouterr()
        assert code == 0, f"slatelake sql {shlex.join(argv)}: exit {code}: {err}"
        assert out.strip(), f"slatelake sql {shlex.join(argv)} printed nothing"
    # the script's INSERT reached the lake
    code = main(["sql", f"file://{root}/lake", "--json", "-c", "SELECT count(*) AS n FROM trips"])
    assert code == 0 and capsys.readouterr().out.strip() == '[{"n":3}]'
