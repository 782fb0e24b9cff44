"""The interval scheduler: unattended passes, single flight, clean shutdown."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

import slatelake
from slatelake.maintenance import options as option_rules
from slatelake.maintenance.flight import PassLease
from tests.conftest import subprocess_env


def _lake(tmp_path: Path, snapshots: int = 3) -> str:
    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path}/data/") as s:
        s.sql("CREATE TABLE t (id INTEGER)")
        for i in range(snapshots):
            s.sql(f"INSERT INTO t VALUES ({i})")
    return url


def _after_every_snapshot() -> str:
    """Now, as a UTC timestamp ``older_than``: every snapshot written so far is
    older, so expiry has work without waiting for a window to pass."""
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f+00")


def _wait_for(predicate, timeout: float = 60.0) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def _scheduled(url: str) -> list:
    with slatelake.connect(url, read_only=True) as ro:
        return [p for p in ro.maintenance_status() if p.trigger == "scheduled"]


@pytest.fixture
def quick_ticks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ticks of a fraction of a second for the in-process tests below: the
    interval's floor (options.MIN_INTERVAL_S, 10 s) guards a deployment's
    lake, and these tests time the scheduler's own ticks. Processes the
    tests start run with the floor as shipped."""
    monkeypatch.setattr(option_rules, "MIN_INTERVAL_S", 0.1)


@pytest.mark.usefixtures("quick_ticks")
def test_the_scheduler_runs_a_pass_unattended(tmp_path: Path) -> None:
    url = _lake(tmp_path)
    options = {"MAINTENANCE_INTERVAL": "0.3", "MAINTENANCE_MERGE_ADJACENT_FILES": "true"}
    session = slatelake.connect(url, options=options)
    try:
        _wait_for(lambda: session.scheduler.passes >= 1)
    finally:
        session.close()
    window = _scheduled(url)
    assert window and window[0].step("merge_adjacent_files").status == "ran"


@pytest.mark.usefixtures("quick_ticks")
def test_ticks_skip_while_a_pass_holds_the_lease(tmp_path: Path) -> None:
    url = _lake(tmp_path)
    with slatelake.connect(url) as s:
        other = PassLease(s.lake.location)
        assert other.try_acquire()  # a pass "running" in another process
    session = slatelake.connect(url, options={"MAINTENANCE_INTERVAL": "0.2"})
    try:
        _wait_for(lambda: session.scheduler.skipped_ticks >= 3)
        assert session.scheduler.passes == 0
        assert _scheduled(url) == []
        other.release()
        _wait_for(lambda: session.scheduler.passes >= 1)
    finally:
        session.close()
    assert len(_scheduled(url)) >= 1


def test_sigterm_during_a_running_pass_completes_it_then_exits(tmp_path: Path) -> None:
    url = _lake(tmp_path, snapshots=12)
    older_than = _after_every_snapshot()
    env = subprocess_env() | {"SLATELAKE_MAX_CHANGESET_OPS": "4"}  # expiry in small batches
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "slatelake.cli",
            "hold",
            url,
            "--poll",
            "0.2",
            "--option",
            "MAINTENANCE_INTERVAL=10s",  # the floor: the first pass starts after 10 s
            "--option",
            f"MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN={older_than}",
            "--option",
            "MAINTENANCE_PROGRESS=true",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen = []
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            seen.append(line)
            if "step expire_snapshots start" in line:
                os.kill(proc.pid, signal.SIGTERM)
                break
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    seen.append(err)
    text = "".join(seen)
    assert proc.returncode == 0, text
    assert "pass end" in text and "stopped" in out
    assert _scheduled(url), "the interrupted pass still recorded its report"


EXIT_WITHOUT_CLOSE = r"""
import sys, threading
import slatelake

started = threading.Event()


class Watch:
    # stderr that notices when the scheduled pass is inside its first step
    def __init__(self, inner):
        self.inner = inner

    def write(self, text):
        if "step expire_snapshots start" in text:
            started.set()
        return self.inner.write(text)

    def flush(self):
        self.inner.flush()


sys.stderr = Watch(sys.stderr)
session = slatelake.connect(
    sys.argv[1],
    options={
        "MAINTENANCE_INTERVAL": "10s",  # the floor
        "MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN": sys.argv[2],
        "MAINTENANCE_PROGRESS": "true",
    },
)
assert started.wait(120), "no scheduled pass started"
print("leaving without close()", flush=True)
"""


def test_interpreter_exit_without_close_completes_the_pass_records_it_and_frees_the_lease(
    tmp_path: Path,
) -> None:
    """The RFC: process teardown without detach completes a running pass
    before the database goes (here: before the interpreter does)."""
    url = _lake(tmp_path, snapshots=12)
    older_than = _after_every_snapshot()
    env = subprocess_env() | {"SLATELAKE_MAX_CHANGESET_OPS": "4"}  # expiry in small batches
    proc = subprocess.run(
        [sys.executable, "-c", EXIT_WITHOUT_CLOSE, url, older_than],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    assert "leaving without close()" in proc.stdout
    assert "pass end" in proc.stderr, "the pass in flight was cut off at exit"
    window = _scheduled(url)
    assert window, f"the pass in flight at exit recorded no report:\n{proc.stderr[-3000:]}"
    with slatelake.connect(url, read_only=True) as ro:
        holder = PassLease(ro.lake.location).current()
    assert holder is not None and not holder.held(), f"the lease outlived the process: {holder}"
