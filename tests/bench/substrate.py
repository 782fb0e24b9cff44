"""Substrate benchmarks: commit latency, materialization, fold, and stock DuckLake on the same rows.

Run from the repository root (not part of the test suite; pytest ignores tests/bench)::

    python -m tests.bench.substrate [--quick] [--sizes 10000,100000,1000000]
                                    [--commits N] [--unfolded K] [--profile]
                                    [--out bench-results/substrate.json]

Everything runs on local files (``file://`` lakes under a temporary directory),
so the object store is the local file system and the OS page cache is warm.
"Cold" means a fresh handle in this process (a new SlateDB ``DbReader`` with
empty caches, a new DuckDB connection), never a cold disk.

What each figure is, exactly:

1. Commit latency: a lake with DuckLake's genesis rows; N sequential
   ``Lake.commit`` calls, each the rows of one DuckLake INSERT from
   ``synthetic.commit_changes``, no folder running. The timed span is
   ``Lake.commit`` only (build the change set, encode the envelope, the
   create-if-absent slot PUT, apply to the in-memory state); generating the
   rows is reported apart. Object-store calls are counted by a wrapper around
   the lake's ``ObjectClient``.
2. Materialization: a lake built to about S catalog rows (40 tables of 5
   columns; every DuckLake snapshot inserts 1-3 data files, each with 5 column
   stats; table stats updated in place), committed as large change sets with
   ``Lake.commit``, folded with ``Folder.fold_once``. Timed: ``Lake.open(url)``
   plus ``materialize()`` on a fresh handle, end to end (SlateDB scan of every
   catalog subspace, value decode into Python rows, one LIST of the log). Also
   the bare SlateDB scan (keys and value bytes into Python, no decode), and a
   materialization with K unfolded one-INSERT slots on top (log replay).
3. Fold: ``Folder.fold_once(truncate=False)`` over the build's slots (read
   and decode slots, one WriteBatch per 50k keys, flush); truncation timed apart.
4. Stock DuckLake 1.5.5 on the same rows: a DuckDB-file catalog created by
   the extension, every ``ducklake_*`` table emptied (``ducklake_metadata``
   keeps the extension's own rows) and loaded with the materialized rows.
   (a) fresh connection, ``ATTACH 'ducklake:...'`` then
   ``SELECT count(*) FROM lake.t1`` (answered from metadata) and
   ``SELECT count(*) FROM lake.snapshots()``; the LOAD of the extension is
   timed apart. (b) fresh connection, plain ``ATTACH`` of the catalog file,
   ``SELECT *`` of every ``ducklake_*`` table fetched into Python tuples
   (TIMESTAMPTZ cast to VARCHAR: no pytz here). (b) is the like-for-like
   figure for ``materialize`` (all catalog rows into Python); (a) is what stock
   DuckLake actually pays to open a lake, because it reads lazily.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import gc
import glob
import io
import json
import os
import pstats
import resource
import shutil
import site
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from slatelake.catalog import registry
from slatelake.catalog.changes import RowChanges
from slatelake.catalog.folder import Folder
from slatelake.catalog.lake import Lake
from slatelake.catalog.rows import Row
from slatelake.catalog.state import CATALOG_SUBSPACES, CatalogState
from slatelake.log.committer import DEFAULT_MAX_OPERATIONS
from slatelake.store import _bindings
from slatelake.store.db import open_admin
from slatelake.store.location import LakeLocation
from slatelake.store.objects import ObjectClient
from tests.bench.common import run_header
from tests.catalog.synthetic import STATS_PER_FILE, commit_changes, genesis_changes

GOAL_MATERIALIZE_ROWS_S = 500_000
GOAL_FOLD_ROWS_S = 100_000
TABLES = 40
FILES_PATTERN = (2, 1, 3, 2)  # data files per snapshot, cycled: ~1.9 like the churned lake
READ_AHEAD_WHAT_IF = 16 << 20
SNAPSHOTS_PER_CHANGE_SET = 10_000  # ~60k operations per change set, well under the limit
COLUMNS = (
    ("a", "int64"),
    ("b", "varchar"),
    ("c", "float64"),
    ("d", "date"),
    ("e", "boolean"),
)
assert len(COLUMNS) == STATS_PER_FILE
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


# -- counting object-store calls ---------------------------------------------------------------
class CountingClient(ObjectClient):
    """An ObjectClient that counts calls by verb and top folder (commits, readers, ...)."""

    def __init__(self, inner: ObjectClient) -> None:
        super().__init__(inner.location, inner.store)
        self.counts: Counter[str] = Counter()

    def _area(self, path: str) -> str:
        root = self.location.root
        rel = path[len(root) + 1 :] if root and path.startswith(root + "/") else path
        return rel.split("/", 1)[0]

    def put_if_absent(self, path: str, data: bytes) -> bool:
        self.counts[f"put_if_absent:{self._area(path)}"] += 1
        return super().put_if_absent(path, data)

    def put(self, path: str, data: bytes) -> None:
        self.counts[f"put:{self._area(path)}"] += 1
        super().put(path, data)

    def get(self, path: str) -> bytes | None:
        self.counts[f"get:{self._area(path)}"] += 1
        return super().get(path)

    def delete(self, path: str) -> None:
        self.counts[f"delete:{self._area(path)}"] += 1
        super().delete(path)

    def list(self, prefix: str, offset: str | None = None):
        self.counts[f"list:{self._area(prefix)}"] += 1
        return super().list(prefix, offset)


def install_counter(lake: Lake) -> CountingClient:
    counter = CountingClient(lake.log.client)
    lake.log.client = counter  # the committer writes slots through lake.log
    lake.lease.book.client = counter
    return counter


# -- small helpers -----------------------------------------------------------------------------
def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    idx = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[idx]


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# -- 1. commit latency -------------------------------------------------------------------------
def bench_commits(root: Path, n: int) -> dict[str, Any]:
    url = (root / "commit-lake").as_uri()
    lake = Lake.create(url)
    counter = install_counter(lake)
    state = lake.materialize()
    lake.commit(state, genesis_changes(), mints_snapshot=True, changes_made="created_schema")
    before = Counter(counter.counts)
    commit_ms: list[float] = []
    gen_ms: list[float] = []
    for _ in range(n):
        t0 = time.perf_counter()
        changes = commit_changes(state)
        t1 = time.perf_counter()
        lake.commit(state, changes, mints_snapshot=True, changes_made="inserted_into_table:1")
        t2 = time.perf_counter()
        gen_ms.append((t1 - t0) * 1000)
        commit_ms.append((t2 - t1) * 1000)
    during = counter.counts - before
    lake.close()
    total = Counter(counter.counts)  # create, materialize, genesis, commits, close
    shutil.rmtree(root / "commit-lake", ignore_errors=True)
    return {
        "commits": n,
        "p50_ms": pct(commit_ms, 0.50),
        "p95_ms": pct(commit_ms, 0.95),
        "mean_ms": statistics.fmean(commit_ms),
        "max_ms": max(commit_ms),
        "rowgen_mean_ms": statistics.fmean(gen_ms),
        "rowgen_last_ms": gen_ms[-1],
        "slot_puts_per_commit": during["put_if_absent:commits"] / n,
        "lease_puts_during_commits": during["put:readers"],
        "other_calls_during_commits": {
            k: v for k, v in during.items() if k not in ("put_if_absent:commits", "put:readers")
        },
        "calls_whole_run": dict(total),
        "final_rows": state.row_count(),
    }


# -- building a lake of a given size ----------------------------------------------------------
class Builder:
    """DuckLake-shaped rows for a churn-free lake of TABLES tables, ids tracked here."""

    def __init__(self) -> None:
        self.snap = 0  # last snapshot id written (genesis is 0)
        self.next_file = 0
        self.next_catalog = 1
        self.rows = 0  # net catalog rows committed
        self.files = 0
        self.table_stats: dict[int, Row] = {}
        self.col_stats: dict[tuple[int, int], Row] = {}
        self._pattern = 0

    def count(self, changes: RowChanges) -> None:
        self.rows += sum(len(r) for r in changes.inserted.values())
        self.rows -= sum(len(r) for r in changes.deleted.values())

    def genesis(self) -> RowChanges:
        return genesis_changes()

    def create_tables(self) -> RowChanges:
        self.snap += 1
        snap = self.snap
        ch = RowChanges()
        first = self.next_catalog
        for tid in range(first, first + TABLES):
            ch.insert(
                "ducklake_table",
                (tid, uuid.UUID(int=tid), snap, None, 0, f"t{tid}", f"t{tid}/", True),
            )
            for cid, (name, typ) in enumerate(COLUMNS, start=1):
                ch.insert(
                    "ducklake_column",
                    (
                        cid,
                        snap,
                        None,
                        tid,
                        cid,
                        name,
                        typ,
                        None,
                        "NULL",
                        True,
                        None,
                        "literal",
                        "duckdb",
                    ),
                )
            ch.insert("ducklake_schema_versions", (snap, 1, tid))
        self.next_catalog = first + TABLES
        ch.insert(
            "ducklake_snapshot",
            (snap, T0 + dt.timedelta(seconds=snap), 1, self.next_catalog, self.next_file),
        )
        ch.insert(
            "ducklake_snapshot_changes", (snap, 'created_table:"main"."t1"', None, None, None)
        )
        return ch

    def insert_snapshot(self, ch: RowChanges, touched: set[int]) -> None:
        """One DuckLake INSERT of 1-3 files into one table (no stats rows yet)."""
        self.snap += 1
        snap = self.snap
        tid = 1 + snap % TABLES
        nfiles = FILES_PATTERN[self._pattern % len(FILES_PATTERN)]
        self._pattern += 1
        rec_total, row_start, _ = self.table_stats.get(tid, (tid, 0, 0, 0))[1:]
        next_row = row_start
        for _ in range(nfiles):
            fid = self.next_file
            self.next_file += 1
            records = 1000 + fid % 97
            ch.insert(
                "ducklake_data_file",
                (
                    fid,
                    tid,
                    snap,
                    None,
                    None,
                    f"ducklake-{fid:012d}.parquet",
                    True,
                    "parquet",
                    records,
                    20_000 + fid % 4096,
                    438,
                    next_row,
                    None,
                    None,
                    None,
                    None,
                ),
            )
            ch.insert(
                "ducklake_file_column_stats",
                *(
                    (
                        fid,
                        tid,
                        cid,
                        4_000 + cid,
                        records,
                        0,
                        str(next_row),
                        str(next_row + records),
                        False if typ == "float64" else None,
                        None,
                    )
                    for cid, (_, typ) in enumerate(COLUMNS, start=1)
                ),
            )
            next_row += records
        self.files += nfiles
        old = self.table_stats.get(tid)
        size = (old[3] if old else 0) + nfiles * 20_000
        self.table_stats[tid] = (tid, rec_total + (next_row - row_start), next_row, size)
        touched.add(tid)
        ch.insert(
            "ducklake_snapshot",
            (snap, T0 + dt.timedelta(seconds=snap), 1, self.next_catalog, self.next_file),
        )
        ch.insert(
            "ducklake_snapshot_changes", (snap, f"inserted_into_table:{tid}", None, None, None)
        )

    def stats_rows(self, ch: RowChanges, touched: set[int], committed: dict) -> None:
        """Table stats and table column stats, updated in place for the touched tables."""
        for tid in sorted(touched):
            prev = committed["table_stats"].get(tid)
            if prev is not None:
                ch.delete("ducklake_table_stats", prev)
            ch.insert("ducklake_table_stats", self.table_stats[tid])
            committed["table_stats"][tid] = self.table_stats[tid]
            for cid in range(1, len(COLUMNS) + 1):
                row = (tid, cid, False, None, "0", str(self.table_stats[tid][2]), None)
                prev = committed["col_stats"].get((tid, cid))
                if prev is not None:
                    ch.delete("ducklake_table_column_stats", prev)
                ch.insert("ducklake_table_column_stats", row)
                committed["col_stats"][(tid, cid)] = row

    def bulk(self, snapshots: int, committed: dict) -> RowChanges:
        ch = RowChanges()
        touched: set[int] = set()
        for _ in range(snapshots):
            self.insert_snapshot(ch, touched)
        self.stats_rows(ch, touched, committed)
        return ch


def build_lake(url: str, target_rows: int) -> dict[str, Any]:
    """Create a lake of about target_rows catalog rows; leave its slots unfolded."""
    builder = Builder()
    committed: dict[str, dict] = {"table_stats": {}, "col_stats": {}}
    lake = Lake.create(url)
    state = lake.materialize()
    slots = 0
    slot_rows: list[int] = []
    gen_s = commit_s = 0.0
    max_ops = 0
    for ch in (builder.genesis(), builder.create_tables()):
        builder.count(ch)
        lake.commit(state, ch, mints_snapshot=True)
        slots += 1
        slot_rows.append(builder.rows - sum(slot_rows))
    while builder.rows < target_rows:
        # rows per snapshot ~ 2 + 6 * 2; aim the last change set at the target
        remaining = max(1, (target_rows - builder.rows) // 14 + 1)
        t0 = time.perf_counter()
        ch = builder.bulk(min(SNAPSHOTS_PER_CHANGE_SET, remaining), committed)
        t1 = time.perf_counter()
        before = builder.rows
        builder.count(ch)
        committed_cs = lake.commit(state, ch, mints_snapshot=True, changes_made="bulk")
        t2 = time.perf_counter()
        max_ops = max(max_ops, committed_cs.change_set.operations)
        gen_s += t1 - t0
        commit_s += t2 - t1
        slots += 1
        slot_rows.append(builder.rows - before)
    keys = len(state.entries)
    lake.close()  # drops the reader lease so the folder may truncate
    del state
    gc.collect()
    return {
        "builder": builder,
        "rows": builder.rows,
        "keys": keys,
        "files": builder.files,
        "snapshots": builder.snap + 1,
        "slots": slots,
        "max_ops_per_change_set": max_ops,
        "operation_limit": DEFAULT_MAX_OPERATIONS,
        "rowgen_s": gen_s,
        "commit_s": commit_s,
        "committed": committed,
    }


def commit_small(url: str, builder: Builder, committed: dict, k: int, state: CatalogState) -> float:
    """K one-INSERT commits (one slot each) on top of ``state``, no folder running."""
    with Lake.open(url) as lake:
        t0 = time.perf_counter()
        for _ in range(k):
            ch = builder.bulk(1, committed)
            builder.count(ch)
            lake.commit(state, ch, mints_snapshot=True, changes_made="inserted_into_table")
        return time.perf_counter() - t0


# -- 2/3. fold and materialize -----------------------------------------------------------------
def fold(location: Any) -> dict[str, Any]:
    """One fold_once over every pending slot; the writer's write and flush timed apart."""
    folder = Folder(location, margin_s=0)
    spent: Counter[str] = Counter()
    for name in ("write", "flush"):
        inner = getattr(folder.writer, name)

        def wrapped(*a: Any, _inner: Any = inner, _name: str = name, **kw: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return _inner(*a, **kw)
            finally:
                spent[_name] += time.perf_counter() - t0

        setattr(folder.writer, name, wrapped)  # this instance only
    try:
        report = folder.fold_once(truncate=False)
        trunc_s, truncated = timed(folder.truncate)
    finally:
        folder.close()
    return {
        "slots": report.slots,
        "change_sets": report.change_sets,
        "operations": report.operations,
        "batches": report.batches,
        "seconds": report.seconds,
        "write_s": spent["write"],
        "flush_s": spent["flush"],
        "read_and_merge_s": report.seconds - spent["write"] - spent["flush"],
        "truncated": truncated,
        "truncate_s": trunc_s,
    }


def cold_materialize(url: str) -> tuple[dict[str, Any], CatalogState]:
    t0 = time.perf_counter()
    lake = Lake.open(url, read_only=True)
    t1 = time.perf_counter()
    state = lake.materialize()
    t2 = time.perf_counter()
    lake.close()
    return {"open_s": t1 - t0, "materialize_s": t2 - t1, "total_s": t2 - t0}, state


def scan_only(url: str, read_ahead: int | None = None) -> dict[str, Any]:
    """The bare SlateDB scan of the catalog subspaces: keys and bytes into Python, no decode.

    ``read_ahead`` is a what-if: the same scan through ``scan_prefix_with_options`` with
    that many read-ahead bytes and 8 fetch tasks (the library scans with the defaults).
    """
    with Lake.open(url, read_only=True) as lake:
        reader = lake.reader()
        t0 = time.perf_counter()
        keys = nbytes = 0
        for sub in CATALOG_SUBSPACES:
            if read_ahead is None:
                batches = reader.scan_prefix_batches(bytes((sub,)))
            else:
                batches = _scan_with_read_ahead(reader, bytes((sub,)), read_ahead)
            for batch in batches:
                keys += len(batch)
                nbytes += sum(len(k) + len(v) for k, v in batch)
        return {"seconds": time.perf_counter() - t0, "keys": keys, "bytes": nbytes}


def _scan_with_read_ahead(reader: Any, prefix: bytes, read_ahead: int) -> Any:
    from slatedb.uniffi import DurabilityLevel, ScanOptions

    from slatelake.store.db import _ALL, SCAN_BATCH, _call

    opts = ScanOptions(
        durability_filter=DurabilityLevel.REMOTE,
        dirty=False,
        read_ahead_bytes=read_ahead,
        cache_blocks=False,
        max_fetch_tasks=8,
    )
    where = reader.location
    it = _call(where, "scan", reader._handle.scan_prefix_with_options(prefix, _ALL, opts))
    while True:
        rows = _call(where, "scan", it.next_batch(SCAN_BATCH))
        if not rows:
            return
        yield [(kv.key, kv.value) for kv in rows]


def store_shape(location: Any) -> dict[str, Any]:
    manifest = open_admin(location).read_manifest()
    out = {}
    for seg in manifest.segments:
        label = seg.prefix.hex()
        out[label] = {
            "l0": len(seg.l0),
            "sorted_runs": len(seg.compacted),
            "bytes": sum(v.estimated_size_bytes for v in seg.l0)
            + sum(r.estimated_size_bytes for r in seg.compacted),
        }
    return out


# -- 4. stock DuckLake --------------------------------------------------------------------------
def ducklake_extension() -> str:
    bases = [*site.getsitepackages(), site.getusersitepackages()]
    for base in bases:
        hits = glob.glob(
            f"{base}/duckdb_extension_ducklake/extensions/v1.5.5/ducklake.duckdb_extension"
        )
        if hits:
            return hits[0]
    raise SystemExit("the duckdb-extension-ducklake 1.5.5 wheel is not installed in this venv")


def duck_connect(ext: str) -> tuple[Any, float]:
    import duckdb

    con = duckdb.connect(
        config={"autoinstall_known_extensions": False, "autoload_known_extensions": False}
    )
    load_s, _ = timed(lambda: con.execute(f"LOAD '{ext}'"))
    return con, load_s


def _json_value(value: Any, type_: str = "") -> Any:
    if type_.upper().startswith("TIMESTAMP") and isinstance(value, int):
        # the synthetic rows hold instants as µs since the epoch; JSON needs text
        epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
        return (epoch + dt.timedelta(microseconds=value)).isoformat()
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


def build_stock(directory: Path, ext: str, tables: dict[str, list[Row]]) -> dict[str, Any]:
    """A stock DuckLake whose catalog file holds exactly these rows (its own metadata kept)."""
    directory.mkdir(parents=True, exist_ok=True)
    meta = directory / "meta.duckdb"
    con, _ = duck_connect(ext)
    con.execute(f"ATTACH 'ducklake:{meta}' AS lake (DATA_PATH '{directory / 'data'}/')")
    con.execute("DETACH lake")
    con.execute(f"ATTACH '{meta}' AS m")
    present = {
        r[0]
        for r in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = 'm'"
        ).fetchall()
    }
    missing = sorted(set(tables) - present)
    if missing:
        raise SystemExit(f"stock catalog lacks tables {missing}")
    t0 = time.perf_counter()
    con.execute("BEGIN")
    for name in sorted(present):
        if name.startswith("ducklake_") and name != "ducklake_metadata":
            con.execute(f"DELETE FROM m.{name}")
    loaded = 0
    for name, rows in sorted(tables.items()):
        if name == "ducklake_metadata" or not rows:
            continue
        spec = registry.spec(name)
        path = directory / f"{name}.json"
        cols = spec.column_names
        with open(path, "w") as fh:
            buf = io.StringIO()
            for row in rows:
                values = zip(spec.columns, row, strict=True)
                buf.write(json.dumps({c: _json_value(v, t) for (c, t), v in values}))
                buf.write("\n")
            fh.write(buf.getvalue())
        types = ", ".join(f"{c}: '{t}'" for c, t in spec.columns)
        collist = ", ".join(cols)
        con.execute(
            f"INSERT INTO m.{name} ({collist}) SELECT {collist} FROM read_json('{path}', "
            f"format = 'newline_delimited', columns = {{{types}}})"
        )
        loaded += len(rows)
        path.unlink()
    con.execute("COMMIT")
    con.execute("CHECKPOINT m")
    con.execute("DETACH m")
    con.close()
    return {"load_s": time.perf_counter() - t0, "rows_loaded": loaded, "path": str(meta)}


