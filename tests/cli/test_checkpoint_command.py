"""``slatelake checkpoint create|list|delete`` and ``slatelake restore``: a
restore point from a shell, its ``--json`` the report's own document; a bad
name or TTL exits 2 before a lake is read; an occupied target exits 1
naming it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import slatelake
from slatelake.cli import main


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _lake(tmp_path: Path) -> str:
    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path / 'data'}/") as s:
        s.sql("CALL lake.set_option('data_inlining_row_limit', '0')")
        s.sql("CREATE TABLE t (i BIGINT)")
        s.sql("INSERT INTO t SELECT * FROM range(100)")
        s.sql("DELETE FROM t WHERE i < 10")
    return url


def _rows(url: str) -> list[tuple[int, ...]]:
    with slatelake.connect(url, read_only=True) as s:
        return s.sql("SELECT * FROM t ORDER BY 1").fetchall()


def test_create_list_restore_and_delete_a_restore_point(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _lake(tmp_path)
    code, out, err = _run(capsys, "checkpoint", "create", url, "--name", "nightly", "--ttl", "30d")
    assert code == 0, err
    assert "restore point nightly of" in out and "2 files kept" in out and "lapses" in out

    code, out, _ = _run(capsys, "checkpoint", "list", url, "--json")
    (doc,) = json.loads(out)
    assert (doc["name"], doc["files"], doc["lapsed"]) == ("nightly", 2, False)
    assert 29 * 86400e6 < doc["expires_at"] - doc["created_at"] <= 30 * 86400e6
    code, out, _ = _run(capsys, "checkpoint", "list", url)
    assert "nightly" in out and "left)" in out

    with slatelake.connect(url) as s:
        s.sql("INSERT INTO t VALUES (1000)")
    back = (tmp_path / "back").as_uri()
    code, out, err = _run(
        capsys, "restore", url, "--checkpoint", "nightly", "--to", back, "--share-data"
    )
    assert code == 0, err
    assert f"restored nightly of {url} to {back}" in out and "note: " in out
    assert _rows(back) == [(i,) for i in range(10, 100)]

    code, out, _ = _run(capsys, "checkpoint", "delete", url, "nightly", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["action"] == "deleted" and doc["checkpoint"] == "deleted"
    assert doc["point"]["name"] == "nightly"
    code, out, _ = _run(capsys, "checkpoint", "list", url)
    assert out.strip() == "no restore points"


def test_create_json_is_the_change_document(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _lake(tmp_path)
    code, out, _ = _run(capsys, "checkpoint", "create", url, "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["action"] == "created" and doc["checkpoint"] == "created"
    assert doc["point"]["name"].startswith("rp-") and doc["point"]["expires_at"] is None


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (("checkpoint", "create", "{url}", "--name", "no/slash"), "argument --name"),
        (("checkpoint", "create", "{url}", "--ttl", "soon"), "argument --ttl"),
        (("checkpoint", "delete", "{url}", ".dot"), "argument NAME"),
        (("restore", "{url}", "--checkpoint", "x", "--to", "relative"), "argument --to"),
    ],
)
def test_bad_values_exit_2_before_the_lake_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], words: str
) -> None:
    url = (tmp_path / "none").as_uri()  # no lake: a verb that got past parsing would fail 1
    with pytest.raises(SystemExit) as exit_:
        main([a.format(url=url) for a in argv])
    assert exit_.value.code == 2
    assert words in capsys.readouterr().err


def test_restore_to_an_occupied_location_exits_1_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _lake(tmp_path)
    assert _run(capsys, "checkpoint", "create", url, "--name", "p")[0] == 0
    code, _, err = _run(capsys, "restore", url, "--checkpoint", "p", "--to", url, "--share-data")
    assert code == 1
    assert "MisconfigurationError: restore target" in err and url in err
    code, _, err = _run(capsys, "checkpoint", "delete", url, "missing")
    assert code == 1 and "NotFoundError: no restore point 'missing'" in err
