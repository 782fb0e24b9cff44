"""Transfer refusals and the ``export``/``import`` command line.

Every refusal names the thing and the fix, and leaves nothing behind: no
lake root, no export file, an existing lake or file untouched.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import duckdb
import pytest

from slatelake.catalog.lake import Lake
from slatelake.cli import transfer as transfer_cli
from slatelake.ducklake import extensions, transfer
from slatelake.ducklake.session import connect
from slatelake.errors import MisconfigurationError, NotFoundError, UnsupportedError
from slatelake.maintenance.borrowed import borrowed_at_head
from tests.ducklake.transfer_oracle import build_stock, meta_rows


@pytest.fixture(scope="module")
def stock(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A stock DuckLake catalog in a DuckDB file; tests that change it use a copy."""
    root = tmp_path_factory.mktemp("stock")
    build_stock(str(root / "stock.duckdb"), f"{root}/data/")
    return root / "stock.duckdb"


# -- import --------------------------------------------------------------------------
def _altered_copy(stock: Path, tmp_path: Path, *statements: str) -> Path:
    """A copy of the stock catalog file changed with plain DuckDB (no DuckLake)."""
    copy = tmp_path / "altered.duckdb"
    shutil.copy(stock, copy)
    con = duckdb.connect(str(copy))
    try:
        for statement in statements:
            con.execute(statement)
    finally:
        con.close()
    return copy


def _stock_count(catalog: Path, table: str) -> tuple[int]:
    con = extensions.connect()
    try:
        con.execute(f"ATTACH 'ducklake:{catalog}' AS lake (READ_ONLY)")
        return con.execute(f"SELECT count(*) FROM lake.{table}").fetchone()
    finally:
        con.close()


def _assert_nothing_at(url_path: Path) -> None:
    assert not url_path.exists() or not any(url_path.iterdir()), list(url_path.rglob("*"))


def test_import_of_a_missing_catalog_file_is_refused_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nope.duckdb"
    with pytest.raises(NotFoundError, match=f"catalog file {missing} does not exist"):
        transfer.import_catalog(missing, (tmp_path / "lake").as_uri())
    _assert_nothing_at(tmp_path / "lake")


@pytest.mark.parametrize("name", ["with\x00nul.duckdb", "not-utf8-\udcff.duckdb", ""])
def test_import_and_export_refuse_a_path_no_file_can_have(tmp_path: Path, name: str) -> None:
    url = (tmp_path / "lake").as_uri()
    with pytest.raises(MisconfigurationError, match="catalog"):
        transfer.import_catalog(name, url)
    with pytest.raises(MisconfigurationError, match="export target"):
        transfer.export_catalog(url, name)
    assert list(tmp_path.iterdir()) == []


def test_import_of_a_file_that_is_no_database_is_refused_naming_it(tmp_path: Path) -> None:
    text = tmp_path / "notes.duckdb"
    text.write_text("not a database at all, just some text that is long enough\n")
    with pytest.raises(MisconfigurationError, match="neither a DuckDB nor a SQLite") as err:
        transfer.import_catalog(text, (tmp_path / "lake").as_uri())
    assert str(text) in str(err.value)
    _assert_nothing_at(tmp_path / "lake")


def test_import_of_a_duckdb_file_that_is_not_a_ducklake_catalog_is_refused(
    tmp_path: Path,
) -> None:
    plain = tmp_path / "plain.duckdb"
    duckdb.connect(str(plain)).execute("CREATE TABLE t AS SELECT 1 AS x").close()
    with pytest.raises(MisconfigurationError, match="not a DuckLake catalog") as err:
        transfer.import_catalog(plain, (tmp_path / "lake").as_uri())
    assert str(plain) in str(err.value)
    _assert_nothing_at(tmp_path / "lake")


