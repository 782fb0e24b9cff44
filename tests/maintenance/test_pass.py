"""The maintenance pass on real DuckLake, one test per RFC live obligation."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

import slatelake
from slatelake.catalog.commit_lock import TTL_ENV
from slatelake.cli import main
from slatelake.maintenance.delete_boundary import SKEW_ENV
from slatelake.maintenance.flight import PassLease
from slatelake.maintenance.options import DUCKLAKE_STEPS, STEPS, MaintenanceConfigError
from slatelake.maintenance.report import FAILED, RAN, SKIPPED, PassReport
from tests.conftest import subprocess_env

CONFIGURED = {
    "MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN": "1 second",
    "MAINTENANCE_FLUSH_INLINED_DATA": "true",
    "MAINTENANCE_MERGE_ADJACENT_FILES": "true",
    "MAINTENANCE_REWRITE_DATA_FILES_DELETE_THRESHOLD": "0.01",
    "MAINTENANCE_CLEANUP_OLD_FILES_CLEANUP_ALL": "true",
    "MAINTENANCE_DELETE_ORPHANED_FILES_CLEANUP_ALL": "true",
    "MAINTENANCE_ORPHAN_AGE_FLOOR_OVERRIDE": "true",
}


@pytest.fixture(autouse=True)
def _one_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Strays planted a moment before a pass, on this host's clock: the
    orphan window's skew allowance off (maintenance/delete_boundary.py)."""
    monkeypatch.setenv(SKEW_ENV, "0")


def _churn(url: str, data: Path) -> None:
    """A small churned lake: two tables, Parquet and inlined inserts, deletes, a drop."""
    with slatelake.connect(url, data_path=f"{data}/") as s:
        s.sql("CREATE TABLE a (id INTEGER, v VARCHAR)")
        s.sql("CREATE TABLE b (id INTEGER)")
        s.sql("CREATE TABLE gone (id INTEGER)")
        for i in range(4):
            s.sql(f"INSERT INTO a SELECT i, 'v' || i FROM range({i * 50}, {i * 50 + 50}) r(i)")
        s.sql("INSERT INTO a VALUES (1000, 'inline')")
        s.sql("INSERT INTO b SELECT * FROM range(30)")
        s.sql("INSERT INTO gone SELECT * FROM range(30)")
        s.sql("DELETE FROM a WHERE id % 5 = 0")
        s.sql("DROP TABLE gone")


@pytest.fixture(scope="module")
def _churned_once(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, float]:
    """Churn once per module (it dominated these tests' time); each test gets
    a fresh copy at the same absolute path, since the catalog records it.
    Also returns when the churn's last snapshot was written (wall clock)."""
    work = tmp_path_factory.mktemp("churned")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SLATELAKE_VERIFY_CAPTURE", "1")
        _churn((work / "lake").as_uri(), work / "data")
    churned_at = time.time()
    pristine = work.with_name(work.name + "-pristine")
    shutil.copytree(work, pristine, symlinks=True)
    return work, pristine, churned_at


@pytest.fixture
def churned(
    _churned_once: tuple[Path, Path, float], monkeypatch: pytest.MonkeyPatch
) -> tuple[str, Path]:
    """The churned lake, as it was right after the churn."""
    monkeypatch.setenv("SLATELAKE_VERIFY_CAPTURE", "1")
    work, pristine, _ = _churned_once
    shutil.rmtree(work)
    shutil.copytree(pristine, work, symlinks=True)
    return (work / "lake").as_uri(), work / "data"


@pytest.fixture
def aged(churned: tuple[str, Path], _churned_once: tuple[Path, Path, float]) -> tuple[str, Path]:
    """The churned lake once its every snapshot is more than a second old, so
    a 1-second retention covers the churn. The churn is shared by the module,
    so this waits only when a test runs within a second of it."""
    _wait_until(lambda: time.time() > _churned_once[2] + 1.05, "the churn to age a second")
    return churned


def _wait_until(check, what: str, timeout: float = 30.0) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
        time.sleep(0.05)


def _after_every_snapshot() -> str:
    """Now, as a UTC timestamp ``older_than``: every snapshot already written
    is older, with no waiting (where the window's arithmetic is not the point)."""
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f+00")


def _contents(session) -> dict:  # noqa: ANN001
    return {t: sorted(session.sql(f"SELECT * FROM {t}").fetchall()) for t in ("a", "b")}


