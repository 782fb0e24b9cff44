"""``slatelake image``: write an image now, print its seq, head, size and
path; say so and write nothing when the newest image is at the fold cursor;
``--print-attach`` prints the statement stock DuckDB runs to read the newest
image, quoted; a bad LAKE exits 2, a missing one 1."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

import slatelake
from slatelake.catalog.folder import Folder
from slatelake.catalog.lake import Lake
from slatelake.cli import main
from slatelake.ducklake import extensions
from slatelake.log.images import ImageBook
from slatelake.store.location import LakeLocation
from tests.catalog.helpers import commit_inserts, fold_all


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_image_writes_one_and_prints_seq_head_bytes_and_path(
    shared_lake_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = shared_lake_url
    Lake.create(url).close()
    commit_inserts(url, 3, 1)
    fold_all(url)
    code, out, _ = _run(capsys, "image", url, "--json")
    assert code == 0
    doc = json.loads(out)
    newest = ImageBook(LakeLocation.parse(url)).newest()
    assert newest is not None
    assert doc["written"] is True and doc["seq"] == newest.seq == 3
    assert doc["head"] == {"snapshot_id": 2, "batch_seq": 3}
    assert (doc["bytes"], doc["path"]) == (newest.size, newest.url)
    code, out, _ = _run(capsys, "image", url)
    assert code == 0
    assert "no image written: the newest image is already at the fold cursor 3" in out
    assert len(ImageBook(LakeLocation.parse(url)).list()) == 1


def test_print_attach_prints_a_quoted_statement_stock_duckdb_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "it's a lake"  # a quote is a legal lake-path character
    url, data = (root / "lake").as_uri(), str(tmp_path / "data")
    with slatelake.connect(url, data_path=data) as session:
        session.sql("CREATE TABLE t (id INTEGER)")
        session.sql("INSERT INTO t SELECT * FROM range(5)")
    folder = Folder(LakeLocation.parse(url), margin_s=0)
    folder.fold_once()
    folder.close()
    assert _run(capsys, "image", url)[0] == 0
    code, out, _ = _run(capsys, "image", url, "--print-attach")
    assert code == 0
    statement = out.strip()
    assert statement.startswith("ATTACH 'ducklake:") and statement.endswith("(READ_ONLY);")
    stock = duckdb.connect(
        config={"autoinstall_known_extensions": False, "autoload_known_extensions": False}
    )
    stock.execute(f"LOAD '{extensions.extension_path('ducklake')}'")
    stock.execute(statement)
    assert stock.execute("SELECT count(*), sum(id) FROM lake.t").fetchone() == (5, 10)
    stock.close()
    code, out, _ = _run(capsys, "image", url, "--print-attach", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["attach"] == statement and doc["seq"] >= 1
    assert doc["path"] == ImageBook(LakeLocation.parse(url)).newest().url


def test_print_attach_without_an_image_exits_1_saying_how_to_write_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = (tmp_path / "lake").as_uri()
    Lake.create(url).close()
    code, out, err = _run(capsys, "image", url, "--print-attach")
    assert code == 1 and out == ""
    assert "no usable catalog image; fold and write one with `slatelake fold" in err


def test_a_bad_lake_exits_2_and_a_missing_one_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["image", "ftp://nowhere/lake"])
    assert exc.value.code == 2
    assert "unsupported scheme 'ftp'" in capsys.readouterr().err
    code, _, err = _run(capsys, "image", (tmp_path / "none").as_uri())
    assert code == 1 and "NotFoundError: no slatelake lake" in err


def test_help_says_an_image_is_as_fresh_as_its_seq(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["image", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "as fresh as its seq" in text and "--print-attach" in text
    with pytest.raises(SystemExit):
        main(["hold", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for option in ("--image-every-slots", "--image-max-age", "--image-grace", "--no-images"):
        assert option in text


@pytest.mark.parametrize(
    "option, value",
    [
        ("--image-every-slots", "-1"),
        ("--image-every-slots", "2.5"),
        ("--image-every-slots", "٣"),
        ("--image-max-age", "nan"),
        ("--image-grace", "-5"),
    ],
)
def test_hold_refuses_a_bad_image_cadence_before_opening_the_lake(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, value: str
) -> None:
    url = (tmp_path / "lake").as_uri()
    with pytest.raises(SystemExit) as exc:
        main(["hold", url, option, value])
    assert exc.value.code == 2
    assert option in capsys.readouterr().err
    assert not (tmp_path / "lake").exists()
