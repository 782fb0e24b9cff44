"""The store merge (RFC 0021, "The store merge"): what a merge reclaims, which
trees it touches, how it waits, and that the catalog reads the same. Real
SlateDB: an in-process folder (the holder) runs the compactor that executes
what ``compact_store`` submits; nothing here is mocked. The
race tests only schedule a real rival submitter inside a real submit (see
``RacedHandle``)."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from slatelake.catalog.folder import Folder
from slatelake.catalog.lake import Lake
from slatelake.errors import ReadOnlyError
from slatelake.store import merge as store_merge
from slatelake.store.census import CensusRequest, store_census
from slatelake.store.db import (
    StoreAdmin,
    StoreWriter,
    full_tree_spec,
    open_admin,
    open_reader,
    open_writer,
)
from slatelake.store.keys import Subspace, encode_key
from slatelake.store.location import LakeLocation
from slatelake.store.merge import (
    COMPLETED,
    FAILED,
    PENDING,
    SKIPPED,
    CompactStoreRequest,
    compact_store,
)
from tests.catalog.synthetic import commit_inserts
from tests.catalog.test_census import churn, fast_compactor, settled, wait_for

__all__ = ["fast_compactor"]  # a fixture, used by name
WAIT_S = 30.0


def _runs(url: str, subspace: str) -> tuple[int, int, int]:
    row = store_census(url, CensusRequest(list_objects=False)).row(subspace)
    return row.bytes, row.sorted_runs, row.sorted_run_ssts


def _all_entries(url: str) -> dict[bytes, bytes]:
    reader = open_reader(LakeLocation.parse(url))
    try:
        return {k: v for sub in Subspace for k, v in reader.scan_prefix(bytes((sub,)))}
    finally:
        reader.close()


class Holder:
    """The lake's holder (an in-process folder, whose compactor executes
    merges), which a test may stop and start again."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.folder: Folder | None = None
        self.start()

    def start(self) -> Folder:
        self.folder = Folder(LakeLocation.parse(self.url), margin_s=0)
        return self.folder

    def stop(self) -> None:
        if self.folder is not None:
            self.folder.close()
            self.folder = None


@pytest.fixture
def churned(tmp_path: Path, fast_compactor: None) -> Iterator[tuple[str, Holder]]:
    """A lake on local files whose sys, snapshot and current trees hold at
    least two sorted runs each, with its holder running. (On S3 a merge is
    pinned by the single-key test and the raced submits below; churning
    through moto costs ~15 s a lake.)"""
    url = (tmp_path / "lake").as_uri()
    Lake.create(url).close()
    holder = Holder(url)
    try:
        assert holder.folder is not None
        churn(url, holder.folder, folds=8)
        for sub in ("sys", "snapshot", "current"):
            wait_for(f"two runs in {sub}", settled(url, sub, 2))
        yield url, holder
    finally:
        holder.stop()


# -- what a merge reclaims ---------------------------------------------------
def test_merge_reclaims_runs_and_bytes_and_every_key_reads_back(
    churned: tuple[str, Holder],
) -> None:
    url, _ = churned
    before = _all_entries(url)
    bytes_before, runs_before, _ = _runs(url, "current")
    with Lake.open(url) as lake:
        report = compact_store(lake, CompactStoreRequest(subspace="current", wait_s=WAIT_S))
    merge = report.merge("current")
    assert (report.outcome, merge.outcome) == (COMPLETED, COMPLETED), merge.reason
    assert merge.sorted_runs_before == runs_before >= 2 and merge.sorted_runs_after == 1
    assert merge.bytes_before == bytes_before
    assert merge.bytes_after is not None and merge.bytes_after < bytes_before
    assert _runs(url, "current")[:2] == (merge.bytes_after, 1)
    assert _all_entries(url) == before


