"""The store census (RFC 0021, "The store census"): which subspaces it names,
what it reads, and that its live leg matches an independent scan; on real
SlateDB stores and, for read counting, a moto S3 server whose request
recorder logs every request it serves."""

from __future__ import annotations

import json
import os
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import slatelake
from slatelake.catalog.fold_slot import SYS_FOLD_SLOT
from slatelake.catalog.folder import Folder
from slatelake.catalog.lake import Lake
from slatelake.catalog.state import SYS_FOLD, SYS_FORMAT
from slatelake.log.changeset import ChangeSet
from slatelake.store.census import (
    OBJECT_KINDS,
    SCHEDULED_DELETION_KIND,
    SUBSPACE_NAMES,
    CensusRequest,
    classify_object,
    store_census,
)
from slatelake.store.db import COMPACTOR_POLL_ENV, open_reader
from slatelake.store.keys import Subspace, encode_key
from slatelake.store.location import LakeLocation
from tests.catalog.synthetic import EPOCH_2026_US, commit_inserts
from tests.conftest import S3_ENV, start_moto_server

FAST_POLL = "100ms"


@pytest.fixture
def fast_compactor(monkeypatch: pytest.MonkeyPatch) -> None:
    """Holders and merges in this process use a 100 ms compactor poll."""
    monkeypatch.setenv(COMPACTOR_POLL_ENV, FAST_POLL)


