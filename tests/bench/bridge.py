"""Bridge benchmark: opening and using a slatelake lake against stock DuckLake,
on the same catalog, side by side in one run (the catalog-image goals). Not part
of the test suite; run from the repository root::

    bash scripts/bench bridge [--files 1000,20000,100000] [--backends local,s3]
                              [--dir DIR] [--reps 3] [--n 20] [--no-profile]
                              [--out bench-results/bridge.json]

Per size N (data files) and per backend:

- **Lakes.** Stock DuckLake on a DuckDB-file catalog, table ``t (id BIGINT, v
  VARCHAR, x DOUBLE)``, one one-row Parquet file per id, inlining off (built
  once per size and cached under ``--dir``; tests/bench/bridge_lakes.py). The
  slatelake lake is the same catalog imported (``import_catalog``), then one
  marker commit (also run on stock's copy) and ``slatelake fold``.
  ``local``: the slatelake root under the run directory, the data local.
  ``s3``: moto's server on loopback (started here, as tests/conftest.py does);
  the catalog's data files uploaded to ``s3://DATA/data/`` (~180 PUTs/s:
  about 9 minutes at 100k), the slatelake root at ``s3://LAKE/slate``. Two
  buckets, because moto lists a prefix by scanning its whole bucket (one
  LIST of ``commits/`` went from 8 to 50 ms with 20k data files beside it;
  real S3 does not do that). Stock keeps its catalog in a LOCAL DuckDB file
  with the data on moto: DuckDB cannot write a database file on S3 (a
  writable stock DuckLake on object storage needs a catalog server), so
  this is stock's best case, while slatelake reads everything from moto.
- **Cold** (a fresh process per run, median of --reps, interleaved with stock
  so drift hits both): the clock starts before ``import slatelake`` (stock:
  ``import duckdb``) and stops at the first ``SELECT count(*) FROM t`` (which
  DuckLake answers from the catalog, reading no Parquet). Slatelake twice:
  ``store`` before any image exists, ``image`` after ``slatelake image LAKE
  --json`` wrote one; and ``tail``, from that image plus the --n slots the
  INSERTs below committed after it (a holder writes an image every 200 slots
  by default, so an open replays up to that many). Also: connect+query
  without the imports (the figure quoted before catalog images), extension load alone,
  the child's VmHWM.
- **Warm** and **1-row INSERT** (a fresh session process each side, median
  of --n): the next count(*) with the head unmoved, then autocommitted 1-row
  INSERTs (each writes one Parquet file on both sides).
- **Image and holder**: the image command's own seconds, the object's bytes,
  the process's wall and peak RSS; after the INSERTs, ``slatelake fold`` +
  ``slatelake image`` again: what a fold+image costs the holder.
- **Profiles** (cProfile, largest size, local): a cold open and --n INSERTs.

Without image support (the CLI verb missing or refusing) the image rows say
why they are skipped; the rest still runs.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.bench import bridge_lakes as lakes
from tests.bench.bridge_report import print_report, verdicts
from tests.bench.common import REPO, Moto, log, median, run_header, vm_hwm_mb

BACKENDS = ("local", "s3")


def cold_runs(mode_args: list[list[str]], reps: int) -> list[list[dict[str, Any]]]:
    """``reps`` rounds, each running every child once, interleaved."""
    runs: list[list[dict[str, Any]]] = [[] for _ in mode_args]
    for _ in range(reps):
        for i, args in enumerate(mode_args):
            runs[i].append(lakes.child(*args))
    return runs


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians of every numeric figure the runs share; the first run's counts."""
    out: dict[str, Any] = {}
    for key, value in runs[0].items():
        if isinstance(value, float | int) and not isinstance(value, bool):
            out[key] = median([r[key] for r in runs if key in r])
    for key in ("phases_s", "phase_calls", "store_calls"):
        if key in runs[0]:
            names = {k for r in runs for k in r.get(key, {})}
            out[key] = {k: median([r.get(key, {}).get(k, 0) for r in runs]) for k in names}
    for key in ("count", "files", "not_instrumented"):
        if key in runs[0]:
            out[key] = runs[0][key]
    out["runs"] = runs
    return out


