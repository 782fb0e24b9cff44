"""A pass's lifecycle around its caller: a killed owner, the in-process lock,
the caller's transaction and connection, and a status record that does not
decode."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pytest

import slatelake
from slatelake.ducklake.session import Session
from slatelake.log.changeset import ChangeSet
from slatelake.maintenance import report as rpt
from slatelake.maintenance.flight import TTL_ENV, AlreadyRunningError, PassLease, process_lock
from slatelake.maintenance.runner import run_pass
from slatelake.store import values
from tests.conftest import subprocess_env


def _lake(url: str, data: str, snapshots: int = 3) -> str:
    with slatelake.connect(url, data_path=data) as s:
        s.sql("CREATE TABLE t (id INTEGER)")
        for i in range(snapshots):
            s.sql(f"INSERT INTO t VALUES ({i})")
    return url


def _after_every_snapshot() -> str:
    """Now, as a UTC timestamp ``older_than``: every snapshot written so far is
    older, so expiry has work without waiting for a window to pass."""
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f+00")


def _data_path(url: str, tmp_path: Path) -> str:
    return url.rsplit("/", 1)[0] + "/data/" if url.startswith("s3://") else f"{tmp_path}/data/"


def test_a_killed_pass_is_replaced_once_its_heartbeat_stops(
    shared_lake_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGKILL runs no hook: the dead owner's lease must lapse in about a TTL
    (here 2 s), not block every pass for a quarter of an hour."""
    url = _lake(shared_lake_url, _data_path(shared_lake_url, tmp_path), snapshots=12)
    older_than = _after_every_snapshot()
    env = subprocess_env() | {TTL_ENV: "2", "SLATELAKE_MAX_CHANGESET_OPS": "4"}
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "slatelake.cli",
            "maintain",
            url,
            "--option",
            f"MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN={older_than}",
            "--option",
            "MAINTENANCE_PROGRESS=true",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stderr is not None
        for line in child.stderr:
            if "step expire_snapshots start" in line:
                os.kill(child.pid, signal.SIGKILL)
                break
        child.wait(60)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == -signal.SIGKILL
    with slatelake.connect(url, read_only=True) as ro:
        holder = PassLease(ro.lake.location).current()
    assert holder is not None and holder.state == "held", "killed after its pass ended"
    monkeypatch.setenv(TTL_ENV, "2")
    with slatelake.connect(url) as s:
        report = run_pass(s, s.options, wait_s=8.0)  # a 15-minute lease would refuse this
    assert report.trigger == "manual" and not report.failed


def test_two_spellings_of_one_lake_share_the_in_process_lock(tmp_path: Path) -> None:
    url = _lake((tmp_path / "lake").as_uri(), f"{tmp_path}/data/")
    other_spelling = f"file://{tmp_path}/lake/"  # a trailing slash: the same lake
    with slatelake.connect(other_spelling) as s:
        assert s.url != url
        lock = process_lock(s.lake.location.url)
        assert lock.acquire(blocking=False)  # a pass on the canonical spelling, running
        try:
            with pytest.raises(AlreadyRunningError, match="in this process"):
                run_pass(s, s.options, wait_s=0)
        finally:
            lock.release()
        assert not run_pass(s, s.options, wait_s=0).failed


def test_the_trigger_refuses_inside_a_raw_begin_and_records_nothing(tmp_path: Path) -> None:
    """A BEGIN sent as SQL is as much an explicit transaction as
    ``session.transaction()``; a later ROLLBACK must not undo a record."""
    url = _lake((tmp_path / "lake").as_uri(), f"{tmp_path}/data/")
    with slatelake.connect(url, options={"MAINTENANCE_MERGE_ADJACENT_FILES": "true"}) as s:
        s.sql("BEGIN TRANSACTION")
        with pytest.raises(slatelake.MisconfigurationError, match="explicit transaction"):
            s.maintenance()
        s.sql("ROLLBACK")
        s.sql("BEGIN")
        with pytest.raises(slatelake.MisconfigurationError, match="explicit transaction"):
            run_pass(s, s.options)
        s.sql("COMMIT")
        assert s.maintenance().step("merge_adjacent_files").status == rpt.RAN
    with slatelake.connect(url, read_only=True) as ro:
        assert len(ro.maintenance_status()) == 1


def test_the_trigger_runs_on_a_connection_of_its_own(tmp_path: Path) -> None:
    """What the caller did to its own connection (here: turning off external
    access, which a merge writing Parquet needs) never reaches the pass."""
    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path}/data/") as s:
        s.sql("CREATE TABLE t (id INTEGER)")
        for i in range(3):  # three Parquet files for the merge to join
            s.sql(f"INSERT INTO t SELECT * FROM range({i * 100}, {i * 100 + 100})")
    with slatelake.connect(url, options={"MAINTENANCE_MERGE_ADJACENT_FILES": "true"}) as s:
        s.sql("SET enable_external_access = false")
        report = s.maintenance()
    merge = report.step("merge_adjacent_files")
    assert merge.status == rpt.RAN, merge.detail
    assert merge.counts["files_created"] >= 1