def wait_for(what: str, check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


def commit_index_entries(lake: Lake, entries: dict[bytes, bytes], deletes: tuple = ()) -> None:
    """Index-subspace puts and deletes through the log, as a head-preserving
    batch (how index entries reach the store: a slot the holder folds)."""
    state = lake.materialize()
    cs = ChangeSet(
        base=state.head,
        puts=tuple(entries.items()),
        deletes=tuple(deletes),
        tables=("index",),
        changes_made="index entries",
    )
    lake.commit_change_set(state, cs)


def churn(url: str, folder: Folder, folds: int, commits: int = 2) -> None:
    """``folds`` rounds of INSERT-shaped commits, each folded: one L0 SST per
    touched subspace per round, which the compactor gathers into sorted runs."""
    for _ in range(folds):
        commit_inserts(url, commits, 1)
        folder.fold_once()
        # Let the size-tiered scheduler take each full tier (4 L0 SSTs) before
        # the next flush, so every four folds make exactly one sorted run.
        wait_for("the compactor to take full L0 tiers", lambda: _l0_below(url, 4))


def _l0_below(url: str, limit: int) -> bool:
    census = store_census(url, CensusRequest(list_objects=False))
    return all(row.l0_ssts < limit for row in census.subspaces)


def settled(url: str, subspace: str, runs: int, no_l0: bool = False) -> Callable[[], bool]:
    """True once ``subspace`` has at least ``runs`` sorted runs (and, with
    ``no_l0``, nothing left in L0)."""

    def check() -> bool:
        row = store_census(url, CensusRequest(list_objects=False)).row(subspace)
        return row.sorted_runs >= runs and (row.l0_ssts == 0 or not no_l0)

    return check


# -- what the census names ---------------------------------------------------
def test_census_names_the_subspaces_the_store_wrote(tmp_path: Path) -> None:
    url, data = (tmp_path / "lake").as_uri(), tmp_path / "data"
    with slatelake.connect(url, data_path=f"{data}/") as s:
        s.sql("CREATE TABLE t (id INTEGER, v VARCHAR)")
        s.sql("CREATE TABLE gone (id INTEGER)")
        s.sql("INSERT INTO t VALUES (1, 'inlined')")  # small: DuckLake inlines it
        s.sql("DROP TABLE gone")  # ends rows: history
    loc = LakeLocation.parse(url)
    folder = Folder(loc, margin_s=0)
    try:
        folder.fold_once()
        before = store_census(url)
        written = {r.subspace for r in before.subspaces if r.bytes > 0}
        assert written == {"sys", "snapshot", "current", "history", "inline"}
        assert {r.subspace for r in before.subspaces} == set(SUBSPACE_NAMES)

        with Lake.open(url) as lake:
            commit_index_entries(lake, {encode_key(Subspace.INDEX, 1, 7, 1): b"entry"})
        folder.fold_once()
        after = store_census(url)
        assert {r.subspace for r in after.subspaces if r.bytes > 0} == written | {"index"}
        assert after.row("unknown").bytes == 0
        assert after.manifest_id > before.manifest_id

        # A segment no slatelake subspace owns: reported, never dropped.
        folder.writer.write([(b"\x7f" + b"foreign", b"x" * 64)])
        folder.writer.flush()
        foreign = store_census(url, CensusRequest(count_live_entries=True))
        unknown = foreign.row("unknown")
        assert unknown.bytes > 0 and unknown.l0_ssts == 1 and unknown.prefixes == (0x7F,)
        assert unknown.live is not None and unknown.live.keys == 1
    finally:
        folder.close()


def test_census_rows_json_shape_and_live_columns_null_unless_counted(lake_url: str) -> None:
    Lake.create(lake_url).close()
    plain = store_census(lake_url).rows()
    assert [r["subspace"] for r in plain] == list(SUBSPACE_NAMES)
    for row in plain:
        assert set(row) == {
            "subspace",
            "bytes",
            "l0_ssts",
            "sorted_runs",
            "sorted_run_ssts",
            "manifest_id",
            "live_keys",
            "live_bytes",
            "live_split",
        }
        assert row["live_keys"] is None and row["live_bytes"] is None
    live = {r["subspace"]: r for r in store_census(lake_url, CensusRequest(True)).rows()}
    assert live["sys"]["live_keys"] == 2  # format stamp, fold cursor (the head)
    assert live["index"]["live_keys"] == 0  # counted, and zero: not null
    # The census wrote nothing: the manifest it measured did not move.
    assert store_census(lake_url).rows()[0]["manifest_id"] == plain[0]["manifest_id"]


def test_object_totals_sum_to_the_whole_and_a_refused_listing_keeps_the_rest(
    s3_bucket: str,
) -> None:
    url = f"s3://{s3_bucket}/lakes/{uuid.uuid4().hex[:8]}"
    Lake.create(url).close()
    commit_inserts(url, 3, 1)
    census = store_census(url)
    objects = census.objects
    assert objects is not None and census.objects_error is None
    assert objects["log"]["objects"] == 3  # three slots, not yet folded
    assert objects["manifest"]["objects"] >= 1 and objects["sst"]["objects"] >= 1
    for field in ("objects", "bytes"):
        assert sum(objects[k][field] for k in OBJECT_KINDS) == objects["total"][field]

    from obstore.store import S3Store

    refused = LakeLocation.parse(url)
    # A listing the object store refuses (here: a bucket that does not exist),
    # while SlateDB reads the manifest through its own store.
    refused._stores["obstore"] = S3Store(
        f"missing-{uuid.uuid4().hex[:8]}",
        endpoint=os.environ["AWS_ENDPOINT_URL"],
        region=S3_ENV["AWS_REGION"],
        access_key_id="testing",
        secret_access_key="testing",
        client_options={"allow_http": True},
    )
    partial = store_census(refused)
    assert partial.objects is None and "listing" in (partial.objects_error or "")
    assert partial.rows() == census.rows()


# -- what the census reads, counted through moto's request recorder -----------
@dataclass
class Recorder:
    endpoint: str
    path: Path

    def _call(self, action: str) -> bytes:
        req = urllib.request.Request(f"{self.endpoint}/moto-api/recorder/{action}", method="POST")
        if action == "download-recording":
            req.method = "GET"
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.read()

    def count(self, fn: Callable[[], object]) -> dict[str, int]:
        """Run ``fn`` and count the S3 requests it made, by kind."""
        self._call("reset-recording")
        self._call("start-recording")
        try:
            fn()
        finally:
            self._call("stop-recording")
        counts = {"get": 0, "list": 0, "head": 0, "write": 0}
        for line in self._call("download-recording").decode().splitlines():
            entry = json.loads(line)
            method, url = entry["method"], entry["url"]
            if method == "GET" and "list-type=" in url:
                counts["list"] += 1
            elif method == "GET":
                counts["get"] += 1
            elif method == "HEAD":
                counts["head"] += 1
            else:
                counts["write"] += 1
        return counts


@pytest.fixture(scope="module")
def recorded_s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorder]:
    """A moto server of our own, so its request log holds only this test's requests."""
    log_path = tmp_path_factory.mktemp("moto") / "recording.jsonl"
    proc, endpoint = start_moto_server({"MOTO_RECORDER_FILEPATH": str(log_path)})
    try:
        yield Recorder(endpoint, log_path)
    finally:
        proc.terminate()
        proc.wait(10)


def _recorded_lake(recorder: Recorder, monkeypatch: pytest.MonkeyPatch) -> str:
    import boto3

    for key, value in S3_ENV.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AWS_ENDPOINT_URL", recorder.endpoint)
    bucket = f"census-{uuid.uuid4().hex[:10]}"
    boto3.client("s3", endpoint_url=recorder.endpoint).create_bucket(Bucket=bucket)
    return f"s3://{bucket}/lake"


