"""A pass ended from outside: SIGTERM or SIGINT to ``slatelake maintain``,
a second signal, and SIGKILL while the pass holds the lake's commit lock.

Each ends with the next pass timed: a stopped pass must hand the lake over
at once (it releases its lease), a killed one as soon as its pass lease
lapses, never after the commit lock's own TTL.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

import slatelake
from slatelake.catalog.commit_lock import TTL_ENV as LOCK_TTL_ENV
from slatelake.catalog.commit_lock import WAIT_ENV as LOCK_WAIT_ENV
from slatelake.maintenance.flight import TTL_ENV, PassLease
from tests.conftest import subprocess_env

SNAPSHOTS = 40
# Small change sets make expiry a long loop of small commits, each one
# preceded by the pass's stop check: a pass of several seconds to signal.
SMALL_BATCHES = {"SLATELAKE_MAX_CHANGESET_OPS": "4"}


def _lake(url: str, data: str) -> str:
    with slatelake.connect(url, data_path=data) as s:
        s.sql("CREATE TABLE t (id INTEGER)")
        for i in range(SNAPSHOTS):
            s.sql(f"INSERT INTO t VALUES ({i})")
    return url


def _data_path(url: str, tmp_path: Path) -> str:
    return url.rsplit("/", 1)[0] + "/data/" if url.startswith("s3://") else f"{tmp_path}/data/"


def _expire_options() -> dict[str, str]:
    """Every snapshot written so far is older than now: expiry has work."""
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f+00")
    return {"MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN": now, "MAINTENANCE_PROGRESS": "true"}


def _maintain(url: str, options: dict[str, str], env: dict[str, str]) -> subprocess.Popen:
    argv = [sys.executable, "-m", "slatelake.cli", "maintain", url]
    for key, value in options.items():
        argv += ["--option", f"{key}={value}"]
    return subprocess.Popen(
        argv,
        env=subprocess_env() | SMALL_BATCHES | env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_line(child: subprocess.Popen, needle: str) -> list[str]:
    """Read the child's stderr up to the line holding ``needle``."""
    seen = []
    assert child.stderr is not None
    for line in child.stderr:
        seen.append(line)
        if needle in line:
            return seen
    raise AssertionError(f"{needle!r} never printed:\n{''.join(seen)}")


def _next_pass_start(url: str, options: dict[str, str], wait_s: float) -> tuple[float, object]:
    """Run the next pass, waiting up to ``wait_s`` for the lease; the moment
    it started (time.monotonic) and its report."""
    with slatelake.connect(url, options=options) as s:
        return _pass_start(s, options, wait_s)


def _pass_start(session: object, options: dict[str, str], wait_s: float) -> tuple[float, object]:
    """A pass on an open session: when it started (had its lease) and its report."""
    started: list[float] = []

    def progress(message: str, fields: dict[str, object]) -> None:
        if message.startswith("pass start") and not started:
            started.append(time.monotonic())

    report = slatelake.maintenance.run(session, options, wait_s=wait_s, on_progress=progress)
    assert started, "the next pass never started"
    return started[0], report


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_a_signalled_pass_stops_between_batches_and_releases_its_lease(
    shared_lake_url: str, tmp_path: Path, sig: signal.Signals
) -> None:
    """The first signal ends the pass at its next boundary: it exits 128 +
    the signal, its status is recorded, its lease released, and the next
    pass starts within 2 s of the exit (with the default 60 s lease TTL)."""
    url = _lake(shared_lake_url, _data_path(shared_lake_url, tmp_path))
    options = _expire_options()
    with slatelake.connect(url, options=options) as following:  # open, ready to start
        child = _maintain(url, options, {})
        try:
            _wait_for_line(child, "expire_snapshots: batch 3 expired")  # mid-step
            signalled = time.monotonic()
            child.send_signal(sig)
            _, err = child.communicate(timeout=60)
            exited = time.monotonic()
        finally:
            if child.poll() is None:
                child.kill()
        assert child.returncode == 128 + sig, err
        started, report = _pass_start(following, options, wait_s=2.0)
    print(
        f"{sig.name}: exit {exited - signalled:.2f}s after the signal; "
        f"next pass started {started - exited:.2f}s after the exit"
    )
    assert started - exited < 2.0
    assert not report.failed
    assert f"{sig.name}: stopping at the next step boundary" in err
    with slatelake.connect(url, read_only=True) as ro:
        stopped = ro.maintenance_status()[1]  # the one before the next pass
    expire = stopped.step("expire_snapshots")
    assert "stopped: shutdown requested" in expire.detail and stopped.work_pending, stopped
    assert 3 <= expire.counts["snapshots_expired"] < SNAPSHOTS, expire  # ended between batches


