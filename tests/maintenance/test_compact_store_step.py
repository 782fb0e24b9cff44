"""Step 8 in a real pass (real DuckDB + DuckLake, real SlateDB): ran with a
holder, skipped unconfigured, failed on a merge the compactor rejects (the
lake stays queryable), pending without a holder. The live case runs
``slatelake hold`` as its own process."""

from __future__ import annotations

import io
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import slatelake
from slatelake import maintenance
from slatelake.catalog.folder import Folder
from slatelake.catalog.lake import Lake
from slatelake.maintenance.holder import HolderLease
from slatelake.maintenance.report import FAILED, RAN, SKIPPED
from slatelake.store.census import CensusRequest, store_census
from slatelake.store.db import COMPACTOR_POLL_ENV, open_admin
from slatelake.store.location import LakeLocation
from tests.catalog.test_census import _l0_below, fast_compactor, wait_for
from tests.conftest import subprocess_env

__all__ = ["fast_compactor"]  # a fixture, used by name
INSERTS = 6


def _runs(url: str, subspace: str) -> int:
    return store_census(url, CensusRequest(list_objects=False)).row(subspace).sorted_runs


@pytest.fixture
def lake_with_runs(tmp_path: Path, fast_compactor: None) -> Iterator[str]:
    """A DuckLake lake folded insert by insert until current holds a sorted
    run; the folder is closed again, so no holder runs."""
    url, data = (tmp_path / "lake").as_uri(), tmp_path / "data"
    folder: Folder | None = None
    with slatelake.connect(url, data_path=f"{data}/") as s:
        s.sql("CREATE TABLE t (id INTEGER, v VARCHAR)")
        folder = Folder(LakeLocation.parse(url), margin_s=0)
        try:
            for i in range(INSERTS):
                s.sql(f"INSERT INTO t SELECT i, 'v' || i FROM range({i * 10}, {i * 10 + 10}) r(i)")
                folder.fold_once()
                wait_for("full L0 tiers taken", lambda: _l0_below(url, 4))
            wait_for("a sorted run in current", lambda: _runs(url, "current") >= 1)
        finally:
            folder.close()
    yield url


def _unfolded(url: str) -> int:
    return int(maintenance.backlog_of(url).unfolded_slots)


def _count(session: Any) -> int:
    return session.sql("SELECT count(*) FROM t").fetchone()[0]


def test_an_unconfigured_pass_reports_compact_store_skipped(lake_with_runs: str) -> None:
    with slatelake.connect(lake_with_runs) as s:
        report = s.maintenance()
    step = report.step("compact_store")
    assert (step.status, step.detail) == (SKIPPED, "not configured")
    assert _runs(lake_with_runs, "current") >= 1  # nothing was submitted, nothing merged