def bench_backend(
    build: lakes.StockBuild,
    backend: str,
    run_dir: Path,
    moto: Moto | None,
    reps: int,
    n: int,
    profile: bool,
) -> dict[str, Any]:
    files = build.files
    run_dir.mkdir(parents=True)
    out: dict[str, Any] = {"backend": backend, "files": files}
    s3: list[str] = []
    if backend == "local":
        stock_meta = lakes.stock_copy(build, run_dir / "stock.duckdb")
        url = (run_dir / "slate").as_uri()
    else:
        assert moto is not None
        data_bucket, lake_bucket = moto.bucket("data"), moto.bucket("lake")
        log(f"{files} files, s3: uploading the data files to s3://{data_bucket}/data/")
        out["upload"] = lakes.upload_data(build, data_bucket)
        data_url = f"s3://{data_bucket}/data/"
        stock_meta = lakes.stock_copy(build, run_dir / "stock-s3.duckdb", data_url)
        url = f"s3://{lake_bucket}/slate"
        s3 = ["--s3"]
    tag = f"{files} files, {backend}"
    log(f"{tag}: importing into {url}, marker commit, fold")
    out["slate_build"] = lakes.slate_lake(url, stock_meta)
    lakes.child("mark-stock", str(stock_meta), *s3)
    stock_args = ["cold-stock", str(stock_meta), *s3]

    present = lakes.images_present(url)
    out["images_before"] = present
    log(f"{tag}: cold opens x{reps} (slatelake without an image, stock, extension load)")
    ext, store_runs, stock_a = cold_runs([["ext"], ["cold-slate", url], stock_args], reps)
    out["ext_load_s"] = median([r["ext_load_s"] for r in ext])
    out["cold_store"] = summarize(store_runs)
    if present:
        out["cold_store"]["note"] = f"{present} image(s) existed already: not the store path"

    log(f"{tag}: slatelake image")
    out["image"] = lakes.write_image(url)
    stock_b: list[dict[str, Any]] = []
    if "skipped" in out["image"]:
        log(f"{tag}: image variant skipped: {out['image']['skipped']}")
        out["cold_image"] = {"skipped": out["image"]["skipped"]}
    else:
        log(f"{tag}: cold opens x{reps} (slatelake from the image, stock)")
        image_runs, stock_b = cold_runs([["cold-slate", url], stock_args], reps)
        out["cold_image"] = summarize(image_runs)
        if not out["cold_image"].get("image_reads"):
            out["cold_image"]["note"] = "an image exists but the open did not read it"
    out["cold_stock"] = summarize(stock_a + stock_b)
    check_same(out)

    log(f"{tag}: warm queries and 1-row INSERTs x{n}, each side in its own process")
    out["session_slate"] = lakes.child("session-slate", url, str(n))
    out["session_stock"] = lakes.child("session-stock", str(stock_meta), str(n), *s3)
    read = (out["session_slate"]["probe_rows"], out["session_stock"]["probe_rows"])
    if read[0] != read[1] or not read[0]:
        raise SystemExit(f"{tag}: reading a data file: slatelake {read[0]}, stock {read[1]}")
    if "skipped" not in out["image"]:
        log(f"{tag}: cold opens x{reps} (slatelake from the image plus the {n} INSERT slots)")
        out["cold_tail"] = summarize(cold_runs([["cold-slate", url]], reps)[0])
        got, wanted = out["cold_tail"]["count"], out["verified"]["count"] + n
        if got != wanted:
            raise SystemExit(f"{tag}: the image plus its tail counts {got} rows, not {wanted}")
    log(f"{tag}: holder: fold the {n} INSERT slots, then an image")
    out["holder"] = lakes.fold_and_image(url)
    if profile:
        log(f"{tag}: profiles: a cold open and {n} INSERTs")
        out["profile"] = {
            "cold": lakes.child("cold-slate", url, "--profile"),
            "insert": lakes.child("profile-inserts", url, str(n)),
        }
    brief(out)
    return out


def check_same(out: dict[str, Any]) -> None:
    """Every side sees the same rows and data files, or the run stops."""
    seen = {"stock": (out["cold_stock"]["count"], out["cold_stock"]["files"])}
    for variant in ("cold_store", "cold_image"):
        if "count" in out[variant]:
            seen[variant] = (out[variant]["count"], out[variant]["files"])
    if len(set(seen.values())) != 1:
        raise SystemExit(f"{out['files']} files, {out['backend']}: sides disagree: {seen}")
    out["verified"] = {"count": seen["stock"][0], "files": seen["stock"][1]}