def test_a_second_signal_exits_at_once_and_the_lease_lapses_within_its_ttl(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second signal does not wait for a boundary; what the pass held
    then lapses at its expiry: no later than the lease TTL (here 3 s)
    after the last heartbeat."""
    url = _lake((tmp_path / "lake").as_uri(), f"{tmp_path}/data/")
    options = _expire_options()
    child = _maintain(url, options, {TTL_ENV: "3"})
    try:
        _wait_for_line(child, "expire_snapshots: batch 1 expired")
        child.send_signal(signal.SIGTERM)
        _wait_for_line(child, "stopping at the next step boundary")
        child.send_signal(signal.SIGTERM)
        _, err = child.communicate(timeout=60)
        exited = time.monotonic()
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 128 + signal.SIGTERM, err
    assert "SIGTERM again: exiting now" in err
    monkeypatch.setenv(TTL_ENV, "3")
    started, report = _next_pass_start(url, options, wait_s=10.0)
    print(f"second signal: the next pass started {started - exited:.2f}s after the exit")
    assert started - exited < 3.0 + 1.0  # the TTL, and a poll of the waiting pass
    assert not report.failed


# The child: a real pass whose expire step, as it starts, takes the lake's
# commit lock the way a commit does and stalls there until it is killed.
_STALLS_HOLDING_THE_LOCK = textwrap.dedent(
    """
    import sys, time
    import slatelake
    from slatelake.maintenance.runner import run_pass

    url, older_than = sys.argv[1], sys.argv[2]
    options = {"MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN": older_than}

    def stall():
        print("locked", flush=True)
        time.sleep(600)

    with slatelake.connect(url, options=options) as s:
        def progress(message, fields):
            if message.startswith("step expire_snapshots start"):
                s.commit_under_lock(stall)
        run_pass(s, s.options, on_progress=progress)
    """
)


@pytest.mark.parametrize("after", ["pass", "writer"])
def test_a_killed_pass_holding_the_commit_lock_blocks_commits_only_until_its_lease_lapses(
    shared_lake_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, after: str
) -> None:
    """SIGKILL during the expire step, with the commit lock held: the next
    pass takes the lease once it lapses (TTL 3 s here) and breaks the dead
    pass's commit lock at once; a plain writer breaks it once that lease
    expires. Neither waits for the lock's own 60 s TTL."""
    url = _lake(shared_lake_url, _data_path(shared_lake_url, tmp_path))
    options = _expire_options()
    env = subprocess_env() | {TTL_ENV: "3", LOCK_TTL_ENV: "60"}
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _STALLS_HOLDING_THE_LOCK,
            url,
            options["MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN"],
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "locked", "the child never took the lock"
        child.send_signal(signal.SIGKILL)
        child.wait(30)
        killed = time.monotonic()
    finally:
        if child.poll() is None:
            child.kill()
    monkeypatch.setenv(TTL_ENV, "3")
    monkeypatch.setenv(LOCK_TTL_ENV, "60")
    if after == "pass":
        _, report = _next_pass_start(url, options, wait_s=10.0)
        assert report.step("expire_snapshots").status == "ran", report
    else:
        with slatelake.connect(url) as s:
            s.sql("INSERT INTO t VALUES (-1)")
    ended = time.monotonic()
    print(f"killed holding the commit lock: the next {after} ended {ended - killed:.2f}s after")
    assert ended - killed < 3.0 + 15.0  # the lease's TTL and the work, far below 60 s


def test_a_commit_lock_under_a_live_lease_is_not_broken_until_the_lease_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Never break a lock whose owner's lease stands: a writer waiting on it
    gives up (CommitLockBusyError); once that lease is released (its owner
    stalled or gone) the writer takes the lock within a lease check."""
    url = _lake((tmp_path / "lake").as_uri(), f"{tmp_path}/data/")
    monkeypatch.setenv(LOCK_WAIT_ENV, "2")
    owner = slatelake.connect(url)
    writer = slatelake.connect(url)
    lease = PassLease(owner.lake.location, ttl_s=60)
    locked, resume = threading.Event(), threading.Event()

    def stall_holding_the_lock() -> None:
        def build() -> None:
            locked.set()
            resume.wait(60)

        owner.commit_under_lock(build)  # nothing to commit: gives back what is left

    try:
        lease.acquire()
        owner.commit_lock.lease = lease.ref
        stalled = threading.Thread(target=stall_holding_the_lock)
        stalled.start()
        assert locked.wait(30)
        with pytest.raises(slatelake.CommitLockBusyError):
            writer.sql("INSERT INTO t VALUES (-1)")
        lease.release()
        t0 = time.monotonic()
        writer.sql("INSERT INTO t VALUES (-2)")
        took = time.monotonic() - t0
        assert took < 2.0, f"the lock of a released lease waited {took:.1f}s"
        resume.set()
        stalled.join(30)
        assert writer.sql("SELECT count(*) FROM t WHERE id < 0").fetchone() == (1,)
    finally:
        resume.set()
        owner.close()
        writer.close()
    print(f"lease released: the waiting writer committed in {took:.2f}s")


def test_a_signal_while_waiting_for_another_pass_ends_the_wait(tmp_path: Path) -> None:
    """A maintain waiting (``--wait``) for a running pass's lease gives up
    the wait at the signal, with the signal's status, and takes nothing."""
    url = _lake((tmp_path / "lake").as_uri(), f"{tmp_path}/data/")
    with slatelake.connect(url, read_only=True) as ro:
        running = PassLease(ro.lake.location)
    running.acquire()
    try:
        child = _maintain(url, {}, {})
        time.sleep(3.0)  # opened the lake, now polling the lease
        assert child.poll() is None, child.communicate()
        signalled = time.monotonic()
        child.send_signal(signal.SIGTERM)
        _, err = child.communicate(timeout=30)
        print(f"a waiting maintain ended {time.monotonic() - signalled:.2f}s after SIGTERM")
    finally:
        if child.poll() is None:
            child.kill()
        current = running.current()
        running.release()
    assert child.returncode == 128 + signal.SIGTERM, err
    assert "stopped while waiting for the maintenance lease" in err
    assert current is not None and current.owner == running.owner and current.held()
