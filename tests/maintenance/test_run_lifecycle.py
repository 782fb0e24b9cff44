"""A run's life in the run history (issue 44, item 4): ``running`` from the
moment its pass takes the lease, its lease's heartbeat naming the step, then
rewritten under the same id with how it ended; a killed pass recorded
``failed`` by the next pass, saying when its heartbeat stopped and where;
every finished run audited with its counters; a run that waited for the
lease says how long it was queued."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

import slatelake
from slatelake import maintenance
from slatelake.errors import LeaseLiveError
from slatelake.log.changeset import ChangeSet
from slatelake.log.committer import MAX_OPERATIONS_ENV
from slatelake.maintenance.flight import TTL_ENV, PassLease
from slatelake.maintenance.lease_record import LeaseRecord
from slatelake.maintenance.policy import POLICY_KEY
from slatelake.maintenance.report import PassReport
from slatelake.maintenance.runner import run_pass
from tests.conftest import subprocess_env

FLUSH = {"MAINTENANCE_FLUSH_INLINED_DATA": "true"}


def _lake(tmp_path: Path, snapshots: int = 2) -> str:
    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path / 'data'}/") as s:
        s.sql("CREATE TABLE t (id INTEGER)")
        for i in range(snapshots):
            s.sql(f"INSERT INTO t VALUES ({i})")
    return url


def _lease(url: str) -> LeaseRecord | None:
    return maintenance.pass_lease(url)


def _until(what: str, check: object, timeout_s: float = 10.0) -> None:
    ends = time.monotonic() + timeout_s
    while not check():  # type: ignore[operator]
        assert time.monotonic() < ends, f"{what} never happened"
        time.sleep(0.05)


def _maintain(url: str, older_than: str) -> subprocess.Popen[str]:
    """``slatelake maintain`` expiring every snapshot in small batches: a
    pass of several seconds, its lease TTL 2 s."""
    argv = [sys.executable, "-m", "slatelake.cli", "maintain", url]
    for option in (
        f"MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN={older_than}",
        "MAINTENANCE_PROGRESS=true",
    ):
        argv += ["--option", option]
    env = subprocess_env() | {TTL_ENV: "2", "SLATELAKE_MAX_CHANGESET_OPS": "4"}
    return subprocess.Popen(
        argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )


@pytest.mark.parametrize("then", ["lapsed", "broken"])
def test_a_killed_pass_is_recorded_failed_by_the_next_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, then: str
) -> None:
    """SIGKILL mid-step runs no hook, so the killed pass's entry stays
    ``running``; the next pass (once the lease lapsed, or after ``lease
    break``) rewrites it ``failed``, naming when its heartbeat stopped and
    the step it was in, audits it, puts it in the status window, and runs."""
    url = _lake(tmp_path, snapshots=40)
    older_than = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f+00")
    child = _maintain(url, older_than)
    try:
        assert child.stderr is not None
        for line in child.stderr:
            if "step expire_snapshots start" in line:
                break
        # the step's own beat: the lease, and so `lease show`, says where it is
        _until(
            "a beat naming the step", lambda: (r := _lease(url)) and r.step == "expire_snapshots"
        )
        record = _lease(url)
        assert record is not None and record.run_id is not None
        assert f"run {record.run_id} at step expire_snapshots" in record.describe()
        (running,) = maintenance.runs(url, limit=1).items
        assert (running.run_id, str(running.status)) == (record.run_id, "running")
        assert running.lease_owner == record.owner and running.lease_generation is not None
        assert running.steps == [] and running.trigger == "manual"
        os.kill(child.pid, signal.SIGKILL)
        child.wait(60)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == -signal.SIGKILL
    killed = record.run_id
    assert maintenance.runs(url, limit=1).items[0].status == "running"  # nothing ran on death
    if then == "broken":

        def broke() -> bool:
            try:
                return maintenance.break_lease(url).broken is not None
            except LeaseLiveError:
                return False

        _until("lease break", broke)
    monkeypatch.setenv(TTL_ENV, "2")
    with slatelake.connect(url) as s:
        report = run_pass(s, s.options, wait_s=10.0)
    assert str(report.status) == "succeeded" and report.run_id != killed
    newest, dead = maintenance.runs(url, limit=2).items
    assert (newest.run_id, str(newest.status)) == (report.run_id, "succeeded")
    assert (dead.run_id, str(dead.status)) == (killed, "failed")
    reason = dead.failed_reason or ""
    assert "its heartbeat stopped at " in reason and "during step expire_snapshots" in reason
    assert "the process died" in reason
    if then == "broken":
        assert "`slatelake lease break` ended its lease" in reason
    assert dead.seconds > 0  # from its start to its last heartbeat
    window = maintenance.status(url)
    assert [(p.run_id, str(p.status)) for p in window[:2]] == [
        (report.run_id, "succeeded"),
        (killed, "failed"),
    ]
    audited = {e.what["run_id"]: e for e in maintenance.audit_log(url, limit=5).items}
    assert audited[killed].kind == "run.manual" and audited[killed].what["status"] == "failed"
    assert audited[killed].what["reason"] == reason
    assert audited[report.run_id].what["status"] == "succeeded"
    with slatelake.connect(url) as s:  # recorded once: a later pass finds nothing to mark
        run_pass(s, s.options)
    assert [str(r.status) for r in maintenance.runs(url, limit=3).items] == [
        "succeeded",
        "succeeded",
        "failed",
    ]


def test_a_pass_is_running_in_history_from_its_lease_to_its_end_under_one_id(
    tmp_path: Path,
) -> None:
    url = _lake(tmp_path)
    seen: list[tuple[PassReport, LeaseRecord | None]] = []

    def progress(message: str, fields: dict[str, float]) -> None:
        if message.startswith("step flush_inlined_data start"):
            _until(
                "the flush's beat", lambda: (r := _lease(url)) and r.step == "flush_inlined_data"
            )
            seen.append((maintenance.runs(url, limit=1).items[0], _lease(url)))

    with slatelake.connect(url, options=FLUSH) as s:
        report = maintenance.run(s, FLUSH, by="erin", on_progress=progress)
    ((running, lease),) = seen
    assert str(running.status) == "running" and running.running
    assert (running.run_id, running.by, running.started_at) == (
        report.run_id,
        "erin",
        report.started_at,
    )
    assert lease is not None and lease.run_id == report.run_id and lease.held()
    assert running.lease_owner == lease.owner == report.lease_owner
    assert (
        report.lease_generation is not None and running.lease_generation == report.lease_generation
    )
    (ended,) = maintenance.runs(url, limit=10).items  # rewritten, not added
    assert ended.to_dict() == report.to_dict()
    assert str(ended.status) == "succeeded" and not ended.running
    assert ended.step("flush_inlined_data").counts == {"rows_flushed": 2}
    after = _lease(url)
    assert after is not None and not after.held() and after.run_id == report.run_id


def test_a_pass_adds_one_commit_at_its_start(tmp_path: Path) -> None:
    """The start's change set is the pass's only extra commit: a pass with
    nothing to do writes two, its start and its end."""
    url = _lake(tmp_path)
    with slatelake.connect(url) as s:
        before = s.state.head.batch_seq
        report = run_pass(s, s.options)
        s.refresh()
        after = s.state.head.batch_seq
    assert report.head_batch_seq == before + 1  # the end was recorded on the start's head
    assert after == before + 2


def test_scheduled_and_threshold_runs_are_audited_with_their_counters(tmp_path: Path) -> None:
    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path / 'data'}/") as s:
        s.sql("CREATE TABLE busy (id INTEGER)")
        for n in range(5):
            s.sql(f"INSERT INTO busy SELECT range FROM range({n * 200}, {n * 200 + 200})")
        s.sql("INSERT INTO busy VALUES (-1), (-2)")  # inlined
    scheduled = maintenance.run(url, FLUSH, trigger="scheduled")
    maintenance.set_policy(url, {"enabled": "true", "small_file_min_count": "4"}, by="ops")
    threshold = maintenance.run_threshold(url, by="ops").runs[0]
    entries = maintenance.audit_log(url, limit=4).items
    assert [(e.kind, e.who) for e in entries] == [
        ("run.threshold", "ops"),
        ("policy.set", "ops"),
        ("run.scheduled", None),
    ]
    ran, _, tick = entries
    assert tick.what["run_id"] == scheduled.run_id and tick.what["status"] == "succeeded"
    assert tick.what["counts"]["rows_flushed"] == 2
    assert ran.what["run_id"] == threshold.run_id and ran.what["table"] == "main.busy"
    assert ran.what["counts"]["files_processed"] == 6  # five inserts and the flush's file
    assert ran.what["counts"] == threshold.totals()
    assert ran.what["seconds"] == threshold.seconds


def test_a_run_waiting_for_the_lease_records_how_long_it_was_queued(tmp_path: Path) -> None:
    url = _lake(tmp_path)
    with slatelake.connect(url) as s:
        other = PassLease(s.lake.location)
        other.acquire()
        threading.Timer(1.0, other.release).start()
        report = run_pass(s, s.options, wait_s=20.0)
        assert run_pass(s, s.options).queued_s is None  # did not wait
    assert report.queued_s is not None and 0.9 <= report.queued_s < 15
    kept = {r.run_id: r for r in maintenance.runs(url).items}
    assert kept[report.run_id].queued_s == report.queued_s


def test_a_pass_that_raises_is_recorded_failed_with_its_error(tmp_path: Path) -> None:
    """A policy record that does not decode stops the pass before its first
    step; the run is recorded failed, with the error, and the error raised."""
    url = _lake(tmp_path)
    with slatelake.connect(url) as s:
        s.commit_change_set(
            ChangeSet(
                base=s.state.head,
                puts=((POLICY_KEY, b"\x00not a policy"),),
                tables=("sys/maintenance_policy",),
                changes_made="maintenance_policy",
            )
        )
        with pytest.raises(slatelake.SlatelakeError) as raised:
            run_pass(s, s.options)
    (failed,) = maintenance.runs(url).items
    assert str(failed.status) == "failed"
    assert failed.failed_reason == f"the pass raised {type(raised.value).__name__}: {raised.value}"
    assert maintenance.status(url)[0].run_id == failed.run_id
    (audited,) = maintenance.audit_log(url).items
    assert (audited.kind, audited.what["status"]) == ("run.manual", "failed")


def test_under_a_tiny_change_set_cap_a_run_is_still_rewritten_with_how_it_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two operations fit: the start (its entry and the index) is recorded,
    and the end keeps the window and the entry's rewrite, never leaving it
    ``running`` for the next pass to call dead; the audit entry does not fit."""
    url = _lake(tmp_path)
    monkeypatch.setenv(MAX_OPERATIONS_ENV, "2")
    with slatelake.connect(url) as s:
        report = run_pass(s, s.options)
    monkeypatch.delenv(MAX_OPERATIONS_ENV)
    (kept,) = maintenance.runs(url).items
    assert (kept.run_id, str(kept.status)) == (report.run_id, "succeeded")
    assert maintenance.status(url)[0].run_id == report.run_id
    assert maintenance.audit_log(url).items == []
