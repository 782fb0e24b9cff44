"""Flushing more inlined rows than the change-set cap (SLATELAKE_MAX_CHANGESET_OPS).

DuckLake 1.5.5 flushes a table by removing every one of its inlined rows:
the current schema version's inlined-data table is emptied, an older
version's is dropped, and the inlined-deletion table is emptied. Each of
those is one range delete in the change set, so the flush of a table holding
any number of inlined rows is one slot of a handful of operations, and the
lake reads the same rows after it, from the log and after the holder folded.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import slatelake
from slatelake.catalog.folder import Folder
from slatelake.log.changeset import ChangeSet
from slatelake.maintenance.report import RAN
from slatelake.store.location import LakeLocation
from tests.ducklake.test_hidden_catalogs import listed_tables

FLUSH = {"MAINTENANCE_FLUSH_INLINED_DATA": "true"}
CAP = 30
META = "__slatelake_meta"


@pytest.fixture(params=["file", "s3"])
def inlined(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[str, list[tuple[int, int | None]], int]:
    """Table ``big``: 60 inlined rows over two schema versions (3 of them
    deleted, so ended but still inlined); table ``p``: 1000 rows in Parquet
    with 40 deletions inlined. Built under the default cap.
    Returns (url, big's rows, p's row count)."""
    monkeypatch.setenv("SLATELAKE_VERIFY_CAPTURE", "1")
    if request.param == "s3":
        bucket = request.getfixturevalue("s3_bucket")
        url, data = f"s3://{bucket}/lake", f"s3://{bucket}/data/"
    else:
        url, data = (tmp_path / "lake").as_uri(), f"{tmp_path / 'data'}/"
    with slatelake.connect(url, data_path=data) as s:
        s.sql("CREATE TABLE big (id INTEGER)")
        for i in range(8):
            s.sql(f"INSERT INTO big SELECT * FROM range({i * 5}, {i * 5 + 5})")
        s.sql("ALTER TABLE big ADD COLUMN w INTEGER")
        for i in range(8, 12):
            s.sql(f"INSERT INTO big SELECT i, i FROM range({i * 5}, {i * 5 + 5}) t(i)")
        s.sql("DELETE FROM big WHERE id IN (3, 17, 44)")
        s.sql("CREATE TABLE p (id INTEGER)")
        s.sql("INSERT INTO p SELECT * FROM range(1000)")
        for i in range(8):  # small deletions are inlined, not written as delete files
            s.sql(f"DELETE FROM p WHERE id >= {i * 5} AND id < {i * 5 + 5}")
        assert _inlined_rows(s, "big") > CAP and _inlined_rows(s, "p") > CAP
        big = sorted(s.sql("SELECT id, w FROM big").fetchall())
        count = s.sql("SELECT count(*) FROM p").fetchone()[0]
    assert len(big) == 57 and count == 960
    return url, big, count


def _inlined_rows(session, table: str) -> int:  # noqa: ANN001
    """Rows DuckLake holds inline for ``table``: inlined data and deletions."""
    table_id = session.sql(
        f"SELECT table_id FROM {META}.ducklake_table WHERE table_name = ? AND end_snapshot IS NULL",
        [table],
    ).fetchone()[0]
    # the session's metadata database is hidden from DuckDB's listings
    names = [
        n
        for n in listed_tables(session.con, META)
        if n.startswith(f"ducklake_inlined_data_{table_id}_")
        or n == f"ducklake_inlined_delete_{table_id}"
    ]
    return sum(session.sql(f'SELECT count(*) FROM {META}."{n}"').fetchone()[0] for n in names)


def _reads(url: str) -> tuple[list[tuple[int, int | None]], int]:
    with slatelake.connect(url, read_only=True) as s:
        assert _inlined_rows(s, "big") == 0 and _inlined_rows(s, "p") == 0
        return sorted(s.sql("SELECT id, w FROM big").fetchall()), s.sql(
            "SELECT count(*) FROM p"
        ).fetchone()[0]


def test_a_table_holding_more_inlined_rows_than_the_cap_flushes_in_one_small_slot(
    inlined: tuple[str, list[tuple[int, int | None]], int], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, big, count = inlined
    monkeypatch.setenv("SLATELAKE_MAX_CHANGESET_OPS", str(CAP))
    with slatelake.connect(url, options=FLUSH) as s:
        before = s.lake.log.list_after(0)
        first_new = max(info.seq for info in before) + 1
        report = s.maintenance()
        flush = report.step("flush_inlined_data")
        assert flush.status == RAN, flush.detail
        assert flush.counts["rows_flushed"] > CAP
        assert _inlined_rows(s, "big") == 0 and _inlined_rows(s, "p") == 0
        slots = [(info.seq, s.lake.log.read(info.seq)) for info in s.lake.log.list_after(0)]
    # DuckLake commits of the pass (its status record is head-preserving): one per table.
    flushes: list[ChangeSet] = [
        cs for seq, sets in slots if seq >= first_new for cs in sets or [] if cs.mints_snapshot
    ]
    made = sorted(cs.changes_made for cs in flushes)
    assert made == ["deleted_from_table:2", "inline_flush:1"], made
    for cs in flushes:
        assert cs.operations <= 15, (cs.changes_made, cs.operations)
        assert cs.ranges, "the inlined rows were not removed by a range delete"
    assert not report.work_pending

    assert _reads(url) == (big, count)  # a fresh session replays the log
    folder = Folder(LakeLocation.parse(url), margin_s=0)
    try:
        folded = folder.fold_once()
        assert folded.fold_seq == max(seq for seq, _ in slots)
    finally:
        folder.close()
    assert _reads(url) == (big, count)  # the holder folded: read from the store
