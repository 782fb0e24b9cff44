"""Bridge benchmarks: a DuckLake session on a slatelake lake against stock DuckLake.

Run from the repository root (not part of the test suite; pytest ignores tests/bench)::

    python -m tests.bench.bridge [--quick] [--files 1000,20000,100000]
                                 [--reps 3] [--n 20] [--no-profile]
                                 [--out bench-results/bridge.json]

Everything runs on local files: the slatelake lake is a ``file://`` URL under a
temporary directory, the stock lake is DuckLake 1.5.5 on a DuckDB-file catalog
in the same directory. Both lakes hold the same metadata and share one data
directory (the Parquet files are immutable; each side's new files get unique
names). "Cold" means a fresh Python process with a warm OS page cache.

Per size N (data files):

0. Build (not a goal): stock DuckLake, ``ATTACH 'ducklake:stock.duckdb'
   (DATA_PATH ..., DATA_INLINING_ROW_LIMIT 0)`` plus ``set_option
   ('data_inlining_row_limit', '0')`` so the setting is in the catalog; table
   ``t (id BIGINT, v VARCHAR, x DOUBLE)`` partitioned by ``id`` while loading,
   so one ``INSERT ... FROM range(a, b)`` writes one one-row Parquet file per
   id (~0.6 ms a file, the cheapest way found: a tiny ``target_file_size``
   still writes one file per 2048-row vector, and DuckDB compacts filtered
   vectors; one INSERT per file costs ~1.8 ms). Files come in INSERTs of
   ``BUILD_BATCH`` files (one snapshot each); then ``RESET PARTITIONED BY``,
   so the timed 1-row INSERTs are plain.
1. Copy: DETACH, plain read-only ATTACH of ``stock.duckdb``, every
   ``ducklake_*`` table (dynamic inlined tables included) read with
   ``tables.select_list`` (TIMESTAMPTZ as epoch µs), all rows inserted into one
   ``RowChanges``. A fresh store is laid down like ``Lake.create`` but with
   head ``(max_snapshot_id - 1, 0)``, so one minting commit lands the head on
   the copied catalog's last snapshot id; then ``Folder.fold_once``.
   Verified: a slatelake session sees stock's ``count(*)`` and file count.
2. Cold connect-to-first-query, a fresh process per run (median of --reps):
   slatelake ``connect(url)`` + ``SELECT count(*) FROM t``; stock
   ``extensions.connect()`` + ``ATTACH 'ducklake:...'`` + the same query.
   Imports happen before the clock starts. Extension load
   (``extensions.connect()`` alone, its own fresh process) is reported apart;
   both cold figures include it. Slatelake's phases come from wrappers
   installed in the child (open = Lake.open and the rest of Session.__init__).
3. Warm: same process, session open, head unmoved: the next ``SELECT
   count(*) FROM t`` (slatelake: includes the refresh, one LIST), median of
   --n; stock: the same query repeated on its attached connection.
4. 1-row INSERT, median of --n, each its own autocommitted statement.
   Inlining is off on both sides (limit 0, stored in the catalog), so both
   write one Parquet file and the catalog rows that describe it; the figure
   says what each side actually did (data-file count before and after).
   Slatelake's phases: refresh, DuckDB (the INSERT itself, DuckLake's commit
   into the in-memory catalog), capture, Lake.commit (build, slot PUT, apply).
5. Profiles (cProfile, tottime) at the largest size: a cold connect in a
   fresh process and --n inserts in an open session, both the main thread and
   the SlateDB loop thread.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb

from slatelake.catalog import registry
from slatelake.catalog.changes import RowChanges, build_change_set
from slatelake.catalog.folder import Folder
from slatelake.catalog.lake import Lake
from slatelake.catalog.state import (
    SYS_FOLD,
    SYS_FORMAT,
    SYS_HEAD,
    encode_fold,
    encode_format,
    encode_head,
)
from slatelake.ducklake import extensions
from slatelake.ducklake.tables import quote, select_list, table_columns
from slatelake.log.changeset import Head
from slatelake.store.db import open_writer, store_exists
from slatelake.store.location import LakeLocation
from tests.bench.common import run_header
from tests.bench.substrate import CountingClient, ThreadProfiles

REPO = Path(__file__).resolve().parents[2]
GOAL_COLD_S = 1.5  # slatelake cold connect-to-first-query at 100k files
GOAL_COLD_FILES = 100_000
GOAL_WARM_S = 0.100
GOAL_INSERT_VS_STOCK = 3.0
GOAL_INSERT_GROWTH = 1.5  # slatelake's own insert time, largest size / smallest size
BUILD_BATCH = 2_000  # data files per building INSERT (one DuckLake snapshot each)
MAX_COPY_OPERATIONS = 5_000_000
QUERY = "SELECT count(*) FROM t"
FILES_QUERY = "SELECT count(*) FROM ducklake_list_files('lake', 't')"
SLATE_ID_BASE = 1_000_000_000
STOCK_ID_BASE = 2_000_000_000
PROFILE_LINES = 22


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def insert_sql(ident: int) -> str:
    return f"INSERT INTO t VALUES ({ident}, 'row {ident}', {ident % 1000}.25)"


# -- 0. the stock lake -------------------------------------------------------------------------
def stock_attach_sql(meta: Path, data: Path, extra: str = "") -> str:
    return f"ATTACH 'ducklake:{meta}' AS lake (DATA_PATH '{data}/'{extra})"


def build_stock(directory: Path, files: int) -> dict[str, Any]:
    directory.mkdir(parents=True, exist_ok=True)
    meta, data = directory / "stock.duckdb", directory / "data"
    t0 = time.perf_counter()
    con = extensions.connect()
    con.execute(stock_attach_sql(meta, data, ", DATA_INLINING_ROW_LIMIT 0"))
    con.execute("CALL lake.set_option('data_inlining_row_limit', '0')")  # kept in the catalog
    con.execute("CREATE TABLE lake.t (id BIGINT, v VARCHAR, x DOUBLE)")
    con.execute("ALTER TABLE lake.t SET PARTITIONED BY (id)")  # one file per id
    inserts = 0
    for start in range(0, files, BUILD_BATCH):
        end = min(files, start + BUILD_BATCH)
        con.execute(
            f"INSERT INTO lake.t SELECT i, 'v' || i, i * 0.5 FROM range({start}, {end}) r(i)"
        )
        inserts += 1
    con.execute("ALTER TABLE lake.t RESET PARTITIONED BY")
    written = con.execute(FILES_QUERY).fetchone()[0]
    con.execute("DETACH lake")
    con.close()
    seconds = time.perf_counter() - t0
    if written != files:
        raise SystemExit(f"stock build wrote {written} data files, wanted {files}")
    return {
        "seconds": seconds,
        "ms_per_file": seconds / files * 1000,
        "inserts": inserts,
        "files": written,
        "meta": str(meta),
        "data": str(data),
        "catalog_file_bytes": meta.stat().st_size,
    }


# -- 1. copying the catalog into a slatelake lake ------------------------------------------------
def read_stock_catalog(meta: str) -> dict[str, Any]:
    """Every ducklake_* table of the stock catalog file, rows as the bridge fetches them."""
    con = duckdb.connect()
    con.execute(f"ATTACH '{meta}' AS m (READ_ONLY)")
    names = [
        n
        for (n,) in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = 'm' "
            "AND table_name LIKE 'ducklake_%' ORDER BY 1"
        ).fetchall()
    ]
    tables: dict[str, list[tuple]] = {}
    inline: dict[str, list[tuple[str, str]]] = {}
    for name in names:
        spec = registry.BY_NAME.get(name)
        if spec is not None:
            present = [c for c, _ in table_columns(con, "m", name)]
            if sorted(present) != sorted(spec.column_names):
                raise SystemExit(f"{name}: stock columns {present} differ from the registry")
            columns = list(spec.columns)
        elif registry.inline_table(name) is not None:
            columns = table_columns(con, "m", name)
            inline[name] = columns
        else:
            raise SystemExit(f"stock catalog has a table slatelake does not know: {name}")
        tables[name] = [
            tuple(r)
            for r in con.execute(f"SELECT {select_list(columns)} FROM m.{quote(name)}").fetchall()
        ]
    max_snap = con.execute("SELECT max(snapshot_id) FROM m.ducklake_snapshot").fetchone()[0]
    changes_made = con.execute(
        "SELECT changes_made FROM m.ducklake_snapshot_changes WHERE snapshot_id = ?", [max_snap]
    ).fetchone()[0]
    con.close()
    return {
        "tables": tables,
        "inline": inline,
        "max_snapshot_id": max_snap,
        "changes_made": changes_made or "",
    }


def create_store_at(url: str, head: Head) -> None:
    """Lake.create, but with the head a copied catalog needs instead of EMPTY_HEAD."""
    location = LakeLocation.parse(url)
    if store_exists(location):
        raise SystemExit(f"a lake already exists at {url}")
    writer = open_writer(location)
    try:
        writer.write(
            [
                (SYS_FORMAT, encode_format()),
                (SYS_HEAD, encode_head(head)),
                (SYS_FOLD, encode_fold(0, head)),
            ]
        )
        writer.flush()
    finally:
        writer.close()


def copy_to_slatelake(url: str, meta: str) -> dict[str, Any]:
    t0 = time.perf_counter()
    cat = read_stock_catalog(meta)
    t_read = time.perf_counter()
    max_snap = cat["max_snapshot_id"]
    changes = RowChanges()
    for name, rows in cat["tables"].items():
        if rows:
            changes.insert(name, *rows)
    for name, columns in cat["inline"].items():
        changes.created_inline[name] = columns
    rows_by_table = {n: len(r) for n, r in cat["tables"].items()}
    del cat["tables"]
    create_store_at(url, Head(max_snap - 1, 0))
    lake = Lake.open(url, max_operations=MAX_COPY_OPERATIONS)
    state = lake.materialize()
    t_open = time.perf_counter()
    cs = build_change_set(state, changes, mints_snapshot=True, changes_made=cat["changes_made"])
    t_build = time.perf_counter()
    committed = lake.commit_change_set(state, cs)
    t_commit = time.perf_counter()
    if state.head != Head(max_snap, 1):
        raise SystemExit(f"copy landed at head {state.head}, wanted ({max_snap}, 1)")
    keys = len(state.entries)
    rows = state.row_count()
    operations = cs.operations
    lake.close()  # drops the reader lease, so the folder may truncate the slot
    del state, changes, cs
    gc.collect()
    folder = Folder(LakeLocation.parse(url), margin_s=0)
    try:
        report = folder.fold_once()
    finally:
        folder.close()
    t_fold = time.perf_counter()
    return {
        "max_snapshot_id": max_snap,
        "rows_by_table": rows_by_table,
        "rows": rows,
        "keys": keys,
        "operations": operations,
        "slot_seq": committed.seq,
        "inline_tables": sorted(cat["inline"]),
        "read_s": t_read - t0,
        "open_s": t_open - t_read,
        "build_change_set_s": t_build - t_open,
        "commit_s": t_commit - t_build,
        "fold_s": t_fold - t_commit,
        "fold_ops": report.operations,
        "fold_truncated": report.truncated,
        "total_s": t_fold - t0,
    }


# -- 2. cold connect, in child processes -------------------------------------------------------
def child_ext() -> dict[str, Any]:
    t0 = time.perf_counter()
    con = extensions.connect()
    t1 = time.perf_counter()
    con.close()
    return {"ext_load_s": t1 - t0}


def _wrap(owner: Any, name: str, spent: Counter[str], label: str) -> None:
    inner = getattr(owner, name)

    def wrapped(*a: Any, **kw: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return inner(*a, **kw)
        finally:
            spent[label] += time.perf_counter() - t0

    setattr(owner, name, wrapped)


def child_cold_slate(url: str, profile: bool) -> dict[str, Any]:
    from slatelake.ducklake import session as session_mod
    from slatelake.ducklake.capture import Capture

    spent: Counter[str] = Counter()
    _wrap(extensions, "connect", spent, "ext_load")
    _wrap(Lake, "open", spent, "lake_open")
    _wrap(Lake, "materialize", spent, "materialize")
    _wrap(session_mod.Session, "_load", spent, "load")
    _wrap(session_mod, "load_registry_table", spent, "load_rows")
    _wrap(Capture, "reset", spent, "capture_reset")
    _wrap(Lake, "refresh", spent, "refresh")
    prof = ThreadProfiles() if profile else None
    if prof is not None:
        prof.__enter__()
    t0 = time.perf_counter()
    s = session_mod.connect(url)
    t1 = time.perf_counter()
    count = s.sql(QUERY).fetchone()[0]
    t2 = time.perf_counter()
    if prof is not None:
        prof.__exit__(None, None, None)
    files = s.con.execute(FILES_QUERY).fetchone()[0]
    rows = s.state.row_count()
    s.close()
    phases = {
        "lake_open_s": spent["lake_open"],
        "ext_load_s": spent["ext_load"],
        "materialize_s": spent["materialize"],
        "load_rows_s": spent["load_rows"],
        "attach_and_rest_of_load_s": spent["load"] - spent["load_rows"] - spent["capture_reset"],
        "capture_reset_s": spent["capture_reset"],
        "query_s": t2 - t1,
        "query_refresh_s": spent["refresh"],
    }
    accounted = sum(v for k, v in phases.items() if k not in ("query_s", "query_refresh_s"))
    phases["other_connect_s"] = (t1 - t0) - accounted
    out: dict[str, Any] = {
        "total_s": t2 - t0,
        "connect_s": t1 - t0,
        "phases": phases,
        "count": count,
        "files": files,
        "rows": rows,
    }
    if prof is not None:
        out["profile"] = prof.top(PROFILE_LINES)
    return out


def child_cold_stock(meta: str, data: str) -> dict[str, Any]:
    t0 = time.perf_counter()
    con = extensions.connect()
    t1 = time.perf_counter()
    con.execute(stock_attach_sql(Path(meta), Path(data)))
    con.execute("USE lake")
    t2 = time.perf_counter()
    count = con.execute(QUERY).fetchone()[0]
    t3 = time.perf_counter()
    files = con.execute(FILES_QUERY).fetchone()[0]
    con.close()
    return {
        "total_s": t3 - t0,
        "phases": {"ext_load_s": t1 - t0, "attach_s": t2 - t1, "query_s": t3 - t2},
        "count": count,
        "files": files,
    }


def run_child(*args: str) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "tests.bench.bridge", "--child", *args]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"child {args[0]} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["process_wall_s"] = wall
    return out


def bench_cold(url: str, stock: dict[str, Any], reps: int) -> dict[str, Any]:
    ext, slate, stock_runs = [], [], []
    for _ in range(reps):  # interleaved, so drift hits both sides alike
        ext.append(run_child("ext"))
        slate.append(run_child("cold-slate", url))
        stock_runs.append(run_child("cold-stock", stock["meta"], stock["data"]))

    def phases(runs: list[dict[str, Any]]) -> dict[str, float]:
        return {k: median([r["phases"][k] for r in runs]) for k in runs[0]["phases"]}

    return {
        "ext_load_s": median([r["ext_load_s"] for r in ext]),
        "slate_s": median([r["total_s"] for r in slate]),
        "slate_connect_s": median([r["connect_s"] for r in slate]),
        "slate_phases": phases(slate),
        "slate_process_wall_s": median([r["process_wall_s"] for r in slate]),
        "stock_s": median([r["total_s"] for r in stock_runs]),
        "stock_phases": phases(stock_runs),
        "stock_process_wall_s": median([r["process_wall_s"] for r in stock_runs]),
        "slate_count": slate[0]["count"],
        "slate_files": slate[0]["files"],
        "slate_rows": slate[0]["rows"],
        "stock_count": stock_runs[0]["count"],
        "stock_files": stock_runs[0]["files"],
        "runs": {"ext": ext, "slate": slate, "stock": stock_runs},
    }


# -- 3/4. warm query and 1-row INSERT, in this process ------------------------------------------
def _instrument_session(s: Any) -> tuple[Counter[str], CountingClient]:
    spent: Counter[str] = Counter()
    _wrap(s, "refresh", spent, "refresh")
    _wrap(s.capture, "capture", spent, "capture")
    _wrap(s.lake, "commit", spent, "commit")
    counter = CountingClient(s.lake.log.client)
    s.lake.log.client = counter  # the committer and refresh go through lake.log
    s.lake.lease.book.client = counter
    return spent, counter


def bench_slate_session(url: str, n: int) -> dict[str, Any]:
    from slatelake.ducklake.session import connect

    s = connect(url)
    try:
        spent, counter = _instrument_session(s)
        first = s.sql(QUERY).fetchone()[0]
        first_spent = Counter(spent)
        warm = []
        calls_before = Counter(counter.counts)
        for _ in range(n):
            sec, _ = timed(lambda: s.sql(QUERY).fetchone())
            warm.append(sec)
        warm_calls = {k: v / n for k, v in (counter.counts - calls_before).items()}
        warm_phases = {
            "refresh_ms": (spent["refresh"] - first_spent["refresh"]) / n * 1000,
            "capture_ms": (spent["capture"] - first_spent["capture"]) / n * 1000,
        }
        files_before = s.con.execute(FILES_QUERY).fetchone()[0]
        spent.clear()
        calls_before = Counter(counter.counts)
        ins = []
        for i in range(n):
            sec, _ = timed(lambda i=i: s.sql(insert_sql(SLATE_ID_BASE + i)))
            ins.append(sec)
        insert_calls = {k: v / n for k, v in (counter.counts - calls_before).items()}
        files_after = s.con.execute(FILES_QUERY).fetchone()[0]
        count_after = s.sql(QUERY).fetchone()[0]
        inlined = s.con.execute(
            "SELECT count(*) FROM duckdb_tables() WHERE database_name = '__slatelake_meta' "
            "AND table_name LIKE 'ducklake_inlined_data_%'"
        ).fetchone()[0]
        phases = {
            "refresh_ms": spent["refresh"] / n * 1000,
            "capture_ms": spent["capture"] / n * 1000,
            "commit_ms": spent["commit"] / n * 1000,
        }
        phases["duckdb_and_rest_ms"] = statistics.fmean(ins) * 1000 - sum(phases.values())
        return {
            "first_count": first,
            "files_before": files_before,
            "warm_s": median(warm),
            "warm_p90_s": sorted(warm)[int(0.9 * (len(warm) - 1))],
            "warm_phases_mean": warm_phases,
            "warm_store_calls": warm_calls,
            "insert_s": median(ins),
            "insert_mean_s": statistics.fmean(ins),
            "insert_max_s": max(ins),
            "insert_phases_mean": phases,
            "insert_store_calls": insert_calls,
            "insert_files_added": files_after - files_before,
            "insert_rows_added": count_after - first,
            "insert_wrote": "parquet" if files_after - files_before == n else "inlined/other",
            "inlined_data_tables": inlined,
        }
    finally:
        s.close()


def bench_stock_session(stock: dict[str, Any], n: int) -> dict[str, Any]:
    con = extensions.connect()
    try:
        con.execute(stock_attach_sql(Path(stock["meta"]), Path(stock["data"])))
        con.execute("USE lake")
        first = con.execute(QUERY).fetchone()[0]
        warm = [timed(lambda: con.execute(QUERY).fetchone())[0] for _ in range(n)]
        files_before = con.execute(FILES_QUERY).fetchone()[0]
        ins = [timed(lambda i=i: con.execute(insert_sql(STOCK_ID_BASE + i)))[0] for i in range(n)]
        files_after = con.execute(FILES_QUERY).fetchone()[0]
        count_after = con.execute(QUERY).fetchone()[0]
        return {
            "first_count": first,
            "files_before": files_before,
            "warm_s": median(warm),
            "insert_s": median(ins),
            "insert_mean_s": statistics.fmean(ins),
            "insert_max_s": max(ins),
            "insert_files_added": files_after - files_before,
            "insert_rows_added": count_after - first,
            "insert_wrote": "parquet" if files_after - files_before == n else "inlined/other",
        }
    finally:
        con.close()


def profile_inserts(url: str, n: int) -> dict[str, Any]:
    from slatelake.ducklake.session import connect

    s = connect(url)
    try:
        s.sql(QUERY).fetchone()
        with ThreadProfiles() as prof:
            t0 = time.perf_counter()
            for i in range(n):
                s.sql(insert_sql(SLATE_ID_BASE + 500_000 + i))
            seconds = time.perf_counter() - t0
        return {"inserts": n, "seconds_profiled": seconds, "top": prof.top(PROFILE_LINES)}
    finally:
        s.close()


# -- one size ----------------------------------------------------------------------------------
def bench_size(root: Path, files: int, reps: int, n: int, profile: bool) -> dict[str, Any]:
    directory = root / f"size-{files}"
    log(f"{files} files: building the stock lake")
    built = build_stock(directory / "stock", files)
    log(f"{files} files: stock built in {built['seconds']:.1f}s; copying into slatelake")
    url = (directory / "slate").as_uri()
    copied = copy_to_slatelake(url, built["meta"])
    log(
        f"{files} files: copied {copied['rows']} rows / {copied['keys']} keys "
        f"({copied['operations']} ops) in {copied['total_s']:.1f}s "
        f"(fold {copied['fold_s']:.1f}s); cold connects x{reps}"
    )
    cold = bench_cold(url, built, reps)
    if (cold["slate_count"], cold["slate_files"]) != (cold["stock_count"], cold["stock_files"]):
        raise SystemExit(
            f"slatelake sees count {cold['slate_count']} / {cold['slate_files']} files, "
            f"stock {cold['stock_count']} / {cold['stock_files']}"
        )
    log(f"{files} files: cold slatelake {cold['slate_s']:.2f}s, stock {cold['stock_s']:.3f}s")
    slate = bench_slate_session(url, n)
    stock = bench_stock_session(built, n)
    log(
        f"{files} files: warm {slate['warm_s'] * 1000:.1f} / {stock['warm_s'] * 1000:.1f} ms, "
        f"insert {slate['insert_s'] * 1000:.1f} / {stock['insert_s'] * 1000:.1f} ms"
    )
    out: dict[str, Any] = {
        "files": files,
        "build": built,
        "copy": copied,
        "cold": cold,
        "slate": slate,
        "stock": stock,
        "verified": {
            "count": cold["slate_count"],
            "files": cold["slate_files"],
            "same_as_stock": True,
        },
    }
    if profile:
        log(f"{files} files: profiling a cold connect and {n} inserts")
        out["profile"] = {
            "cold": run_child("cold-slate", url, "--profile"),
            "insert": profile_inserts(url, n),
        }
    shutil.rmtree(directory, ignore_errors=True)
    out["rss_high_water_mb"] = rss_mb()
    return out


# -- reporting ---------------------------------------------------------------------------------
def ratio(a: float, b: float) -> float:
    return a / b if b else float("inf")


def verdicts(result: dict[str, Any]) -> list[dict[str, Any]]:
    sizes = result["sizes"]
    out = []
    largest = sizes[-1]
    cold = largest["cold"]["slate_s"]
    out.append(
        {
            "goal": f"cold connect-to-first-query <= {GOAL_COLD_S} s at {GOAL_COLD_FILES} files",
            "measured": f"{cold:.2f} s at {largest['files']} files",
            "met": cold <= GOAL_COLD_S if largest["files"] >= GOAL_COLD_FILES else None,
        }
    )
    for s in sizes:
        cold = s["cold"]["slate_s"]
        if s["files"] < GOAL_COLD_FILES:
            out.append(
                {
                    "goal": f"(info) cold <= {GOAL_COLD_S} s at {s['files']} files",
                    "measured": f"{cold:.2f} s",
                    "met": cold <= GOAL_COLD_S,
                }
            )
    worst_warm = max(s["slate"]["warm_s"] for s in sizes)
    out.append(
        {
            "goal": f"warm query <= {GOAL_WARM_S * 1000:.0f} ms (every size)",
            "measured": f"worst {worst_warm * 1000:.1f} ms",
            "met": worst_warm <= GOAL_WARM_S,
        }
    )
    worst_ratio = max(ratio(s["slate"]["insert_s"], s["stock"]["insert_s"]) for s in sizes)
    out.append(
        {
            "goal": f"1-row INSERT <= {GOAL_INSERT_VS_STOCK:.0f}x stock (every size)",
            "measured": f"worst {worst_ratio:.2f}x",
            "met": worst_ratio <= GOAL_INSERT_VS_STOCK,
        }
    )
    growth = ratio(sizes[-1]["slate"]["insert_s"], sizes[0]["slate"]["insert_s"])
    out.append(
        {
            "goal": f"slatelake INSERT {sizes[0]['files']} -> {sizes[-1]['files']} files "
            f"within {GOAL_INSERT_GROWTH}x",
            "measured": f"{growth:.2f}x",
            "met": growth <= GOAL_INSERT_GROWTH if len(sizes) > 1 else None,
        }
    )
    return out


def print_report(result: dict[str, Any]) -> None:
    sizes = result["sizes"]
    print()
    print("== slatelake session vs stock DuckLake (DuckDB-file catalog), same metadata ==")
    print(
        f"  {'files':>7} {'rows':>7} {'keys':>7} | {'cold sl s':>9} {'cold st s':>9} "
        f"{'ratio':>6} | {'warm sl ms':>10} {'warm st ms':>10} {'ratio':>6} | "
        f"{'ins sl ms':>9} {'ins st ms':>9} {'ratio':>6}"
    )
    for s in sizes:
        c, sl, st = s["cold"], s["slate"], s["stock"]
        print(
            f"  {s['files']:>7} {s['copy']['rows']:>7} {s['copy']['keys']:>7} | "
            f"{c['slate_s']:>9.3f} {c['stock_s']:>9.3f} {ratio(c['slate_s'], c['stock_s']):>5.1f}x"
            f" | {sl['warm_s'] * 1000:>10.2f} {st['warm_s'] * 1000:>10.2f} "
            f"{ratio(sl['warm_s'], st['warm_s']):>5.1f}x | {sl['insert_s'] * 1000:>9.2f} "
            f"{st['insert_s'] * 1000:>9.2f} {ratio(sl['insert_s'], st['insert_s']):>5.1f}x"
        )
    print(
        "  cold: fresh process, clock from before connect/extension load to the first count(*) "
        "(both include the extension load);\n  warm: the next count(*) on an open session "
        "(slatelake: refresh = one LIST); ins: 1-row INSERT autocommit; medians"
    )
    print(
        "  inserts wrote: "
        + ", ".join(
            f"{s['files']}: slatelake {s['slate']['insert_wrote']}, "
            f"stock {s['stock']['insert_wrote']}"
            for s in sizes
        )
    )
    print()
    print("   cold connect phases, medians (s)")
    print(
        f"  {'files':>7} | {'ext load':>8} | {'sl open':>7} {'mater':>7} {'load rows':>9} "
        f"{'attach+':>7} {'cnt rst':>7} {'other':>6} {'query':>6} | {'st attach':>9} "
        f"{'st query':>8} | {'sl proc':>7} {'st proc':>7}"
    )
    for s in sizes:
        c = s["cold"]
        p, q = c["slate_phases"], c["stock_phases"]
        print(
            f"  {s['files']:>7} | {c['ext_load_s']:>8.3f} | {p['lake_open_s']:>7.3f} "
            f"{p['materialize_s']:>7.3f} {p['load_rows_s']:>9.3f} "
            f"{p['attach_and_rest_of_load_s']:>7.3f} {p['capture_reset_s']:>7.3f} "
            f"{p['other_connect_s']:>6.3f} {p['query_s']:>6.3f} | {q['attach_s']:>9.3f} "
            f"{q['query_s']:>8.3f} | {c['slate_process_wall_s']:>7.2f} "
            f"{c['stock_process_wall_s']:>7.2f}"
        )
    print(
        "  ext load: extensions.connect() alone in a fresh process; sl open: Lake.open "
        "(store manifest, reader); mater: Lake.materialize;\n  load rows: "
        "load_registry_table into the in-memory catalog; attach+: CREATE TABLEs, inlined "
        "tables, ATTACH ducklake; cnt rst: "
        "capture's row counts;\n  query: first count(*) incl. refresh; proc: whole child "
        "process wall (interpreter start + imports + the above)"
    )
    print()
    print("   warm count(*), slatelake phases (mean ms) and object-store calls per query")
    print(f"  {'files':>7} {'median':>7} | {'refresh':>7} {'capture':>7} {'duckdb+':>7} | calls")
    for s in sizes:
        sl = s["slate"]
        p = sl["warm_phases_mean"]
        rest = sl["warm_s"] * 1000 - p["refresh_ms"] - p["capture_ms"]
        calls = ", ".join(f"{k} {v:g}" for k, v in sorted(sl["warm_store_calls"].items()))
        print(
            f"  {s['files']:>7} {sl['warm_s'] * 1000:>7.2f} | {p['refresh_ms']:>7.2f} "
            f"{p['capture_ms']:>7.2f} {rest:>7.2f} | {calls or 'none'}"
        )
    print(
        "  capture = Capture.capture after the SELECT (0 when the session skips it for "
        "reads); duckdb+ = median - refresh - capture (approximate)"
    )
    print()
    print("   1-row INSERT, slatelake phases (mean ms) and object-store calls per INSERT")
    print(
        f"  {'files':>7} {'median':>7} {'mean':>7} {'max':>7} | {'refresh':>7} {'duckdb+':>7} "
        f"{'capture':>7} {'commit':>7} | calls"
    )
    for s in sizes:
        sl = s["slate"]
        p = sl["insert_phases_mean"]
        calls = ", ".join(f"{k} {v:g}" for k, v in sorted(sl["insert_store_calls"].items()))
        print(
            f"  {s['files']:>7} {sl['insert_s'] * 1000:>7.2f} {sl['insert_mean_s'] * 1000:>7.2f} "
            f"{sl['insert_max_s'] * 1000:>7.2f} | {p['refresh_ms']:>7.2f} "
            f"{p['duckdb_and_rest_ms']:>7.2f} {p['capture_ms']:>7.2f} {p['commit_ms']:>7.2f} | "
            f"{calls}"
        )
    print(
        "  duckdb+ = the statement in DuckDB (Parquet write, DuckLake's commit into the "
        "in-memory catalog) and the session's own bookkeeping"
    )
    print()
    print("   build and copy (not goals)")
    print(
        f"  {'files':>7} {'snaps':>6} {'build s':>7} {'ms/file':>7} {'cat MB':>6} | "
        f"{'read s':>6} {'cs s':>6} {'commit s':>8} {'ops':>7} {'fold s':>6} {'total s':>7}"
    )
    for s in sizes:
        b, c = s["build"], s["copy"]
        print(
            f"  {s['files']:>7} {c['max_snapshot_id'] + 1:>6} {b['seconds']:>7.1f} "
            f"{b['ms_per_file']:>7.2f} {b['catalog_file_bytes'] / 1e6:>6.1f} | "
            f"{c['read_s']:>6.2f} {c['build_change_set_s']:>6.2f} {c['commit_s']:>8.2f} "
            f"{c['operations']:>7} {c['fold_s']:>6.1f} {c['total_s']:>7.1f}"
        )
    print()
    print("   goals")
    for v in result["verdicts"]:
        met = {True: "MET", False: "MISSED", None: "n/a"}[v["met"]]
        print(f"  [{met:>6}] {v['goal']}: {v['measured']}")
    prof = next((s.get("profile") for s in reversed(sizes) if s.get("profile")), None)
    if prof:
        files = next(s["files"] for s in reversed(sizes) if s.get("profile"))
        print()
        print(
            f"== profile at {files} files: cold connect (fresh process, "
            f"{prof['cold']['total_s']:.2f}s under the profiler) =="
        )
        for thread, text in prof["cold"]["profile"].items():
            print(f"-- cold connect, {thread}")
            print(_trim_profile(text))
        ins = prof["insert"]
        print()
        print(
            f"== profile at {files} files: {ins['inserts']} 1-row INSERTs "
            f"({ins['seconds_profiled']:.2f}s under the profiler) =="
        )
        for thread, text in ins["top"].items():
            print(f"-- insert, {thread}")
            print(_trim_profile(text))


def _trim_profile(text: str) -> str:
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if "ncalls" in line), 0)
    return "\n".join(lines[max(0, start - 3) :]).rstrip()


def library_revision() -> dict[str, Any]:
    """The commit the library was measured at, and any uncommitted library changes."""

    def git(*args: str) -> str:
        proc = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True)
        return proc.stdout.strip() if proc.returncode == 0 else ""

    dirty = git("status", "--porcelain", "--", "layers/slatelake/slatelake").splitlines()
    return {"commit": git("rev-parse", "--short", "HEAD"), "uncommitted": dirty}


# -- main --------------------------------------------------------------------------------------
def child_main(args: list[str]) -> int:
    mode, rest = args[0], args[1:]
    if mode == "ext":
        out = child_ext()
    elif mode == "cold-slate":
        out = child_cold_slate(rest[0], "--profile" in rest)
    elif mode == "cold-stock":
        out = child_cold_stock(rest[0], rest[1])
    else:
        raise SystemExit(f"unknown child mode {mode}")
    print(json.dumps(out, default=str))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return child_main(argv[1:])
    ap = argparse.ArgumentParser(
        prog="python -m tests.bench.bridge",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--quick", action="store_true", help="1k and 20k files")
    ap.add_argument("--files", help="data-file counts, comma separated")
    ap.add_argument("--reps", type=int, default=3, help="cold runs per side (fresh processes)")
    ap.add_argument("--n", type=int, default=20, help="warm queries and INSERTs per side")
    ap.add_argument("--no-profile", action="store_true", help="skip the profiles")
    ap.add_argument("--out", default="bench-results/bridge.json")
    ap.add_argument("--tmp", help="directory for the lakes (default: a temp dir)")
    args = ap.parse_args(argv)
    if args.files:
        sizes = sorted(int(s.replace("_", "")) for s in args.files.split(",") if s.strip())
    else:
        sizes = [1_000, 20_000] if args.quick else [1_000, 20_000, 100_000]

    result: dict[str, Any] = {
        **run_header(str(extensions.extension_path("ducklake"))),
        "config": {
            "quick": args.quick,
            "files": sizes,
            "reps": args.reps,
            "n": args.n,
            "build_batch_files": BUILD_BATCH,
            "table": "t (id BIGINT, v VARCHAR, x DOUBLE), one row per data file",
            "inlining": "off on both sides (data_inlining_row_limit 0, stored in the catalog)",
            "goals": {
                "cold_s_at_100k": GOAL_COLD_S,
                "warm_s": GOAL_WARM_S,
                "insert_vs_stock": GOAL_INSERT_VS_STOCK,
                "insert_growth": GOAL_INSERT_GROWTH,
            },
        },
        "sizes": [],
    }
    result["library"] = library_revision()
    root = Path(tempfile.mkdtemp(prefix="slatelake-bridge-", dir=args.tmp or None))
    t_start = time.perf_counter()
    try:
        log(f"lakes under {root}")
        for files in sizes:
            profile = not args.no_profile and files == sizes[-1]
            result["sizes"].append(bench_size(root, files, args.reps, args.n, profile))
            gc.collect()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    result["verdicts"] = verdicts(result)
    result["wall_s"] = time.perf_counter() - t_start
    result["rss_high_water_mb"] = rss_mb()
    print_report(result)
    lib = result["library"]
    dirty = f", uncommitted: {' '.join(x.split()[-1] for x in lib['uncommitted'])}"
    print(f"\nlibrary at {lib['commit']}{dirty if lib['uncommitted'] else ''}")
    print(f"wall {result['wall_s']:.0f}s, RSS high-water {result['rss_high_water_mb']:.0f} MB")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
