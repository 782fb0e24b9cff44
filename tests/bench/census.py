"""Census and store-merge benchmark: what a census reads and what a merge reclaims.

Run from the repository root (not part of the test suite; pytest ignores tests/bench)::

    python -m tests.bench.census [--quick] [--sizes 10000,1000000] [--churn 24]
                                 [--out bench-results/census.json]

Every lake lives on a moto S3 server this script starts, with moto's request
recorder on, so object requests are counted as the server saw them (GET, LIST
pages, HEAD, writes), not estimated.

1. Census cost by size: a lake of about S catalog rows (the substrate
   benchmark's builder: 40 tables, DuckLake-shaped snapshots, files and column
   stats, large change sets), folded by one ``Folder.fold_once``. Timed: the
   default census (manifest plus one object listing) as the median of 5, the
   manifest-only census (no listing) as the median of 5, and the live leg once;
   each with the requests it made. Must be flat in S for the default census
   (the listing grows one page per 1000 objects; reported apart).
2. Merge reclaim: a 10k-row lake churned with R rounds of small commits (one
   INSERT's rows each, which also update table stats in place) and hard
   deletes of a data file's rows (what ``merge_adjacent_files`` does), each
   round folded, with the holder's compactor running (100 ms poll). Then a
   whole-store ``compact_store`` waited to completion: per-subspace bytes and
   sorted runs before/after, and the object totals before/after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from slatelake.catalog.changes import RowChanges
from slatelake.catalog.folder import Folder
from slatelake.catalog.lake import Lake
from slatelake.store.census import CensusRequest, store_census
from slatelake.store.db import COMPACTOR_POLL_ENV
from slatelake.store.location import LakeLocation
from slatelake.store.merge import CompactStoreRequest, compact_store
from tests.bench.common import run_header
from tests.bench.substrate import build_lake, ducklake_extension
from tests.catalog.synthetic import commit_changes
from tests.catalog.test_census import Recorder
from tests.conftest import S3_ENV, start_moto_server


def log(msg: str) -> None:
    print(f"[census-bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def start_moto(workdir: Path) -> tuple[subprocess.Popen[bytes], Recorder]:
    path = workdir / "moto-recording.jsonl"
    proc, endpoint = start_moto_server({"MOTO_RECORDER_FILEPATH": str(path)})
    os.environ.update(S3_ENV, AWS_ENDPOINT_URL=endpoint)
    return proc, Recorder(endpoint, path)


def new_bucket(recorder: Recorder) -> str:
    import boto3

    name = f"bench-{uuid.uuid4().hex[:10]}"
    boto3.client("s3", endpoint_url=recorder.endpoint).create_bucket(Bucket=name)
    return name


def measured(recorder: Recorder, fn: Callable[[], Any], reps: int) -> dict[str, Any]:
    """Median seconds of ``reps`` runs; the requests of one run."""
    times = []
    counts: dict[str, int] = {}
    for i in range(reps):
        t0 = time.perf_counter()
        if i == 0:
            counts = recorder.count(fn)
        else:
            fn()
        times.append(time.perf_counter() - t0)
    return {"median_s": statistics.median(times), "runs": reps, "requests": counts}


def bench_size(recorder: Recorder, target: int) -> dict[str, Any]:
    url = f"s3://{new_bucket(recorder)}/lake"
    log(f"building ~{target} rows at {url}")
    t0 = time.perf_counter()
    built = build_lake(url, target)
    build_s = time.perf_counter() - t0
    folder = Folder(LakeLocation.parse(url), margin_s=0)
    try:
        t0 = time.perf_counter()
        folder.fold_once()
        fold_s = time.perf_counter() - t0
    finally:
        folder.close()
    log(f"built {built['rows']} rows / {built['keys']} keys in {build_s:.1f}s; fold {fold_s:.1f}s")
    census = store_census(url)
    out: dict[str, Any] = {
        "target_rows": target,
        "rows": built["rows"],
        "keys": built["keys"],
        "build_s": round(build_s, 2),
        "fold_s": round(fold_s, 2),
        "manifest_id": census.manifest_id,
        "sst_bytes": census.sst_bytes,
        "objects": census.objects,
        "subspaces": {
            r.subspace: {"bytes": r.bytes, "l0_ssts": r.l0_ssts, "runs": r.sorted_runs}
            for r in census.subspaces
        },
    }
    out["census_default"] = measured(recorder, lambda: store_census(url), 5)
    out["census_manifest_only"] = measured(
        recorder, lambda: store_census(url, CensusRequest(list_objects=False)), 5
    )
    out["census_live"] = measured(
        recorder, lambda: store_census(url, CensusRequest(count_live_entries=True)), 1
    )
    return out


def bench_merge(recorder: Recorder, rounds: int) -> dict[str, Any]:
    os.environ[COMPACTOR_POLL_ENV] = "100ms"
    url = f"s3://{new_bucket(recorder)}/churned"
    build_lake(url, 10_000)
    folder = Folder(LakeLocation.parse(url), margin_s=0)
    try:
        folder.fold_once()
        with Lake.open(url) as lake:
            state = lake.materialize()
            for i in range(rounds):
                for _ in range(4):  # one INSERT's rows each; table stats updated in place
                    lake.commit(state, commit_changes(state, table_id=1 + i % 3), True)
                files = sorted(state.rows("ducklake_data_file"))[:1]
                if files:  # hard-delete one file's rows, as merge_adjacent_files does
                    lake.commit(state, RowChanges().delete("ducklake_data_file", *files), False)
                folder.fold_once()
                time.sleep(0.3)  # the compactor takes each full L0 tier
        time.sleep(2)
        before = store_census(url, CensusRequest(count_live_entries=True))
        with Lake.open(url) as lake:
            t0 = time.perf_counter()
            report = compact_store(lake, CompactStoreRequest(wait_s=300))
            merge_s = time.perf_counter() - t0
        after = store_census(url, CensusRequest(count_live_entries=True))
    finally:
        folder.close()
    rows = {}
    for b, a in zip(before.subspaces, after.subspaces, strict=True):
        rows[b.subspace] = {
            "bytes_before": b.bytes,
            "bytes_after": a.bytes,
            "runs_before": b.sorted_runs,
            "runs_after": a.sorted_runs,
            "l0_before": b.l0_ssts,
            "l0_after": a.l0_ssts,
            "live_bytes": None if a.live is None else a.live.bytes,
        }
    return {
        "rounds": rounds,
        "outcome": report.outcome,
        "merge_s": round(merge_s, 2),
        "report": report.to_dict(),
        "sst_bytes_before": before.sst_bytes,
        "sst_bytes_after": after.sst_bytes,
        "reclaimed_bytes": before.sst_bytes - after.sst_bytes,
        "objects_before": before.objects,
        "objects_after": after.objects,
        "subspaces": rows,
    }


def print_report(result: dict[str, Any]) -> None:
    print("census cost by lake size (moto S3; requests as the server logged them)")
    print(
        f"{'rows':>9} {'keys':>8} {'sst bytes':>11} {'default s':>9} {'GET':>4} {'LIST':>4} "
        f"{'manifest-only s':>15} {'GET':>4} {'LIST':>4} {'live s':>7} {'GET':>5}"
    )
    for s in result["sizes"]:
        d, m, lv = s["census_default"], s["census_manifest_only"], s["census_live"]
        print(
            f"{s['rows']:>9} {s['keys']:>8} {s['sst_bytes']:>11} {d['median_s']:>9.4f} "
            f"{d['requests']['get']:>4} {d['requests']['list']:>4} {m['median_s']:>15.4f} "
            f"{m['requests']['get']:>4} {m['requests']['list']:>4} {lv['median_s']:>7.2f} "
            f"{lv['requests']['get']:>5}"
        )
    merge = result.get("merge")
    if merge:
        print(
            f"\nmerge on a churned lake ({merge['rounds']} rounds): {merge['outcome']} in "
            f"{merge['merge_s']}s; SST bytes {merge['sst_bytes_before']} -> "
            f"{merge['sst_bytes_after']} (reclaimed {merge['reclaimed_bytes']})"
        )
        for name, row in merge["subspaces"].items():
            if row["bytes_before"]:
                print(
                    f"  {name:<9} {row['bytes_before']:>9} -> {row['bytes_after']:>9} bytes, "
                    f"runs {row['runs_before']} -> {row['runs_after']}, "
                    f"L0 {row['l0_before']} -> {row['l0_after']}, live {row['live_bytes']}"
                )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="10k and 100k rows, 12 churn rounds")
    ap.add_argument("--sizes", help="comma-separated catalog row targets (default 10000,1000000)")
    ap.add_argument("--churn", type=int, help="merge benchmark churn rounds (default 24)")
    ap.add_argument("--out", default="bench-results/census.json")
    args = ap.parse_args(argv)
    sizes = (
        [int(s) for s in args.sizes.split(",")]
        if args.sizes
        else ([10_000, 100_000] if args.quick else [10_000, 1_000_000])
    )
    rounds = args.churn or (12 if args.quick else 24)
    with tempfile.TemporaryDirectory() as tmp:
        proc, recorder = start_moto(Path(tmp))
        try:
            result: dict[str, Any] = {
                **run_header(ducklake_extension()),
                "quick": args.quick,
                "sizes": [bench_size(recorder, s) for s in sizes],
            }
            log(f"merge benchmark, {rounds} churn rounds")
            result["merge"] = bench_merge(recorder, rounds)
        finally:
            proc.terminate()
            proc.wait(10)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print_report(result)
    print(f"\nwritten to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
