"""The delete boundary: a pass deletes only files it can prove deletable.

Each test writes the catalog the way an attacker (or a careless hand) could
before sessions refused metadata writes, through a session allowed to
(``metadata_writes``), then runs a real pass and checks the file is there.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import slatelake
from slatelake import maintenance
from slatelake.ducklake.session import META_DB, Session
from slatelake.maintenance import holds

CLEANUP_NOW = {"MAINTENANCE_CLEANUP_OLD_FILES_CLEANUP_ALL": "true"}


def _lake(tmp_path: Path) -> tuple[str, Path]:
    url, data = (tmp_path / "lake").as_uri(), tmp_path / "data"
    with slatelake.connect(url, data_path=f"{data}/") as s:
        s.sql("CALL lake.set_option('data_inlining_row_limit', '0')")
        s.sql("CREATE TABLE t (i BIGINT)")
        s.sql("INSERT INTO t SELECT * FROM range(6830)")
    return url, data


def _hand(url: str) -> Session:
    session = slatelake.connect(url)
    session.metadata_writes = True
    return session


def _schedule(session: Session, file_id: int, path: str, relative: bool) -> None:
    session.sql(
        f"INSERT INTO {META_DB}.ducklake_files_scheduled_for_deletion "
        "VALUES (?, ?, ?, now() - INTERVAL 1 DAY)",
        [file_id, path, relative],
    )


def test_cleanup_spares_a_scheduled_file_outside_the_data_path(tmp_path: Path) -> None:
    url, _data = _lake(tmp_path)
    victim = tmp_path / "victim.parquet"
    victim.write_bytes(b"someone else's file")
    with _hand(url) as s:
        _schedule(s, 9999, str(victim), relative=False)
        _schedule(s, 9998, "../victim.parquet", relative=True)
    report = maintenance.run(url, CLEANUP_NOW, operations="cleanup")
    step = report.step("cleanup_old_files")
    assert victim.read_bytes() == b"someone else's file"
    assert step.counts["files_deleted"] == 0 and step.counts["files_spared"] == 2
    assert "outside the data path" in step.detail


def test_cleanup_spares_a_scheduled_file_the_catalog_still_reads(tmp_path: Path) -> None:
    url, _data = _lake(tmp_path)
    with _hand(url) as s:
        (file_id, path) = s.sql(
            f"SELECT data_file_id, path FROM {META_DB}.ducklake_data_file"
        ).fetchone()
        _schedule(s, file_id, f"main/t/{path}", relative=True)
    report = maintenance.run(url, CLEANUP_NOW, operations="cleanup")
    step = report.step("cleanup_old_files")
    assert step.counts == {
        "files_deleted": 0,
        "files_spared": 1,
        "files_kept_by_pins": 0,
        "bytes_deleted": 0,
    }
    assert "named by the catalog" in step.detail
    with slatelake.connect(url) as s:
        assert s.sql("SELECT count(*), sum(i) FROM t").fetchone() == (6830, sum(range(6830)))


def test_a_hold_keeps_its_files_when_the_metadata_is_written_around_it(tmp_path: Path) -> None:
    """The attack: end the held snapshot's file by hand and schedule it;
    the pinned-file guard no longer sees it (the file is not live at the held
    snapshot by the rows now), but the hold's recorded file set does."""
    url, data = _lake(tmp_path)
    with slatelake.connect(url) as s:
        (held,) = s.sql("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()
        maintenance.protect(s, held, "audit")
        assert len(holds.held_files(s)["audit"]) == 1
    with _hand(url) as s:
        (file_id, path, begin) = s.sql(
            f"SELECT data_file_id, path, begin_snapshot FROM {META_DB}.ducklake_data_file"
        ).fetchone()
        s.sql(
            f"UPDATE {META_DB}.ducklake_data_file SET end_snapshot = ? WHERE data_file_id = ?",
            [begin, file_id],
        )
        s.sql(f"DELETE FROM {META_DB}.ducklake_data_file WHERE data_file_id = ?", [file_id])
        _schedule(s, file_id, f"main/t/{path}", relative=True)
    report = maintenance.run(url, CLEANUP_NOW, operations="cleanup")
    step = report.step("cleanup_old_files")
    assert step.counts["files_deleted"] == 0 and step.counts["files_spared"] == 1
    assert "kept by retention holds" in step.detail
    assert (data / "main" / "t" / path).exists()


def test_unprotect_drops_the_holds_file_set(tmp_path: Path) -> None:
    url, _data = _lake(tmp_path)
    with slatelake.connect(url) as s:
        (held,) = s.sql("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()
        maintenance.protect(s, held, "a")
        maintenance.protect(s, held, "b")
        maintenance.unprotect(s, "a")
        assert sorted(holds.held_files(s)) == ["b"]


def test_a_dry_run_counts_what_the_boundary_would_spare(tmp_path: Path) -> None:
    url, _data = _lake(tmp_path)
    victim = tmp_path / "victim.parquet"
    victim.write_bytes(b"x")
    with _hand(url) as s:
        _schedule(s, 9999, str(victim), relative=False)
    report = maintenance.run(url, CLEANUP_NOW, operations="cleanup", dry_run=True)
    assert report.plan is not None
    planned = report.plan["cleanup_old_files"]
    assert planned.total == 0 and planned.details["spared"] == 1
    assert victim.exists()


@pytest.mark.parametrize(
    "statement",
    [
        f"UPDATE {META_DB}.ducklake_data_file SET end_snapshot = 1",
        f'UPDATE "{META_DB}"."main".ducklake_data_file SET end_snapshot = 1',
        f"update {META_DB.upper()} . ducklake_data_file set end_snapshot = 1",
        f'UPDATE "{META_DB}"/* a comment */.ducklake_data_file SET end_snapshot = 1',
        f"INSERT INTO {META_DB}.ducklake_files_scheduled_for_deletion VALUES (1, 'x', true, now())",
        f"DELETE FROM {META_DB}.ducklake_snapshot",
        f"TRUNCATE {META_DB}.ducklake_snapshot",
        f"DROP TABLE {META_DB}.ducklake_snapshot",
        f"CREATE TABLE {META_DB}.evil (i INTEGER)",
        f"USE {META_DB}",
        f"SET search_path = 'lake.main,{META_DB}.main'",
        f"SET schema = '{META_DB}.main'",
        f"PREPARE p AS DELETE FROM {META_DB}.ducklake_snapshot",
        "UPDATE __slatelake_base.ducklake_data_file SET end_snapshot = 1",
        f"SELECT 1; UPDATE {META_DB}.ducklake_data_file SET end_snapshot = 1",
    ],
)
def test_statements_that_write_the_metadata_are_refused(tmp_path: Path, statement: str) -> None:
    url, _data = _lake(tmp_path)
    with slatelake.connect(url) as s:
        before = s.sql(f"SELECT * FROM {META_DB}.ducklake_data_file").fetchall()
        with pytest.raises(slatelake.ReadOnlyError, match="statements only read"):
            s.sql(statement)
        with pytest.raises(slatelake.ReadOnlyError), s.transaction():
            s.sql(statement)
        assert s.sql(f"SELECT * FROM {META_DB}.ducklake_data_file").fetchall() == before
        s.sql("INSERT INTO t VALUES (1)")  # the session goes on
    with slatelake.connect(url) as s:
        assert s.sql("SELECT count(*) FROM t").fetchone() == (6831,)


def test_reads_of_the_metadata_and_lake_tables_named_like_it_still_work(tmp_path: Path) -> None:
    url, _data = _lake(tmp_path)
    with slatelake.connect(url) as s:
        assert s.sql(f"SELECT count(*) FROM {META_DB}.ducklake_data_file").fetchone() == (1,)
        s.sql("CREATE TABLE ducklake_data_file (note VARCHAR)")  # a lake table
        s.sql("INSERT INTO ducklake_data_file VALUES (?)", [f"about {META_DB}"])
        # a write that only reads the metadata is refused too (name-based):
        # read it first, then write what was read
        with pytest.raises(slatelake.ReadOnlyError):
            s.sql(f"INSERT INTO t SELECT count(*) FROM {META_DB}.ducklake_snapshot")
        assert s.sql("SELECT note FROM ducklake_data_file").fetchall() == [(f"about {META_DB}",)]


def test_slatelake_sql_refuses_a_metadata_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from slatelake.cli import main

    url, _data = _lake(tmp_path)
    code = main(["sql", url, "-c", f"UPDATE {META_DB}.ducklake_data_file SET end_snapshot = 1"])
    assert code == 1
    err = capsys.readouterr().err
    assert "statements only read" in err and "Traceback" not in err