def brief(out: dict[str, Any]) -> None:
    img = out["cold_image"].get("cold_s")
    sl, st = out["session_slate"], out["session_stock"]
    log(
        f"{out['files']} files, {out['backend']}: cold image "
        f"{'skipped' if img is None else f'{img:.2f}s'}, store {out['cold_store']['cold_s']:.2f}s, "
        f"stock {out['cold_stock']['cold_s']:.2f}s; warm {sl['warm_s'] * 1000:.1f} / "
        f"{st['warm_s'] * 1000:.1f} ms; insert {sl['insert_s'] * 1000:.1f} / "
        f"{st['insert_s'] * 1000:.1f} ms"
    )


def library_revision() -> dict[str, Any]:
    """The commit the library was measured at, and any uncommitted library changes."""

    def git(*args: str) -> str:
        proc = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True)
        return proc.stdout.strip() if proc.returncode == 0 else ""

    dirty = git("status", "--porcelain", "--", "layers/slatelake/slatelake").splitlines()
    return {"commit": git("rev-parse", "--short", "HEAD"), "uncommitted": dirty}


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="bash scripts/bench bridge",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--files", default="1000,20000,100000", help="data-file counts, commas")
    ap.add_argument("--quick", action="store_true", help="--files 1000,20000")
    ap.add_argument("--backends", default=",".join(BACKENDS), help="local, s3 or both")
    ap.add_argument(
        "--dir",
        help="cache for the stock lakes (reused by later runs; default: a temp dir, removed)",
    )
    ap.add_argument("--reps", type=int, default=3, help="cold opens per variant (processes)")
    ap.add_argument("--n", type=int, default=20, help="warm queries and INSERTs per side")
    ap.add_argument("--no-profile", action="store_true", help="skip the profiles")
    ap.add_argument("--out", default="bench-results/bridge.json")
    args = ap.parse_args(argv)
    spec = "1000,20000" if args.quick else args.files
    args.sizes = sorted({int(s.replace("_", "")) for s in spec.split(",") if s.strip()})
    args.backend_list = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = set(args.backend_list) - set(BACKENDS)
    if unknown or not args.backend_list or not args.sizes:
        ap.error(f"--backends takes {', '.join(BACKENDS)}; --files at least one count")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    from slatelake.ducklake import extensions

    os.environ["BENCH_EXTENSIONS"] = json.dumps(
        {name: str(extensions.extension_path(name)) for name in ("ducklake", "httpfs")}
    )
    result: dict[str, Any] = {
        **run_header(str(extensions.extension_path("ducklake"))),
        "library": library_revision(),
        "config": {
            "files": args.sizes,
            "backends": args.backend_list,
            "reps": args.reps,
            "n": args.n,
            "table": "t (id BIGINT, v VARCHAR, x DOUBLE), one row per data file",
            "inlining": "off on both sides (data_inlining_row_limit 0, stored in the catalog)",
            "stock_on_s3": "catalog in a local DuckDB file, data files on moto",
        },
        "sizes": [],
    }
    own_cache = args.dir is None
    cache = Path(args.dir or tempfile.mkdtemp(prefix="slatelake-bridge-cache-"))
    cache.mkdir(parents=True, exist_ok=True)
    runs = Path(tempfile.mkdtemp(prefix="slatelake-bridge-run-"))
    moto = Moto() if "s3" in args.backend_list else None
    t_start = time.perf_counter()
    try:
        log(f"stock lakes cached under {cache}; run lakes under {runs}")
        for files in args.sizes:
            build = lakes.stock_lake(cache, files)
            entry: dict[str, Any] = {"files": files, "stock_build": build.record, "backends": {}}
            for backend in args.backend_list:
                profile = not args.no_profile and files == args.sizes[-1] and backend == "local"
                entry["backends"][backend] = bench_backend(
                    build, backend, runs / f"{files}-{backend}", moto, args.reps, args.n, profile
                )
                gc.collect()
            entry["strays_pruned"] = lakes.prune_strays(build)
            result["sizes"].append(entry)
    finally:
        if moto is not None:
            result["moto_peak_rss_mb"] = moto.peak_rss_mb()
            moto.stop()
        shutil.rmtree(runs, ignore_errors=True)
        if own_cache:
            shutil.rmtree(cache, ignore_errors=True)
    result["verdicts"] = verdicts(result)
    result["wall_s"] = time.perf_counter() - t_start
    result["driver_peak_rss_mb"] = vm_hwm_mb()
    print_report(result)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
