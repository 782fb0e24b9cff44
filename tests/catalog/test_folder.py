"""The folder: crash boundaries, fencing, corruption, format stamps."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from slatelake.catalog.folder import Folder
from slatelake.catalog.lake import Lake
from slatelake.catalog.state import SYS_FOLD, SYS_FORMAT, decode_fold
from slatelake.errors import CorruptionError, FencedError, FormatError
from slatelake.store import values
from slatelake.store.db import open_writer
from slatelake.store.keys import Subspace, encode_key
from slatelake.store.location import LakeLocation
from tests.catalog.helpers import commit_inserts
from tests.conftest import subprocess_env

SLOTS = 12

# (boundary, nth time reached, batch_ops, slots the restarted folder must fold)
CRASHES = [
    ("after_write", 1, 10, None),  # first batch only in the memtable: all refolded
    ("after_write", 3, 10, None),  # mid-fold, several batches in: all refolded
    ("after_flush", 1, 10, 0),  # durable, crashed before truncating: nothing refolded
    ("after_delete", 4, 10, 0),  # crashed mid-truncation: truncation resumes
]


def _durable_fold_seq(url: str) -> int:
    with Lake.open(url, read_only=True) as lake:
        return decode_fold(lake.reader(fresh=True).get(SYS_FOLD))[0]


@pytest.mark.parametrize(("boundary", "nth", "batch_ops", "refold"), CRASHES)
def test_folder_killed_at_a_boundary_resumes_exactly(
    shared_lake_url: str, boundary: str, nth: int, batch_ops: int, refold: int | None
) -> None:
    Lake.create(shared_lake_url).close()
    commit_inserts(shared_lake_url, SLOTS, 1)
    with Lake.open(shared_lake_url, read_only=True) as lake:
        expected = lake.materialize()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.catalog.crash_folder",
            shared_lake_url,
            boundary,
            str(nth),
            str(batch_ops),
        ],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 9, proc.stderr
    durable = _durable_fold_seq(shared_lake_url)
    folder = Folder(LakeLocation.parse(shared_lake_url), margin_s=0, batch_ops=batch_ops)
    try:
        report = folder.fold_once()
        assert report.fold_seq == SLOTS
        assert report.slots == SLOTS - durable
        if refold is not None:
            assert report.slots == refold
        # truncation completed too, keeping the newest slot
        assert [s.seq for s in folder.log.list_after(0)] == [SLOTS]
        assert folder.log.truncated_upto() == SLOTS - 1
    finally:
        folder.close()
    with Lake.open(shared_lake_url, read_only=True) as lake:
        after = lake.materialize()
    assert after.same_rows(expected)
    assert after.row_count() == expected.row_count()


def test_a_second_folder_fences_the_first(lake_url: str) -> None:
    Lake.create(lake_url).close()
    location = LakeLocation.parse(lake_url)
    first = Folder(location, margin_s=0)
    second = Folder(location, margin_s=0)
    try:
        commit_inserts(lake_url, 2, 1)
        with pytest.raises(FencedError, match="newer folder"):
            first.fold_once()
        assert second.fold_once().fold_seq == 2
    finally:
        first.close()
        second.close()


def test_hold_exits_with_status_3_when_fenced(shared_lake_url: str) -> None:
    Lake.create(shared_lake_url).close()
    proc = subprocess.Popen(
        [sys.executable, "-m", "slatelake.cli", "hold", shared_lake_url, "--poll", "0.2"],
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert "holding" in proc.stdout.readline()
        newer = Folder(LakeLocation.parse(shared_lake_url), margin_s=0)
        commit_inserts(shared_lake_url, 1, 1)
        _, err = proc.communicate(timeout=60)
        newer.close()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 3, err
    assert "fenced" in err and "Traceback" not in err


def test_hold_folds_new_commits_while_running(lake_url: str) -> None:
    import threading

    Lake.create(lake_url).close()
    folder = Folder(LakeLocation.parse(lake_url), margin_s=0)
    stop = threading.Event()
    reports = []
    thread = threading.Thread(target=folder.hold, args=(0.05, stop, reports.append))
    thread.start()
    try:
        commit_inserts(lake_url, 3, 1)
        deadline = time.monotonic() + 30
        while (not reports or reports[-1].fold_seq < 3) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert reports and reports[-1].fold_seq == 3
    finally:
        stop.set()
        thread.join(30)
        folder.close()


def test_corrupt_store_value_fails_as_corruption_never_as_data(lake_url: str) -> None:
    Lake.create(lake_url).close()
    commit_inserts(lake_url, 2, 1)
    location = LakeLocation.parse(lake_url)
    folder = Folder(location, margin_s=0)
    folder.fold_once()
    # A data-file key whose value is framed for another table kind.
    bad_key = encode_key(Subspace.CURRENT, 0x09, 1)
    folder.writer.write([(bad_key, values.frame(0x05, [1, 2, 3]))])
    folder.writer.flush()
    folder.close()
    with (
        Lake.open(lake_url, read_only=True) as lake,
        pytest.raises(CorruptionError, match="kind 5 where 9 was expected"),
    ):
        lake.materialize()


def test_unknown_newer_format_stamp_is_refused(lake_url: str) -> None:
    Lake.create(lake_url).close()
    writer = open_writer(LakeLocation.parse(lake_url))
    writer.write([(SYS_FORMAT, values.frame(0x01, {"format": 99, "writer": "future"}))])
    writer.flush()
    writer.close()
    with pytest.raises(FormatError, match="lake format 99 is newer"):
        Lake.open(lake_url)
    with pytest.raises(FormatError, match="lake format 99 is newer"):
        Folder(LakeLocation.parse(lake_url))
