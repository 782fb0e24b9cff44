"""A listing is not a snapshot: a gap in it is asked about by GET, and only a
slot still missing after a bounded wait is a hole (log/replay.py).

A local lake lists ``commits/`` with readdir, which misses entries created
while it runs (ext4 returns them in hash order): with writers committing, a
listing shows slot N+1 and not slot N, written a moment earlier. A pass that
took that for a hole failed with CorruptionError on a whole log."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from slatelake.catalog.folder import Folder
from slatelake.catalog.lake import Lake
from slatelake.catalog.state import SYS_FOLD
from slatelake.errors import CorruptionError, StaleViewError
from slatelake.log import replay
from slatelake.log.changeset import ChangeSet, Head, encode_envelope
from slatelake.log.replay import read_key_tail, read_tail
from slatelake.log.slots import SlotLog
from slatelake.store.location import LakeLocation
from tests.catalog.helpers import commit_inserts
from tests.conftest import subprocess_env

WRITERS = 3


@pytest.fixture
def lake(lake_url: str):  # noqa: ANN201
    Lake.create(lake_url).close()
    commit_inserts(lake_url, 5, 1)
    handle = Lake.open(lake_url)
    yield handle
    handle.close()


def _head_slot(head: Head, seq: int) -> bytes:
    """A head-preserving change set validated against ``head``, as slot ``seq``."""
    cs = ChangeSet(base=head, puts=((bytes((0x00,)) + b"probe", b"x"),), tables=("probe",))
    return encode_envelope([cs], seq)


def test_a_slot_written_after_the_listing_saw_a_higher_one_is_waited_for(lake: Lake) -> None:
    state = lake.materialize()
    head6 = Head(state.head.snapshot_id, state.head.batch_seq + 1)
    # slot 7 is there, slot 6 not yet: the window a listing that is not a
    # snapshot shows, held open until slot 6 lands a moment later
    assert lake.log.try_write(7, _head_slot(head6, 7))
    writer = threading.Timer(0.3, lambda: lake.log.try_write(6, _head_slot(state.head, 6)))
    writer.start()
    try:
        tail = read_tail(lake.log, state.head, 5)
    finally:
        writer.join()
    assert [seq for seq, _ in tail.applied] == [6, 7] and tail.last_seq == 7


def test_a_key_reader_waits_for_a_slot_below_a_listed_one_too(lake: Lake) -> None:
    state = lake.materialize()
    head6 = Head(state.head.snapshot_id, state.head.batch_seq + 1)
    assert lake.log.try_write(7, _head_slot(head6, 7))
    writer = threading.Timer(0.3, lambda: lake.log.try_write(6, _head_slot(state.head, 6)))
    writer.start()
    try:
        tail = read_key_tail(lake.log, state.head, 5, _fold_key_only())
    finally:
        writer.join()
    assert [seq for seq, _ in tail.applied] == [6, 7] and tail.last_seq == 7


def _fold_key_only():  # noqa: ANN202
    from slatelake.log.changeset import KeySelection

    return KeySelection(frozenset((SYS_FOLD,)))


def test_a_slot_that_never_comes_is_a_hole_after_the_bounded_wait(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(replay, "HOLE_WAIT_S", 0.3)
    lake.log.delete(3)
    started = time.monotonic()
    with pytest.raises(CorruptionError, match=r"slot 3 is missing below present slot 4"):
        read_tail(lake.log, Head(-1, 0), 0)
    assert 0.3 <= time.monotonic() - started < 5


def test_a_gap_the_truncation_mark_covers_is_stale_at_once(lake: Lake) -> None:
    lake.log.delete(1)
    lake.log.delete(2)
    lake.log.mark_truncated(2)
    started = time.monotonic()
    with pytest.raises(StaleViewError, match="truncated the commit log up to slot 2"):
        read_tail(lake.log, Head(-1, 0), 0)
    assert time.monotonic() - started < replay.HOLE_WAIT_S


def test_a_whole_listing_reads_each_slot_once(lake: Lake, monkeypatch: pytest.MonkeyPatch) -> None:
    gets: list[int] = []
    real = SlotLog.read_raw

    def counted(self: SlotLog, seq: int) -> bytes | None:
        gets.append(seq)
        return real(self, seq)

    monkeypatch.setattr(SlotLog, "read_raw", counted)
    tail = read_tail(lake.log, Head(-1, 0), 0)
    assert tail.last_seq == 5 and sorted(gets) == [1, 2, 3, 4, 5]


def _stress(url: str, seconds: float) -> tuple[int, int]:
    """WRITERS processes commit for ``seconds`` while this one replays the log
    back to back (a full replay, a keyed one) and folds and truncates between
    them; returns (replays, commits). Any CorruptionError fails the test."""
    Lake.create(url).close()
    commit_inserts(url, 1, 1)
    with Lake.open(url) as lake:
        start = lake.materialize().head.snapshot_id
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.log.tail_writer", url, str(10 + t), str(seconds)],
            env=subprocess_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for t in range(WRITERS)
    ]
    location = LakeLocation.parse(url)
    log = SlotLog(location)
    folder = Folder(location, margin_s=0)
    replays = 0
    try:
        with Lake.open(url) as reader:
            deadline = time.monotonic() + seconds
            last_fold = time.monotonic()
            while time.monotonic() < deadline:
                read_tail(log, folder.head, folder.seq)
                reader.read_sys_at_head(SYS_FOLD)
                replays += 2
                if time.monotonic() - last_fold > 1.0:
                    folder.fold_once()
                    last_fold = time.monotonic()
    finally:
        folder.close()
        outs = [p.communicate(timeout=120) for p in procs]
    for p, (_out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
    commits = sum(int(out) for out, _ in outs)
    with Lake.open(url) as lake:
        state = lake.materialize()
    assert state.head.snapshot_id == start + commits  # every commit is in, once
    return replays, commits


@pytest.mark.slow
def test_replays_beside_three_writer_processes_never_see_a_hole(tmp_path) -> None:  # noqa: ANN001
    replays, commits = _stress((tmp_path / "lake").as_uri(), 10.0)
    assert replays > 25 and commits > 25


@pytest.mark.long
def test_replays_beside_three_writer_processes_for_five_minutes_never_see_a_hole(
    tmp_path,  # noqa: ANN001
) -> None:
    replays, commits = _stress((tmp_path / "lake").as_uri(), 300.0)
    assert replays > 500 and commits > 500
