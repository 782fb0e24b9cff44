"""A script written for DuckDB runs unchanged on a slatelake session.

The same function is handed a stock DuckLake connection and a slatelake
session: results, replacement scans of the caller's DataFrames, ``register``,
parameters, ``executemany``, relations chained and turned into pandas, Arrow
and polars. Whatever the script sees must be the same on both.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest
from duckdb.sqltypes import DOUBLE

import slatelake
from slatelake.ducklake import extensions


def duckdb_script(con: Any) -> dict[str, Any]:
    """A user's DuckDB script: ``con`` is whatever they connected with."""
    seen: dict[str, Any] = {}
    con.sql("CREATE TABLE trips (id INTEGER, city VARCHAR, km DOUBLE)")
    con.execute("INSERT INTO trips VALUES (?, ?, ?)", [1, "Turku", 3.5])
    con.executemany("INSERT INTO trips VALUES (?, ?, ?)", [[2, "Oulu", 12.0], [3, "Vaasa", 7.25]])
    new_trips = pd.DataFrame(  # noqa: F841 - found by DuckDB in this frame
        {"id": [4, 5], "city": ["Turku", "Pori"], "km": [1.0, 40.5]}
    )
    con.sql("INSERT INTO trips SELECT * FROM new_trips")  # DuckDB's replacement scan
    con.register("cities", pd.DataFrame({"city": ["Turku", "Oulu"], "region": ["SW", "N"]}))
    seen["joined"] = con.sql(
        "SELECT id, region FROM trips JOIN cities USING (city) ORDER BY id"
    ).fetchall()
    seen["one"] = con.execute("SELECT count(*) FROM trips WHERE km > ?", [5]).fetchone()
    seen["named"] = con.execute("SELECT city FROM trips WHERE id = $id", {"id": 2}).fetchall()
    seen["df"] = con.sql("SELECT * FROM trips ORDER BY id").df()
    seen["arrow"] = con.sql("SELECT * FROM trips ORDER BY id").to_arrow_table()
    seen["polars"] = con.sql("SELECT * FROM trips ORDER BY id").pl()
    rel = con.sql("SELECT * FROM trips")
    seen["chained"] = rel.filter("km > 2").aggregate("count(*) AS n, sum(km) AS total").fetchall()
    seen["types"] = (rel.columns, [str(t) for t in rel.types])
    seen["updated"] = con.execute(
        "UPDATE trips SET km = km * 2 WHERE city = ?", ["Turku"]
    ).fetchall()
    seen["deleted"] = con.execute("DELETE FROM trips WHERE id = ?", [2]).fetchall()
    cursor = con.execute("SELECT id, km FROM trips ORDER BY id")
    seen["description"] = [d[0] for d in cursor.description]
    seen["fetchmany"] = (cursor.fetchmany(2), cursor.fetchall())
    seen["script"] = con.execute(
        "CREATE TABLE tags AS SELECT 1 AS t; SELECT t + 1 FROM tags"
    ).fetchall()
    con.begin()
    con.execute("INSERT INTO trips VALUES (9, 'Kemi', 2.0)")
    con.rollback()
    con.begin()
    con.execute("INSERT INTO trips VALUES (10, 'Lahti', 5.0)")
    con.commit()
    seen["after"] = con.sql("SELECT id FROM trips ORDER BY id").fetchall()
    seen["sum"] = con.sql("SELECT sum(km) FROM trips").fetchone()
    return seen