def _files(data: Path) -> list[str]:
    return sorted(str(p.relative_to(data)) for p in data.rglob("*.parquet"))


def test_unconfigured_pass_skips_every_ducklake_step_and_moves_no_data(churned) -> None:  # noqa: ANN001
    url, data = churned
    with slatelake.connect(url) as s:
        before, files, head = _contents(s), _files(data), s.state.head
        report = s.maintenance()
        assert [st.step for st in report.steps] == list(STEPS)
        for step in DUCKLAKE_STEPS:
            assert (report.step(step).status, report.step(step).detail) == (
                SKIPPED,
                "not configured",
            )
        assert _contents(s) == before and _files(data) == files
        assert s.state.head.snapshot_id == head.snapshot_id  # no DuckLake snapshot minted


def test_configured_pass_reports_in_order_and_leaves_contents_unchanged(aged) -> None:  # noqa: ANN001
    url, data = aged
    with slatelake.connect(url, options=CONFIGURED) as s:
        before, snapshots = _contents(s), _snapshot_ids(s)
        report = s.maintenance()
        assert [st.step for st in report.steps] == list(STEPS)
        assert [report.step(st).status for st in DUCKLAKE_STEPS] == [RAN] * 6
        expired = len(snapshots) - 1  # all but the latest: the churn is older than a second
        expire = report.step("expire_snapshots")
        assert expire.detail == f"expired {expired} snapshots in 1 batches"
        assert expire.counts == {
            "snapshots_expired": expired,
            "snapshots_kept_by_thinning": 0,
            "snapshots_kept_by_holds": 0,
            "snapshots_kept_by_pins": 0,
        }
        assert _snapshot_ids(s) & snapshots == {max(snapshots)}  # later steps add their own
        assert "files" in report.step("cleanup_old_files").detail
        assert not report.work_pending
        assert _contents(s) == before
    with slatelake.connect(url, read_only=True) as fresh:
        assert _contents(fresh) == before


def test_misconfiguration_fails_at_bind_before_any_work(
    churned,  # noqa: ANN001
    capsys: pytest.CaptureFixture[str],
) -> None:
    url, _ = churned
    with pytest.raises(MaintenanceConfigError, match="MAINTENANCE_MERGE_ADJACENT_FILE_X"):
        slatelake.connect(url, options={"MAINTENANCE_MERGE_ADJACENT_FILE_X": "1"})
    assert main(["maintain", url, "--option", "MAINTENANCE_INTERVAL=0"]) == 2
    assert "MAINTENANCE_INTERVAL" in capsys.readouterr().err


def test_status_retains_earlier_passes_each_with_its_trigger_and_reads_read_only(
    churned,  # noqa: ANN001
) -> None:
    url, _ = churned
    with slatelake.connect(url, options={"MAINTENANCE_MERGE_ADJACENT_FILES": "true"}) as s:
        first = s.maintenance()
    with slatelake.connect(url) as s:
        second = s.maintenance()
    with slatelake.connect(url, read_only=True) as ro:
        window = ro.maintenance_status()
        head = ro.state.head
    assert [p.started_at for p in window] == [second.started_at, first.started_at]
    assert all(p.trigger == "manual" for p in window)
    assert window[1].step("merge_adjacent_files").status == RAN
    assert window[0].step("merge_adjacent_files").status == SKIPPED
    with slatelake.connect(url) as s:
        assert s.state.head.snapshot_id == head.snapshot_id  # status writes mint nothing
    # Each record carries the head it was written against: the newest one is
    # the current head less its own head-preserving batch.
    assert (window[0].head_snapshot_id, window[0].head_batch_seq) == (
        head.snapshot_id,
        head.batch_seq - 1,
    )
    assert window[1].head_snapshot_id is not None
    assert (window[1].head_snapshot_id, window[1].head_batch_seq) < (
        window[0].head_snapshot_id,
        window[0].head_batch_seq,
    )


