"""DuckLake's data-path rules on a slatelake session, checked against stock DuckLake.

Stock DuckLake (the pinned ``duckdb-extension-ducklake``) takes a relative
DATA_PATH: it stores the text as given (a trailing '/' added) and DuckDB's
file system reads it against the process's current directory at every write,
with a leading '~' read as $HOME. A slatelake session resolves it the same
way, once, at connect, and the catalog keeps the absolute path, so every
process that opens the lake later finds the same files. Each test runs the
stock extension beside the session where their behaviour is compared.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from slatelake.catalog.lake import Lake
from slatelake.cli import main
from slatelake.ducklake import extensions
from slatelake.ducklake.attach_options import stored_data_path
from slatelake.ducklake.session import Session, connect
from slatelake.ducklake.sql import literal
from slatelake.errors import MisconfigurationError, NotFoundError

pytestmark = pytest.mark.fast

ROWS = 1000  # past DuckLake's inlining limit: the rows go to a Parquet file


def _stock(meta: Path, options: str) -> duckdb.DuckDBPyConnection:
    """Stock DuckLake on a DuckDB metadata file, attached as ``l``."""
    con = extensions.connect()
    try:
        con.execute(f"ATTACH {literal(f'ducklake:{meta}')} AS l {options}")
    except BaseException:
        con.close()
        raise
    return con


def _stock_data_path(path: str) -> str:
    """The ATTACH options giving stock DuckLake ``path``, quoted."""
    return f"(DATA_PATH {literal(path)})"


def _table_dirs(root: Path, table: str) -> set[Path]:
    """Where DuckLake wrote ``table``'s Parquet files under ``root``: the data
    path's directory (``<data path>/main/<table>/*.parquet``)."""
    return {
        p.parent.parent.parent.resolve()
        for p in root.rglob("*.parquet")
        if p.parent.name == table and p.parent.parent.name == "main"
    }


def _stored_data_path(session: Session) -> str | None:
    """The data path the lake's catalog records (its committed state)."""
    return stored_data_path(session.state)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """$HOME, which DuckDB reads a leading '~' as, inside the test's directory."""
    path = tmp_path / "home"
    path.mkdir()
    monkeypatch.setenv("HOME", str(path))
    return path


def _two_dirs(tmp_path: Path) -> tuple[Path, Path]:
    """Two working directories a process may run from."""
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    return first, second