def _write_rounds(writer: StoreWriter, rounds: list[tuple[bytes, bytes | None]]) -> None:
    """One write and one flush (one L0 SST) per (key, value); None deletes."""
    for key, value in rounds:
        if value is None:
            writer.write([], [key])
        else:
            writer.write([(key, value)])
        writer.flush()


@pytest.mark.parametrize("kind", ["file", "s3"])
def test_a_key_written_n_times_and_a_deleted_key_leave_one_version_no_tombstone(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path, fast_compactor: None
) -> None:
    key = encode_key(Subspace.INDEX, 1, 42)
    gone = encode_key(Subspace.INDEX, 1, 43)
    versions = [os.urandom(1024) for _ in range(6)]
    final = versions[-1]

    if kind == "file":
        churned_url, clean_url = (tmp_path / "churned").as_uri(), (tmp_path / "clean").as_uri()
    else:
        bucket = request.getfixturevalue("s3_bucket")
        churned_url, clean_url = f"s3://{bucket}/churned", f"s3://{bucket}/clean"
    writer = open_writer(LakeLocation.parse(churned_url))
    try:
        # Four versions of the key: the compactor gathers them into the bottom run.
        _write_rounds(writer, [(key, v) for v in versions[:4]])
        wait_for("the first run", settled(churned_url, "index", 1, no_l0=True))
        # A fifth version, a key put and deleted, the final version: a second
        # run above the first, holding the tombstone and two more versions.
        _write_rounds(writer, [(key, versions[4]), (gone, b"x" * 512), (gone, None), (key, final)])
        wait_for("the second run", settled(churned_url, "index", 2, no_l0=True))
        before = store_census(churned_url, CensusRequest(count_live_entries=True)).row("index")
        assert before.sorted_runs == 2 and before.live is not None and before.live.keys == 1
        with Lake.open(churned_url) as lake:
            report = compact_store(lake, CompactStoreRequest(subspace="index", wait_s=WAIT_S))
        assert report.merge("index").outcome == COMPLETED, report.merge("index").reason
        after = store_census(churned_url, CensusRequest(count_live_entries=True)).row("index")
    finally:
        writer.close()

    # The same segment written with nothing but the key's final version.
    writer = open_writer(LakeLocation.parse(clean_url))
    try:
        _write_rounds(writer, [(key, final)] * 4)
        wait_for("the clean run", settled(clean_url, "index", 1, no_l0=True))
        clean = store_census(clean_url, CensusRequest(count_live_entries=True)).row("index")
    finally:
        writer.close()

    assert (after.sorted_runs, after.sorted_run_ssts, after.l0_ssts) == (1, 1, 0)
    assert after.live == clean.live and after.live is not None and after.live.keys == 1
    # One version and no tombstone: byte for byte what a single write leaves.
    assert after.bytes == clean.bytes < before.bytes


# -- which trees, and how long it waits --------------------------------------
def test_only_the_named_subspace_merges(churned: tuple[str, Holder]) -> None:
    url, _ = churned
    untouched = {sub: _runs(url, sub) for sub in ("sys", "snapshot", "index")}
    with Lake.open(url) as lake:
        report = compact_store(lake, CompactStoreRequest(subspace=Subspace.CURRENT, wait_s=WAIT_S))
    assert [m.subspace for m in report.merges] == ["current"]
    assert report.outcome == COMPLETED
    assert _runs(url, "current")[1] == 1
    assert {sub: _runs(url, sub) for sub in untouched} == untouched


class TrimmedFirstHandle:
    """SlateDB's admin handle, every call delegated, except that a finished
    merge is gone from the compactions record (trimmed) while the manifest
    still reads as it was when the merge was planned, for ``lag`` reads: the
    record and the manifest are separate objects, written one after the other."""

    def __init__(self, handle: Any, lag: int) -> None:
        self._handle, self.lag = handle, lag
        self.planned: Any = None
        self.trimmed = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handle, name)

    async def read_compactor_state_view(self) -> Any:
        view = await self._handle.read_compactor_state_view()
        if self.planned is None:
            self.planned = view.manifest
        return view

    async def read_compaction(self, cid: str, at: Any) -> Any:
        record = await self._handle.read_compaction(cid, at)
        if record is not None and store_merge.is_terminal(record.status):
            self.trimmed = True
            return None
        return record

    async def read_manifest(self, at: Any) -> Any:
        if self.trimmed and self.lag > 0:
            self.lag -= 1
            return self.planned
        return await self._handle.read_manifest(at)