def test_a_failed_step_skips_later_ducklake_steps_naming_it(
    churned,
    monkeypatch: pytest.MonkeyPatch,  # noqa: ANN001
) -> None:
    url, _ = churned
    # A bad value no longer reaches a step (it is refused at bind); a change-set
    # cap no snapshot fits under fails expiry inside the step instead.
    monkeypatch.setenv("SLATELAKE_MAX_CHANGESET_OPS", "1")
    options = {**CONFIGURED, "MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN": _after_every_snapshot()}
    with slatelake.connect(url, options=options) as s:
        report = s.maintenance()
        assert report.step("expire_snapshots").status == FAILED
        for step in DUCKLAKE_STEPS[1:]:
            assert report.step(step).status == SKIPPED
            assert report.step(step).detail == "not attempted because expire_snapshots failed"
        assert report.work_pending
        assert s.sql("SELECT count(*) FROM a").fetchone()[0] > 0  # still queryable


def test_string_versions_expire_exactly_those_versions(churned) -> None:  # noqa: ANN001
    url, _ = churned
    options = {"MAINTENANCE_EXPIRE_SNAPSHOTS_VERSIONS": "[2,3]"}
    with slatelake.connect(url, options=options) as s:
        before = {r[0] for r in s.sql("SELECT snapshot_id FROM lake.snapshots()").fetchall()}
        report = s.maintenance()
        after = {r[0] for r in s.sql("SELECT snapshot_id FROM lake.snapshots()").fetchall()}
    assert report.step("expire_snapshots").detail == "expired 2 snapshots in 1 batches"
    assert before - after == {2, 3}


def test_interval_older_than_is_a_rolling_window_per_pass(churned) -> None:  # noqa: ANN001
    url, _ = churned
    options = {"MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN": "6 seconds"}

    def snapshots(s) -> set[int]:  # noqa: ANN001
        return {r[0] for r in s.sql("SELECT snapshot_id FROM lake.snapshots()").fetchall()}

    with slatelake.connect(url, options=options) as s:
        s.sql("INSERT INTO b VALUES (1)")
        fresh, written_by = max(snapshots(s)), time.time()
        s.sql("INSERT INTO b VALUES (2)")  # the latest snapshot, never expired
        s.maintenance()
        assert fresh in snapshots(s), "a snapshot younger than the window survives"
        _wait_until(lambda: time.time() > written_by + 6.05, "the snapshot to leave the window")
        s.maintenance()  # the same option, evaluated again at this pass's now()
        assert fresh not in snapshots(s), "the window rolled forward and took it"


def test_expiry_halves_batches_on_the_operation_limit(
    churned,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],  # noqa: ANN001
) -> None:
    url, _ = churned
    monkeypatch.setenv("SLATELAKE_MAX_CHANGESET_OPS", "30")
    options = {
        "MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN": _after_every_snapshot(),
        "MAINTENANCE_PROGRESS": "true",
    }
    with slatelake.connect(url, options=options) as s:
        report = s.maintenance()
        remaining = s.sql("SELECT count(*) FROM lake.snapshots()").fetchone()[0]
    err = capsys.readouterr().err
    assert "over the operation limit; halving" in err
    assert report.step("expire_snapshots").status == RAN
    assert remaining == 1  # only the latest snapshot survives
    assert "rss=" in err and "hwm=" in err


def test_a_single_snapshot_over_the_cap_fails_with_work_pending(
    churned,
    monkeypatch: pytest.MonkeyPatch,  # noqa: ANN001
) -> None:
    url, _ = churned
    monkeypatch.setenv("SLATELAKE_MAX_CHANGESET_OPS", "1")
    with slatelake.connect(
        url,
        options={"MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN": _after_every_snapshot()},
    ) as s:
        report = s.maintenance()
    step = report.step("expire_snapshots")
    assert step.status == FAILED and "alone exceeds the change-set operation limit" in step.detail
    assert report.work_pending


