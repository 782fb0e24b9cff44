"""What capture costs DuckDB per commit, as a shape (not a timing).

Capture lists the metadata tables after every DuckLake commit. Listing them
through ``duckdb_tables()`` makes DuckLake compute (and cache, for good) the
size statistics of every table in the lake at the new snapshot, so each
commit cost memory and time in proportion to the number of tables: a pass
over 160 tables spent two thirds of its time there and its RSS rose with
every commit. A commit must cost what it changed.
"""

from __future__ import annotations

from pathlib import Path

from slatelake.ducklake.session import Session

TABLES = 20
# DuckLake keeps a few bytes per snapshot of its own; listing every table's
# statistics per commit cost ~120 KB here (300 bytes per table per commit).
ALLOWED_GROWTH = 4096


def _object_cache_bytes(session: Session) -> int:
    (used,) = session.con.execute(
        "SELECT memory_usage_bytes FROM duckdb_memory() WHERE tag = 'OBJECT_CACHE'"
    ).fetchone()
    return int(used)


def test_commits_do_not_grow_duckdbs_object_cache_with_the_lakes_tables(tmp_path: Path) -> None:
    with Session((tmp_path / "lake").as_uri(), data_path=f"{tmp_path / 'data'}/") as s:
        for i in range(TABLES):
            s.sql(f"CREATE TABLE t{i} (id INTEGER, v VARCHAR)")
        s.sql("INSERT INTO t0 VALUES (0, 'warm')")
        before = _object_cache_bytes(s)
        for i in range(TABLES):
            s.sql(f"INSERT INTO t{i} VALUES ({i}, 'x')")
        grown = _object_cache_bytes(s) - before
    assert grown < ALLOWED_GROWTH, (
        f"{TABLES} one-row commits grew DuckDB's object cache by {grown} bytes"
    )
