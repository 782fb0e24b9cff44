"""The stock DuckLake workload and the comparisons the transfer tests share.

The source catalogs are written by stock DuckLake 1.5.5 with inlined data,
Parquet and inlined deletes, updates, schema changes, a view, a tag, a
partitioned table, dropped tables and expired snapshots. ``raw_tables``
reads every ``ducklake_*`` table as a multiset (with column types and
constraints); ``dump`` reads every object now and at every retained
snapshot through DuckLake.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb

from slatelake.ducklake import extensions
from slatelake.ducklake.catalog_file import load_sqlite
from slatelake.ducklake.session import META_DB, connect
from slatelake.ducklake.tables import select_list, table_columns

WORKLOAD = [
    "CREATE SCHEMA s1",
    "CREATE TABLE t1 (id INTEGER, name VARCHAR, ts TIMESTAMPTZ, tags STRUCT(a INTEGER, b VARCHAR))",
    "CREATE TABLE s1.t2 (k BIGINT, v DOUBLE)",
    # inlined (DATA_INLINING_ROW_LIMIT 10), then Parquet
    "INSERT INTO t1 VALUES (1, 'a', TIMESTAMPTZ '2026-01-01 00:00:00+00', {'a': 1, 'b': 'x'}), "
    "(2, 'b', NULL, NULL)",
    "INSERT INTO t1 SELECT i, 'n' || i, TIMESTAMPTZ '2026-01-02 00:00:00+00' + i * INTERVAL 1 "
    "SECOND, {'a': i, 'b': 'y'} FROM range(10, 200) r(i)",
    "INSERT INTO s1.t2 SELECT i, i * 1.5 FROM range(100) r(i)",
    "UPDATE t1 SET name = 'upd' WHERE id IN (1, 50)",
    "DELETE FROM t1 WHERE id % 7 = 0",  # a Parquet delete file
    "DELETE FROM t1 WHERE id IN (2, 11)",  # inlined deletes
    "ALTER TABLE t1 ADD COLUMN extra INTEGER",
    "INSERT INTO t1 VALUES (500, 'x', NULL, NULL, 5)",
    "ALTER TABLE t1 RENAME COLUMN name TO label",
    "ALTER TABLE t1 DROP COLUMN extra",
    "CREATE VIEW v1 AS SELECT id, label FROM t1 WHERE id < 20",
    "COMMENT ON TABLE t1 IS 'the first table'",
    "CREATE TABLE p (g INTEGER, x INTEGER)",
    "ALTER TABLE p SET PARTITIONED BY (g)",
    "INSERT INTO p SELECT i % 3, i FROM range(30) r(i)",
    "DELETE FROM s1.t2 WHERE k < 10",
    "DROP TABLE s1.t2",
    "INSERT INTO t1 VALUES (600, 'y', NULL, NULL)",
    "CREATE TABLE gone AS SELECT i FROM range(50) r(i)",
    "DROP TABLE gone",
]
# Snapshots 2, 3, 6 and the one that created 'gone' (its files become scheduled).
EXPIRE = "SELECT count(*) FROM ducklake_expire_snapshots('lake', versions => [2, 3, 6, 22])"
OBJECTS = ("t1", "s1.t2", "v1", "p", "gone")


def attach_stock(con: duckdb.DuckDBPyConnection, spec: str, data: str) -> None:
    """Stock DuckLake on catalog ``spec`` as 'lake', inlining up to 10 rows."""
    con.execute(
        f"ATTACH 'ducklake:{spec}' AS lake (DATA_PATH '{data}', DATA_INLINING_ROW_LIMIT 10)"
    )
    con.execute("USE lake")


def build_stock(spec: str, data: str, sqlite: bool = False) -> None:
    """Run the workload with stock DuckLake on catalog ``spec`` (a path, or
    'sqlite:path'), then expire snapshots."""
    con = extensions.connect()
    try:
        if sqlite:
            load_sqlite(con)
        attach_stock(con, spec, data)
        for statement in WORKLOAD:
            con.execute(statement)
        assert con.execute(EXPIRE).fetchall() == [(4,)]  # all fetched: the expiry commits
        con.execute("USE memory")
        con.execute("DETACH lake")
    finally:
        con.close()


# -- what is compared ------------------------------------------------------------------
def raw_tables(con: duckdb.DuckDBPyConnection, db: str) -> dict[str, Any]:
    """Every ducklake_* table of a database: columns and types, rows as a
    multiset (sorted), and the constraints."""
    names = sorted(
        n
        for (n,) in con.execute(
            "SELECT DISTINCT table_name FROM duckdb_columns() WHERE database_name = ? "
            "AND table_name LIKE 'ducklake_%'",
            [db],
        ).fetchall()
    )
    out: dict[str, Any] = {}
    for name in names:
        columns = table_columns(con, db, name)
        rows = con.execute(f'SELECT {select_list(columns)} FROM "{db}"."{name}"').fetchall()
        out[name] = (columns, sorted(map(repr, rows)))
    out["constraints"] = sorted(
        con.execute(
            "SELECT table_name, constraint_text FROM duckdb_constraints() WHERE database_name = ?",
            [db],
        ).fetchall()
    )
    return out


def raw_file(path: Path) -> dict[str, Any]:
    con = duckdb.connect()
    try:
        con.execute(f"ATTACH '{path}' AS f (READ_ONLY)")
        return raw_tables(con, "f")
    finally:
        con.close()


def _rows(con: duckdb.DuckDBPyConnection, sql: str) -> Any:
    try:
        return sorted(map(repr, con.execute(sql).fetchall()))
    except duckdb.Error as exc:
        return f"error: {type(exc).__name__}"


def dump(
    con: duckdb.DuckDBPyConnection, alias: str = "lake", snapshots: bool = True
) -> dict[str, Any]:
    """Snapshots and what every object reads now and at every retained snapshot."""
    con.execute("SET TimeZone = 'UTC'")
    snaps = con.execute(
        "SELECT snapshot_id, schema_version, CAST(snapshot_time AS VARCHAR), "
        f"CAST(changes AS VARCHAR) FROM {alias}.snapshots() ORDER BY 1"
    ).fetchall()
    out: dict[str, Any] = {"snapshots": snaps, "now": {}, "at": {}}
    for obj in OBJECTS:
        out["now"][obj] = _rows(con, f"SELECT CAST(COLUMNS(*) AS VARCHAR) FROM {alias}.{obj}")
    for snap, *_ in snaps if snapshots else ():
        out["at"][snap] = {
            obj: _rows(
                con, f"SELECT CAST(COLUMNS(*) AS VARCHAR) FROM {alias}.{obj} AT (VERSION => {snap})"
            )
            for obj in OBJECTS
        }
    return out


def dump_stock(spec: str, sqlite: bool = False) -> dict[str, Any]:
    """What stock DuckLake (a connection with no slatelake session) reads."""
    con = extensions.connect()
    try:
        if sqlite:
            load_sqlite(con)
        con.execute(f"ATTACH 'ducklake:{spec}' AS lake (READ_ONLY)")
        return dump(con)
    finally:
        con.close()


def dump_lake(url: str) -> dict[str, Any]:
    with connect(url, read_only=True) as session:
        return dump(session.con)


def meta_rows(url: str) -> dict[str, Any]:
    """The lake's catalog rows as a slatelake session loads them."""
    with connect(url, read_only=True) as session:
        # the session's copy is hidden from DuckDB's listings: list a visible copy of it
        session.con.execute("ATTACH ':memory:' AS __raw")
        try:
            session.con.execute(f"COPY FROM DATABASE {META_DB} TO __raw")
            tables = raw_tables(session.con, "__raw")
        finally:
            session.con.execute("DETACH __raw")
    tables.pop("constraints")
    return {name: rows for name, (_, rows) in tables.items()}


def rows_only(raw: dict[str, Any]) -> dict[str, Any]:
    return {name: v[1] for name, v in raw.items() if name != "constraints"}
