"""The folder: crash boundaries, fencing, corruption, format stamps, range deletes."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from slatelake.catalog import registry
from slatelake.catalog.changes import RowChanges, build_change_set
from slatelake.catalog.folder import Folder
from slatelake.catalog.lake import Lake
from slatelake.catalog.rows import encode_inline_row, inline_row_key, inline_rows_prefix
from slatelake.catalog.state import SYS_FOLD, SYS_FORMAT, CatalogState, decode_fold
from slatelake.errors import CorruptionError, FencedError, FormatError
from slatelake.log.changeset import ChangeSet, encode_envelope, prefix_range
from slatelake.store import values
from slatelake.store.db import open_writer
from slatelake.store.keys import Subspace, encode_key
from slatelake.store.location import LakeLocation
from tests.catalog.helpers import commit_inserts, fold_all
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


# -- range deletes ---------------------------------------------------------------------
FLUSHED = "ducklake_inlined_data_7_1"
KEPT = "ducklake_inlined_data_7_2"
INLINE_COLUMNS = [
    ("row_id", "BIGINT"),
    ("begin_snapshot", "BIGINT"),
    ("end_snapshot", "BIGINT"),
    ("v", "BIGINT"),
]


def _rows(*ids: int) -> list[tuple[int, int, None, int]]:
    return [(i, 1, None, i * 10) for i in ids]


def _entries(name: str, *ids: int) -> tuple[tuple[bytes, bytes], ...]:
    table = registry.inline_table(name)
    assert table is not None
    return tuple((inline_row_key(table, r), encode_inline_row(table, r)) for r in _rows(*ids))


def _prefix(name: str) -> bytes:
    table = registry.inline_table(name)
    assert table is not None
    return inline_rows_prefix(table)


def _stored(folder: Folder, name: str) -> set[bytes]:
    return {k for k, _ in folder.writer.scan_prefix(_prefix(name))}


def _commit(lake: Lake, state: CatalogState, **fields: object) -> None:
    lake.commit_change_set(state, ChangeSet(base=state.head, **fields))  # type: ignore[arg-type]


@pytest.mark.parametrize("batch_ops", [1, 1000], ids=["slot-per-batch", "one-batch"])
def test_a_range_delete_folds_to_every_key_the_store_and_the_fold_hold_in_it(
    lake_url: str, batch_ops: int
) -> None:
    Lake.create(lake_url).close()
    folder = Folder(LakeLocation.parse(lake_url), margin_s=0, batch_ops=batch_ops)
    try:
        with Lake.open(lake_url) as lake:
            state = lake.materialize()
            _commit(lake, state, puts=_entries(FLUSHED, 1, 2, 3) + _entries(KEPT, 1))
            folder.fold_once(truncate=False)
            assert len(_stored(folder, FLUSHED)) == 3
            _commit(lake, state, puts=_entries(FLUSHED, 4))  # folded with the range below
            # Ranges apply before puts: row 5 put alongside the range survives.
            _commit(
                lake, state, puts=_entries(FLUSHED, 5), ranges=(prefix_range(_prefix(FLUSHED)),)
            )
            survivors = {k for k, _ in _entries(FLUSHED, 5)}
            assert {k for k in state.entries if k.startswith(_prefix(FLUSHED))} == survivors
        with Lake.open(lake_url, read_only=True) as reader:  # the replayed view agrees
            assert reader.materialize().same_rows(state)
        report = folder.fold_once(truncate=False)
        assert (report.slots, report.operations) == (2, 3)
        assert _stored(folder, FLUSHED) == survivors
        assert _stored(folder, KEPT) == {k for k, _ in _entries(KEPT, 1)}
    finally:
        folder.close()
    with Lake.open(lake_url, read_only=True) as reader:  # read from the store alone
        assert reader.materialize().same_rows(state)


def test_a_cleared_or_dropped_inlined_table_is_one_range_delete_however_many_rows(
    lake_url: str,
) -> None:
    Lake.create(lake_url).close()
    rows = 500
    with Lake.open(lake_url) as lake:
        state = lake.materialize()
        created = RowChanges(created_inline={FLUSHED: INLINE_COLUMNS, KEPT: INLINE_COLUMNS})
        created.insert(FLUSHED, *_rows(*range(rows))).insert(KEPT, *_rows(*range(rows)))
        lake.commit(state, created, mints_snapshot=False)
        fold_all(lake_url)
        # What DuckLake's flush does: one table emptied, an older version's dropped.
        flush = RowChanges(dropped_inline=[KEPT]).delete(FLUSHED, *_rows(*range(rows)))
        cs = build_change_set(state, flush, mints_snapshot=True)
        assert cs.ranges == (prefix_range(_prefix(FLUSHED)), prefix_range(_prefix(KEPT)))
        assert cs.operations == 3  # two ranges and the dropped table's DDL key
        # Not every row: row keys one by one, no range.
        partial = RowChanges().delete(FLUSHED, *_rows(*range(rows - 1)))
        assert build_change_set(state, partial, mints_snapshot=True).ranges == ()
        lake.commit_change_set(state, cs)
        assert state.rows(FLUSHED) == [] and FLUSHED in state.inline_ddl()
        assert state.rows(KEPT) == [] and KEPT not in state.inline_ddl()
    fold_all(lake_url)
    with Lake.open(lake_url, read_only=True) as reader:
        assert reader.materialize().same_rows(state)
        assert not [k for k in state.entries if k[0] == Subspace.INLINE and k[1] == 0x40]


@pytest.mark.parametrize("subspace", [Subspace.SYS, Subspace.INDEX])
def test_a_range_delete_outside_the_catalog_rows_is_refused_and_never_folded(
    lake_url: str, subspace: Subspace
) -> None:
    Lake.create(lake_url).close()
    commit_inserts(lake_url, 1, 1)
    with Lake.open(lake_url) as lake:
        head = lake.materialize().head
        start = bytes((subspace, 0x02))
        bad = ChangeSet(base=head, ranges=((start, start + b"\xff"),))
        assert lake.log.try_write(2, encode_envelope([bad], 2))
        with pytest.raises(CorruptionError, match=f"slot 2: .*subspace {subspace.label}"):
            lake.materialize()
    folder = Folder(LakeLocation.parse(lake_url), margin_s=0)
    try:
        with pytest.raises(CorruptionError, match=f"slot 2: .*subspace {subspace.label}"):
            folder.fold_once()
        assert decode_fold(folder.writer.get(SYS_FOLD))[0] == 0  # not even slot 1
    finally:
        folder.close()