def _opened_sessions(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The URL of every session opened from now on (the real ones, counted)."""
    opened: list[str] = []
    real = Session.__init__

    def counting(self: Session, lake_url: str, *args: Any, **kwargs: Any) -> None:
        opened.append(lake_url)
        real(self, lake_url, *args, **kwargs)

    monkeypatch.setattr(Session, "__init__", counting)
    return opened


def _three_files(tmp_path: Path) -> str:
    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path}/data/") as s:
        s.sql("CREATE TABLE t (id INTEGER)")
        for i in range(3):  # three Parquet files for the merge to join
            s.sql(f"INSERT INTO t SELECT * FROM range({i * 100}, {i * 100 + 100})")
    return url


def test_the_trigger_runs_on_the_sessions_own_database_and_leaves_the_caller_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RFC 0021: the on-demand trigger runs on a connection of its own against
    the handle the attach holds. No second catalog is opened, and what is
    the caller's connection's own (USE, search path, a temporary table, a
    session variable) is as it was after the pass."""
    url = _three_files(tmp_path)
    with slatelake.connect(url, options={"MAINTENANCE_MERGE_ADJACENT_FILES": "true"}) as s:
        s.sql("USE memory")
        s.sql("SET search_path = 'memory.main'")
        s.sql("CREATE TEMP TABLE mine AS SELECT 7 AS x")
        s.sql("SET VARIABLE answer = 42")
        opened = _opened_sessions(monkeypatch)
        report = s.maintenance()
        assert opened == []
        merge = report.step("merge_adjacent_files")
        assert merge.status == rpt.RAN and merge.counts["files_created"] >= 1, merge.detail
        assert s.con.execute("SELECT current_database()").fetchone() == ("memory",)
        assert s.con.execute("SELECT current_setting('search_path')").fetchone() == ("memory.main",)
        assert s.sql("SELECT x FROM mine").fetchall() == [(7,)]
        assert s.sql("SELECT getvariable('answer')").fetchall() == [(42,)]
        # the session saw the pass's commits as they landed: one file, all rows
        files = s.sql("SELECT count(*) FROM ducklake_list_files('lake', 't')").fetchall()
        assert files == [(1,)]
        assert s.sql("SELECT count(*) FROM lake.t").fetchall() == [(300,)]
    with slatelake.connect(url, read_only=True) as fresh:
        assert fresh.sql("SELECT count(*) FROM ducklake_list_files('lake', 't')").fetchall() == [
            (1,)
        ]


def test_the_trigger_opens_a_session_of_its_own_when_the_caller_changed_a_global_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A global setting is the database's, shared by every connection to it: once
    the caller changed one, or when the DuckDB connection is the caller's own,
    the pass runs on a session of its own, where none of it reaches."""
    url = _three_files(tmp_path)
    options = {"MAINTENANCE_MERGE_ADJACENT_FILES": "true"}
    with slatelake.connect(url, options=options) as s:
        s.sql("SET threads = 1")
        opened = _opened_sessions(monkeypatch)
        assert s.maintenance().step("merge_adjacent_files").status == rpt.RAN
        assert opened == [url]
    monkeypatch.undo()
    con = duckdb.connect()
    with slatelake.connect(url, options=options, connection=con) as s:
        opened = _opened_sessions(monkeypatch)
        assert s.maintenance().step("merge_adjacent_files").status == rpt.RAN
        assert opened == [url]


def _store_status(url: str, raw: bytes) -> None:
    """Write ``raw`` as the stored window, through a real commit."""
    with slatelake.connect(url) as s:
        s.commit_change_set(
            ChangeSet(
                base=s.state.head,
                puts=((rpt.STATUS_KEY, raw),),
                tables=("sys/maintenance_status",),
                changes_made="maintenance_status",
            )
        )


@pytest.mark.parametrize(
    ("damage", "kept"),
    [
        (b"\x00garbage, not a framed value", 0),
        (values.frame(0x04, [{"trigger": "manual"}, "not a record"]), 0),
        (
            values.frame(0x04, [rpt.PassReport(trigger="manual").to_dict(), {"steps": "damaged"}]),
            1,
        ),
    ],
    ids=["bad-framing", "malformed-records", "one-good-record"],
)
def test_a_corrupt_status_window_warns_and_the_next_pass_rewrites_it(
    tmp_path: Path, damage: bytes, kept: int
) -> None:
    url = _lake((tmp_path / "lake").as_uri(), f"{tmp_path}/data/")
    _store_status(url, damage)
    with slatelake.connect(url, read_only=True) as ro:
        window = ro.maintenance_status()
    assert len(window) == kept
    assert window.warning is not None and "sys/maintenance_status" in window.warning
    with slatelake.connect(url) as s:
        s.maintenance()
    with slatelake.connect(url, read_only=True) as ro:
        window = ro.maintenance_status()
    assert window.warning is None
    assert len(window) == kept + 1 and window[0].trigger == "manual"
