"""What capture costs DuckDB per commit, as a shape (not a timing).

Capture lists the metadata tables after every DuckLake commit. Listing them
through ``duckdb_tables()`` makes DuckLake compute (and cache, for good) the
size statistics of every table in the lake at the new snapshot, so each
commit cost memory and time in proportion to the number of tables: a pass
over 160 tables spent two thirds of its time there and its RSS rose with
every commit. A commit must cost what it changed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

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


# Run where pandas cannot be found: every meta-path finder is wrapped so it
# finds nothing named pandas and counts how often it was asked.
_WITHOUT_PANDAS = """
import sys
class Hide:
    asked = 0
    def __init__(self, finder):
        self.finder = finder
    def __getattr__(self, name):
        return getattr(self.finder, name)
    def find_spec(self, name, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            Hide.asked += 1
            return None
        return self.finder.find_spec(name, path, target)
sys.meta_path[:] = [Hide(f) for f in sys.meta_path]
from slatelake.ducklake.session import Session
with Session(sys.argv[1], data_path=sys.argv[2]) as s:
    s.sql("CREATE TABLE t (id INTEGER, v VARCHAR)")
    Hide.asked = 0
    s.sql("INSERT INTO t VALUES (1, 'x')")
    s.sql("DELETE FROM t WHERE id = 1")
print(Hide.asked)
"""


@pytest.mark.slow
def test_a_commit_does_not_search_for_an_absent_pandas(tmp_path: Path) -> None:
    """DuckDB tries ``import pandas`` on each execute with parameters; without
    pandas (the Lambda has none) every try walked sys.path (~1 ms each,
    dozens per commit)."""
    lake, data = (tmp_path / "lake").as_uri(), f"{tmp_path / 'data'}/"
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_PANDAS, lake, data],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lookups = int(done.stdout.split()[-1])
    assert lookups == 0, f"two commits searched for pandas {lookups} times"