@pytest.mark.parametrize(
    ("statements", "error", "message"),
    [
        (
            ["CREATE TABLE ducklake_future (x INTEGER)"],
            UnsupportedError,
            "tables slatelake does not know: main.ducklake_future",
        ),
        (
            ["CREATE SCHEMA other", "CREATE TABLE other.ducklake_snapshot (x INTEGER)"],
            UnsupportedError,
            "other.ducklake_snapshot",
        ),
        (
            ["UPDATE ducklake_metadata SET value = '1.1' WHERE key = 'version'"],
            UnsupportedError,
            "version '1.1' is not one slatelake supports .*upgrade slatelake",
        ),
        (
            ["UPDATE ducklake_metadata SET value = '0.3' WHERE key = 'version'"],
            UnsupportedError,
            "version '0.3' .*migrates older catalogs",
        ),
        (
            ["ALTER TABLE ducklake_snapshot ADD COLUMN shiny VARCHAR"],
            UnsupportedError,
            "table ducklake_snapshot has columns",
        ),
    ],
)
def test_import_refuses_a_catalog_slatelake_cannot_keep_whole_naming_why(
    stock: Path, tmp_path: Path, statements: list[str], error: type, message: str
) -> None:
    altered = _altered_copy(stock, tmp_path, *statements)
    with pytest.raises(error, match=message):
        transfer.import_catalog(altered, (tmp_path / "lake").as_uri())
    _assert_nothing_at(tmp_path / "lake")


def test_import_of_a_catalog_without_a_data_path_asks_for_one_and_keeps_the_given_one(
    stock: Path, tmp_path: Path
) -> None:
    altered = _altered_copy(
        stock, tmp_path, "DELETE FROM ducklake_metadata WHERE key = 'data_path'"
    )
    url = (tmp_path / "lake").as_uri()
    with pytest.raises(MisconfigurationError, match="records no data path; give .*--data-path"):
        transfer.import_catalog(altered, url)
    _assert_nothing_at(tmp_path / "lake")
    data = f"{stock.parent}/data/"
    assert transfer.import_catalog(altered, url, data_path=data).data_path == data
    with connect(url, read_only=True) as session:
        stored = session.sql(
            "SELECT value FROM __slatelake_meta.ducklake_metadata WHERE key = 'data_path'"
        ).fetchall()
        assert stored == [(data,)]
        assert session.sql("SELECT count(*) FROM t1").fetchone() == _stock_count(stock, "t1")


def test_import_into_an_existing_lake_is_refused_and_leaves_it_as_it_was(
    stock: Path, tmp_path: Path
) -> None:
    url = (tmp_path / "lake").as_uri()
    with connect(url, data_path=f"{tmp_path}/own-data/") as session:
        session.sql("CREATE TABLE mine (x INTEGER)")
    before = meta_rows(url)
    with pytest.raises(MisconfigurationError, match=f"a lake already exists at {url}"):
        transfer.import_catalog(stock, url)
    assert meta_rows(url) == before


def test_import_refuses_a_data_path_that_overlaps_the_lake_root(
    stock: Path, tmp_path: Path
) -> None:
    lake = tmp_path / "lake"
    with pytest.raises(MisconfigurationError, match="overlaps the lake root"):
        transfer.import_catalog(stock, lake.as_uri(), data_path=str(lake / "data"))
    _assert_nothing_at(lake)


def test_export_refuses_an_existing_target_and_leaves_it_untouched(
    stock: Path, tmp_path: Path
) -> None:
    url = (tmp_path / "lake").as_uri()
    transfer.import_catalog(stock, url)
    target = tmp_path / "taken.duckdb"
    target.write_bytes(b"someone else's file")
    with pytest.raises(MisconfigurationError, match=f"export target {target} already exists"):
        transfer.export_catalog(url, target)
    assert target.read_bytes() == b"someone else's file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lake", "taken.duckdb"]


def test_export_of_a_missing_lake_is_refused_and_writes_no_file(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="no slatelake lake at"):
        transfer.export_catalog((tmp_path / "lake").as_uri(), tmp_path / "out.duckdb")
    assert list(tmp_path.iterdir()) == []