def stock_attach(meta: str, data: str, ext: str) -> dict[str, float]:
    con, load_s = duck_connect(ext)
    out = {"load_extension_s": load_s}
    out["attach_s"], _ = timed(
        lambda: con.execute(f"ATTACH 'ducklake:{meta}' AS lake (DATA_PATH '{data}/')")
    )
    out["count_t1_s"], rows = timed(lambda: con.execute("SELECT count(*) FROM lake.t1").fetchall())
    out["snapshots_s"], snaps = timed(
        lambda: con.execute("SELECT count(*) FROM lake.snapshots()").fetchall()
    )
    out["attach_and_count_s"] = out["attach_s"] + out["count_t1_s"]
    out["t1_count"] = rows[0][0]
    out["snapshot_count"] = snaps[0][0]
    con.close()
    return out


def stock_read_all(meta: str, ext: str) -> dict[str, Any]:
    con, _ = duck_connect(ext)
    t0 = time.perf_counter()
    con.execute(f"ATTACH '{meta}' AS m (READ_ONLY)")
    names = [
        r[0]
        for r in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = 'm' "
            "AND table_name LIKE 'ducklake_%' ORDER BY 1"
        ).fetchall()
    ]
    total = 0
    for name in names:
        cols = con.execute(
            "SELECT column_name, data_type FROM duckdb_columns() "
            "WHERE database_name = 'm' AND table_name = ?",
            [name],
        ).fetchall()
        select = ", ".join(f'"{c}"::VARCHAR' if "TIME ZONE" in t else f'"{c}"' for c, t in cols)
        total += len(con.execute(f"SELECT {select} FROM m.{name}").fetchall())
    seconds = time.perf_counter() - t0
    con.close()
    return {"seconds": seconds, "rows": total, "tables": len(names)}