def test_default_census_reads_stay_flat_as_rows_grow_and_the_live_leg_grows(
    recorded_s3: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = _recorded_lake(recorded_s3, monkeypatch)
    Lake.create(url).close()
    loc = LakeLocation.parse(url)
    small_rows, big_rows = 0, 0

    def grow(commits: int, folds: int) -> int:
        folder = Folder(loc, margin_s=0)
        try:
            for _ in range(folds):
                commit_inserts(url, commits // folds, 1)
                folder.fold_once()
        finally:
            folder.close()
        with Lake.open(url, read_only=True) as lake:
            return lake.materialize().row_count()

    small_rows = grow(4, 2)
    default_small = recorded_s3.count(lambda: store_census(url))
    live_small = recorded_s3.count(lambda: store_census(url, CensusRequest(True)))
    big_rows = grow(40, 4)
    assert big_rows > 8 * small_rows
    default_big = recorded_s3.count(lambda: store_census(url))
    live_big = recorded_s3.count(lambda: store_census(url, CensusRequest(True)))

    assert default_small["write"] == default_big["write"] == 0  # the census writes nothing
    assert default_big["get"] == default_small["get"] > 0  # manifest only: flat in rows
    assert default_big["list"] == default_small["list"]  # one page each, both sizes
    assert live_small["get"] > default_small["get"]  # the scanning leg reads SSTs
    # ... as many as the store holds then (the compactor may have merged some
    # between the two, so the GETs follow the SSTs, not the rows)
    assert live_big["get"] > default_big["get"]
    assert live_big["write"] == 0


# -- the live leg ------------------------------------------------------------
def test_census_live_leg_matches_an_independent_scan(lake_url: str) -> None:
    n, k = 9, 3
    Lake.create(lake_url).close()
    commit_inserts(lake_url, n, 1)
    with Lake.open(lake_url) as lake:
        state = lake.materialize()
        files = sorted(state.rows("ducklake_data_file"))[:k]
        from slatelake.catalog.changes import RowChanges

        changes = RowChanges().delete("ducklake_data_file", *files)
        changes.insert(
            "ducklake_files_scheduled_for_deletion",
            *[(f[0], f"t1/f{f[0]}.parquet", True, EPOCH_2026_US) for f in files],
        )
        lake.commit(state, changes, mints_snapshot=False)
    folder = Folder(LakeLocation.parse(lake_url), margin_s=0)
    try:
        folder.fold_once()
    finally:
        folder.close()
    census = store_census(lake_url, CensusRequest(count_live_entries=True))

    # Independently: the materialized catalog's keys, each read back by point get.
    with Lake.open(lake_url, read_only=True) as lake:
        state = lake.materialize()
        reader = open_reader(lake.location)
        try:
            expected: dict[str, list[int]] = {name: [0, 0] for name in SUBSPACE_NAMES}
            split = {"entity": [0, 0], "scheduled_deletion": [0, 0]}
            keys = list(state) + [SYS_FORMAT, SYS_FOLD, SYS_FOLD_SLOT]  # the fold's own records
            for key in keys:
                value = reader.get(key)
                assert value is not None, key.hex()
                name = Subspace(key[0]).label
                expected[name][0] += 1
                expected[name][1] += len(key) + len(value)
                if key[0] == Subspace.CURRENT:
                    part = "scheduled_deletion" if key[1] == SCHEDULED_DELETION_KIND else "entity"
                    split[part][0] += 1
                    split[part][1] += len(key) + len(value)
        finally:
            reader.close()
        assert len(state.rows("ducklake_data_file")) == n - k
    for row in census.subspaces:
        assert row.live is not None
        assert [row.live.keys, row.live.bytes] == expected[row.subspace], row.subspace
    current = census.row("current").live
    assert current is not None and current.split is not None
    assert {p: [v["keys"], v["bytes"]] for p, v in current.split.items()} == split
    assert current.split["scheduled_deletion"]["keys"] == k


def test_census_counts_the_truncation_mark_with_the_log() -> None:
    loc = LakeLocation.parse("s3://b/lakes/sales")
    assert classify_object(loc, "lakes/sales/log/truncated") == "log"
    assert classify_object(loc, "lakes/sales/commits/00000000000000000001") == "log"
    assert classify_object(loc, "lakes/sales/readers/abc") == "other"
