"""The Lambda handler cold on a large lake: ``bash scripts/bench lambda --files N``.

The lake is the bridge benchmark's (tests/bench/bridge_lakes.py): stock
DuckLake's N one-row data files, built once and cached under ``--dir``,
imported into a slatelake lake (on local files, or with ``--s3`` on moto's
server, the data files uploaded), one marker commit, ``slatelake fold``.
Then a fresh process plays a cold Lambda container twice (as
``lambda_pass.lambda_pass`` does): first with no image (the open reads the
store), then after ``slatelake fold`` + ``slatelake image`` (the open loads
the image). Measured: interpreter start to the handler's ``first step
starting`` line, the pass, the process's peak RSS.

The pass is scheduled with expiry, flush and cleanup only: merging 100k
one-row files is a rewrite of the whole table, not the cold start this
measures. The build's snapshots are append-only, so expiry schedules no file
for deletion and the cached data directory is left as it was (checked after).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from tests.bench import bridge_lakes as lakes
from tests.bench.common import Moto, log, run_header
from tests.bench.lambda_pass import lambda_pass

GOAL_FIRST_STEP_S = 3.0
FILES_OPTIONS = {
    "MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN": "1 second",
    "MAINTENANCE_FLUSH_INLINED_DATA": "true",
    "MAINTENANCE_CLEANUP_OLD_FILES_CLEANUP_ALL": "true",
}


def _figures(run: dict[str, Any]) -> dict[str, Any]:
    report = run["report"]
    return {
        "cold_start_to_first_step_s": run["cold_start_to_first_step_s"],
        "handler_import_s": run["imported_s"],
        "pass_s": report["seconds"],
        "peak_rss_mb": run["peak_rss_mb"],
        "invocation_wall_s": run["invocation_wall_s"],
        "steps": {s["step"]: s["status"] for s in report["steps"]},
        # every extension load (the option bind's, the session's, the pass's) and the open
        "call_seconds": run.get("call_seconds", {}),
    }


def main_files(files: int, s3: bool, cache_dir: str | None, out: str | None) -> int:
    from slatelake.ducklake import extensions

    result: dict[str, Any] = {
        **run_header(str(extensions.extension_path("ducklake"))),
        "files": files,
        "backend": "s3" if s3 else "local",
        "options": FILES_OPTIONS,
    }
    own_cache = cache_dir is None
    cache = Path(cache_dir or tempfile.mkdtemp(prefix="slatelake-lambda-cache-"))
    cache.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="slatelake-lambda-files-"))
    moto = Moto() if s3 else None
    try:
        build = lakes.stock_lake(cache, files)
        result["stock_build"] = build.record
        if moto is not None:
            data_bucket, lake_bucket = moto.bucket("data"), moto.bucket("lake")  # see bridge.py
            log(f"lambda {files} files: uploading the data files to s3://{data_bucket}/data/")
            result["upload"] = lakes.upload_data(build, data_bucket)
            catalog = lakes.stock_copy(build, work / "stock.duckdb", f"s3://{data_bucket}/data/")
            url = f"s3://{lake_bucket}/slate"
        else:
            catalog = lakes.stock_copy(build, work / "stock.duckdb")
            url = (work / "slate").as_uri()
        log(f"lambda {files} files: importing into {url}, marker commit, fold")
        result["slate_build"] = lakes.slate_lake(url, catalog)
        log(f"lambda {files} files: cold Lambda process, no image")
        result["store"] = _figures(lambda_pass(url, FILES_OPTIONS))
        log(f"lambda {files} files: fold + slatelake image")
        result["holder"] = lakes.fold_and_image(url)
        image = result["holder"]["image"]
        if "skipped" in image:
            log(f"lambda {files} files: image variant skipped: {image['skipped']}")
            result["image"] = {"skipped": image["skipped"]}
        else:
            log(f"lambda {files} files: cold Lambda process, from the image")
            result["image"] = _figures(lambda_pass(url, FILES_OPTIONS))
        pruned = lakes.prune_strays(build)
        missing = len(lakes.referenced_files(build)) - lakes.present_files(build)
        result["cache"] = {"strays_pruned": pruned, "referenced_files_missing": missing}
        if missing:
            raise SystemExit(f"the pass removed {missing} cached data files; rebuild the cache")
    finally:
        if moto is not None:
            moto.stop()
        shutil.rmtree(work, ignore_errors=True)
        if own_cache:
            shutil.rmtree(cache, ignore_errors=True)
    best = result["image"] if "cold_start_to_first_step_s" in result["image"] else result["store"]
    first = best["cold_start_to_first_step_s"]
    result["verdict"] = {
        "goal": f"cold start to first step <= {GOAL_FIRST_STEP_S:g} s at {files} files",
        "measured_s": first,
        "variant": "image" if best is result["image"] else "store (no image)",
        "met": first <= GOAL_FIRST_STEP_S,
    }
    out_path = Path(out or f"bench-results/lambda-{files}.json")
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(result, indent=2, default=str))
    _print(result)
    print(f"wrote {out_path}")
    return 0


def _print(result: dict[str, Any]) -> None:
    print(f"\nLambda handler, cold process, {result['files']} files, {result['backend']}")
    print(f"  {'open':<18} {'first step s':>12} {'import s':>8} {'pass s':>7} {'RSS MB':>7}")
    for name in ("store", "image"):
        r = result[name]
        if "skipped" in r:
            print(f"  {name:<18} skipped: {r['skipped']}")
            continue
        calls = r["call_seconds"]
        print(
            f"  {name:<18} {r['cold_start_to_first_step_s']:>12.2f} "
            f"{r['handler_import_s']:>8.2f} {r['pass_s']:>7.2f} {r['peak_rss_mb']:>7.0f}   "
            f"slatelake.connect {calls.get('slatelake.connect')}, "
            f"extensions.connect {calls.get('extensions.connect')}"
        )
    image = result["holder"]["image"]
    if "skipped" not in image:
        print(
            f"  image: {image['bytes'] / 1e6:.1f} MB written in {image['seconds']:.2f}s "
            f"(process {image['process_wall_s']:.2f}s, {image['peak_rss_mb']:.0f} MB)"
        )
    v = result["verdict"]
    print(
        f"  [{'MET' if v['met'] else 'MISSED':>6}] {v['goal']}: {v['measured_s']:.2f} s "
        f"({v['variant']})"
    )