def idioms_script(con: Any, scratch: Path) -> dict[str, Any]:
    """More of a user's DuckDB habits: the connection's relation builders,
    ``append``, a Python UDF, COPY out and back in, ``read_parquet``,
    ``table``, ``values``, ``from_df``, ``from_arrow``, ``query`` and a
    relation's own ``insert_into``."""
    seen: dict[str, Any] = {}
    con.sql("CREATE TABLE readings (id INTEGER, sensor VARCHAR, value DOUBLE)")
    con.append(
        "readings", pd.DataFrame({"id": [1, 2], "sensor": ["a", "b"], "value": [50.0, 68.0]})
    )
    con.append(
        "readings", pd.DataFrame({"value": [86.0], "id": [3], "sensor": ["c"]}), by_name=True
    )
    con.table("readings").filter("id = 1").project("id + 10, sensor, value").insert_into("readings")
    seen["table"] = con.table("readings").order("id").fetchall()
    seen["values"] = con.values([1, "x", 2.5]).fetchall()
    seen["from_df"] = con.from_df(pd.DataFrame({"x": [1, 2, 3]})).aggregate("sum(x)").fetchall()
    seen["from_arrow"] = con.from_arrow(pa.table({"y": ["p", "q"]})).order("y").fetchall()
    con.create_function("celsius", lambda f: round((f - 32) * 5 / 9, 3), [DOUBLE], DOUBLE)
    con.sql(
        "INSERT INTO readings SELECT id + 100, sensor, celsius(value) FROM readings WHERE id < 3"
    )
    seen["udf"] = con.query("SELECT id, value FROM readings WHERE id > 100 ORDER BY id").fetchall()
    out = scratch / "readings.parquet"
    con.execute(f"COPY readings TO '{out}' (FORMAT parquet)")
    seen["read_parquet"] = con.read_parquet(str(out)).order("id").fetchall()
    con.sql("CREATE TABLE restored (id INTEGER, sensor VARCHAR, value DOUBLE)")
    seen["copy_in"] = con.execute(f"COPY restored FROM '{out}'").fetchall()
    con.sql(f"INSERT INTO restored SELECT * FROM read_parquet('{out}') WHERE id = 2")
    seen["restored"] = con.sql("SELECT count(*), sum(value) FROM restored").fetchall()
    con.checkpoint()
    seen["after_checkpoint"] = con.table("restored").count("*").fetchall()
    seen["all"] = con.sql("SELECT * FROM readings ORDER BY id").fetchall()
    return seen


def _stock(tmp_path: Path) -> Any:
    con = extensions.connect()
    catalog = tmp_path / "stock.ducklake"
    con.execute(f"ATTACH 'ducklake:{catalog}' AS lake (DATA_PATH '{tmp_path / 'stock'}/')")
    con.execute("USE lake")
    return con


def test_a_duckdb_script_sees_the_same_on_slatelake_as_on_stock(tmp_path: Path) -> None:
    stock = _stock(tmp_path)
    try:
        expected = duckdb_script(stock)
    finally:
        stock.close()
    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path / 'data'}/") as session:
        got = duckdb_script(session)
    pd.testing.assert_frame_equal(got.pop("df"), expected.pop("df"))
    assert got.pop("arrow").equals(expected.pop("arrow"))
    assert got.pop("polars").equals(expected.pop("polars"))
    assert got == expected
    with slatelake.connect(url, read_only=True) as fresh:  # and it all reached the lake
        assert fresh.sql("SELECT id FROM trips ORDER BY id").fetchall() == expected["after"]


def test_a_duckdb_script_of_relations_copy_and_udfs_sees_the_same_on_both(tmp_path: Path) -> None:
    (tmp_path / "stock_scratch").mkdir()
    (tmp_path / "scratch").mkdir()
    stock = _stock(tmp_path)
    try:
        expected = idioms_script(stock, tmp_path / "stock_scratch")
    finally:
        stock.close()
    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path / 'data'}/") as session:
        got = idioms_script(session, tmp_path / "scratch")
    assert got == expected
    with slatelake.connect(url, read_only=True) as fresh:  # and it all reached the lake
        assert fresh.sql("SELECT * FROM readings ORDER BY id").fetchall() == expected["all"]


