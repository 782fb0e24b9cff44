"""Laying down the bridge benchmark's lakes.

Stock DuckLake is built once per size and cached (``--dir``): ``stock-N/``
holds ``stock.duckdb`` (the pristine catalog, never written after the build),
``data/`` (its Parquet files) and ``built.json`` (written last: a directory
without it is rebuilt). Each run works on copies of the catalog file: one
with the local data path, and for S3 one whose stored data path is rewritten
to ``s3://BUCKET/data/`` after the catalog's files are uploaded to moto. New
files written by a run's INSERTs land in the cached data directory (DuckLake
names them uniquely); ``prune_strays`` deletes every file there that the
pristine catalog does not reference.

The slatelake side of a run: ``import_catalog`` (the catalog's rows laid
down as folded state), one marker commit (a table comment; stock's copy gets
the same statement, so both catalogs stay alike), ``slatelake fold``. The
import leaves the fold cursor at slot 0, which no image can hold; the marker
is what gives the holder a folded slot to image. Images are written with the
CLI, ``python -m slatelake.cli image LAKE --json`` (run under
tests/bench/peak.py for its peak RSS), whose own JSON gives the time and
size; a CLI without the verb, or an image not written, is a reported skip.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.bench.common import Measured, log, run_module

BUILD_BATCH = 2_000  # data files per building INSERT (one DuckLake snapshot each)
UPLOAD_CONCURRENCY = 32
UPLOAD_ATTEMPTS = 4


@dataclass(frozen=True)
class StockBuild:
    """A cached stock lake: its pristine catalog, data directory and build record."""

    files: int
    meta: Path
    data: Path
    record: dict[str, Any]


# -- the stock lake, built once ----------------------------------------------------------------
def stock_lake(cache: Path, files: int) -> StockBuild:
    """The cached stock lake of ``files`` one-row data files, built when missing.

    ``ATTACH ... (DATA_INLINING_ROW_LIMIT 0)`` plus ``set_option`` keeps
    inlining off in the catalog; ``t`` is partitioned by ``id`` while loading,
    so one ``INSERT ... FROM range(a, b)`` writes one one-row Parquet file per
    id (the cheapest way found, ~0.6 ms a file), then ``RESET PARTITIONED BY``
    so the timed INSERTs are plain."""
    directory = cache / f"stock-{files}"
    meta, data, done = directory / "stock.duckdb", directory / "data", directory / "built.json"
    if done.is_file() and meta.is_file():
        record = json.loads(done.read_text()) | {"reused": True}
        cached = StockBuild(files, meta, data, record)
        missing = len(referenced_files(cached)) - present_files(cached)
        if not missing:
            return cached
        log(f"{files} files: the cache lacks {missing} data files; rebuilding it")
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    from slatelake.ducklake import extensions

    log(f"{files} files: building the stock lake in {directory}")
    t0 = time.perf_counter()
    con = extensions.connect()
    con.execute(
        f"ATTACH '{_q('ducklake:' + str(meta))}' AS lake "
        f"(DATA_PATH '{_q(str(data))}/', DATA_INLINING_ROW_LIMIT 0)"
    )
    con.execute("CALL lake.set_option('data_inlining_row_limit', '0')")
    con.execute("CREATE TABLE lake.t (id BIGINT, v VARCHAR, x DOUBLE)")
    con.execute("ALTER TABLE lake.t SET PARTITIONED BY (id)")
    inserts = 0
    for start in range(0, files, BUILD_BATCH):
        end = min(files, start + BUILD_BATCH)
        con.execute(
            f"INSERT INTO lake.t SELECT i, 'v' || i, i * 0.5 FROM range({start}, {end}) r(i)"
        )
        inserts += 1
    con.execute("ALTER TABLE lake.t RESET PARTITIONED BY")
    written = con.execute("SELECT count(*) FROM ducklake_list_files('lake', 't')").fetchone()[0]
    con.execute("DETACH lake")
    con.close()
    seconds = time.perf_counter() - t0
    if written != files:
        raise SystemExit(f"stock build wrote {written} data files, wanted {files}")
    record = {
        "seconds": seconds,
        "ms_per_file": seconds / files * 1000,
        "inserts": inserts,
        "files": written,
        "catalog_file_bytes": meta.stat().st_size,
    }
    done.write_text(json.dumps(record))
    return StockBuild(files, meta, data, record | {"reused": False})


def _q(text: str) -> str:
    if "\x00" in text:
        raise SystemExit("NUL in a benchmark path")
    return text.replace("'", "''")


def referenced_files(build: StockBuild) -> list[str]:
    """The data files the pristine catalog references, relative to its data directory."""
    from slatelake.ducklake import extensions

    con = extensions.connect()
    try:
        con.execute(f"ATTACH '{_q('ducklake:' + str(build.meta))}' AS lake (READ_ONLY)")
        listed = con.execute("SELECT data_file FROM ducklake_list_files('lake', 't')")
        paths = [p for (p,) in listed.fetchall()]
    finally:
        con.close()
    root = str(build.data.resolve()) + "/"
    outside = [p for p in paths if not p.startswith(root)]
    if outside:
        raise SystemExit(f"{len(outside)} data files outside {root}, e.g. {outside[0]}")
    return [p[len(root) :] for p in paths]


def present_files(build: StockBuild) -> int:
    """How many of the files the pristine catalog references exist."""
    return sum((build.data / rel).is_file() for rel in referenced_files(build))


def prune_strays(build: StockBuild) -> int:
    """Delete files in the cached data directory the pristine catalog does not
    reference (what runs' INSERTs wrote); returns how many."""
    keep = set(referenced_files(build))
    gone = 0
    for path in build.data.rglob("*"):
        if path.is_file() and str(path.relative_to(build.data)) not in keep:
            path.unlink()
            gone += 1
    return gone


# -- per run: the working copies -----------------------------------------------------------------
def stock_copy(build: StockBuild, dest: Path, data_url: str | None = None) -> Path:
    """A writable copy of the pristine catalog; ``data_url`` replaces its stored data path."""
    import duckdb

    shutil.copyfile(build.meta, dest)
    if data_url is not None:
        con = duckdb.connect(str(dest))
        try:
            changed = con.execute(
                "UPDATE ducklake_metadata SET value = ? WHERE key = 'data_path' RETURNING 1",
                [data_url],
            ).fetchall()
        finally:
            con.close()
        if len(changed) != 1:
            raise SystemExit(f"{dest}: {len(changed)} data_path rows, expected 1")
    return dest


def upload_data(build: StockBuild, bucket: str, prefix: str = "data") -> dict[str, Any]:
    """Put every data file the catalog references into ``s3://bucket/prefix/``,
    keys as the local relative paths (what the rewritten data path resolves)."""
    import obstore

    from slatelake.store.location import LakeLocation

    rel = referenced_files(build)
    store = LakeLocation.parse(f"s3://{bucket}/{prefix}").obstore()
    t0 = time.perf_counter()
    sent = count = 0

    async def put_all() -> None:
        gate = asyncio.Semaphore(UPLOAD_CONCURRENCY)

        async def one(path: str) -> None:
            nonlocal sent, count
            async with gate:  # read inside the gate: at most UPLOAD_CONCURRENCY files in memory
                data = (build.data / path).read_bytes()
                for attempt in range(UPLOAD_ATTEMPTS):  # a busy moto times out now and then
                    try:
                        await obstore.put_async(store, f"{prefix}/{path}", data)
                        break
                    except Exception:
                        if attempt == UPLOAD_ATTEMPTS - 1:
                            raise
                        await asyncio.sleep(0.5 * (attempt + 1))
            sent += len(data)
            count += 1
            if count % 10_000 == 0:
                log(f"uploaded {count} of {len(rel)} data files")

        await asyncio.gather(*(one(p) for p in rel))

    asyncio.run(put_all())
    seconds = time.perf_counter() - t0
    return {"objects": len(rel), "bytes": sent, "seconds": seconds}


def child_env() -> dict[str, str]:
    """The environment children run with (the parent's: S3 settings, extension paths)."""
    return dict(os.environ)


def child(mode: str, *args: str) -> dict[str, Any]:
    """A ``tests.bench.bridge_child`` run: its JSON, wall time and own peak RSS."""
    m = run_module("tests.bench.bridge_child", [mode, *args], child_env())
    if m.returncode != 0:
        raise SystemExit(f"child {mode} failed ({m.returncode}):\n{m.stderr[-4000:]}")
    out = m.last_json()
    if not isinstance(out, dict):
        raise SystemExit(f"child {mode} printed no JSON:\n{m.stdout[-2000:]}{m.stderr[-2000:]}")
    return out | {"process_wall_s": m.wall_s, "process_peak_rss_mb": m.peak_rss_mb}


def cli(*args: str) -> Measured:
    """``python -m slatelake.cli ARGS``: the ``slatelake`` command, measured."""
    return run_module("slatelake.cli", args, child_env())


def slate_lake(url: str, catalog: Path) -> dict[str, Any]:
    """Import ``catalog`` into a new lake at ``url``, commit the marker, fold."""
    imported = child("import", str(catalog), url)
    marked = child("mark-slate", url)
    folded = cli("fold", url, "--json", "--margin", "0")
    if folded.returncode != 0:
        raise SystemExit(f"slatelake fold {url} failed:\n{folded.stderr[-3000:]}")
    return {"import": imported, "mark": marked, "fold_wall_s": folded.wall_s}


def images_present(url: str) -> int | None:
    """How many images the lake lists; None when this build has no image support."""
    try:
        from slatelake.log.images import ImageBook
        from slatelake.store.location import LakeLocation
    except ImportError:
        return None
    return len(ImageBook(LakeLocation.parse(url)).list())


def write_image(url: str) -> dict[str, Any]:
    """``slatelake image LAKE --json``: its own seconds and the object's bytes, the
    process wall and peak RSS; ``{"skipped": why}`` when no image was written."""
    m = cli("image", url, "--json")
    if m.returncode != 0:
        tail = (m.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"skipped": f"`slatelake image` exited {m.returncode}: {tail}"}
    doc = m.last_json()
    if not isinstance(doc, dict) or "bytes" not in doc:
        return {"skipped": f"`slatelake image --json` printed no image record: {m.stdout[-300:]}"}
    if doc.get("written") is False:
        return {"skipped": f"no image written: {doc.get('reason', 'no reason given')}"}
    return {
        "seconds": doc.get("seconds"),
        "bytes": doc["bytes"],
        "seq": doc.get("seq"),
        "path": doc.get("path"),
        "process_wall_s": m.wall_s,
        "peak_rss_mb": m.peak_rss_mb,
    }


def fold_and_image(url: str) -> dict[str, Any]:
    """What the holder pays after a burst of commits: ``slatelake fold`` then
    ``slatelake image`` (each its own process: wall and peak RSS)."""
    folded = cli("fold", url, "--json", "--margin", "0")
    if folded.returncode != 0:
        raise SystemExit(f"slatelake fold {url} failed:\n{folded.stderr[-3000:]}")
    reports = [line for line in folded.stdout.splitlines() if line.startswith("{")]
    fold_doc = json.loads(reports[-1]) if reports else {}
    return {
        "fold": {
            "slots": fold_doc.get("slots"),
            "seconds": fold_doc.get("seconds"),
            "process_wall_s": folded.wall_s,
            "peak_rss_mb": folded.peak_rss_mb,
        },
        "image": write_image(url),
    }
