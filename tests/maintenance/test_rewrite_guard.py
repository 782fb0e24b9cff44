"""A rewrite never leaves inlined deletions behind for a later flush to turn
into a second delete file of the rewritten file (maintenance/rewrite_guard.py).

The shape, on one 1,100-row data file: five rows deleted (inlined) and
flushed into a delete file, three more deleted (inlined), then a rewrite,
then a flush. DuckLake 1.5.5 rewrites the file without carrying the three
inlined deletions; the later flush writes them as a delete file of the
ended file, live from their snapshot, so a read between that deletion and
the rewrite scans the file once per live delete file.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import slatelake
from slatelake import maintenance
from slatelake.ducklake import extensions
from slatelake.maintenance.options import StepConfig
from slatelake.maintenance.rewrite_guard import tables_with_inlined_deletions
from slatelake.maintenance.steps import Steps

REWRITE = StepConfig(enabled=True, params={"delete_threshold": 0.0})


def _deletions_pending(sql) -> None:  # noqa: ANN001 - a session's or a connection's execute
    """The shape up to the rewrite: a delete file, then inlined deletions."""
    sql("CREATE TABLE t (id BIGINT)")
    sql("INSERT INTO t SELECT range FROM range(0, 1100)")
    sql("DELETE FROM t WHERE id < 5")
    sql("CALL ducklake_flush_inlined_data('lake')")
    sql("DELETE FROM t WHERE id >= 100 AND id < 103")


def _twice_counted(sql) -> list[tuple[int, int, int]]:  # noqa: ANN001
    """(snapshot, rows, ids) for every snapshot at which some id reads twice."""
    out = []
    for (snap,) in sql("SELECT snapshot_id FROM lake.snapshots() ORDER BY 1").fetchall()[2:]:
        n, ids = sql(
            f"SELECT count(*), count(DISTINCT id) FROM t AT (VERSION => {snap})"
        ).fetchone()
        if n != ids:
            out.append((snap, n, ids))
    return out


def test_stock_ducklake_double_counts_time_travel_when_a_flush_follows_a_rewrite(
    tmp_path: Path,
) -> None:
    """The upstream defect the guard works around: if this stops failing on
    an upgrade of DuckLake, the guard may go."""
    con = extensions.connect()
    con.execute(f"ATTACH 'ducklake:{tmp_path}/c.ducklake' AS lake (DATA_PATH '{tmp_path}/d/')")
    con.execute("USE lake")
    _deletions_pending(con.execute)
    con.execute("CALL ducklake_rewrite_data_files('lake', delete_threshold => 0)")
    con.execute("CALL ducklake_flush_inlined_data('lake')")
    assert _twice_counted(con.execute) == [(5, 2192, 1100)]


def test_a_rewrite_flushes_inlined_deletions_first_so_time_travel_counts_each_row_once(
    tmp_path: Path,
) -> None:
    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path / 'data'}/") as s:
        _deletions_pending(s.sql)
        steps = Steps(s, threading.Event(), lambda _: None)
        steps.may_flush = True  # the pass flushes: its flush step is on
        outcome = steps.compact("rewrite_data_files", REWRITE, per_table=False, skip=set())
        s.sql("CALL ducklake_flush_inlined_data('lake')")  # a later pass's flush
        assert _twice_counted(s.sql) == []
        assert s.sql("SELECT count(*) FROM t").fetchone()[0] == 1092
        assert "flushed every table first: inlined deletions" in outcome.detail, outcome.detail
        assert outcome.counts["files_processed"] == 1


def test_a_rewrite_in_a_pass_that_does_not_flush_leaves_out_a_table_with_inlined_deletions(
    tmp_path: Path,
) -> None:
    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path / 'data'}/") as s:
        _deletions_pending(s.sql)
        s.sql("CREATE TABLE other (id BIGINT)")
        s.sql("INSERT INTO other SELECT range FROM range(0, 2000)")
        s.sql("DELETE FROM other WHERE id < 500")  # a delete file, nothing inlined
    options = {
        "MAINTENANCE_FLUSH_INLINED_DATA": "false",
        "MAINTENANCE_REWRITE_DATA_FILES_DELETE_THRESHOLD": "0",
    }
    report = maintenance.run(url, options)
    with slatelake.connect(url) as s:
        s.sql("CALL ducklake_flush_inlined_data('lake')")  # a later flush
        assert _twice_counted(s.sql) == []
    rewrite = report.step("rewrite_data_files")
    assert "left out main.t: their inlined deletions are not flushed" in rewrite.detail
    assert rewrite.counts["files_processed"] == 1  # other's file, not t's
    assert report.work_pending


def test_a_checked_maintenance_call_asks_its_check_on_the_head_with_the_lock_held(
    tmp_path: Path,
) -> None:
    """The rewrite's question is asked after every commit up to the head is in
    the session's copy, with the lock that keeps others out until the call
    commits: a deletion another session committed a moment before is seen."""
    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path / 'data'}/") as a:
        a.sql("CREATE TABLE t (id BIGINT)")
        a.sql("INSERT INTO t SELECT range FROM range(0, 1100)")
        with slatelake.connect(url) as b:
            b.sql("DELETE FROM t WHERE id < 3")  # inlined, after a's last statement
        seen: list[set[tuple[str, str]]] = []

        def check() -> str | None:
            seen.append(tables_with_inlined_deletions(a))
            return "inlined deletions" if seen[-1] else None

        head = a.state.head.snapshot_id
        sql = "CALL ducklake_rewrite_data_files('lake', 't', delete_threshold => 0)"
        result, reason = a.run_maintenance_unless(sql, check)
        assert (result, reason) == (None, "inlined deletions")
        assert seen == [{("main", "t")}]
        assert a.state.head.snapshot_id == head + 1  # b's deletion, and nothing of ours
        a.sql("CALL ducklake_flush_inlined_data('lake')")
        result, reason = a.run_maintenance_unless(sql, check)
        assert reason is None and result is not None
        assert dict(zip(result.columns, result.fetchone(), strict=True))["files_processed"] == 1


def test_a_deletion_committed_as_the_rewrite_reaches_its_table_is_flushed_before_the_rewrite(
    tmp_path: Path,
) -> None:
    """A writer's inlined deletion lands after the pass's flush step and just
    before the rewrite calls DuckLake for that table (forced through the
    pass's own progress line): the rewrite still never ends a file that
    holds it."""
    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path / 'data'}/") as s:
        _deletions_pending(s.sql)
    writer = slatelake.connect(url)
    landed: list[str] = []

    def on_progress(message: str, _figures: dict[str, float]) -> None:
        if message.startswith("rewrite_data_files: main.t") and not landed:
            writer.sql("DELETE FROM t WHERE id >= 200 AND id < 202")  # inlined
            landed.append(message)

    options = {
        "MAINTENANCE_FLUSH_INLINED_DATA": "true",
        "MAINTENANCE_REWRITE_DATA_FILES_DELETE_THRESHOLD": "0",
        "MAINTENANCE_TABLE_BATCHES": "true",
    }
    try:
        report = maintenance.run(url, options, on_progress=on_progress)
    finally:
        writer.close()
    with slatelake.connect(url) as s:
        s.sql("CALL ducklake_flush_inlined_data('lake')")  # a later pass's flush
        assert _twice_counted(s.sql) == []
        assert s.sql("SELECT count(*) FROM t").fetchone()[0] == 1090
    assert landed, "the deletion was never injected"
    rewrite = report.step("rewrite_data_files")
    assert rewrite.counts["files_processed"] == 1, rewrite.detail
    assert "flushed main.t first: inlined deletions" in rewrite.detail, rewrite.detail


def test_asking_one_table_for_inlined_deletions_reads_that_tables_alone(tmp_path: Path) -> None:
    """With TABLE_BATCHES the guard asks before every table's rewrite: the
    question must cost that table, not the lake (no listing of the
    database's tables, no other table's inlined deletions read)."""
    with slatelake.connect((tmp_path / "lake").as_uri(), data_path=f"{tmp_path}/d/") as s:
        for name in ("a", "b", "c"):
            s.sql(f"CREATE TABLE {name} (id BIGINT)")
            s.sql(f"INSERT INTO {name} SELECT range FROM range(0, 1100)")
            s.sql(f"DELETE FROM {name} WHERE id < 3")  # inlined: under DuckLake's row limit
        assert tables_with_inlined_deletions(s) == {("main", "a"), ("main", "b"), ("main", "c")}
        real, asked = s.con, []

        class Counting:
            """A connection (or a cursor of it) that keeps each query's text."""

            def __init__(self, con: Any) -> None:
                self.con = con

            def execute(self, query: str, *args: object) -> object:
                asked.append(" ".join(query.split()))
                return self.con.execute(query, *args)

            def cursor(self) -> Counting:
                return Counting(self.con.cursor())

            def close(self) -> None:
                self.con.close()

        s.con = Counting(real)  # type: ignore[assignment]
        try:
            found = tables_with_inlined_deletions(s, ("main", "b"))
        finally:
            s.con = real
        assert found == {("main", "b")}
        text = " ".join(asked)
        assert "duckdb_tables" not in text, asked
        assert len(set(re.findall(r"ducklake_inlined_delete_\d+", text))) == 1, asked
        assert tables_with_inlined_deletions(s, ("main", "absent")) == set()
