"""The oracle workload and a dump that compares two DuckLakes row for row.

Run in a child process (``python -m tests.ducklake.oracle LAKE``) the dump
opens a fresh read-only slatelake session, i.e. a fresh materialization.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import duckdb

WORKLOAD = [
    "CREATE SCHEMA s1",
    "CREATE TABLE t1 (id INTEGER, name VARCHAR)",
    "CREATE TABLE s1.t2 (k BIGINT, v DOUBLE)",
    "INSERT INTO t1 VALUES (1, 'a'), (2, 'b')",  # inlined
    "INSERT INTO t1 SELECT i, 'n' || i FROM range(10, 200) r(i)",  # Parquet
    "INSERT INTO s1.t2 SELECT i, i * 1.5 FROM range(100) r(i)",
    "UPDATE t1 SET name = 'upd' WHERE id IN (1, 50)",
    "DELETE FROM t1 WHERE id % 7 = 0",
    "DELETE FROM t1 WHERE id % 11 = 0",  # a second delete on the same files: DuckLake
    "UPDATE t1 SET name = name || '*' WHERE id % 13 = 1",  # replaces their delete files
    "ALTER TABLE t1 ADD COLUMN extra INTEGER",
    "INSERT INTO t1 VALUES (500, 'x', 5)",
    "ALTER TABLE t1 RENAME COLUMN name TO label",
    "ALTER TABLE t1 DROP COLUMN extra",
    "CREATE VIEW v1 AS SELECT id, label FROM t1 WHERE id < 20",
    "DELETE FROM s1.t2 WHERE k < 10",
    "DROP TABLE s1.t2",
    "INSERT INTO t1 VALUES (600, 'y')",
]
OBJECTS = ["t1", "s1.t2", "v1"]


def _rows(con: duckdb.DuckDBPyConnection, sql: str) -> Any:
    try:
        rows = con.execute(sql).fetchall()
    except duckdb.Error as exc:
        return f"error: {type(exc).__name__}"
    return sorted((list(r) for r in rows), key=repr)


def dump(con: duckdb.DuckDBPyConnection, catalog: str = "lake") -> dict[str, Any]:
    snaps = con.execute(
        f"SELECT snapshot_id, schema_version, changes FROM {catalog}.snapshots() ORDER BY 1"
    ).fetchall()
    out: dict[str, Any] = {
        "snapshots": [[s, v, {k: sorted(x) for k, x in (c or {}).items()}] for s, v, c in snaps],
        "now": {o: _rows(con, f"SELECT * FROM {catalog}.{o}") for o in OBJECTS},
        "at": {},
    }
    for snap, _, _ in snaps:
        out["at"][str(snap)] = {
            o: _rows(con, f"SELECT * FROM {catalog}.{o} AT (VERSION => {snap})") for o in OBJECTS
        }
    return out


def main(url: str) -> None:
    from slatelake.ducklake.session import connect

    with connect(url, read_only=True) as session:
        print(json.dumps(dump(session.con)))


if __name__ == "__main__":
    main(sys.argv[1])
    # The dump is complete and printed. Rarely (1 in ~30 runs on S3, seen before
    # this change too) native threads abort the interpreter's teardown with
    # SIGABRT after all work is done; that at-exit defect is tracked on its own
    # (closing note) and is not what this oracle checks, so leave without teardown.
    sys.stdout.flush()
    os._exit(0)