def test_a_merge_gone_from_the_record_before_the_manifest_shows_it_is_completed_not_failed(
    churned: tuple[str, Holder], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, _ = churned
    location = LakeLocation.parse(url)
    handle = TrimmedFirstHandle(open_admin(location)._handle, lag=2)
    monkeypatch.setattr(store_merge, "open_admin", lambda loc: StoreAdmin(handle, loc))
    with Lake.open(url) as lake:
        report = compact_store(lake, CompactStoreRequest(subspace="sys", wait_s=WAIT_S))
    merge = report.merge("sys")
    assert handle.trimmed and handle.lag == 0  # the stale manifest was read, twice
    assert merge.outcome == COMPLETED, merge.reason
    assert merge.sorted_runs_after == 1 == _runs(url, "sys")[1]


def test_a_tree_with_nothing_to_merge_is_skipped_with_the_reason(
    lake_url: str, fast_compactor: None
) -> None:
    Lake.create(lake_url).close()
    with Lake.open(lake_url) as lake:
        whole = compact_store(lake, CompactStoreRequest(wait_s=5))
        named = compact_store(lake, CompactStoreRequest(subspace="sys", wait_s=5))
    assert whole.outcome == SKIPPED and [m.subspace for m in whole.merges] == [
        s.label for s in Subspace
    ]
    assert {m.outcome for m in whole.merges} == {SKIPPED}
    assert "1 L0 SSTs only" in whole.merge("sys").reason  # the format stamp, never merged
    assert "nothing written out" in whole.merge("index").reason
    assert (named.outcome, named.merge("sys").reason) == (SKIPPED, whole.merge("sys").reason)
    assert whole.manifest_after is None  # nothing submitted, nothing re-read


def test_a_merge_not_waited_for_returns_at_once_and_a_later_census_shows_it(
    churned: tuple[str, Holder],
) -> None:
    url, _ = churned
    bytes_before, _, _ = _runs(url, "snapshot")
    with Lake.open(url) as lake:
        t0 = time.monotonic()
        report = compact_store(lake, CompactStoreRequest(subspace="snapshot"))
        elapsed = time.monotonic() - t0
    assert report.outcome == PENDING and report.merge("snapshot").reason.startswith("submitted")
    assert elapsed < 2.0
    wait_for("the merge to land", lambda: _runs(url, "snapshot")[1] == 1, timeout=WAIT_S)
    assert _runs(url, "snapshot")[0] < bytes_before


def test_read_only_refuses_a_merge_and_serves_the_census(
    churned: tuple[str, Holder],
) -> None:
    url, _ = churned
    with Lake.open(url, read_only=True) as lake:
        with pytest.raises(ReadOnlyError, match="read-only"):
            compact_store(lake, CompactStoreRequest(wait_s=1))
        census = store_census(lake, CensusRequest(count_live_entries=True))
    assert census.row("current").sorted_runs >= 2  # nothing was submitted
    assert census.row("current").live is not None and census.row("current").live.keys > 0


def test_a_tree_already_being_merged_is_adopted_and_a_later_holder_executes_it(
    churned: tuple[str, Holder],
) -> None:
    url, holder = churned
    holder.stop()  # no holder: a submitted merge waits in the compactions record
    with Lake.open(url) as lake:
        first = compact_store(lake, CompactStoreRequest(subspace="current", wait_s=0.5))
        assert first.outcome == PENDING and "still running" in first.merge("current").reason
        second = compact_store(lake, CompactStoreRequest(subspace="current"))
        merge = second.merge("current")
        assert merge.adopted and merge.compaction_id == first.merge("current").compaction_id
        holder.start()
        third = compact_store(lake, CompactStoreRequest(subspace="current", wait_s=WAIT_S))
    assert third.merge("current").adopted and third.outcome == COMPLETED
    assert third.merge("current").sorted_runs_after == 1


# -- the catalog reads the same ----------------------------------------------
def test_a_merge_leaves_the_head_and_the_materialization_unchanged(
    churned: tuple[str, Holder],
) -> None:
    url, _ = churned
    with Lake.open(url) as lake:
        before = lake.materialize()
        report = compact_store(lake, CompactStoreRequest(wait_s=WAIT_S))
        assert report.outcome == COMPLETED
        assert {m.subspace for m in report.of(COMPLETED)} >= {"sys", "snapshot", "current"}
    with Lake.open(url, read_only=True) as fresh:
        after = fresh.materialize()
    assert after.head == before.head  # head stamp unchanged, no snapshot minted
    assert after.same_rows(before) and after.last_seq == before.last_seq


def test_a_commit_landing_during_a_merge_succeeds_and_both_read_back(
    churned: tuple[str, Holder],
) -> None:
    url, holder = churned
    assert holder.folder is not None
    before = _all_entries(url)
    with Lake.open(url) as lake:
        head = lake.materialize().head
        report = compact_store(lake, CompactStoreRequest())  # submitted, not waited for
        assert report.outcome == PENDING
        commit_inserts(url, 1, 2)  # lands while the merges run
        holder.folder.fold_once()
        wait_for(
            "every merged tree down to one run",
            lambda: all(_runs(url, s)[1] == 1 for s in ("sys", "snapshot", "current")),
            timeout=WAIT_S,
        )
    with Lake.open(url, read_only=True) as fresh:
        state = fresh.materialize()
    assert state.head.snapshot_id == head.snapshot_id + 1  # the commit's, and only that
    assert any(row[1] == 2 for row in state.rows("ducklake_data_file"))
    after = _all_entries(url)
    changed = {k for k in before if after.get(k) != before[k]}
    # Only what the commit itself rewrote: sys head/fold, and nothing else vanished.
    assert all(k[0] == Subspace.SYS for k in changed)
    assert set(after) >= set(before)


def test_a_foreign_segment_is_reported_and_left_alone_by_a_whole_store_merge(
    tmp_path: Path, fast_compactor: None
) -> None:
    url = (tmp_path / "lake").as_uri()
    Lake.create(url).close()
    holder = Holder(url)
    try:
        assert holder.folder is not None
        holder.folder.writer.write([(b"\x7fforeign", b"x" * 64)])
        holder.folder.writer.flush()
        with Lake.open(url) as lake:
            report = compact_store(lake, CompactStoreRequest(wait_s=5))
    finally:
        holder.stop()
    unknown = report.merge("unknown")
    assert unknown.outcome == SKIPPED and "0x7f" in unknown.reason
    assert unknown.bytes_before > 0
    assert store_census(url).row("unknown").l0_ssts == 1  # untouched


# -- a submit raced by a newer job ---------------------------------------------
class RacedHandle:
    """SlateDB's admin handle, every call delegated, except that its next
    ``races`` submits are raced. SlateDB mints a submit's compaction id (a
    ULID) from the clock on the submit's first poll, then reads the
    compactions record and writes it back; the record refuses a new job older
    than its newest one. Here the submit runs exactly that first poll, a rival
    submitter's job minted a few milliseconds later lands, then the submit
    resumes: the interleaving that two submitters, or a submitter and the
    holder's scheduler, produce on their own under load (three threads
    submitting at once see it in about 1 submit in 5), forced so the test is
    deterministic."""

    def __init__(self, handle: Any, rival: Any, races: int) -> None:
        self._handle, self._rival, self.races, self.rival_jobs = handle, rival, races, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handle, name)

    def submit_compaction(self, spec: Any) -> Any:
        submit = self._handle.submit_compaction(spec)
        if self.races <= 0:
            return submit
        self.races -= 1
        return self._raced(submit)

    async def _raced(self, submit: Any) -> Any:
        steps = submit.__await__()
        pending = steps.send(None)  # the first poll: the id is minted, the record not yet read
        await asyncio.sleep(0.005)  # a later millisecond
        manifest = await self._rival.read_manifest(None)
        prefix = bytes((Subspace.CURRENT,))
        current = next(s for s in manifest.segments if bytes(s.prefix) == prefix)
        await self._rival.submit_compaction(full_tree_spec(current))
        self.rival_jobs += 1
        while True:  # resume the submit where it stopped
            await asyncio.wait([pending])
            try:
                pending = steps.send(None)
            except StopIteration as done:
                return done.value


