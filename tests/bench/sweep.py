"""Sweep benchmark: reclaiming a dropped index, and discovery cost.

Run from the repository root (not part of the test suite)::

    python -m tests.bench.sweep [--quick] [--entries N] [--out bench-results/sweep.json]

Everything runs on a local-file lake under a temporary directory.

1. Sweep of a dropped index of N entries (default 1,000,000; --quick 50,000).
   The entries are written straight into the store by the folder's writer
   (what a long-folded index looks like), the definition is ended, then
   ``maintain`` runs with the default batch size (65,536) and pace 0; the
   figure with the default 1 s pace is time + (batches - 1) s; RSS growth is
   measured across the call. Object PUTs:
   slot PUTs counted on the lake's ObjectClient, plus the SST objects the
   folder writes folding the batches (new ``*.sst`` files in the store).
2. Discovery: ``discover`` (the skip-scan alone, all indexes live) over 100
   live indexes of 10,000 entries each versus 100 of 100 entries; median of
   7 runs on a fresh reader. It must be flat: one seek per index id.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from slatelake.catalog import indexes as idx
from slatelake.catalog.folder import Folder
from slatelake.catalog.lake import Lake
from slatelake.catalog.sweep import SweepReport, SweepRequest, discover, sweep
from slatelake.maintenance.progress import rss_mb
from slatelake.store.location import LakeLocation
from tests.bench.common import run_header
from tests.bench.substrate import install_counter
from tests.catalog.index_rows import add_table, create_index, drop_index, new_lake

WRITE_CHUNK = 50_000


def _write_entries(url: str, defs: list[idx.IndexDef], per_index: int) -> float:
    """Entries straight into the store (as if folded long ago); returns seconds."""
    t0 = time.perf_counter()
    folder = Folder(LakeLocation.parse(url))
    try:
        folder.fold_once(truncate=False)  # the catalog rows first
        for defn in defs:
            for start in range(0, per_index, WRITE_CHUNK):
                rows = range(start, min(start + WRITE_CHUNK, per_index))
                folder.writer.write(
                    [(idx.entry_key(defn.kind, defn.index_id, r % 1009, r), b"") for r in rows]
                )
        folder.writer.flush()
    finally:
        folder.close()
    return time.perf_counter() - t0


def _ssts(root: Path) -> set[str]:
    return {str(p) for p in root.rglob("*.sst")}


def bench_sweep(root: Path, entries: int) -> dict:
    url = (root / "sweep-lake").as_uri()
    lake, state = new_lake(url)
    with lake:
        table = add_table(lake, state, "t")
        defn = create_index(lake, state, table, 1, 0)
        build_s = _write_entries(url, [defn], entries)
        drop_index(lake, state, defn)
        lake.reader(fresh=True)  # the entries bypassed the log: see the new manifest
        state = lake.materialize()
        counter = install_counter(lake)
        before = dict(counter.counts)
        rss0 = rss_mb()[0]
        t0 = time.perf_counter()
        report = sweep(lake, SweepRequest(pace_s=0), state)
        sweep_s = time.perf_counter() - t0
        rss_growth = rss_mb()[0] - rss0  # the view holding the swept range stays alive
        slot_puts = counter.counts["put_if_absent:commits"] - before.get("put_if_absent:commits", 0)
    ssts = _ssts(root / "sweep-lake")
    t0 = time.perf_counter()
    folder = Folder(LakeLocation.parse(url))
    try:
        folded = folder.fold_once(truncate=False)
        left = sum(1 for _ in folder.writer.scan_prefix(defn.prefix))
    finally:
        folder.close()
    fold_s = time.perf_counter() - t0
    sst_puts = len(_ssts(root / "sweep-lake") - ssts)
    assert report.index_entries_reclaimed == entries and left == 0, (report, left)
    return {
        "entries": entries,
        "build_s": round(build_s, 2),
        "sweep_s": round(sweep_s, 2),
        "entries_per_s": round(entries / sweep_s),
        "batches": report.batches,
        "batch_size": SweepRequest().batch_size,
        "sweep_s_with_default_pace": round(sweep_s + max(report.batches - 1, 0) * 1.0, 2),
        "rss_growth_mb": round(rss_growth, 1),
        "slot_puts": slot_puts,
        "fold_s": round(fold_s, 2),
        "fold_sst_puts": sst_puts,
        "object_puts_total": slot_puts + sst_puts,
        "folded_slots": folded.slots,
    }


def bench_discovery(root: Path, per_index: int, indexes: int = 100, runs: int = 7) -> dict:
    url = (root / f"discovery-{per_index}").as_uri()
    lake, state = new_lake(url)
    with lake:
        table = add_table(lake, state, "t", columns=indexes)
        defs = [create_index(lake, state, table, c, 0) for c in range(1, indexes + 1)]
        build_s = _write_entries(url, defs, per_index)
    with Lake.open(url) as lake:
        state = lake.materialize()
        live = idx.live_index_ids(state)
        times, seeks = [], 0
        for _ in range(runs):
            reader = lake.reader(fresh=True)
            report = SweepReport()
            t0 = time.perf_counter()
            dead = discover(reader, state, live, report)
            times.append(time.perf_counter() - t0)
            seeks = report.seeks
            assert dead == []
    return {
        "indexes": indexes,
        "entries_per_index": per_index,
        "build_s": round(build_s, 2),
        "discovery_ms_median": round(statistics.median(times) * 1000, 2),
        "discovery_ms_min": round(min(times) * 1000, 2),
        "seeks": seeks,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="50k entries, 100x1000 discovery")
    parser.add_argument("--entries", type=int, default=None)
    parser.add_argument("--out", default=None, help="write the JSON results here too")
    args = parser.parse_args()
    entries = args.entries or (50_000 if args.quick else 1_000_000)
    big = 1_000 if args.quick else 10_000
    results: dict = {"header": run_header("bundled with the duckdb wheel (not used here)")}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        results["sweep"] = bench_sweep(root, entries)
        print(json.dumps(results["sweep"]), flush=True)
        results["discovery"] = [bench_discovery(root, n) for n in (100, big)]
        for row in results["discovery"]:
            print(json.dumps(row), flush=True)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