@pytest.mark.parametrize("spelling", ["files/", "files", "./files", "sub/../files", "~/files"])
def test_a_relative_data_path_resolves_as_ducklake_resolves_it(
    spelling: str, tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cwd = tmp_path / "cwd"
    (cwd / "sub").mkdir(parents=True)  # DuckDB walks 'sub/..' on disk
    monkeypatch.chdir(cwd)
    con = _stock(tmp_path / "stock.db", _stock_data_path(spelling))
    try:
        con.execute(f"CREATE TABLE l.stock AS SELECT range AS i FROM range({ROWS})")
    finally:
        con.close()
    url = (tmp_path / "lake").as_uri()
    with connect(url, data_path=spelling) as session:
        session.sql(f"CREATE TABLE slate AS SELECT range AS i FROM range({ROWS})")
        stored = _stored_data_path(session)
    (stock_place,) = _table_dirs(tmp_path, "stock")
    assert _table_dirs(tmp_path, "slate") == {stock_place}
    assert stock_place == (home if spelling.startswith("~") else cwd) / "files"
    # the catalog keeps the place, absolute, not the text read against a directory
    assert stored == f"{stock_place}/"


def test_stock_ducklake_reads_a_relative_data_path_against_each_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Why a session stores the resolved path: stock DuckLake keeps 'files/'
    and, reopened from another directory, writes (and looks) there."""
    first, second = _two_dirs(tmp_path)
    meta = tmp_path / "stock.db"
    for where in (first, second):
        monkeypatch.chdir(where)
        con = _stock(meta, _stock_data_path("files/") if where == first else "")
        try:
            con.execute("CREATE TABLE IF NOT EXISTS l.t (i INTEGER)")
            con.execute(f"INSERT INTO l.t SELECT range FROM range({ROWS})")
            stored = con.execute(
                "SELECT value FROM __ducklake_metadata_l.ducklake_metadata WHERE key = 'data_path'"
            ).fetchone()
        finally:
            con.close()
        assert stored == ("files/",)
    assert _table_dirs(tmp_path, "t") == {first / "files", second / "files"}


def test_reopening_without_a_data_path_finds_the_relative_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = _two_dirs(tmp_path)
    url = (tmp_path / "lake").as_uri()
    monkeypatch.chdir(first)
    with connect(url, data_path="files/") as session:
        session.sql(f"CREATE TABLE t AS SELECT range AS i FROM range({ROWS})")
    monkeypatch.chdir(second)
    with connect(url) as session:
        assert session.sql("SELECT count(*) FROM t").fetchone() == (ROWS,)
        session.sql(f"INSERT INTO t SELECT range FROM range({ROWS})")
        assert session.sql("SELECT count(*) FROM t").fetchone() == (2 * ROWS,)
    with connect(url, data_path="") as session:  # empty: none given, as in DuckLake
        session.sql(f"INSERT INTO t SELECT range FROM range({ROWS})")
    assert _table_dirs(tmp_path, "t") == {first / "files"}
    assert list(second.iterdir()) == []


def test_a_session_resolves_its_relative_data_path_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chdir while the session is open (and the reloads after it) moves nothing."""
    first, second = _two_dirs(tmp_path)
    url = (tmp_path / "lake").as_uri()
    monkeypatch.chdir(first)
    with connect(url, data_path="files/") as session:
        session.sql(f"CREATE TABLE t AS SELECT range AS i FROM range({ROWS})")
        monkeypatch.chdir(second)
        with connect(url) as other:  # another writer: this session reloads its copy
            other.sql(f"INSERT INTO t SELECT range FROM range({ROWS})")
        session.sql(f"INSERT INTO t SELECT range FROM range({ROWS})")
        assert session.sql("SELECT count(*) FROM t").fetchone() == (3 * ROWS,)
        assert session.data_path == f"{first}/files/"  # resolved at connect
    assert _table_dirs(tmp_path, "t") == {first / "files"}
    assert list(second.iterdir()) == []


def test_a_mismatched_relative_data_path_is_refused_in_ducklakes_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = _two_dirs(tmp_path)
    monkeypatch.chdir(first)
    meta = tmp_path / "stock.db"
    _stock(meta, _stock_data_path("files/")).close()
    with pytest.raises(duckdb.Error) as stock_err:
        _stock(meta, _stock_data_path("elsewhere/"))
    assert 'DATA_PATH parameter "elsewhere/" does not match existing data path' in str(
        stock_err.value
    )
    url = (tmp_path / "lake").as_uri()
    with connect(url, data_path="files/") as session:
        session.sql("CREATE TABLE t (i INTEGER)")
    with pytest.raises(MisconfigurationError) as err:
        connect(url, data_path="elsewhere/")
    assert (
        f'DATA_PATH parameter "{first}/elsewhere/" does not match existing data path in the '
        f'catalog "{first}/files/"'
    ) in str(err.value)
    # the same spelling read from another directory names another place: refused
    # (stock DuckLake compares the text, takes it, and writes under the new directory)
    monkeypatch.chdir(second)
    with pytest.raises(MisconfigurationError, match="does not match existing data path") as err:
        connect(url, data_path="files/")
    assert f'"{second}/files/"' in str(err.value)
    assert list(second.iterdir()) == []


def test_a_relative_spelling_of_the_lakes_own_place_is_accepted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sessions compare places, not text: './files', 'files' and the absolute
    path name one directory (stock DuckLake refuses './files/' against 'files/')."""
    monkeypatch.chdir(tmp_path)
    url = (tmp_path / "lake").as_uri()
    with connect(url, data_path="files/") as session:
        session.sql("CREATE TABLE t (i INTEGER)")
    for spelling in ("files", "./files", "sub/../files", f"{tmp_path}/files", "files//"):
        (tmp_path / "sub").mkdir(exist_ok=True)
        with connect(url, data_path=spelling) as session:
            session.sql("INSERT INTO t VALUES (1)")
    with connect(url, read_only=True) as session:
        assert session.sql("SELECT count(*) FROM t").fetchone() == (5,)


@pytest.mark.parametrize(
    "spelling",
    [
        "../lake",  # the lake root itself
        "../lake/",
        "../lake/store",  # the store inside it
        "files/../../lake/store",
        "../lake/files/../store",
        "..",  # a directory holding the lake
        "../lake/store/../../lake",
        "link/data",  # a symlink to the lake root
        "~/data",  # $HOME is the lake root
        "~",
    ],
)
def test_a_relative_data_path_cannot_reach_the_store(
    spelling: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cwd, root = tmp_path / "cwd", tmp_path / "lake"
    (cwd / "files").mkdir(parents=True)
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("HOME", str(root))
    url = root.as_uri()
    (cwd / "link").symlink_to(root)  # dangling until the lake exists
    with pytest.raises(MisconfigurationError, match="overlaps the lake root"):
        connect(url, data_path=spelling)
    assert not root.exists(), "a refused data path created the lake"
    with connect(url, data_path=str(tmp_path / "data")) as session:
        session.sql("CREATE TABLE t (i INTEGER)")
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    with pytest.raises(MisconfigurationError, match="overlaps the lake root"):
        connect(url, data_path=spelling)
    assert sorted(p.relative_to(root) for p in root.rglob("*")) == before


@pytest.mark.parametrize("spelling", ["files/", "./files", "~/files"])
def test_an_s3_lake_refuses_a_relative_data_path_naming_the_fix(
    spelling: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Lambda or another machine opening the lake shares no current directory:
    refused before any store is reached (no server runs for this test)."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(MisconfigurationError) as err:
        connect("s3://bucket/lake", data_path=spelling)
    text = str(err.value)
    assert repr(spelling) in text and "relative" in text and "s3://bucket/data" in text
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("spelling", "says"),
    [
        ("s3:/bucket/data", "starts like a URL scheme"),  # a mistyped URL, not a directory
        ("s3:bucket", "starts like a URL scheme"),
        ("~other/data", "not that user's home"),  # DuckDB would write $HOME + 'other/data'
        ("files/*", "glob"),
    ],
)
def test_a_relative_spelling_that_names_another_place_than_it_seems_is_refused(
    spelling: str, says: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(MisconfigurationError, match=says):
        connect((tmp_path / "lake").as_uri(), data_path=spelling)
    assert list(tmp_path.iterdir()) == []


def test_an_empty_data_path_is_none_given_as_in_ducklake(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    meta = tmp_path / "stock.db"
    _stock(meta, _stock_data_path(f"{tmp_path}/stock-data/")).close()
    con = _stock(meta, _stock_data_path(""))  # the catalog's own, no mismatch
    try:
        stored = con.execute(
            "SELECT value FROM __ducklake_metadata_l.ducklake_metadata WHERE key = 'data_path'"
        ).fetchone()
    finally:
        con.close()
    assert stored == (f"{tmp_path}/stock-data/",)
    url = (tmp_path / "lake").as_uri()
    with pytest.raises(NotFoundError, match="create it by connecting with a data path"):
        connect(url, data_path="")
    assert not (tmp_path / "lake").exists()


def test_a_lake_without_a_catalog_is_never_given_ducklakes_default_data_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DuckLake's default sits beside its metadata database; the session's is
    in memory, so the default would be ':memory:.files/' under the current
    directory. Refused in DuckLake's words for a catalog with no file."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    url = (tmp_path / "lake").as_uri()
    Lake.create(url).close()  # the substrate only (slatelake init LAKE)
    with pytest.raises(MisconfigurationError) as err:
        connect(url)
    assert "data_path is not set - set the DATA_PATH parameter" in str(err.value)
    assert f"slatelake sql {url} --data-path PATH" in str(err.value)
    assert list(cwd.iterdir()) == []
    with connect(url, data_path="files") as session:
        session.sql(f"CREATE TABLE t AS SELECT range AS i FROM range({ROWS})")
    assert _table_dirs(tmp_path, "t") == {cwd / "files"}


def test_the_cli_resolves_a_relative_data_path_as_a_session_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    made, used = (tmp_path / "made").as_uri(), (tmp_path / "used").as_uri()
    assert main(["init", made, "--data-path", "files"]) == 0
    assert f"with data path {cwd}/files" in capsys.readouterr().out
    create = f"CREATE TABLE t AS SELECT range AS i FROM range({ROWS})"
    assert main(["sql", made, "-c", create]) == 0
    assert main(["sql", used, "--data-path", "./other/", "-c", create]) == 0
    assert _table_dirs(tmp_path, "t") == {cwd / "files", cwd / "other"}
    capsys.readouterr()
    assert main(["init", "s3://bucket/lake", "--data-path", "files"]) == 1
    assert "s3://bucket/data" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(["init", (tmp_path / "empty").as_uri(), "--data-path", ""])
    assert exit_.value.code == 2
    with connect(made, read_only=True) as session:
        assert session.sql("SELECT count(*) FROM t").fetchone() == (ROWS,)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cwd", "made", "used"]


def test_override_data_path_reads_a_mirror_and_is_taken_only_read_only(tmp_path: Path) -> None:
    """DuckLake's OVERRIDE_DATA_PATH: this attach reads the files from another
    place (a copy, a mount), the catalog keeps its own; a writer is refused,
    since the lake's maintenance goes by the catalog's path."""
    import shutil

    url, data, mirror = (tmp_path / "lake").as_uri(), tmp_path / "data", tmp_path / "mirror"
    with connect(url, data_path=f"{data}/") as s:
        s.sql(f"CREATE TABLE t AS SELECT i FROM range({ROWS}) r(i)")
    shutil.copytree(data, mirror)
    shutil.rmtree(data)  # only the mirror holds the files now
    with connect(url, data_path=f"{mirror}/", read_only=True, override_data_path=True) as s:
        assert s.sql("SELECT count(*), sum(i) FROM t").fetchone() == (ROWS, sum(range(ROWS)))
        tags = "SELECT tags['data_path'] FROM duckdb_databases() WHERE database_name = 'lake'"
        assert s.sql(tags).fetchone() == (f"{mirror}/",)
    with connect(url, read_only=True) as s:  # the catalog keeps its own path
        assert _stored_data_path(s) == f"{data}/"
    with pytest.raises(MisconfigurationError, match="connect read-only, or without the override"):
        connect(url, data_path=f"{mirror}/", override_data_path=True)
    with pytest.raises(MisconfigurationError, match="give DATA_PATH"):
        connect(url, read_only=True, override_data_path=True)
    with pytest.raises(MisconfigurationError, match="does not match existing data path"):
        connect(url, data_path=f"{mirror}/", read_only=True)  # no override: DuckLake's refusal