@pytest.fixture
def raced(
    s3_bucket: str, fast_compactor: None, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, Callable[[int], RacedHandle]]]:
    """An S3 lake whose index and current trees hold a sorted run each, its
    holder running, and a way to race compact_store's next submits. S3 only:
    on local files SlateDB often finishes a whole submit within its first
    poll (each file operation completes before it is polled), so the window
    cannot be forced there; over HTTP it always spans requests."""
    url = f"s3://{s3_bucket}/lake"
    Lake.create(url).close()
    holder = Holder(url)
    try:
        assert holder.folder is not None
        for n in range(4):  # one full L0 tier per tree: the compactor makes a run of it
            holder.folder.writer.write(
                [
                    (encode_key(Subspace.INDEX, 1, n), os.urandom(256)),
                    (encode_key(Subspace.CURRENT, 1, n), os.urandom(256)),
                ]
            )
            holder.folder.writer.flush()
        for sub in ("index", "current"):
            wait_for(f"a run in {sub}", settled(url, sub, 1, no_l0=True))

        def race(races: int) -> RacedHandle:
            location = LakeLocation.parse(url)
            handle = RacedHandle(open_admin(location)._handle, open_admin(location)._handle, races)
            monkeypatch.setattr(store_merge, "open_admin", lambda loc: StoreAdmin(handle, loc))
            return handle

        yield url, race
    finally:
        holder.stop()


