"""`slatelake demo DIR` wipes only what a previous demo made."""

from __future__ import annotations

from pathlib import Path

import pytest

from slatelake.cli import main
from slatelake.demo import DEMO_MARK, prepare_directory

pytestmark = pytest.mark.fast


def test_demo_refuses_a_directory_holding_someone_elses_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    precious = tmp_path / "home"
    precious.mkdir()
    (precious / "thesis.tex").write_text("years of work")
    assert main(["demo", str(precious), "--commits", "1"]) == 1
    assert "not empty and was not made by `slatelake demo`" in capsys.readouterr().err
    assert (precious / "thesis.tex").read_text() == "years of work"
    assert sorted(p.name for p in precious.iterdir()) == ["thesis.tex"]


def test_demo_refuses_a_file(tmp_path: Path) -> None:
    target = tmp_path / "notes.txt"
    target.write_text("keep")
    assert main(["demo", str(target), "--commits", "1"]) == 1
    assert target.read_text() == "keep"


def test_demo_reuses_its_own_directory_and_an_empty_one(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert prepare_directory(str(empty)) == empty
    assert (empty / DEMO_MARK).is_file()
    (empty / "lake").mkdir()  # what a demo run leaves behind
    assert prepare_directory(str(empty)) == empty
    assert sorted(p.name for p in empty.iterdir()) == [DEMO_MARK]
    fresh = tmp_path / "new" / "demo"
    assert prepare_directory(str(fresh)) == fresh
