"""Committers race through the log with no folder; then a folder folds them."""

from __future__ import annotations

import subprocess
import sys

from slatelake.catalog.folder import Folder
from slatelake.catalog.lake import Lake
from slatelake.catalog.state import SYS_FOLD, decode_fold
from slatelake.store.location import LakeLocation
from tests.catalog.helpers import commit_inserts
from tests.conftest import subprocess_env

PER_PROCESS = 100


def _race(url: str) -> list[str]:
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.catalog.helpers", url, str(PER_PROCESS), str(t)],
            env=subprocess_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for t in (1, 2)
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (_out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
    return [o for o, _ in outs]


def _commit_order(state) -> list[str]:  # noqa: ANN001
    rows = sorted(state.rows("ducklake_snapshot_changes"))
    return [r[3] for r in rows]


def test_two_committer_processes_race_200_commits_exactly_once(shared_lake_url: str) -> None:
    Lake.create(shared_lake_url).close()
    _race(shared_lake_url)
    with Lake.open(shared_lake_url, read_only=True) as lake:
        slots = [s.seq for s in lake.log.list_after(0)]
        assert slots == list(range(1, 2 * PER_PROCESS + 1)), "slots must have no holes"
        txns = [cs.txn_id for s in slots for cs in lake.log.read(s)]
        assert len(txns) == len(set(txns)) == 2 * PER_PROCESS
        state = lake.materialize()
    assert state.head.snapshot_id == 2 * PER_PROCESS - 1
    assert state.head.batch_seq == 2 * PER_PROCESS
    order = _commit_order(state)
    assert len(order) == 2 * PER_PROCESS
    for table in (1, 2):  # each committer's commits appear once each, in its own order
        mine = [o for o in order if o.startswith(f"{table}:")]
        assert mine == [f"{table}:{i}" for i in range(PER_PROCESS)]
    assert len(state.rows("ducklake_data_file")) == 2 * PER_PROCESS


def test_folder_after_race_folds_identically(shared_lake_url: str) -> None:
    Lake.create(shared_lake_url).close()
    _race(shared_lake_url)
    with Lake.open(shared_lake_url, read_only=True) as lake:
        before = lake.materialize()
    folder = Folder(LakeLocation.parse(shared_lake_url), margin_s=0)
    try:
        report = folder.fold_once()
        assert report.slots == 2 * PER_PROCESS
        fold_seq, head = decode_fold(folder.writer.get(SYS_FOLD))
        assert fold_seq == 2 * PER_PROCESS == before.last_seq
        assert head == before.head
    finally:
        folder.close()
    with Lake.open(shared_lake_url, read_only=True) as lake:
        after = lake.materialize()
        assert after.same_rows(before)
        assert after.last_seq == before.last_seq


def test_reader_at_old_fold_cursor_keeps_its_slots_through_truncation(lake_url: str) -> None:
    Lake.create(lake_url).close()
    location = LakeLocation.parse(lake_url)
    commit_inserts(lake_url, 10, 1)
    folder = Folder(location, margin_s=0)
    try:
        folder.fold_once()  # fold cursor 10; nobody holds a lease: slots 1..9 go
        held = Lake.open(lake_url, read_only=True)
        view = held.materialize()  # lease at fold cursor 10
        assert view.last_seq == 10
        commit_inserts(lake_url, 10, 2)
        report = folder.fold_once()  # cursor 20, but the held reader needs 11..20
        assert report.fold_seq == 20
        remaining = [s.seq for s in held.log.list_after(0)]
        assert remaining == list(range(11, 21))
        # The held reader's store view may be at cursor 10 still: replay must work.
        held.refresh(view)
        with Lake.open(lake_url, read_only=True) as fresh:
            assert view.same_rows(fresh.materialize())
        held.close()  # lease released: the next fold may truncate all but the newest
        assert folder.fold_once().truncated == 9
        assert [s.seq for s in folder.log.list_after(0)] == [20]
        assert folder.log.truncated_upto() == 19
    finally:
        folder.close()


def test_truncation_waits_out_the_margin(lake_url: str) -> None:
    Lake.create(lake_url).close()
    commit_inserts(lake_url, 5, 1)
    folder = Folder(LakeLocation.parse(lake_url), margin_s=3600)
    try:
        report = folder.fold_once()
        assert report.slots == 5 and report.truncated == 0
        assert len(list(folder.log.list_after(0))) == 5
    finally:
        folder.close()