def median_of(runs: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def bench_stock(root: Path, ext: str, state: CatalogState, reps: int) -> dict[str, Any]:
    directory = root / "stock"
    built = build_stock(directory, ext, state.tables())
    data = str(directory / "data")
    attach_runs = [stock_attach(built["path"], data, ext) for _ in range(reps)]
    read_runs = [stock_read_all(built["path"], ext) for _ in range(reps)]
    out = {
        "build": built,
        "catalog_file_bytes": os.path.getsize(built["path"]),
        "attach_runs": attach_runs,
        "read_all_runs": read_runs,
        "load_extension_s": median_of(attach_runs, "load_extension_s"),
        "attach_s": median_of(attach_runs, "attach_s"),
        "attach_and_count_s": median_of(attach_runs, "attach_and_count_s"),
        "count_t1_s": median_of(attach_runs, "count_t1_s"),
        "snapshots_s": median_of(attach_runs, "snapshots_s"),
        "read_all_s": median_of(read_runs, "seconds"),
        "read_all_rows": read_runs[0]["rows"],
        "t1_count": attach_runs[0]["t1_count"],
        "snapshot_count": attach_runs[0]["snapshot_count"],
    }
    shutil.rmtree(directory, ignore_errors=True)
    return out


# -- one catalog size --------------------------------------------------------------------------
def bench_size(root: Path, target: int, unfolded: int, ext: str | None) -> dict[str, Any]:
    lake_dir = root / f"lake-{target}"
    url = lake_dir.as_uri()
    log(f"size {target}: building")
    build_s, built = timed(lambda: build_lake(url, target))
    builder: Builder = built.pop("builder")
    committed = built.pop("committed")
    log(
        f"size {target}: built {built['rows']} rows / {built['keys']} keys in {build_s:.1f}s; "
        "folding"
    )
    location = LakeLocation.parse(url)
    folded = fold(location)
    folded["rows"] = built["rows"]
    folded["rows_per_s"] = built["rows"] / folded["seconds"]
    folded["keys_per_s"] = folded["operations"] / folded["seconds"]
    shape = store_shape(location)
    log(f"size {target}: folded in {folded['seconds']:.1f}s; materializing")
    reps = 3 if target <= 200_000 else 2
    runs = []
    state = None
    for _ in range(reps):
        state = None
        gc.collect()
        run, state = cold_materialize(url)
        runs.append(run)
    assert state is not None
    rows = state.row_count()
    keys = len(state.entries)
    mat_s = statistics.median(r["total_s"] for r in runs)
    scan = scan_only(url)
    scan_ra = scan_only(url, read_ahead=READ_AHEAD_WHAT_IF)
    materialize = {
        "runs": runs,
        "seconds": mat_s,
        "rows": rows,
        "keys": keys,
        "rows_per_s": rows / mat_s,
        "keys_per_s": keys / mat_s,
        "scan_only_s": scan["seconds"],
        "scan_keys": scan["keys"],
        "scan_bytes": scan["bytes"],
        "scan_keys_per_s": scan["keys"] / scan["seconds"],
        "decode_and_rest_s": mat_s - scan["seconds"],
        "scan_read_ahead_what_if_s": scan_ra["seconds"],
    }
    stock = None
    if ext is not None:
        log(f"size {target}: materialized {rows} rows in {mat_s:.2f}s; stock DuckLake")
        stock = bench_stock(root, ext, state, reps=3)
        stock["ratio_vs_attach"] = mat_s / stock["attach_and_count_s"]
        stock["ratio_vs_read_all"] = mat_s / stock["read_all_s"]
    replay = None
    if unfolded:
        log(f"size {target}: {unfolded} unfolded commits on top")
        # commit on a shallow copy, so ``state`` stays the folded view to replay onto
        view = CatalogState(state.head, state.last_seq, dict(state.entries))
        commit_s = commit_small(url, builder, committed, unfolded, view)
        del view
        with Lake.open(url, read_only=True) as lake:
            refresh_s, _ = timed(lambda: lake.refresh(state))
        del state
        replay_runs = []
        for _ in range(reps):
            state = None
            gc.collect()
            run, state = cold_materialize(url)
            replay_runs.append(run)
        replay_rows = state.row_count()
        del state
        gc.collect()
        replay_s = statistics.median(r["total_s"] for r in replay_runs)
        small_fold = fold(location)
        replay = {
            "slots": unfolded,
            "commit_s": commit_s,
            "commit_ms_each": commit_s / unfolded * 1000,
            "runs": replay_runs,
            "materialize_s": replay_s,
            "rows": replay_rows,
            "extra_vs_folded_s": replay_s - mat_s,
            "refresh_s": refresh_s,
            "per_slot_ms": refresh_s / unfolded * 1000,
            "fold_after": small_fold,
        }
    shutil.rmtree(lake_dir, ignore_errors=True)
    return {
        "target_rows": target,
        "build": {**built, "seconds": build_s},
        "fold": folded,
        "store_shape": shape,
        "materialize": materialize,
        "replay": replay,
        "stock": stock,
        "rss_high_water_mb": rss_mb(),
    }


# -- profiling ---------------------------------------------------------------------------------
class ThreadProfiles:
    """cProfile of this thread and of the SlateDB event-loop thread (where results are lifted)."""

    def __init__(self) -> None:
        self.main = cProfile.Profile()
        self.loop = cProfile.Profile()
        self._loop = _bindings._runner.loop()

    def _on_loop(self, fn: Callable[[], Any]) -> None:
        done = threading.Event()

        def call() -> None:
            fn()
            done.set()

        self._loop.call_soon_threadsafe(call)
        done.wait(10)

    def __enter__(self) -> ThreadProfiles:
        self._on_loop(self.loop.enable)
        self.main.enable()
        return self

    def __exit__(self, *exc: object) -> None:
        self.main.disable()
        self._on_loop(self.loop.disable)

    def top(self, n: int) -> dict[str, str]:
        out = {}
        for label, prof in (("main thread", self.main), ("slatedb loop thread", self.loop)):
            buf = io.StringIO()
            stats = pstats.Stats(prof, stream=buf)
            stats.strip_dirs().sort_stats("tottime").print_stats(n)
            out[label] = buf.getvalue()
        return out


def bench_profile(root: Path, target: int, n: int) -> dict[str, Any]:
    url = (root / "profile-lake").as_uri()
    log(f"profile: building {target} rows")
    build_lake(url, target)
    location = LakeLocation.parse(url)
    log("profile: fold")
    with ThreadProfiles() as fold_prof:
        folded = fold(location)
    log("profile: materialize")
    lake = Lake.open(url, read_only=True)
    with ThreadProfiles() as mat_prof:
        t0 = time.perf_counter()
        state = lake.materialize()
        mat_s = time.perf_counter() - t0
    lake.close()
    rows = state.row_count()
    del state
    shutil.rmtree(root / "profile-lake", ignore_errors=True)
    return {
        "rows": rows,
        "fold_s_profiled": folded["seconds"],
        "materialize_s_profiled": mat_s,
        "fold": fold_prof.top(n),
        "materialize": mat_prof.top(n),
    }


# -- reporting ---------------------------------------------------------------------------------
def print_report(result: dict[str, Any]) -> None:
    c = result["commits"]
    print()
    print(
        f"== 1. commit latency: {c['commits']} sequential Lake.commit, one INSERT each, "
        "no folder =="
    )
    print(
        f"  p50 {c['p50_ms']:.2f} ms   p95 {c['p95_ms']:.2f} ms   mean {c['mean_ms']:.2f} ms   "
        f"max {c['max_ms']:.2f} ms"
    )
    print(
        f"  slot PUTs per commit {c['slot_puts_per_commit']:.2f}; lease PUTs during commits "
        f"{c['lease_puts_during_commits']}; other calls during commits "
        f"{c['other_calls_during_commits'] or 'none'}"
    )
    print(f"  whole run incl. create/materialize/close: {c['calls_whole_run']}")
    print(
        f"  row generation (synthetic.commit_changes, not in latency): mean "
        f"{c['rowgen_mean_ms']:.2f} ms, last {c['rowgen_last_ms']:.2f} ms "
        f"at {c['final_rows']} rows"
    )
    sizes = result["sizes"]
    print()
    print("== 2. materialization: Lake.open + materialize on a fresh handle (folded lake) ==")
    print(
        f"  {'rows':>9} {'keys':>8} {'files':>7} {'mat s':>7} {'rows/s':>9} {'goal':>5} "
        f"{'keys/s':>8} {'scan s':>7} {'scan k/s':>8} {'decode+ s':>9} {'scan RA s':>9}"
    )
    for s in sizes:
        m = s["materialize"]
        goal = m["rows_per_s"] / GOAL_MATERIALIZE_ROWS_S
        print(
            f"  {m['rows']:>9} {m['keys']:>8} {s['build']['files']:>7} {m['seconds']:>7.2f} "
            f"{m['rows_per_s']:>9.0f} {goal:>4.0%} {m['keys_per_s']:>8.0f} "
            f"{m['scan_only_s']:>7.2f} {m['scan_keys_per_s']:>8.0f} "
            f"{m['decode_and_rest_s']:>9.2f} {m['scan_read_ahead_what_if_s']:>9.2f}"
        )
    print(
        "  scan = SlateDB scan of the catalog subspaces into Python (key, value) pairs only; "
        "decode+ = mat - scan;\n  scan RA = what-if: same scan with 16 MiB read-ahead and 8 "
        "fetch tasks (scan_prefix_with_options), not what the library does"
    )
    if any(s["replay"] for s in sizes):
        print()
        print(
            "   replay: K one-INSERT commits on top, not folded; then materialize, then fold them"
        )
        print(
            f"  {'rows':>9} {'K':>4} {'commit ms':>9} {'refresh s':>9} {'ms/slot':>8} "
            f"{'mat s':>7} {'vs folded':>9} {'fold K s':>8}"
        )
        for s in sizes:
            r = s["replay"]
            if r:
                print(
                    f"  {r['rows']:>9} {r['slots']:>4} {r['commit_ms_each']:>9.2f} "
                    f"{r['refresh_s']:>9.3f} {r['per_slot_ms']:>8.2f} "
                    f"{r['materialize_s']:>7.2f} {r['extra_vs_folded_s']:>+9.2f} "
                    f"{r['fold_after']['seconds']:>8.3f}"
                )
        print(
            "  commit ms = one Lake.commit on the big catalog; refresh = Lake.refresh of the "
            "folded view over the K slots\n  (LIST, K GETs, decode, apply): the replay cost "
            "alone; mat s = cold materialize with the K slots, vs folded = its difference"
        )
    print()
    print("== 3. fold: Folder.fold_once(truncate=False) over the build's slots ==")
    print(
        f"  {'rows':>9} {'slots':>5} {'ops':>8} {'batches':>7} {'fold s':>7} {'rows/s':>9} "
        f"{'goal':>5} {'keys/s':>8} {'write s':>7} {'flush s':>7} {'other s':>7} {'trunc s':>7}"
    )
    for s in sizes:
        f = s["fold"]
        goal = f["rows_per_s"] / GOAL_FOLD_ROWS_S
        print(
            f"  {f['rows']:>9} {f['slots']:>5} {f['operations']:>8} {f['batches']:>7} "
            f"{f['seconds']:>7.2f} {f['rows_per_s']:>9.0f} {goal:>4.0%} "
            f"{f['keys_per_s']:>8.0f} {f['write_s']:>7.2f} {f['flush_s']:>7.2f} "
            f"{f['read_and_merge_s']:>7.2f} {f['truncate_s']:>7.3f}"
        )
    print(
        "  write = StoreWriter.write (WriteBatch.put per key + SlateDB write); other = slot "
        "LIST/GET/decode + merging puts"
    )
    print()
    print("   build (not a goal): rows generated and committed as large change sets")
    print(
        f"  {'rows':>9} {'slots':>5} {'max ops':>8} {'rowgen s':>8} {'commit s':>8} {'RSS MB':>7}"
    )
    for s in sizes:
        bd = s["build"]
        print(
            f"  {bd['rows']:>9} {bd['slots']:>5} {bd['max_ops_per_change_set']:>8} "
            f"{bd['rowgen_s']:>8.1f} {bd['commit_s']:>8.1f} {s['rss_high_water_mb']:>7.0f}"
        )
    if any(s["stock"] for s in sizes):
        print()
        print("== 4. stock DuckLake 1.5.5 (DuckDB-file catalog) on the same rows ==")
        print(
            f"  {'rows':>9} {'mat s':>7} {'attach s':>8} {'count s':>7} {'a+c s':>6} "
            f"{'ratio':>6} {'snaps() s':>9} {'readall s':>9} {'ratio':>6} {'file MB':>7}"
        )
        for s in sizes:
            st = s["stock"]
            if not st:
                continue
            print(
                f"  {s['materialize']['rows']:>9} {s['materialize']['seconds']:>7.2f} "
                f"{st['attach_s']:>8.3f} {st['count_t1_s']:>7.3f} "
                f"{st['attach_and_count_s']:>6.3f} {st['ratio_vs_attach']:>5.0f}x "
                f"{st['snapshots_s']:>9.3f} {st['read_all_s']:>9.2f} "
                f"{st['ratio_vs_read_all']:>5.1f}x {st['catalog_file_bytes'] / 1e6:>7.1f}"
            )
        print(
            "  attach/count: fresh connection (LOAD timed apart, not included), ATTACH "
            "'ducklake:meta.duckdb', then SELECT count(*) FROM lake.t1\n  (answered from "
            "metadata); a+c = their sum, ratio = slatelake materialize / a+c. snaps() = "
            "SELECT count(*) FROM lake.snapshots() after that.\n  readall: fresh connection, "
            "plain ATTACH of the catalog file, SELECT * of every ducklake_* table, fetchall() "
            "into Python;\n  ratio = slatelake materialize / readall (both: every catalog row "
            "into Python tuples)"
        )
    if result.get("profile"):
        p = result["profile"]
        print()
        print(
            f"== profile at {p['rows']} rows (cProfile, tottime; fold "
            f"{p['fold_s_profiled']:.2f}s, materialize {p['materialize_s_profiled']:.2f}s "
            "under the profiler) =="
        )
        for what in ("materialize", "fold"):
            for thread, text in p[what].items():
                print(f"-- {what}, {thread}")
                print(_trim_profile(text))


def _trim_profile(text: str) -> str:
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if "ncalls" in line), 0)
    return "\n".join(lines[max(0, start - 3) :]).rstrip()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m tests.bench.substrate",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--quick", action="store_true", help="10k and 100k rows, fewer commits")
    ap.add_argument("--sizes", help="catalog sizes in rows, comma separated")
    ap.add_argument("--commits", type=int, help="sequential commits for the latency figure")
    ap.add_argument("--unfolded", type=int, help="unfolded slots for the replay figure")
    ap.add_argument("--no-stock", action="store_true", help="skip the stock DuckLake comparison")
    ap.add_argument(
        "--profile",
        action="store_true",
        help="also cProfile fold and materialize at --profile-rows",
    )
    ap.add_argument("--profile-rows", type=int, default=100_000)
    ap.add_argument("--out", default="bench-results/substrate.json")
    ap.add_argument("--tmp", help="directory for the lakes (default: a temp dir)")
    args = ap.parse_args(argv)

    if args.sizes:
        sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    else:
        sizes = [10_000, 100_000] if args.quick else [10_000, 100_000, 1_000_000]
    commits = args.commits or (200 if args.quick else 1000)
    unfolded = args.unfolded if args.unfolded is not None else (20 if args.quick else 100)
    ext = None if args.no_stock else ducklake_extension()

    result: dict[str, Any] = {
        **run_header(ext),
        "config": {
            "quick": args.quick,
            "sizes": sizes,
            "commits": commits,
            "unfolded": unfolded,
            "tables": TABLES,
            "stats_per_file": STATS_PER_FILE,
            "files_per_snapshot": FILES_PATTERN,
            "snapshots_per_change_set": SNAPSHOTS_PER_CHANGE_SET,
            "goals": {
                "materialize_rows_per_s": GOAL_MATERIALIZE_ROWS_S,
                "fold_rows_per_s": GOAL_FOLD_ROWS_S,
            },
            "note": (
                "bulk change sets mint one head snapshot each while carrying up to "
                f"{SNAPSHOTS_PER_CHANGE_SET} DuckLake snapshots, so head.snapshot_id lags the "
                "rows' snapshot ids; nothing measured here reads it"
            ),
        },
    }
    tmp_parent = args.tmp or None
    root = Path(tempfile.mkdtemp(prefix="slatelake-bench-", dir=tmp_parent))
    t_start = time.perf_counter()
    try:
        log(f"lakes under {root}")
        log(f"commit latency: {commits} commits")
        result["commits"] = bench_commits(root, commits)
        result["sizes"] = []
        for size in sizes:
            result["sizes"].append(bench_size(root, size, unfolded, ext))
        if args.profile:
            result["profile"] = bench_profile(root, args.profile_rows, 18)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    result["wall_s"] = time.perf_counter() - t_start
    result["rss_high_water_mb"] = rss_mb()
    print_report(result)
    print(f"\nwall {result['wall_s']:.0f}s, RSS high-water {result['rss_high_water_mb']:.0f} MB")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
