"""The session's own catalogs stay out of the user's sight, as stock DuckLake
hides its metadata catalog, while slatelake still finds every metadata table
by name: commits, capture (checked, ``SLATELAKE_VERIFY_CAPTURE=1`` in this
directory), reopening from an image, export and import all go on working."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from slatelake.catalog import registry
from slatelake.catalog.folder import Folder
from slatelake.cli.sql_complete import Names
from slatelake.ducklake import extensions
from slatelake.ducklake.commit_flow import BASE_DB, META_DB
from slatelake.ducklake.image_writer import write_image
from slatelake.ducklake.session import Session, connect
from slatelake.ducklake.signatures import present_tables
from slatelake.ducklake.sql import ident
from slatelake.ducklake.tables import meta_tables
from slatelake.ducklake.transfer import export_catalog, import_catalog
from slatelake.errors import UnsupportedError
from slatelake.store.location import LakeLocation

INTERNAL = "__slatelake"


@pytest.fixture
def lake(tmp_path: Path) -> tuple[str, Path]:
    url = (tmp_path / "lake").as_uri()
    data = tmp_path / "data"
    with connect(url, data_path=f"{data}/") as session:
        session.sql("CREATE TABLE t (id INTEGER, who VARCHAR)")
        session.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b')")  # inlined
    return url, data


def _databases(con: duckdb.DuckDBPyConnection) -> list[str]:
    return sorted(
        r[0] for r in con.execute("SELECT database_name FROM duckdb_databases()").fetchall()
    )


def _names(rows: list[tuple[object, ...]]) -> list[str]:
    return [str(v) for row in rows for v in row if isinstance(v, str) and INTERNAL in v]


def _stock_databases(tmp_path: Path) -> list[str]:
    """What plain DuckDB with the ducklake extension lists for one lake."""
    con = extensions.connect()
    try:
        con.execute(
            f"ATTACH 'ducklake:{tmp_path / 'stock.ducklake'}' AS lake "
            f"(DATA_PATH '{tmp_path / 'stock-data'}/')"
        )
        con.execute("CREATE TABLE lake.t AS SELECT 1 AS id")
        return _databases(con)
    finally:
        con.close()


def test_duckdb_databases_hides_the_sessions_own_catalogs(
    lake: tuple[str, Path], tmp_path: Path
) -> None:
    url, _ = lake
    with connect(url) as session:
        listed = _databases(session.con)
        assert listed == ["lake", "memory", "system", "temp"]
        # the same shape as stock DuckLake's: its metadata catalog is hidden too
        assert listed == _stock_databases(tmp_path)
        # hidden, not gone: slatelake reads them by name
        assert session.con.execute(f"SELECT count(*) FROM {META_DB}.ducklake_snapshot").fetchone()
        assert session.con.execute(f"SELECT count(*) FROM {BASE_DB}.ducklake_snapshot").fetchone()


def test_show_all_tables_lists_only_the_lake_and_the_users_databases(
    lake: tuple[str, Path],
) -> None:
    url, _ = lake
    with connect(url) as session:
        session.sql("ATTACH ':memory:' AS mine")
        session.sql("CREATE TABLE mine.notes (n INTEGER)")
        rows = session.sql("SHOW ALL TABLES").fetchall()
        assert sorted((r[0], r[2]) for r in rows) == [("lake", "t"), ("mine", "notes")]


def test_information_schema_and_duckdb_tables_show_only_user_tables(
    lake: tuple[str, Path],
) -> None:
    url, _ = lake
    with connect(url) as session:
        tables = session.sql("SELECT database_name, table_name FROM duckdb_tables()").fetchall()
        assert tables == [("lake", "t")]
        columns = session.sql("SELECT DISTINCT database_name FROM duckdb_columns()").fetchall()
        assert {c[0] for c in columns} <= {"lake", "system"}
        schema = session.sql(
            "SELECT table_catalog, table_name FROM information_schema.tables"
        ).fetchall()
        assert schema == [("lake", "t")]
        assert not _names(session.sql("SELECT * FROM duckdb_schemas()").fetchall())


def test_completion_offers_no_internal_names(lake: tuple[str, Path]) -> None:
    url, _ = lake
    with connect(url) as session:
        names = Names(session)
        words = names.words() | names.qualified()
        assert "t" in words and "lake.main.t" in words
        assert not [w for w in words if INTERNAL in w or w.startswith("ducklake_")]


def listed_tables(con: duckdb.DuckDBPyConnection, db: str, schema: str = "main") -> set[str]:
    """``db``'s tables as DuckDB's listing sees them once visible: a session's
    own databases are hidden, so their schema is copied into a visible
    scratch database and listed there (tests only: slatelake finds them by name)."""
    con.execute("ATTACH ':memory:' AS __listed")
    try:
        con.execute(f"COPY FROM DATABASE {ident(db)} TO __listed (SCHEMA)")
        rows = con.execute(
            "SELECT table_name FROM duckdb_tables() "
            "WHERE database_name = '__listed' AND schema_name = ?",
            [schema],
        ).fetchall()
    finally:
        con.execute("DETACH __listed")
    return {r[0] for r in rows}


def test_metadata_tables_listed_whole_or_by_name_are_every_table_the_catalog_holds(
    lake: tuple[str, Path],
) -> None:
    url, _ = lake
    with connect(url) as session:
        session.sql("CREATE TABLE u (x INTEGER)")  # a table with no inlined deletions
        session.sql("CALL ducklake_flush_inlined_data('lake')")
        session.sql("DELETE FROM t WHERE id = 1")  # inlined against the flushed file
        session.sql("INSERT INTO u VALUES (7)")
        whole = meta_tables(session.con, META_DB)  # listed through a schema copy
        assert whole == listed_tables(session.con, META_DB)
        assert {n for n in whole if registry.inline_table(n)} == {
            "ducklake_inlined_delete_1",
            "ducklake_inlined_data_1_1",
            "ducklake_inlined_data_2_2",
        }
        assert "slatelake_index" not in whole
        # by name, from what the session's state knows: the same tables
        known = session.state.inline_names()
        assert meta_tables(session.con, META_DB, known) == whole
        base = listed_tables(session.con, BASE_DB)
        assert "slatelake_index" in base and meta_tables(session.con, BASE_DB) == base
        assert meta_tables(session.con, BASE_DB, known) == base - {"slatelake_index"}
        # a listing leaves nothing attached or visible behind
        assert _databases(session.con) == ["lake", "memory", "system", "temp"]


def test_a_table_slatelake_does_not_know_is_still_seen_and_refused(
    lake: tuple[str, Path],
) -> None:
    """The hidden copy is listed whole where capture cannot vouch for a
    write: a table the registry lacks shows, and is refused by name."""
    url, _ = lake
    with connect(url) as session:
        session.con.execute(f"CREATE TABLE {META_DB}.ducklake_future (i INTEGER)")
        assert "ducklake_future" in meta_tables(session.con, META_DB)
        with pytest.raises(UnsupportedError, match="ducklake_future"):
            present_tables(session.con, META_DB)


def test_inlined_insert_then_flush_commits_and_captures(lake: tuple[str, Path]) -> None:
    url, data = lake
    with connect(url) as session:
        assert session.verify  # every capture checked against the committed state
        session.sql("INSERT INTO t VALUES (3, 'c')")
        session.sql("CALL ducklake_flush_inlined_data('lake')")
        session.sql("DELETE FROM t WHERE id = 1")  # a deletion against the flushed file
        session.sql("INSERT INTO t VALUES (4, 'd')")
    assert list(data.rglob("*.parquet"))
    with connect(url, read_only=True) as session:
        rows = session.sql("SELECT * FROM t ORDER BY id").fetchall()
        assert rows == [(2, "b"), (3, "c"), (4, "d")]
        assert _databases(session.con) == ["lake", "memory", "system", "temp"]


def test_a_session_reopened_from_an_image_keeps_its_catalogs_hidden(
    lake: tuple[str, Path],
) -> None:
    url, _ = lake
    folder = Folder(LakeLocation.parse(url), margin_s=0)
    try:
        folder.fold_once(truncate=False)
    finally:
        folder.close()
    write_image(LakeLocation.parse(url))
    with connect(url) as session:  # the session writes the image's tail on top
        session.sql("INSERT INTO t VALUES (9, 'z')")
    with Session(url) as session:
        assert session.state.source.startswith("image")
        assert _databases(session.con) == ["lake", "memory", "system", "temp"]
        session.sql("INSERT INTO t VALUES (5, 'e')")
        assert session.sql("SELECT count(*) FROM t").fetchone() == (4,)
        assert meta_tables(session.con, META_DB) == listed_tables(session.con, META_DB)
        assert not _names(session.sql("SHOW ALL TABLES").fetchall())


def test_export_and_import_still_carry_every_metadata_table(
    lake: tuple[str, Path], tmp_path: Path
) -> None:
    url, data = lake
    target = tmp_path / "exported.ducklake"
    report = export_catalog(url, target)
    assert any(name.startswith("ducklake_inlined_data_") for name in report.tables)
    back = (tmp_path / "back").as_uri()
    import_catalog(target, back, data_path=f"{data}/")
    with connect(back, read_only=True) as session:
        assert session.sql("SELECT * FROM t ORDER BY id").fetchall() == [(1, "a"), (2, "b")]
        assert _databases(session.con) == ["lake", "memory", "system", "temp"]
