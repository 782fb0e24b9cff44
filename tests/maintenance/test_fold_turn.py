"""One holder's turn (``maintenance.fold_turn``): what the fold function and
``slatelake fold`` run where nothing is resident. Real SlateDB on local files,
real sessions, real processes killed at the turn's boundaries; a resident
``slatelake hold`` started beside a turn."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import slatelake
from slatelake import maintenance
from slatelake.catalog.folder import Folder
from slatelake.catalog.lake import Lake
from slatelake.log.images import ImageBook
from slatelake.maintenance.holder import HolderLease, folded_of
from slatelake.store.location import LakeLocation
from slatelake.store.merge import CompactStoreRequest, compact_store
from tests.catalog.test_census import churn, fast_compactor, settled, wait_for
from tests.conftest import subprocess_env

__all__ = ["fast_compactor"]  # a fixture, used by name


def _lake(tmp_path: Path, commits: int = 6) -> tuple[str, list[int]]:
    url, data = (tmp_path / "lake").as_uri(), f"{tmp_path / 'data'}/"
    ids = list(range(commits))
    with slatelake.connect(url, data_path=data) as s:
        s.sql("CREATE TABLE t (id INTEGER)")
        for i in ids:
            s.sql(f"INSERT INTO t VALUES ({i})")
    return url, ids


def _rows(url: str) -> list[int]:
    with slatelake.connect(url, read_only=True) as s:
        return sorted(r[0] for r in s.sql("SELECT id FROM t").fetchall())


def _commit(url: str, ids: list[int], n: int) -> None:
    with slatelake.connect(url) as s:
        for _ in range(n):
            ids.append(len(ids))
            s.sql(f"INSERT INTO t VALUES ({ids[-1]})")


def test_a_turn_folds_every_slot_writes_an_image_and_truncates_behind_it(tmp_path: Path) -> None:
    url, ids = _lake(tmp_path)
    before = maintenance.backlog_of(url)
    assert before.unfolded_slots == before.last_slot > len(ids)
    assert before.image_seq is None and before.image_lag_slots == before.last_slot
    turn = maintenance.fold_turn(url, maintenance.FoldRequest(margin_s=0))
    assert turn.status == "folded", turn.reason
    assert turn.slots_folded == before.unfolded_slots
    assert turn.image is not None and turn.image["seq"] == turn.fold_seq == before.last_slot
    assert turn.truncated == before.last_slot - 1  # the newest slot always stays
    assert turn.backlog is not None
    assert (turn.backlog.unfolded_slots, turn.backlog.image_lag_slots) == (0, 0)
    assert _rows(url) == ids


def test_the_next_turn_truncates_what_the_last_one_folded_without_a_new_margin(
    tmp_path: Path,
) -> None:
    """A turn lives seconds, far less than the margin: the holder lease's
    record of when the last turn folded is what lets truncation go on."""
    url, ids = _lake(tmp_path)
    request = maintenance.FoldRequest(margin_s=0.5, image=True)
    first = maintenance.fold_turn(url, request)
    assert first.slots_folded > 0 and first.truncated == 0  # folded just now
    record = HolderLease(LakeLocation.parse(url)).current()
    assert record is not None and record.state == "released"
    assert folded_of(record) is not None and folded_of(record)[0] == first.fold_seq
    time.sleep(0.6)
    second = maintenance.fold_turn(url, request)
    assert second.truncated == first.fold_seq - 1
    assert _rows(url) == ids


def test_without_the_previous_holders_record_a_turn_waits_out_the_margin(tmp_path: Path) -> None:
    """The control of the test above: the same turns with the record gone
    truncate nothing, because slots folded before a folder opened count from
    its opening."""
    url, _ = _lake(tmp_path)
    request = maintenance.FoldRequest(margin_s=0.5, image=True)
    maintenance.fold_turn(url, request)
    for lease in (tmp_path / "lake" / "holder").iterdir():
        lease.unlink()
    time.sleep(0.6)
    assert maintenance.fold_turn(url, request).truncated == 0


def test_a_live_holder_lease_makes_a_turn_skip_and_name_the_holder(tmp_path: Path) -> None:
    url, _ = _lake(tmp_path)
    other = HolderLease(LakeLocation.parse(url))
    assert other.try_acquire()
    try:
        turn = maintenance.fold_turn(url)
        assert turn.status == "skipped"
        assert f"owner {other.owner[:8]}" in turn.reason
        assert turn.slots_folded == 0 and turn.backlog is not None
        assert turn.backlog.fold_cursor == 0 and turn.backlog.unfolded_slots > 0
    finally:
        other.release()
    assert maintenance.fold_turn(url).status == "folded"  # released: the next turn holds


KILL_AT = ["after_write", "after_flush", "after_fold", "after_image", "after_delete"]


@pytest.mark.parametrize("boundary", KILL_AT)
def test_a_turn_killed_at_any_boundary_loses_nothing_and_the_next_turn_finishes(
    tmp_path: Path, boundary: str
) -> None:
    url, ids = _lake(tmp_path, commits=5)
    maintenance.fold_turn(url, maintenance.FoldRequest(margin_s=0, image=True))
    _commit(url, ids, 4)  # an unfolded tail over an image, so every boundary is reached
    script = textwrap.dedent(
        f"""
        import os
        from slatelake import maintenance
        def crash(at):
            if at == {boundary!r}:
                os._exit(9)
        maintenance.fold_turn({url!r}, maintenance.FoldRequest(margin_s=0, image=True), fault=crash)
        """
    )
    env = subprocess_env() | {"SLATELAKE_PASS_LEASE_TTL_S": "1"}
    done = subprocess.run([sys.executable, "-c", script], env=env, timeout=120)
    assert done.returncode == 9, f"the turn never reached {boundary}"
    assert _rows(url) == ids  # a committer reads every commit whatever the holder did
    time.sleep(1.1)  # the dead turn's holder lease expires (nobody released it)
    turn = maintenance.fold_turn(url, maintenance.FoldRequest(margin_s=0, image=True))
    assert turn.status == "folded", turn.reason
    assert turn.backlog is not None and turn.backlog.unfolded_slots == 0
    assert turn.backlog.image_lag_slots == 0
    assert _rows(url) == ids


def test_a_resident_holder_started_during_a_turn_waits_then_holds_and_turns_skip(
    tmp_path: Path,
) -> None:
    url, ids = _lake(tmp_path)
    paused, resume = threading.Event(), threading.Event()

    def pause(at: str) -> None:
        if at == "after_fold":
            paused.set()
            assert resume.wait(60)

    result: list[object] = []
    turn_thread = threading.Thread(
        target=lambda: result.append(
            maintenance.fold_turn(url, maintenance.FoldRequest(margin_s=0), fault=pause)
        )
    )
    turn_thread.start()
    assert paused.wait(60)
    holder = subprocess.Popen(
        [sys.executable, "-m", "slatelake.cli", "hold", url, "--poll", "0.2", "--margin", "0"],
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        first = holder.stdout.readline()
        assert first.startswith("waiting for the holder lease"), first
        resume.set()
        turn_thread.join(60)
        turn = result[0]
        assert isinstance(turn, maintenance.FoldTurn) and turn.status == "folded"  # not fenced
        assert holder.stdout.readline().startswith(f"holding {url}")
        _commit(url, ids, 3)
        lake = LakeLocation.parse(url)
        wait_for(
            "the resident holder folds", lambda: maintenance.backlog_of(lake).unfolded_slots == 0
        )
        skipped = maintenance.fold_turn(url)
        assert skipped.status == "skipped" and "lease generation" in skipped.reason
    finally:
        holder.send_signal(signal.SIGTERM)
        out, err = holder.communicate(timeout=60)
    assert holder.returncode == 0, err
    assert maintenance.fold_turn(url).status == "folded"  # a stopped holder released the lease
    assert _rows(url) == ids


def test_a_merge_submitted_with_no_holder_completes_in_the_next_turn(
    tmp_path: Path, fast_compactor: None
) -> None:
    url = (tmp_path / "lake").as_uri()
    Lake.create(url).close()
    holder = Folder(LakeLocation.parse(url), margin_s=0)
    try:
        churn(url, holder, folds=8)
        wait_for("two runs in sys", settled(url, "sys", 2))
    finally:
        holder.close()
    submitted = compact_store(url, CompactStoreRequest(subspace="sys", wait_s=None))
    assert submitted.outcome == "pending"
    assert maintenance.backlog_of(url).store_merges_pending == 1
    stopped = maintenance.fold_turn(
        url, deadline=lambda: -1.0
    )  # no time left: the merge stays pending
    assert stopped.status == "partial" and stopped.merges_pending == 1
    assert "deadline" in stopped.reason
    turn = maintenance.fold_turn(url, deadline=lambda: 30.0)
    assert turn.status == "folded", turn.reason
    assert (turn.merges_completed, turn.merges_pending, turn.merges_failed) == (1, 0, 0)
    assert turn.backlog is not None and turn.backlog.store_merges_pending == 0


def test_slatelake_fold_cli_images_and_says_when_it_skips(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from slatelake.cli import main

    url, _ = _lake(tmp_path)
    assert main(["fold", url, "--image", "--margin", "0", "--deadline", "60s"]) == 0
    out = capsys.readouterr().out
    assert "image of slot" in out and "truncated" in out
    assert ImageBook(LakeLocation.parse(url)).newest() is not None
    other = HolderLease(LakeLocation.parse(url))
    assert other.try_acquire()
    try:
        assert main(["fold", url]) == 0
        assert "skipped: a live holder holds the lake" in capsys.readouterr().err
    finally:
        other.release()
    with pytest.raises(SystemExit) as refused:  # a deadline must be above zero
        main(["fold", url, "--deadline", "0s"])
    assert refused.value.code == 2


def test_a_turn_on_a_missing_lake_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    url = (tmp_path / "nothing").as_uri()
    with pytest.raises(slatelake.NotFoundError, match="no slatelake lake"):
        maintenance.fold_turn(url)
    assert not (tmp_path / "nothing").exists()


def test_a_turn_that_folds_nothing_new_keeps_the_recorded_fold_time(tmp_path: Path) -> None:
    url, _ = _lake(tmp_path)
    location = LakeLocation.parse(url)
    first = maintenance.fold_turn(url, maintenance.FoldRequest(margin_s=30))
    recorded = folded_of(HolderLease(location).current())
    assert recorded is not None and recorded[0] == first.fold_seq
    time.sleep(0.05)
    assert maintenance.fold_turn(url, maintenance.FoldRequest(margin_s=30)).slots_folded == 0
    assert folded_of(HolderLease(location).current()) == recorded
