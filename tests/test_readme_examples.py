"""The README's examples run as written, and its other commands still parse.

The examples use ``/tmp/slatelake-readme`` as their lake; the test moves that
to a temporary directory, writes each ``sql`` block that names its file in a
first-line comment (``-- report.sql``), runs the Python session example, then
every ``slatelake sql`` line through the CLI in-process, in README order, then
the maintenance API example on the same lake. Every other ``slatelake ...``
command in a ``bash`` block of the README, docs/cli.md or docs/lambda.md (they
name S3 buckets) is parsed by the CLI's own
argument parser, so a renamed flag or a value the CLI no longer takes (a
``--wait 90s``) fails here.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from slatelake.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
# The references the README links to: their commands parse too.
REFERENCES = (ROOT / "docs" / "cli.md", ROOT / "docs" / "lambda.md")
PLACEHOLDER = "/tmp/slatelake-readme"
_BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.DOTALL)


def _blocks(kind: str, *docs: Path) -> list[str]:
    found = []
    for doc in docs or (README,):
        found += [body for lang, body in _BLOCK.findall(doc.read_text()) if lang == kind]
    return found


def _python_examples() -> list[str]:
    return [b for b in _blocks("python") if "import slatelake" in b and "connect(" in b]


def _api_examples() -> list[str]:
    return [b for b in _blocks("python") if "lake.maintenance.run(" in b]


def _cli_commands() -> list[list[str]]:
    """Every ``slatelake ...`` command in a bash block, continuation lines
    joined and comments dropped, as argv without the program name."""
    commands = []
    for body in _blocks("bash", README, *REFERENCES):
        for line in body.replace("\\\n", " ").splitlines():
            if line.startswith("slatelake "):
                commands.append(shlex.split(line, comments=True)[1:])
    return commands


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


def _write_sql_files(where: Path) -> None:
    for name, body in _sql_files().items():
        (where / name).write_text(body)


def test_the_readme_shows_the_examples_this_test_runs() -> None:
    assert len(_python_examples()) == 1
    assert len(_api_examples()) == 1
    assert len(_sql_commands()) >= 4
    assert "report.sql" in _sql_files()
    verbs = {argv[0] for argv in _cli_commands()}
    assert {"sql", "maintain", "image"} <= verbs


@pytest.mark.parametrize("argv", _cli_commands(), ids=lambda argv: " ".join(argv[:2]))
def test_every_readme_cli_command_parses(argv: list[str], tmp_path: Path) -> None:
    # `sql -f` reads its script while parsing: the README's files, written
    # where the example's placeholder points (a fresh machine has no /tmp copy)
    _write_sql_files(tmp_path)
    argv = [a.replace(PLACEHOLDER, str(tmp_path)) for a in argv]
    try:
        build_parser().parse_args(argv)
    except SystemExit as exc:  # argparse refused it: the README shows a stale command
        pytest.fail(f"slatelake {shlex.join(argv)}: refused by the CLI (exit {exc.code})")


def test_readme_examples_run_as_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = str(tmp_path / "readme")
    Path(root).mkdir()
    _write_sql_files(Path(root))
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
    # the maintenance API example: one pass, then its status window
    (api,) = _api_examples()
    exec(compile(api.replace(PLACEHOLDER, root), str(README), "exec"), {})
    printed = capsys.readouterr().out
    assert "('expire_snapshots', 'ran')" in printed and "1 manual" in printed
    # `lease show --json` prints the record under "lease", as the README says
    assert main(["lease", "show", f"file://{root}/lake", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert set(shown) == {"lake", "lease", "held"} and shown["held"] is False
    assert '"lease": {"generation"' in README.read_text()