def test_a_configured_pass_with_a_live_holder_reports_compact_store_ran(
    lake_with_runs: str,
) -> None:
    url = lake_with_runs
    env = {**subprocess_env(), COMPACTOR_POLL_ENV: "100ms"}
    holder = subprocess.Popen(
        [sys.executable, "-m", "slatelake.cli", "hold", url, "--poll", "0.2", "--margin", "0"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and "holding" in holder.stdout.readline()
        runs_before = _runs(url, "current")
        options = {
            "MAINTENANCE_COMPACT_STORE": "true",
            "MAINTENANCE_COMPACT_STORE_TIMEOUT": "30s",
        }

        def folded_first(message: str, fields: dict[str, float]) -> None:
            # The pass's start record (its run history entry) is a slot the
            # holder folds into the store: let it land before the merge
            # measures, so the bytes compare like with like.
            if message.startswith("step sweep start"):
                wait_for("the start record folded", lambda: _unfolded(url) == 0)

        with slatelake.connect(url, options=options) as s:
            rows = _count(s)
            report = maintenance.run(s, options, on_progress=folded_first)
            step = report.step("compact_store")
            assert step.status == RAN, step.detail
            assert step.detail.startswith("completed: ")
            assert "current " in step.detail and "->1 runs" in step.detail
            assert step.counts["subspaces_merged"] >= 1 and step.counts["subspaces_failed"] == 0
            assert step.counts["merged_bytes_after"] <= step.counts["merged_bytes_before"]
            assert not report.work_pending
            assert _count(s) == rows
        assert runs_before >= 1 and _runs(url, "current") == 1
    finally:
        holder.terminate()
        holder.communicate(timeout=60)


def test_with_no_holder_live_the_step_hands_the_merge_over_without_waiting(
    lake_with_runs: str,
) -> None:
    """Nothing can execute the merge before the next holder's turn, so the
    pass does not wait out its timeout on every tick; the fold finishes it."""
    options = {"MAINTENANCE_COMPACT_STORE_SUBSPACE": "current"}
    options["MAINTENANCE_COMPACT_STORE_TIMEOUT"] = "30s"
    with slatelake.connect(lake_with_runs, options=options) as s:
        report = s.maintenance()
    step = report.step("compact_store")
    assert step.status == RAN and step.detail.startswith("pending: current pending")
    assert "no holder is live" in step.detail and "fold function" in step.detail
    assert step.counts["subspaces_pending"] == 1
    assert step.seconds < 10  # not the 30 s wait
    assert not report.work_pending  # the holder's work now, not the next pass's
    assert maintenance.backlog_of(lake_with_runs).store_merges_pending == 1
    turn = maintenance.fold_turn(lake_with_runs, deadline=lambda: 30.0)
    assert turn.merges_completed == 1 and turn.backlog.store_merges_pending == 0


def test_with_a_live_holder_lease_the_step_waits_and_reports_pending_within_the_timeout(
    lake_with_runs: str,
) -> None:
    """A holder that holds the lease but executes nothing (stalled): the
    step waits its timeout and marks the work pending for the next pass."""
    options = {"MAINTENANCE_COMPACT_STORE_SUBSPACE": "current"}
    options["MAINTENANCE_COMPACT_STORE_TIMEOUT"] = "1s"
    lease = HolderLease(LakeLocation.parse(lake_with_runs))
    assert lease.try_acquire()
    try:
        with slatelake.connect(lake_with_runs, options=options) as s:
            t0 = time.monotonic()
            report = s.maintenance()
            elapsed = time.monotonic() - t0
    finally:
        lease.release()
    step = report.step("compact_store")
    assert step.status == RAN and step.detail.startswith("pending: current pending")
    assert "not cancelled" in step.detail and "no holder is live" not in step.detail
    assert report.work_pending
    assert elapsed < 15  # the 1 s wait, plus the pass's other (unconfigured) steps


class _Watch(io.TextIOBase):
    """stderr, watched: runs ``then`` once when a line containing ``marker`` is written."""

    def __init__(self, marker: str, then: threading.Thread) -> None:
        self.marker, self.then, self.fired = marker, then, False

    def write(self, text: str) -> int:
        sys.__stderr__.write(text)
        if self.marker in text and not self.fired:
            self.fired = True
            self.then.start()
        return len(text)


def test_a_failing_merge_reports_failed_and_the_lake_stays_queryable(
    lake_with_runs: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from slatedb.uniffi import CompactionSpec, SourceId

    url = lake_with_runs
    loc = LakeLocation.parse(url)
    # A merge the compactor rejects, as a stale plan would be: it names a
    # sorted run current does not have. No holder yet, so it stays in flight
    # until the pass adopts it; the holder starts once step 8 has begun.
    admin = open_admin(loc)
    admin.submit_compaction(CompactionSpec.TIERED(b"\x03", [SourceId.SORTED_RUN(9999)], 9999))
    holders: list[Folder] = []
    lease = HolderLease(loc)  # a holder takes its lease before its writer
    assert lease.try_acquire()
    start_holder = threading.Thread(target=lambda: holders.append(Folder(loc, margin_s=0)))
    watch = _Watch("step compact_store start", start_holder)
    options = {
        "MAINTENANCE_COMPACT_STORE_SUBSPACE": "current",
        "MAINTENANCE_COMPACT_STORE_TIMEOUT": "30s",
        "MAINTENANCE_PROGRESS": "true",
    }
    try:
        with slatelake.connect(url, options=options) as s:
            rows = _count(s)
            monkeypatch.setattr(sys, "stderr", watch)
            report = s.maintenance()
            monkeypatch.setattr(sys, "stderr", sys.__stderr__)
            step = report.step("compact_store")
            assert watch.fired
            assert step.status == FAILED, step.detail
            assert "current failed" in step.detail
            assert step.counts["subspaces_failed"] == 1
            assert report.work_pending
            assert _count(s) == rows  # queryable, same rows
            s.sql("INSERT INTO t VALUES (-1, 'after')")
            assert _count(s) == rows + 1
            final = s.lake.materialize()
    finally:
        start_holder.join(30)
        for folder in holders:
            folder.close()
        lease.release()
    with Lake.open(url, read_only=True) as lake:  # a fresh handle reads the lake too
        assert lake.materialize().same_rows(final)


def test_a_pass_out_of_time_leaves_the_merge_for_the_next_pass(lake_with_runs: str) -> None:
    from slatelake.maintenance.runner import run_pass

    options = {"MAINTENANCE_COMPACT_STORE": "true"}
    with slatelake.connect(lake_with_runs, options=options) as s:
        report = run_pass(s, s.options, deadline=lambda: 0.0)
    step = report.step("compact_store")
    assert step.status == SKIPPED and "deadline" in step.detail and "next pass" in step.detail
    assert report.work_pending