def test_export_that_fails_part_way_leaves_no_file_behind(
    stock: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = (tmp_path / "lake").as_uri()
    transfer.import_catalog(stock, url)
    copy = transfer._exported_data_path

    def copied_then_failed(con: duckdb.DuckDBPyConnection) -> str | None:
        copy(con)  # every table is in the temporary file by now
        raise OSError("No space left on device")

    monkeypatch.setattr(transfer, "_exported_data_path", copied_then_failed)
    with pytest.raises(OSError, match="No space left"):
        transfer.export_catalog(url, tmp_path / "out.duckdb")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lake"]


# -- the command line ------------------------------------------------------------------
def _cli(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="slatelake")
    sub = parser.add_subparsers(dest="command", required=True)
    transfer_cli.register(sub)
    args = parser.parse_args(list(argv))
    return args.func(args)


def test_cli_import_and_export_print_their_counts_as_json(
    stock: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, out = (tmp_path / "lake").as_uri(), tmp_path / "out.duckdb"
    assert _cli("import", str(stock), url, "--json") == 0
    imported = json.loads(capsys.readouterr().out)
    assert imported["kind"] == "duckdb" and imported["lake"] == url
    assert imported["snapshot_id"] == 23 and imported["tables"]["ducklake_snapshot"] == 20
    assert imported["rows"] == sum(imported["tables"].values())
    assert _cli("export", url, str(out), "--json") == 0
    exported = json.loads(capsys.readouterr().out)
    assert exported["path"] == str(out) and exported["snapshot_id"] == 23
    assert exported["rows"] == imported["rows"] and exported["bytes"] == out.stat().st_size
    assert _cli("export", url, str(tmp_path / "text.duckdb")) == 0
    assert "ATTACH 'ducklake:" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv",
    [
        ["export", "relative/lake", "out.duckdb"],
        ["import", "catalog.duckdb", "ftp://host/lake"],
        ["import", "catalog.duckdb", "memory://x", "--data-path", "relative/data"],
        ["export", "memory://x"],
        ["export", "memory://x", "bad\x00name.duckdb"],
        ["export", "memory://x", "s3://bucket/out.duckdb"],
        ["import", "s3://bucket/catalog.duckdb", "memory://x"],
        ["import", "cat\udcffalog.duckdb", "memory://x"],
    ],
)
def test_cli_refuses_a_bad_lake_or_usage_with_status_2_before_touching_anything(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        _cli(*argv)
    assert exit_.value.code == 2
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("verb", "says"),
    [
        ("export", "shares the lake's data files"),
        ("import", "recorded as borrowed"),
        ("release-borrowed", "no longer reads them"),
    ],
)
def test_cli_help_says_what_the_verb_keeps_and_refuses(
    verb: str, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        _cli(verb, "--help")
    assert exit_.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert f"usage: slatelake {verb}" in text
    assert "--json" in text and says in text


def test_cli_export_says_the_export_shares_the_lakes_data_files(
    stock: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = (tmp_path / "lake").as_uri()
    transfer.import_catalog(stock, url)
    assert _cli("export", url, str(tmp_path / "out.duckdb")) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "shares this lake's data files" in text and "may delete files the export" in text
    assert _cli("export", url, str(tmp_path / "out2.duckdb"), "--json") == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["shares_data_files"] is True and "cleanup" in answer["warning"]


def test_cli_import_says_its_files_are_borrowed_and_release_borrowed_gives_them_back(
    stock: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = (tmp_path / "lake").as_uri()
    assert _cli("import", str(stock), url) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "borrows the source catalog's data files" in text and "--copy-data" in text
    with Lake.open(url, read_only=True) as lake:
        files = borrowed_at_head(lake).paths
    assert len(files) > 1 and all(f.startswith(f"{stock.parent}/data/") for f in files)
    assert _cli("release-borrowed", url, files[0], "--json") == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer == {"lake": url, "released": [files[0]], "remaining": len(files) - 1}
    assert _cli("release-borrowed", url, "--all") == 0
    assert f"released {len(files) - 1} borrowed files" in capsys.readouterr().out


def test_cli_import_with_copy_data_prints_what_it_copied(
    stock: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, dest = (tmp_path / "lake").as_uri(), tmp_path / "copy"
    assert _cli("import", str(stock), url, "--copy-data", str(dest), "--json") == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["data_path"] == f"{dest}/" and answer["copied_files"] > 0
    assert answer["borrowed_files"] == 0 and answer["warning"] is None


@pytest.mark.parametrize(
    "argv",
    [
        ["release-borrowed", "memory://x"],
        ["release-borrowed", "memory://x", "--all", "/data/f.parquet"],
        ["release-borrowed", "relative/lake", "--all"],
        ["import", "catalog.duckdb", "memory://x", "--copy-data", "relative/copy"],
    ],
)
def test_cli_refuses_release_borrowed_and_copy_data_misuse_with_status_2(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        _cli(*argv)
    assert exit_.value.code == 2
    assert list(tmp_path.iterdir()) == []