def test_a_second_maintain_reports_already_running(
    churned,  # noqa: ANN001
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The lease is in the bucket, so a holder in this process stands for
    another process as well (the in-process lock is not taken here)."""
    url, _ = churned
    with slatelake.connect(url) as s:
        lease = PassLease(s.lake.location)
        assert lease.try_acquire()
    try:
        assert main(["maintain", url, "--wait", "0"]) == 1
        assert "maintenance already running" in capsys.readouterr().err
    finally:
        lease.release()
    assert main(["maintain", url, "--wait", "0", "--json"]) == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out)["trigger"] == "manual"


def test_trigger_refuses_inside_an_explicit_transaction_and_on_read_only(churned) -> None:  # noqa: ANN001
    url, _ = churned
    with (
        slatelake.connect(url) as s,
        pytest.raises(slatelake.MisconfigurationError, match="inside an explicit transaction"),
        s.transaction(),
    ):
        s.maintenance()
    with slatelake.connect(url, read_only=True) as ro, pytest.raises(slatelake.ReadOnlyError):
        ro.maintenance()


def test_a_pass_completes_while_another_process_keeps_committing(
    aged,
    tmp_path: Path,  # noqa: ANN001
) -> None:
    url, _ = aged
    stop = tmp_path / "stop"
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.maintenance.committer", url, str(stop)],
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        with slatelake.connect(
            url, options={**CONFIGURED, "MAINTENANCE_TABLE_BATCHES": "true"}
        ) as s:
            before_a = sorted(s.sql("SELECT * FROM a").fetchall())
            report = s.maintenance()
    finally:
        stop.touch()
        out, err = child.communicate(timeout=300)
    assert child.returncode == 0, err
    committed = json.loads(out)
    # Every step ran, or says why not in the only words a rival committer on
    # table b can cause: b deferred after its conflicts, later steps waiting.
    for step in DUCKLAKE_STEPS:
        st = report.step(step)
        if st.status == FAILED:
            assert "conflict" in st.detail.lower() and "main.a" not in st.detail, st.detail
        elif st.status == SKIPPED:
            failed = [s.step for s in report.steps if s.status == FAILED]
            assert st.detail in [f"not attempted because {f} failed" for f in failed] or (
                st.detail == "waits for a complete pass; deferred tables: main.b"
            ), st.detail
        else:
            assert st.status == RAN, (step, st.status, st.detail)
    assert report.work_pending == any(s.status != RAN for s in report.steps[:6])
    with slatelake.connect(url, read_only=True) as ro:
        ids = {r[0] for r in ro.sql("SELECT id FROM b WHERE id >= 100000").fetchall()}
        assert ids == set(committed)  # every committed row survives, none invented
        assert sorted(ro.sql("SELECT * FROM a").fetchall()) == before_a


def test_table_batches_defer_a_table_that_keeps_conflicting(
    churned,
    monkeypatch: pytest.MonkeyPatch,  # noqa: ANN001
) -> None:
    from slatelake.ducklake.commit_flow import Committer
    from slatelake.ducklake.session import Session

    url, _ = churned
    # The pass holds the commit lock while it commits; the rival lands its
    # commit by taking the lock over once it has seen it unchanged for the TTL.
    monkeypatch.setenv(TTL_ENV, "200ms")
    rival = slatelake.connect(url)
    original = Committer.commit_captured

    def contended(self, *args, **kwargs) -> None:  # noqa: ANN001, ANN002, ANN003
        # Before each maintenance commit on table a, another session lands a commit:
        # the pass's commit then loses the race for its slot (a real ConflictError).
        session = self._host  # the session this committer commits for
        if session is not rival.session and getattr(session, "_target", None) == "a":
            rival.sql("INSERT INTO b VALUES (7777)")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Committer, "commit_captured", contended)
    original_sql = Session.sql

    def tagging_sql(self, query, params=None, writes=None):  # noqa: ANN001, ANN202
        self._target = "a" if writes and "'a'" in query else None
        return original_sql(self, query, params, writes)

    monkeypatch.setattr(Session, "sql", tagging_sql)
    original_checked = Session.run_maintenance_unless

    def tagging_checked(self, query, check):  # noqa: ANN001, ANN202 - a flush is a checked call
        self._target = "a" if "'a'" in query else None
        return original_checked(self, query, check)

    monkeypatch.setattr(Session, "run_maintenance_unless", tagging_checked)
    options = {
        "MAINTENANCE_FLUSH_INLINED_DATA": "true",
        "MAINTENANCE_MERGE_ADJACENT_FILES": "true",
        "MAINTENANCE_CLEANUP_OLD_FILES": "true",
        "MAINTENANCE_TABLE_BATCHES": "true",
    }
    try:
        with slatelake.connect(url, options=options) as s:
            report = s.maintenance()
    finally:
        rival.close()
    flush = report.step("flush_inlined_data")
    assert flush.status == FAILED and "deferred after 3 conflicts: main.a" in flush.detail
    merge = report.step("merge_adjacent_files")
    assert merge.status == RAN and "across 1 tables" in merge.detail  # b, not the deferred a
    cleanup = report.step("cleanup_old_files")
    assert cleanup.status == SKIPPED and "waits for a complete pass" in cleanup.detail
    assert report.work_pending


def test_a_failed_status_write_is_logged_and_keeps_the_outcome(
    churned,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,  # noqa: ANN001
) -> None:
    from slatelake.ducklake.session import Session

    url, _ = churned

    def refuse(self, cs):  # noqa: ANN001, ANN202
        raise OSError("injected: the bucket refused the status slot")

    monkeypatch.setattr(Session, "commit_change_set", refuse)
    with slatelake.connect(url, options={"MAINTENANCE_MERGE_ADJACENT_FILES": "true"}) as s:
        report = s.maintenance()
    assert report.step("merge_adjacent_files").status == RAN and not report.work_pending
    assert "maintenance status not recorded" in caplog.text


def _snapshot_ids(session) -> set[int]:  # noqa: ANN001
    return {r[0] for r in session.sql("SELECT snapshot_id FROM lake.snapshots()").fetchall()}


@pytest.mark.parametrize("spelling", ["1", "t", " true", "YES"])
def test_a_dry_run_spelled_as_duckdb_reads_it_expires_nothing(churned, spelling: str) -> None:  # noqa: ANN001
    url, _ = churned
    options = {
        "MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN": _after_every_snapshot(),
        "MAINTENANCE_EXPIRE_SNAPSHOTS_DRY_RUN": spelling,
    }
    with slatelake.connect(url, options=options) as s:
        before = _snapshot_ids(s)
        report = s.maintenance()
        after = _snapshot_ids(s)
    step = report.step("expire_snapshots")
    assert after == before, "a dry run expired snapshots"
    assert step.status == RAN
    assert step.detail == f"would expire {len(before) - 1} snapshots (dry run)"
    assert step.counts == {}  # nothing published as expired
    assert step.dry_run


def _data_files(data_path: str) -> set[str]:
    if data_path.startswith("s3://"):
        import boto3

        bucket, _, prefix = data_path[len("s3://") :].partition("/")
        pages = (
            boto3.client("s3")
            .get_paginator("list_objects_v2")
            .paginate(Bucket=bucket, Prefix=prefix)
        )
        return {o["Key"] for page in pages for o in page.get("Contents", [])}
    return {str(p) for p in Path(data_path).rglob("*") if p.is_file()}


def _plant(data_path: str, name: str) -> None:
    if data_path.startswith("s3://"):
        import boto3

        bucket, _, prefix = data_path[len("s3://") :].partition("/")
        boto3.client("s3").put_object(Bucket=bucket, Key=prefix + name, Body=b"PAR1 stray")
    else:
        Path(data_path, name).write_bytes(b"PAR1 stray")
    time.sleep(1.1)  # file times reach the orphan filter in whole seconds


@pytest.mark.parametrize("store", ["file", "s3"])
def test_a_cleanup_dry_run_reports_what_it_would_delete_and_deletes_nothing(
    store: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if store == "s3":
        bucket = request.getfixturevalue("s3_bucket")
        url, data = f"s3://{bucket}/lake", f"s3://{bucket}/data/"
    else:
        url, data = (tmp_path / "lake").as_uri(), f"{tmp_path / 'data'}/"
    with slatelake.connect(url, data_path=data) as s:
        s.sql("CREATE TABLE t (id INTEGER)")
        for i in range(3):
            s.sql(f"INSERT INTO t SELECT * FROM range({i * 100}, {i * 100 + 100})")
    merge = {"MAINTENANCE_MERGE_ADJACENT_FILES": "true"}
    with slatelake.connect(url, options=merge) as s:
        assert s.maintenance().step("merge_adjacent_files").counts["files_processed"] == 3
    _plant(data, "stray.parquet")
    dry = {
        "MAINTENANCE_CLEANUP_OLD_FILES_CLEANUP_ALL": "1",
        "MAINTENANCE_CLEANUP_OLD_FILES_DRY_RUN": "1",
        "MAINTENANCE_DELETE_ORPHANED_FILES_CLEANUP_ALL": "y",
        "MAINTENANCE_DELETE_ORPHANED_FILES_DRY_RUN": "t",
    }
    files = _data_files(data)
    with slatelake.connect(url, options=dry) as s:
        report = s.maintenance()
        rows = sorted(s.sql("SELECT * FROM t").fetchall())
    assert _data_files(data) == files, "a dry run deleted files"
    cleanup, orphans = report.step("cleanup_old_files"), report.step("delete_orphaned_files")
    assert (cleanup.status, cleanup.detail) == (RAN, "would delete 3 files (dry run)")
    assert (orphans.status, orphans.detail) == (RAN, "would delete 1 files (dry run)")
    assert cleanup.counts == {} and orphans.counts == {}  # no FilesDeleted published
    assert cleanup.dry_run and orphans.dry_run
    assert PassReport.from_dict(report.to_dict()).step("cleanup_old_files").dry_run
    wet = {k: v for k, v in dry.items() if not k.endswith("DRY_RUN")}
    # the dry run needed no override (it deletes nothing); the real one does
    wet["MAINTENANCE_ORPHAN_AGE_FLOOR_OVERRIDE"] = "true"
    with slatelake.connect(url, options=wet) as s:
        report = s.maintenance()
        assert sorted(s.sql("SELECT * FROM t").fetchall()) == rows
    assert report.step("cleanup_old_files").counts["files_deleted"] == 3
    assert report.step("cleanup_old_files").counts["bytes_deleted"] > 0
    assert report.step("delete_orphaned_files").counts == {
        "files_deleted": 1,
        "files_spared": 0,
        "files_kept_by_pins": 0,
    }
    assert len(_data_files(data)) == len(files) - 4


def test_interval_older_than_counts_back_from_now_in_any_zone(
    churned,  # noqa: ANN001
    _churned_once: tuple[Path, Path, float],
) -> None:
    # Run under TZ=Asia/Tokyo and America/Los_Angeles by test_time_zones.py.
    url, _ = churned
    churned_at = _churned_once[2]
    with slatelake.connect(url, options={"MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN": "1 hour"}) as s:
        before = _snapshot_ids(s)
        s.maintenance()
        assert _snapshot_ids(s) == before, "seconds-old snapshots expired by a 1-hour window"
    _wait_until(lambda: time.time() > churned_at + 1.05, "the churn to age a second")
    with slatelake.connect(
        url, options={"MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN": "1 second"}
    ) as s:
        s.maintenance()
        assert _snapshot_ids(s) == {max(before)}, "a 1-second window kept older snapshots"


def test_a_timestamp_older_than_names_a_utc_instant_in_any_zone(churned) -> None:  # noqa: ANN001
    url, _ = churned
    with slatelake.connect(url, read_only=True) as s:
        times = s.sql(
            "SELECT snapshot_id, strftime(timezone('UTC', snapshot_time), '%Y-%m-%d %H:%M:%S.%f') "
            "FROM lake.snapshots() ORDER BY snapshot_id"
        ).fetchall()
    # Between the 4th and 5th snapshot, written without an offset: read as UTC.
    (_, earlier), (_, later) = times[3], times[4]
    assert earlier < later
    cut = later
    options = {
        "MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN": cut,
        "MAINTENANCE_EXPIRE_SNAPSHOTS_DRY_RUN": "true",
    }
    with slatelake.connect(url, options=options) as s:
        report = s.maintenance()
    assert report.step("expire_snapshots").detail == "would expire 4 snapshots (dry run)"


def test_dry_run_options_write_no_commit_slot(churned) -> None:  # noqa: ANN001
    """DuckLake's dry runs (the dry-run options, and the selection before an
    expiry, which uses the same call) answer without the commit lock: a pass
    that only asks them writes two slots: its run's start and its status record."""
    url, _ = churned
    dry = {
        "MAINTENANCE_EXPIRE_SNAPSHOTS_DRY_RUN": "true",
        "MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN": _after_every_snapshot(),
        "MAINTENANCE_CLEANUP_OLD_FILES_DRY_RUN": "true",
        "MAINTENANCE_CLEANUP_OLD_FILES_CLEANUP_ALL": "true",
        "MAINTENANCE_SWEEP_INDEXES": "false",
    }
    with slatelake.connect(url, options=dry) as s:
        before = len(list(s.lake.log.list_after(0)))
        report = s.maintenance()
        assert report.step("expire_snapshots").dry_run
        assert len(list(s.lake.log.list_after(0))) == before + 2  # the run's start, its end