def test_a_write_hands_back_duckdbs_row_count_as_a_relation(tmp_path: Path) -> None:
    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path / 'data'}/") as session:
        session.sql("CREATE TABLE t (id INTEGER)")
        inserted = session.sql("INSERT INTO t SELECT * FROM range(5)")
        assert inserted.columns == ["Count"] and inserted.fetchall() == [(5,)]
        assert inserted.fetchall() == [(5,)]  # fetched again: the insert does not run again
        assert session.sql("SELECT count(*) FROM t").fetchone() == (5,)
        assert session.sql("SET threads = 2") is None  # as DuckDB's sql answers a SET


def test_a_relation_of_a_maintenance_call_does_not_run_it_again(tmp_path: Path) -> None:
    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path / 'data'}/") as session:
        session.sql("CREATE TABLE t (id INTEGER)")
        for i in range(3):
            session.sql(f"INSERT INTO t VALUES ({i})")
        expired = session.sql(
            "SELECT snapshot_id FROM ducklake_expire_snapshots('lake', older_than => now()) "
            "ORDER BY snapshot_id"
        )
        first = expired.fetchall()
        assert len(first) == 4
        assert expired.df()["snapshot_id"].tolist() == [r[0] for r in first]
        snapshots = session.sql("SELECT count(*) FROM ducklake_snapshots('lake')").fetchone()
        assert snapshots == (1,)


@pytest.mark.parametrize("name", ["query", "params", "result", "self", "frame", "call"])
def test_a_dataframe_named_like_a_session_local_is_found(tmp_path: Path, name: str) -> None:
    """The replacement scan looks in the caller's frame, never the session's."""
    url = (tmp_path / "lake").as_uri()
    scope = {name: pd.DataFrame({"v": [7, 8]})}
    with slatelake.connect(url, data_path=f"{tmp_path / 'data'}/") as session:
        scope["session"] = session
        exec(f"session.sql('CREATE TABLE t AS SELECT * FROM {name}')", scope)
        assert session.sql("SELECT sum(v) FROM t").fetchone() == (15,)


def _ids(url: str) -> list[int]:
    with slatelake.connect(url, read_only=True) as fresh:
        return [r[0] for r in fresh.sql("SELECT id FROM t ORDER BY id").fetchall()]


@pytest.fixture
def lake(tmp_path: Path) -> tuple[str, str]:
    url, data = (tmp_path / "lake").as_uri(), f"{tmp_path / 'data'}/"
    with slatelake.connect(url, data_path=data) as session:
        session.sql("CREATE TABLE t (id INTEGER)")
    return url, data


def test_a_write_through_a_relation_is_committed_before_the_next_statement(
    lake: tuple[str, str],
) -> None:
    """DuckDB's relation API writes behind the session's back (``insert_into``,
    ``session.con``); DuckLake committed it to the session's copy, so the
    session commits it to the lake before it runs anything else."""
    url, data = lake
    with slatelake.connect(url, data_path=data) as session:
        session.sql("SELECT 1 AS id").insert_into("t")
        session.con.execute("INSERT INTO t VALUES (2)")
        assert session.sql("SELECT count(*) FROM t").fetchone() == (2,)
        assert _ids(url) == [1, 2]


def test_a_write_through_a_relation_is_committed_when_the_session_closes(
    lake: tuple[str, str],
) -> None:
    url, data = lake
    with slatelake.connect(url, data_path=data) as session:
        session.sql("SELECT 3 AS id").insert_into("t")
    assert _ids(url) == [3]


def test_a_write_outside_the_session_overtaken_by_another_is_refused_not_dropped(
    lake: tuple[str, str],
) -> None:
    url, data = lake
    with slatelake.connect(url, data_path=data) as session:
        session.sql("SELECT 4 AS id").insert_into("t")
        with slatelake.connect(url, data_path=data) as other:
            other.sql("INSERT INTO t VALUES (5)")
        with pytest.raises(slatelake.ConflictError, match="outside session.sql"):
            session.sql("SELECT count(*) FROM t")
        assert session.sql("SELECT id FROM t").fetchall() == [(5,)]  # the lake's, reloaded
    assert _ids(url) == [5]