def test_a_submit_refused_for_a_newer_job_in_the_record_is_submitted_again_and_completes(
    raced: tuple[str, Callable[[int], RacedHandle]],
) -> None:
    url, race = raced
    handle = race(1)
    with Lake.open(url) as lake:
        report = compact_store(lake, CompactStoreRequest(subspace="index", wait_s=WAIT_S))
    merge = report.merge("index")
    assert handle.rival_jobs == 1  # the race happened
    assert (merge.outcome, merge.adopted) == (COMPLETED, False), merge.reason
    assert merge.sorted_runs_after == 1
    # The rival's merge of the other tree is left alone by the resubmit and lands too.
    wait_for("the rival's merge", lambda: _runs(url, "current")[1] == 1, timeout=WAIT_S)


def test_a_submit_raced_on_every_attempt_gives_up_after_a_bounded_number_and_says_why(
    raced: tuple[str, Callable[[int], RacedHandle]],
) -> None:
    url, race = raced
    handle = race(100)
    with Lake.open(url) as lake:
        report = compact_store(lake, CompactStoreRequest(subspace="index"))
    merge = report.merge("index")
    assert handle.rival_jobs == store_merge.SUBMIT_ATTEMPTS
    assert (merge.outcome, merge.compaction_id) == (FAILED, None)
    assert f"refused {store_merge.SUBMIT_ATTEMPTS} times" in merge.reason, merge.reason
    assert "recorded a newer compaction" in merge.reason and "run it again" in merge.reason
    assert "invalid clock tick" in merge.reason  # SlateDB's own words, for a search
