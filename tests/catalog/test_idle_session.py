"""Through DuckLake: a session that idled while the folder truncated the log.

Session A reads once and idles past its reader lease; session B inserts three
rows; the folder folds and truncates every slot it may; A then inserts five
rows, each acknowledged. Every acknowledged row must be there, once, both
before and after the folder folds A's commits.
"""

from __future__ import annotations

from pathlib import Path

from slatelake.ducklake.session import connect
from tests.catalog.helpers import fold_all


def _ids(url: str) -> list[int]:
    with connect(url, read_only=True) as reader:
        return [r[0] for r in reader.sql("SELECT id FROM t ORDER BY id").fetchall()]


def test_session_idle_past_its_lease_loses_no_acknowledged_insert(
    shared_lake_url: str, tmp_path: Path
) -> None:
    url = shared_lake_url
    with connect(url, data_path=f"{tmp_path}/data/") as setup:
        setup.sql("CREATE TABLE t (id INTEGER)")
    fold_all(url)
    a = connect(url)
    try:
        assert a.sql("SELECT count(*) FROM t").fetchone() == (0,)
        a.lake.lease.release()  # idled past its TTL: the folder no longer sees it
        with connect(url) as b:
            for i in (100, 101, 102):
                b.sql(f"INSERT INTO t VALUES ({i})")
        fold_all(url)
        for i in range(1, 6):
            a.sql(f"INSERT INTO t VALUES ({i})")
    finally:
        a.close()
    expected = [1, 2, 3, 4, 5, 100, 101, 102]
    assert _ids(url) == expected
    fold_all(url)
    assert _ids(url) == expected
