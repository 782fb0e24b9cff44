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

pytestmark = pytest.mark.fast

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


# Listing a database's tables (duckdb_columns(), duckdb_tables()) walks every
# attached catalog, DuckLake's too: ~6 ms on a small lake, more on a large one.
_LISTINGS = ("duckdb_columns", "duckdb_tables", "information_schema")


@pytest.mark.parametrize("opened_from", ["store", "image"])
def test_a_reopened_session_lists_no_tables_once_ducklake_is_attached(
    opened_from: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its first commits (an inlined insert, a new table and its inlined rows)
    know the inlined tables from the open, which read them before DuckLake
    attached, and create a new one without looking it up first."""
    from slatelake.ducklake.image_writer import write_image
    from slatelake.ducklake.session import VERIFY_ENV
    from slatelake.store.location import LakeLocation
    from tests.catalog.helpers import fold_all
    from tests.ducklake.test_commit_cost_shape import _CountingCursor, _use_cursor

    monkeypatch.delenv(VERIFY_ENV, raising=False)  # the full-diff check lists on purpose
    url = (tmp_path / "lake").as_uri()
    with Session(url, data_path=f"{tmp_path / 'data'}/") as s:
        for i in range(3):
            s.sql(f"CREATE TABLE t{i} (id INTEGER, v VARCHAR)")
            s.sql(f"INSERT INTO t{i} VALUES ({i}, 'seed')")
    if opened_from == "image":
        fold_all(url)
        write_image(LakeLocation.parse(url))
    with Session(url) as s:
        assert s.state.source.startswith(opened_from), s.state.source
        counter = _CountingCursor(s._aux)
        assert "capture.con" in _use_cursor(s, counter)
        s.sql("INSERT INTO t1 VALUES (10, 'x')")
        s.sql("CREATE TABLE fresh (id INTEGER)")
        s.sql("INSERT INTO fresh VALUES (1)")
        assert sorted(s.sql("SELECT * FROM fresh").fetchall()) == [(1,)]
    listed = [q for q in counter.queries if any(name in q for name in _LISTINGS)]
    assert counter.queries and not listed, f"{len(listed)} listings, the first: {listed[:1]}"
