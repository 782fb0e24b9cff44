"""Steps 7, 7b, 7c in the pass on real DuckLake: the RFC's live obligations
for the sweep (what a pass reclaims, and what it leaves)."""

from __future__ import annotations

from pathlib import Path

import pytest

import slatelake
from slatelake.catalog.changes import RowChanges
from slatelake.catalog.folder import Folder
from slatelake.catalog.indexes import EXACT, index_prefix
from slatelake.maintenance.report import FAILED, RAN, SKIPPED
from slatelake.store.keys import Subspace
from slatelake.store.location import LakeLocation

SWEEP = ("sweep_indexes", "sweep_file_stats", "sweep_inlined_tables")


@pytest.fixture
def lake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Table t (120 rows) with two indexes; table gone was dropped."""
    monkeypatch.setenv("SLATELAKE_VERIFY_CAPTURE", "1")
    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path / 'data'}/") as s:
        s.sql("CREATE TABLE t (id INTEGER, tag VARCHAR)")
        s.sql("INSERT INTO t SELECT i, 'g' || (i % 4) FROM range(120) r(i)")
        s.create_index("t", "id", name="by_id")
        s.create_index("t", "tag", name="by_tag")
    return url


def _store_index_keys(url: str, key_prefix: bytes) -> int:
    folder = Folder(LakeLocation.parse(url))
    try:
        folder.fold_once(truncate=False)
        return sum(1 for _ in folder.writer.scan_prefix(key_prefix))
    finally:
        folder.close()


def test_a_pass_reclaims_a_dropped_index_and_only_that(lake: str) -> None:
    with slatelake.connect(lake) as s:
        first = s.maintenance().step("sweep_indexes")
        assert (first.status, first.counts["index_entries_reclaimed"]) == (RAN, 0)
        by_id = next(i for i in s.list_indexes() if i.name == "by_id")
        tags = s.lookup("t", "tag", "g1")
        s.drop_index("by_id")
        snapshot = s.state.head.snapshot_id

        second = s.maintenance()
        row = second.step("sweep_indexes")
        assert row.status == RAN
        assert row.counts == {"indexes_swept": 1, "index_entries_reclaimed": 120, "batches": 1}
        assert f"index {by_id.index_id}: 120" in row.detail
        assert s.lookup("t", "tag", "g1") == tags  # the live index is spared
        assert s.state.head.snapshot_id == snapshot  # no DuckLake snapshot minted

        third = s.maintenance().step("sweep_indexes")
        assert third.counts["index_entries_reclaimed"] == 0
    assert _store_index_keys(lake, index_prefix(EXACT, by_id.index_id)) == 0
    assert _store_index_keys(lake, bytes((Subspace.INDEX,))) == 120  # by_tag's range


def test_a_step_ducklake_rejects_does_not_suppress_the_sweep(lake: str, tmp_path: Path) -> None:
    options = {
        "MAINTENANCE_MERGE_ADJACENT_FILES": "true",
        "MAINTENANCE_CLEANUP_OLD_FILES": "true",
        "MAINTENANCE_BATCH_SIZE": "50",
    }
    with slatelake.connect(lake) as s:
        s.sql("CREATE TABLE u (id INTEGER)")
        for lo in (0, 1000):
            s.sql(f"INSERT INTO u SELECT i FROM range({lo}, {lo + 1000}) r(i)")
        (lost,) = s.sql(
            "SELECT data_file FROM ducklake_list_files('lake', 'u') ORDER BY 1 LIMIT 1"
        ).fetchone()
    lost_file = Path(lost) if Path(lost).is_absolute() else tmp_path / "data" / lost
    lost_file.unlink()  # merge must read it: DuckLake fails the step
    with slatelake.connect(lake, options=options) as s:
        s.drop_index("by_tag")
        report = s.maintenance()
    merge = report.step("merge_adjacent_files")
    assert merge.status == FAILED, merge.detail
    cleanup = report.step("cleanup_old_files")
    assert cleanup.status == SKIPPED and "merge_adjacent_files" in cleanup.detail
    swept = report.step("sweep_indexes")
    assert swept.status == RAN
    assert swept.counts == {"indexes_swept": 1, "index_entries_reclaimed": 120, "batches": 3}
    assert report.work_pending  # the failed step, not the sweep


def test_a_pass_reclaims_stranded_file_stats_and_inlined_tables(
    lake: str,
) -> None:
    with slatelake.connect(lake) as s:
        s.sql("CREATE TABLE small (a INTEGER)")
        s.sql("INSERT INTO small VALUES (1), (2)")  # inlined: a live inlined table
        live_inline = set(s.state.inline_ddl())
        contents = sorted(s.sql("SELECT * FROM t").fetchall())
        # What a damaged catalog holds: statistics of a data file and an inlined
        # table of a table that exist nowhere, live or in history.
        damage = RowChanges().insert(
            "ducklake_file_column_stats",
            (90_001, 9_999, 1, 10, 5, 0, "1", "5", False, None),
            (90_001, 9_999, 2, 10, 5, 0, "a", "e", False, None),
        )
        gone = "ducklake_inlined_data_9999_1"
        damage.created_inline[gone] = [
            ("row_id", "BIGINT"),
            ("begin_snapshot", "BIGINT"),
            ("end_snapshot", "BIGINT"),
            ("a", "INTEGER"),
        ]
        damage.insert(gone, (0, 1, None, 1), (1, 1, None, 2), (2, 1, None, 3))
        damage.insert("ducklake_inlined_data_tables", (9_999, gone, 1))
        s.lake.commit(s.state, damage, mints_snapshot=False, changes_made="damage")
        s.catalog_changed()

        report = s.maintenance()
        stats, inlined = report.step("sweep_file_stats"), report.step("sweep_inlined_tables")
        assert (stats.status, inlined.status) == (RAN, RAN), stats.detail
        assert stats.counts == {"file_column_stats_reclaimed": 2, "file_stats_files": 1}
        assert inlined.counts == {"inlined_tables_reclaimed": 1, "inlined_rows_reclaimed": 3}
        assert set(s.state.inline_ddl()) == live_inline
        assert sorted(s.sql("SELECT * FROM t").fetchall()) == contents
        assert sorted(s.sql("SELECT * FROM small").fetchall()) == [(1,), (2,)]
        again = s.maintenance()
        assert again.step("sweep_file_stats").counts["file_column_stats_reclaimed"] == 0
        assert again.step("sweep_inlined_tables").counts["inlined_tables_reclaimed"] == 0


def test_sweep_switched_off_reports_all_three_skipped(lake: str) -> None:
    with slatelake.connect(lake, options={"MAINTENANCE_SWEEP_INDEXES": "false"}) as s:
        s.drop_index("by_id")
        report = s.maintenance()
    for step in SWEEP:  # each sweep's own switch defaults to MAINTENANCE_SWEEP_INDEXES
        assert (report.step(step).status, report.step(step).detail) == (
            SKIPPED,
            f"MAINTENANCE_{step.upper()} is false",
        )
