"""Maintenance benchmark: one configured pass on a churned lake, slatelake vs stock DuckLake.

Run from the repository root (not part of the test suite; pytest ignores tests/bench)::

    python -m tests.bench.maintenance [--quick] [--tables 40] [--commits 6]
                                      [--churn full|single] [--reps 3]
                                      [--no-batches] [--no-profile]
                                      [--out bench-results/maintenance.json]

What it measures: a full configured pass on a churned lake of ~40 tables,
slatelake against the same six DuckLake calls on stock DuckLake with a
DuckDB-file catalog holding the same data; the ratio and peak RSS.

Everything runs on local files under one temporary directory. Builds and
passes run in child processes of their own, so RSS figures are per side and
a pass's peak is not masked by its build's:

1. Build (not a goal): the same SQL statement list, run statement by statement
   (each autocommits) through a slatelake session (``slatelake.connect(file
   URL, data_path=...)``) and through stock DuckLake (``ATTACH
   'ducklake:stock.duckdb' (DATA_PATH ...)``). The churn: --tables tables
   ``(id INTEGER, grp INTEGER, v VARCHAR, x DOUBLE)``; --commits rounds in which
   every live table gets one INSERT, alternating between 1-2 rows (inlined
   under DuckLake's default DATA_INLINING_ROW_LIMIT of 10, the same on both
   sides) and 100-180 rows (a Parquet file); two mutation rounds; a DROP TABLE
   of every 12th table (at least one) three quarters of the way through.
   ``--churn full`` (default): DELETE a quarter of the rows of every third
   table, UPDATE ~11% of every fourth, a one-row DELETE in every fifth, in both
   rounds, so some data files are deleted from twice (DuckLake then replaces
   the file's delete file). ``--churn single``: each table gets at most one
   DELETE or UPDATE in all. The slatelake build then closes its session and
   folds the log into the store once (``Folder.fold_once``), as a lake with a
   running folder would be. A pristine copy of each built lake is kept, and
   every pass after the first starts from it, restored at the same paths.
2. Pass: a fresh connection (slatelake: ``slatelake.connect(url,
   options=OPTIONS)``; stock: ``extensions.connect()`` + ATTACH, timed apart as
   "connect"), then a wait until 1.1 s after the build ended so a 1-second
   retention covers all the churn, then one configured pass: slatelake's
   ``session.maintenance()`` (per-step seconds parsed from its
   MAINTENANCE_PROGRESS lines, captured from stderr; the total also covers the
   pass lease and the status record), stock's six CALLs in the same order, each
   timed. Stock also runs in RFC 0021's shape (``--shape=rfc``: the expiry
   selected by a dry run and committed 64 snapshots a call, the flush one call
   per table; ``rfc-batches``: merge and rewrite per table too, beside the
   TABLE_BATCHES pass), so the report tells what the RFC's shape costs apart
   from what slatelake adds to each call. --reps passes per side (default 3),
   interleaved across the sides; times are medians, with the load average recorded. Stock's expire
   CALL is executed without fetching (its result has TIMESTAMPTZ columns, which
   need pytz; the CALL runs fully on execute, which the snapshot count before
   and after confirms); the other five are fetched.
   RSS: current and high water just before and after the pass (with
   ``--without-pandas`` every child runs without numpy, pandas and pyarrow,
   as in the Lambda layer: where they are installed, DuckDB's binding
   imports them at the first query that binds a parameter); the pass
   child's peak (``ru_maxrss``) covers imports, connect and the pass (the
   verification below runs after it is read).
3. Verify: after the pass both sides must hold the same tables with the same
   rows (``SELECT * ... ORDER BY ALL``, hashed), the same live data and delete
   files per table (``ducklake_list_files``), the same metadata row counts and
   the same number of files in the data directory; and each side's contents
   (after the build, from the building connection and from a fresh one, and
   after the pass) must equal an oracle: plain in-memory DuckDB tables running
   the same statements. Differences are printed, never hidden.
4. More slatelake passes on the restored build: one with
   MAINTENANCE_TABLE_BATCHES (merge and rewrite called per table), unless
   --no-batches; one under cProfile (main thread and SlateDB loop thread; its
   timings are inflated by the profiler and are not compared), unless
   --no-profile.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import hashlib
import io
import json
import os
import pstats
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from tests.bench.common import run_header

REPO = Path(__file__).resolve().parents[2]
SETTLE_S = 1.1  # the pass starts at least this long after the build's last commit
OPTIONS = {
    "MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN": "1 second",
    "MAINTENANCE_FLUSH_INLINED_DATA": "true",
    "MAINTENANCE_MERGE_ADJACENT_FILES": "true",
    "MAINTENANCE_REWRITE_DATA_FILES_DELETE_THRESHOLD": "0.1",
    "MAINTENANCE_CLEANUP_OLD_FILES_CLEANUP_ALL": "true",
    "MAINTENANCE_DELETE_ORPHANED_FILES_CLEANUP_ALL": "true",
    "MAINTENANCE_ORPHAN_AGE_FLOOR_OVERRIDE": "true",
}
OLDER_THAN = "now()::TIMESTAMP - INTERVAL '1 second'"
# (step, SQL, fetch the result): the same six calls, in the pass's order.
STOCK_CALLS = (
    (
        "expire_snapshots",
        f"CALL ducklake_expire_snapshots('lake', older_than => {OLDER_THAN})",
        False,  # snapshot_time is TIMESTAMPTZ: fetching it needs pytz
    ),
    ("flush_inlined_data", "CALL ducklake_flush_inlined_data('lake')", True),
    ("merge_adjacent_files", "CALL ducklake_merge_adjacent_files('lake')", True),
    (
        "rewrite_data_files",
        "CALL ducklake_rewrite_data_files('lake', delete_threshold => 0.1)",
        True,
    ),
    ("cleanup_old_files", "CALL ducklake_cleanup_old_files('lake', cleanup_all => true)", True),
    (
        "delete_orphaned_files",
        "CALL ducklake_delete_orphaned_files('lake', cleanup_all => true)",
        True,
    ),
)
STEPS = tuple(step for step, _, _ in STOCK_CALLS)
SLATE_META = "__slatelake_meta"
STOCK_META = "__ducklake_metadata_lake"
META_TABLES = (
    "ducklake_snapshot",
    "ducklake_snapshot_changes",
    "ducklake_table",
    "ducklake_column",
    "ducklake_data_file",
    "ducklake_delete_file",
    "ducklake_files_scheduled_for_deletion",
    "ducklake_inlined_data_tables",
    "ducklake_file_column_stats",
    "ducklake_table_stats",
    "ducklake_table_column_stats",
)
PROGRESS_END = re.compile(
    r"^maintenance \+\s*([\d.]+)s rss=(\d+)MB hwm=(\d+)MB step (\w+) end after ([\d.]+)s: "
    r"(\w+) \((.*)\)$"
)
PROFILE_LINES = 30


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def rss_now() -> dict[str, float]:
    """Current RSS (from /proc) and the process high water, MB."""
    high = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    try:
        with open("/proc/self/statm") as f:
            current = int(f.read().split()[1]) * resource.getpagesize() / (1 << 20)
    except (OSError, ValueError, IndexError):
        current = float("nan")
    return {"current_mb": current, "high_water_mb": high}


def ratio(a: float, b: float) -> float:
    return a / b if b else float("inf")


# -- the workload --------------------------------------------------------------------------------
def workload(
    tables: int, commits: int, churn: str = "full"
) -> tuple[list[tuple[str, str]], list[str]]:
    """(kind, SQL) statements in order, and the tables dropped along the way.

    ``full``: two mutation rounds hit the same tables again, so some data files
    get a second delete (DuckLake then replaces the file's delete file).
    ``single``: every table gets at most one DELETE or UPDATE in all, so no data
    file is ever deleted from twice.
    """
    names = [f"t{i:02d}" for i in range(tables)]
    drops = [n for i, n in enumerate(names) if i % 12 == 11] or [names[-1]]
    drop_round = max(1, (3 * commits) // 4)
    round_a, round_b = max(0, commits // 2 - 1), commits - 1
    next_id = dict.fromkeys(names, 0)
    dropped: set[str] = set()
    out: list[tuple[str, str]] = [
        ("create", f"CREATE TABLE {n} (id INTEGER, grp INTEGER, v VARCHAR, x DOUBLE)")
        for n in names
    ]

    def insert(name: str, rows: int) -> str:
        a = next_id[name]
        next_id[name] += rows
        return (
            f"INSERT INTO {name} SELECT i, i % 7, 'v' || i, i * 0.5 "
            f"FROM range({a}, {a + rows}) r(i)"
        )

    def quarter(name: str, r: int) -> tuple[str, str]:
        return ("delete", f"DELETE FROM {name} WHERE id % 4 = {r % 4}")

    def update(name: str) -> tuple[str, str]:
        return ("update", f"UPDATE {name} SET v = v || '*', x = x + 1 WHERE id % 9 = 2")

    def one(name: str, r: int) -> tuple[str, str]:
        return ("delete", f"DELETE FROM {name} WHERE id = {3 + r}")

    for r in range(commits):
        for i, name in enumerate(names):
            if name in dropped:
                continue
            if (r + i) % 2 == 0:
                out.append(("insert_inlined", insert(name, 1 + (r + i) % 4 // 2)))
            else:
                out.append(("insert_parquet", insert(name, 100 + 20 * ((3 * r + i) % 5))))
        if r in (round_a, round_b):
            for i, name in enumerate(names):
                if name in dropped:
                    continue
                if churn == "full":
                    if i % 3 == 0:
                        out.append(quarter(name, r))
                    if i % 4 == 1:
                        out.append(update(name))
                    if i % 5 == 2:
                        out.append(one(name, r))
                elif r == round_a and i % 3 == 0:
                    out.append(quarter(name, r))
                elif r == round_a and i % 3 == 2:
                    out.append(one(name, r))
                elif r == round_b and r != round_a and i % 3 == 1:
                    out.append(update(name))
        if r + 1 == drop_round:
            for name in drops:
                out.append(("drop", f"DROP TABLE {name}"))
                dropped.add(name)
    return out, drops


def expected_contents(statements: list[tuple[str, str]]) -> dict[str, dict[str, Any]]:
    """The oracle: the same statements on plain in-memory DuckDB tables (no DuckLake)."""
    import duckdb

    con = duckdb.connect()
    for _, sql in statements:
        con.execute(sql)
    out = {}
    for (t,) in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = 'memory' ORDER BY 1"
    ).fetchall():
        rows = con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall()
        out[t] = {"rows": len(rows), "sha256": _digest(rows)}
    con.close()
    return out


def _digest(rows: list[tuple[Any, ...]]) -> str:
    return hashlib.sha256(repr(rows).encode()).hexdigest()[:16]


# -- one side's lake -----------------------------------------------------------------------------
class Side:
    """A connection to one side's lake: ``query`` returns all rows."""

    def __init__(self, kind: str, directory: Path, options: dict[str, str] | None = None) -> None:
        self.kind = kind
        self.directory = directory
        self.data = directory / "data"
        self.session: Any = None
        self.con: Any = None
        if kind == "stock":
            from slatelake.ducklake import extensions

            self.con = extensions.connect()
            self.con.execute(
                f"ATTACH 'ducklake:{directory / 'stock.duckdb'}' AS lake (DATA_PATH '{self.data}/')"
            )
            self.con.execute("USE lake")
            self.meta = STOCK_META
            self.run: Callable[[str], Any] = self.con.execute
        else:
            import slatelake

            url = (directory / "lake").as_uri()
            if options is None:
                self.session = slatelake.connect(url, data_path=f"{self.data}/")
            else:
                self.session = slatelake.connect(url, options=options)
            self.con = self.session.con
            self.meta = SLATE_META
            self.run = self.session.sql

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        """A read straight on the DuckDB connection (a slatelake session is at its head)."""
        return self.con.execute(sql).fetchall()

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
        else:
            self.con.close()


def lake_state(side: Side, contents: bool) -> dict[str, Any]:
    """Tables, rows (hashed), live files per table, metadata row counts, files on disk."""
    tables = [
        t
        for (t,) in side.query(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = 'lake' ORDER BY 1"
        )
    ]
    per_table: dict[str, dict[str, Any]] = {}
    for t in tables:
        files = side.query(
            f"SELECT count(*), count(delete_file), coalesce(sum(data_file_size_bytes), 0) "
            f"FROM ducklake_list_files('lake', '{t}')"
        )[0]
        entry: dict[str, Any] = {
            "data_files": files[0],
            "delete_files": files[1],
            "data_bytes": int(files[2]),
        }
        if contents:
            rows = side.query(f"SELECT * FROM lake.main.{t} ORDER BY ALL")
            entry["rows"] = len(rows)
            entry["sha256"] = _digest(rows)
        per_table[t] = entry
    meta: dict[str, Any] = {}
    for name in META_TABLES:
        try:
            meta[name] = side.query(f"SELECT count(*) FROM {side.meta}.{name}")[0][0]
        except Exception as exc:  # a table this DuckLake version lacks
            meta[name] = f"n/a ({type(exc).__name__})"
    meta["live_data_files"] = side.query(
        f"SELECT count(*) FROM {side.meta}.ducklake_data_file WHERE end_snapshot IS NULL"
    )[0][0]
    meta["live_delete_files"] = side.query(
        f"SELECT count(*) FROM {side.meta}.ducklake_delete_file WHERE end_snapshot IS NULL"
    )[0][0]
    inlined_rows = 0
    inlined_live = 0
    for (name,) in side.query(f"SELECT table_name FROM {side.meta}.ducklake_inlined_data_tables"):
        inlined_rows += side.query(f"SELECT count(*) FROM {side.meta}.{name}")[0][0]
        inlined_live += side.query(
            f"SELECT count(*) FROM {side.meta}.{name} WHERE end_snapshot IS NULL"
        )[0][0]
    meta["inlined_rows"] = inlined_rows
    meta["inlined_rows_live"] = inlined_live
    disk_files = disk_bytes = 0
    for root, _, names in os.walk(side.data):
        for n in names:
            disk_files += 1
            disk_bytes += (Path(root) / n).stat().st_size
    return {
        "tables": per_table,
        "meta": meta,
        "disk_files": disk_files,
        "disk_bytes": disk_bytes,
        "live_data_files": sum(e["data_files"] for e in per_table.values()),
        "live_delete_files": sum(e["delete_files"] for e in per_table.values()),
        "rows": sum(e.get("rows", 0) for e in per_table.values()),
    }


# -- children ------------------------------------------------------------------------------------
def child_build(
    kind: str, directory: Path, tables: int, commits: int, churn: str
) -> dict[str, Any]:
    statements, drops = workload(tables, commits, churn)
    directory.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    side = Side(kind, directory)
    t_open = time.perf_counter()
    spent: dict[str, list[float]] = defaultdict(list)
    for what, sql in statements:
        s0 = time.perf_counter()
        side.run(sql)
        spent[what].append(time.perf_counter() - s0)
    t_sql = time.perf_counter()
    state = lake_state(side, contents=True)  # what the building connection sees
    side.close()
    out: dict[str, Any] = {
        "statements": len(statements),
        "dropped": drops,
        "open_s": t_open - t0,
        "statements_s": t_sql - t_open,
        "by_kind": {
            k: {"n": len(v), "mean_ms": sum(v) / len(v) * 1000, "max_ms": max(v) * 1000}
            for k, v in spent.items()
        },
        "state": state,
    }
    if kind != "stock":
        from slatelake.catalog.folder import Folder
        from slatelake.catalog.lake import Lake
        from slatelake.store.location import LakeLocation

        url = (directory / "lake").as_uri()
        with Lake.open(url, read_only=True) as lake:
            out["unfolded_slots_before_fold"] = lake.summary().unfolded_slots
        f0 = time.perf_counter()
        folder = Folder(LakeLocation.parse(url), margin_s=0)
        try:
            report = folder.fold_once()
        finally:
            folder.close()
        out["fold_s"] = time.perf_counter() - f0
        out["fold"] = {
            "slots": report.slots,
            "operations": report.operations,
            "truncated": report.truncated,
        }
    out["seconds"] = time.perf_counter() - t0
    out["rss"] = rss_now()
    # What a fresh connection sees (slatelake: materialized from the store): the lake
    # the pass starts from. Not timed, and after the build's RSS is read.
    fresh = Side(kind, directory)
    out["state_reopened"] = lake_state(fresh, contents=True)
    fresh.close()
    (directory / "built.json").write_text(json.dumps({"ended_at": time.time()}))
    return out


def _settle(directory: Path) -> float:
    """Wait until SETTLE_S after the build ended; returns the seconds waited."""
    ended = json.loads((directory / "built.json").read_text())["ended_at"]
    wait = ended + SETTLE_S - time.time()
    if wait > 0:
        time.sleep(wait)
    return max(0.0, wait)


def _profile_text(prof: cProfile.Profile, key: str, n: int) -> str:
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).strip_dirs().sort_stats(key).print_stats(n)
    lines = buf.getvalue().splitlines()
    start = next((i for i, line in enumerate(lines) if "ncalls" in line), 0)
    return "\n".join(lines[max(0, start - 3) :]).rstrip()


def child_pass_slate(
    directory: Path, table_batches: bool, profile: bool, parallel: int | None = None
) -> dict[str, Any]:
    rss_start = rss_now()
    options = {**OPTIONS, "MAINTENANCE_PROGRESS": "true"}
    if table_batches:
        options["MAINTENANCE_TABLE_BATCHES"] = "true"
    t0 = time.perf_counter()
    side = Side("slate", directory, options=options)
    connect_s = time.perf_counter() - t0
    waited = _settle(directory)
    snapshots_before = side.query(f"SELECT count(*) FROM {SLATE_META}.ducklake_snapshot")[0][0]
    prof = None
    if profile:
        from tests.bench.substrate import ThreadProfiles

        prof = ThreadProfiles()
    rss_before = rss_now()
    progress = io.StringIO()
    with contextlib.redirect_stderr(progress):
        if prof is not None:
            prof.__enter__()
        t0 = time.perf_counter()
        if parallel is None:
            report = side.session.maintenance()
        else:  # fanned out: plan, batches in worker processes, finish (maintenance/fanout.py)
            from slatelake import PassRequest
            from slatelake.maintenance.fanout_run import run_parallel

            report = run_parallel(side.session, PassRequest(options=options), workers=parallel)
        pass_s = time.perf_counter() - t0
        if prof is not None:
            prof.__exit__(None, None, None)
    rss_after = rss_now()
    load = os.getloadavg()
    lines = progress.getvalue().splitlines()
    steps: dict[str, dict[str, Any]] = {}
    for line in lines:
        m = PROGRESS_END.match(line)
        if m:
            steps[m.group(4)] = {
                "seconds": float(m.group(5)),
                "status": m.group(6),
                "detail": m.group(7),
                "rss_mb": float(m.group(2)),
                "high_water_mb": float(m.group(3)),
            }
    state = lake_state(side, contents=True)
    status = side.session.maintenance_status()
    side.close()
    out: dict[str, Any] = {
        "connect_s": connect_s,
        "waited_s": waited,
        "pass_s": pass_s,
        "loadavg": load,
        "steps": steps,
        "report": report.to_dict(),
        "status_window_len": len(status),
        "progress": lines,
        "snapshots_before": snapshots_before,
        "rss_start": rss_start,
        "rss_before": rss_before,
        "rss_after": rss_after,
        "peak_rss_mb": rss_after["high_water_mb"],
        "state": state,
    }
    if prof is not None:
        out["profile"] = {
            **prof.top(PROFILE_LINES),
            "main thread (cumulative)": _profile_text(prof.main, "cumulative", PROFILE_LINES),
        }
    return out


def rfc_shape_calls(
    side: Side, table_batches: bool
) -> Iterator[tuple[str, list[tuple[str, bool]]]]:
    """Stock DuckLake called in the shape RFC 0021 gives slatelake's pass:
    expiry selected by a dry run and committed 64 snapshots at a time, the
    flush one call per table, and with ``table_batches`` merge and rewrite one
    call per table too; cleanup and orphans catalog-wide. Yields each step's
    SQL calls, made after the previous step's ran (the expiry's batches come
    from its dry run, the per-table calls from the tables then present)."""
    from slatelake.maintenance.steps import EXPIRE_BATCH

    ids = sorted(
        r[0]
        for r in side.query(
            "SELECT snapshot_id FROM ducklake_expire_snapshots('lake', dry_run => true, "
            f"older_than => {OLDER_THAN})"
        )
    )
    yield (
        "expire_snapshots",
        [
            (
                f"SELECT snapshot_id FROM ducklake_expire_snapshots('lake', versions => "
                f"{list(ids[i : i + EXPIRE_BATCH])})",
                True,
            )
            for i in range(0, len(ids), EXPIRE_BATCH)
        ],
    )
    tables = side.query(
        "SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = 'lake' "
        "ORDER BY 1, 2"
    )
    yield (
        "flush_inlined_data",
        [
            (
                "CALL ducklake_flush_inlined_data('lake', "
                f"schema_name => '{s}', table_name => '{t}')",
                True,
            )
            for s, t in tables
        ],
    )
    for step, sql, fetch in STOCK_CALLS[2:4]:
        if not table_batches:
            yield step, [(sql, fetch)]
            continue
        extra = ", delete_threshold => 0.1" if step == "rewrite_data_files" else ""
        yield (
            step,
            [
                (f"CALL ducklake_{step}('lake', '{t}', schema => '{s}'{extra})", True)
                for s, t in tables
            ],
        )
    for step, sql, fetch in STOCK_CALLS[4:]:
        yield step, [(sql, fetch)]


def child_pass_stock(directory: Path, shape: str = "calls") -> dict[str, Any]:
    """Stock's pass: its six calls (``calls``), or in RFC 0021's shape
    (``rfc``; ``rfc-batches`` with merge and rewrite per table too)."""
    rss_start = rss_now()
    t0 = time.perf_counter()
    side = Side("stock", directory)
    connect_s = time.perf_counter() - t0
    waited = _settle(directory)
    snapshots_before = side.query(f"SELECT count(*) FROM {STOCK_META}.ducklake_snapshot")[0][0]
    rss_before = rss_now()
    steps: dict[str, dict[str, Any]] = {}
    snapshots_after_expire = None
    t_pass = time.perf_counter()
    if shape == "calls":
        plan: Iterable[tuple[str, list[tuple[str, bool]]]] = (
            (step, [(sql, fetch)]) for step, sql, fetch in STOCK_CALLS
        )
    else:
        plan = rfc_shape_calls(side, table_batches=shape == "rfc-batches")
    s0 = time.perf_counter()
    for step, calls in plan:  # a step's clock starts when the last one ended (its planning)
        rows: list[Any] | None = None
        for sql, fetch in calls:
            cur = side.con.execute(sql)
            if fetch:
                rows = (rows or []) + cur.fetchall()
        seconds = time.perf_counter() - s0
        steps[step] = {"seconds": seconds, "rss_mb": rss_now()["current_mb"], "calls": len(calls)}
        if step == "expire_snapshots":  # untimed: how many the CALL expired
            p0 = time.perf_counter()
            snapshots_after_expire = side.query(
                f"SELECT count(*) FROM {STOCK_META}.ducklake_snapshot"
            )[0][0]
            t_pass += time.perf_counter() - p0
            steps[step]["detail"] = f"expired {snapshots_before - snapshots_after_expire} snapshots"
            rows = []
        elif step == "flush_inlined_data":
            steps[step]["detail"] = (
                f"flushed {sum(int(r[2]) for r in rows)} rows from {len(rows)} tables"
            )
        elif step in ("merge_adjacent_files", "rewrite_data_files"):
            steps[step]["detail"] = (
                f"processed {sum(int(r[2]) for r in rows)} files, "
                f"created {sum(int(r[3]) for r in rows)}"
            )
        else:
            steps[step]["detail"] = f"deleted {len(rows or [])} files"
        if len(calls) > 1:
            steps[step]["detail"] += f" in {len(calls)} calls"
        s0 = time.perf_counter()
    pass_s = time.perf_counter() - t_pass
    rss_after = rss_now()
    load = os.getloadavg()
    state = lake_state(side, contents=True)
    side.close()
    return {
        "connect_s": connect_s,
        "waited_s": waited,
        "pass_s": pass_s,
        "loadavg": load,
        "steps": steps,
        "snapshots_before": snapshots_before,
        "snapshots_after_expire": snapshots_after_expire,
        "rss_start": rss_start,
        "rss_before": rss_before,
        "rss_after": rss_after,
        "peak_rss_mb": rss_after["high_water_mb"],
        "state": state,
    }


def child_main(args: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="maintenance --child")
    ap.add_argument("mode", choices=["build", "pass"])
    ap.add_argument("side", choices=["slate", "stock"])
    ap.add_argument("dir")
    ap.add_argument("--tables", type=int, default=40)
    ap.add_argument("--commits", type=int, default=6)
    ap.add_argument("--churn", choices=["full", "single"], default="full")
    ap.add_argument("--table-batches", action="store_true")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--shape", choices=["calls", "rfc", "rfc-batches"], default="calls")
    ap.add_argument("--parallel", type=int)
    a = ap.parse_args(args)
    directory = Path(a.dir)
    if a.mode == "build":
        out = child_build(a.side, directory, a.tables, a.commits, a.churn)
    elif a.side == "slate":
        out = child_pass_slate(directory, a.table_batches, a.profile, a.parallel)
    else:
        out = child_pass_stock(directory, a.shape)
    print(json.dumps(out, default=str))
    return 0


# Modules a child treats as not installed (``--without-pandas``), as in the
# Lambda layer: DuckDB's Python binding imports numpy, pandas and pyarrow
# when a query binds a parameter (~80 MB of RSS where they are installed).
WITHOUT_ENV = "SLATELAKE_BENCH_WITHOUT"
LAMBDA_ABSENT = ("numpy", "pandas", "pyarrow")


def _block_absent_modules() -> None:
    """A None in ``sys.modules`` makes an import fail at once, as for a
    package that is not installed (slatelake's own probe then skips it)."""
    for name in filter(None, os.environ.get(WITHOUT_ENV, "").split(",")):
        if name in sys.modules and sys.modules[name] is not None:
            raise SystemExit(f"{name} was imported before the child could block it")
        sys.modules[name] = None  # type: ignore[assignment]


def run_child(*args: str) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "tests.bench.maintenance", "--child", *args]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, stdout=subprocess.PIPE, text=True, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"child {' '.join(args)} failed ({proc.returncode}); see stderr above")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["process_wall_s"] = wall
    return out


def build_side(
    root: Path, label: str, kind: str, shape: tuple[int, int, str], keep: bool
) -> dict[str, Any]:
    """Build one side's lake; ``keep``: also keep a pristine copy for more passes."""
    directory = root / label
    tables, commits, churn = shape
    log(f"{label}: building ({tables} tables, {commits} commit rounds, {churn} churn)")
    built = run_child(
        "build",
        kind,
        str(directory),
        f"--tables={tables}",
        f"--commits={commits}",
        f"--churn={churn}",
    )
    fold = f", fold {built['fold_s']:.1f}s" if "fold_s" in built else ""
    log(f"{label}: built in {built['seconds']:.1f}s ({built['statements']} statements{fold})")
    if keep:
        shutil.copytree(directory, root / f"{label}.pristine", symlinks=True)
    return built


def pass_once(root: Path, label: str, kind: str, *pass_flags: str) -> dict[str, Any]:
    """One pass on the lake at ``root/label``; first restored from the pristine copy
    when an earlier pass ran there (the lake and data paths are unchanged, so the
    copy is the same lake byte for byte, as a second build would not be)."""
    directory = root / label
    pristine = root / f"{label}.pristine"
    if (directory / "passed").exists():
        shutil.rmtree(directory)
        shutil.copytree(pristine, directory, symlinks=True)
    passed = run_child("pass", kind, str(directory), *pass_flags)
    (directory / "passed").touch()
    peak = passed["peak_rss_mb"]
    flags = f" {' '.join(pass_flags)}" if pass_flags else ""
    log(f"{label}{flags}: pass {passed['pass_s']:.2f}s, pass-child peak RSS {peak:.0f} MB")
    return passed


def combine(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Several passes on the same restored build as one record: the first pass's
    record kept whole (report, state, progress); times become medians, the peak RSS
    the highest; every later pass's end state is checked against the first."""
    main = runs[0]
    main["reps"] = [
        {
            "pass_s": r["pass_s"],
            "connect_s": r["connect_s"],
            "peak_rss_mb": r["peak_rss_mb"],
            "loadavg": r["loadavg"],
            "steps": {k: v["seconds"] for k, v in r["steps"].items()},
        }
        for r in runs
    ]
    main["rep_differences"] = [
        d
        for i, r in enumerate(runs[1:], start=2)
        for d in differences(r["state"], main["state"], f"pass {i}", "pass 1")
    ]
    main["pass_s"] = statistics.median(r["pass_s"] for r in runs)
    main["connect_s"] = statistics.median(r["connect_s"] for r in runs)
    main["peak_rss_mb"] = max(r["peak_rss_mb"] for r in runs)
    for step, entry in main["steps"].items():
        entry["seconds"] = statistics.median(
            r["steps"].get(step, {}).get("seconds", float("nan")) for r in runs
        )
    return main


# -- comparing and reporting ---------------------------------------------------------------------
def differences(a: dict[str, Any], b: dict[str, Any], la: str, lb: str) -> list[str]:
    """Every way two lake states differ (table set, rows, live files, metadata, disk)."""
    out = []
    ta, tb = a["tables"], b["tables"]
    if sorted(ta) != sorted(tb):
        out.append(f"tables: {la} {sorted(ta)} vs {lb} {sorted(tb)}")
    for t in sorted(set(ta) & set(tb)):
        for key in ("rows", "sha256", "data_files", "delete_files"):
            if ta[t].get(key) != tb[t].get(key):
                out.append(f"{t}.{key}: {la} {ta[t].get(key)} vs {lb} {tb[t].get(key)}")
    for key in sorted(set(a["meta"]) | set(b["meta"])):
        if a["meta"].get(key) != b["meta"].get(key):
            out.append(f"meta {key}: {la} {a['meta'].get(key)} vs {lb} {b['meta'].get(key)}")
    if a["disk_files"] != b["disk_files"]:
        out.append(f"files on disk: {la} {a['disk_files']} vs {lb} {b['disk_files']}")
    return out


def against_oracle(state: dict[str, Any], oracle: dict[str, dict[str, Any]]) -> list[str]:
    """Table contents against plain DuckDB running the same statements."""
    out = []
    tables = state["tables"]
    if sorted(tables) != sorted(oracle):
        out.append(f"tables: lake {sorted(tables)} vs oracle {sorted(oracle)}")
    for t in sorted(set(tables) & set(oracle)):
        got, want = tables[t], oracle[t]
        if (got.get("rows"), got.get("sha256")) != (want["rows"], want["sha256"]):
            out.append(
                f"{t}: {got.get('rows')} rows (sha {got.get('sha256')}), "
                f"oracle {want['rows']} rows (sha {want['sha256']})"
            )
    return out


def print_report(result: dict[str, Any]) -> None:
    cfg = result["config"]
    sl, st = result["slate"], result["stock"]
    tb = result.get("slate_table_batches")
    sp, tp = sl["pass"], st["pass"]
    print()
    print(
        f"== one configured maintenance pass: slatelake vs stock DuckLake (DuckDB-file catalog), "
        f"{cfg['tables']} tables, {cfg['commits']} commit rounds, "
        f"{sl['build']['statements']} statements =="
    )
    print(
        f"  seconds: medians of {cfg['reps']} passes per side, interleaved, each on the same "
        f"build restored from a pristine copy; {os.cpu_count()} CPUs"
    )
    if cfg.get("absent_modules"):
        absent = ", ".join(cfg["absent_modules"])
        print(f"  every child ran without {absent}, as in the Lambda layer")
    head = f"  {'step':<22} {'slatelake s':>11} {'stock s':>9} {'ratio':>7}"
    if tb:
        head += f" | {'sl batches s':>12} {'ratio':>7}"
    print(head + " | slatelake detail / stock detail")
    for step in STEPS:
        a = sp["steps"].get(step, {}).get("seconds", float("nan"))
        b = tp["steps"][step]["seconds"]
        line = f"  {step:<22} {a:>11.3f} {b:>9.3f} {ratio(a, b):>6.1f}x"
        if tb:
            c = tb["pass"]["steps"].get(step, {}).get("seconds", float("nan"))
            line += f" | {c:>12.3f} {ratio(c, b):>6.1f}x"
        detail = sp["steps"].get(step, {}).get("detail", "?")
        print(f"{line} | {detail} / {tp['steps'][step]['detail']}")
    a_sum = sum(s["seconds"] for s in sp["steps"].values())
    b_sum = sum(s["seconds"] for s in tp["steps"].values())
    line = f"  {'six steps':<22} {a_sum:>11.3f} {b_sum:>9.3f} {ratio(a_sum, b_sum):>6.1f}x"
    if tb:
        c_sum = sum(s["seconds"] for s in tb["pass"]["steps"].values())
        line += f" | {c_sum:>12.3f} {ratio(c_sum, b_sum):>6.1f}x"
    print(line)
    line = (
        f"  {'whole pass':<22} {sp['pass_s']:>11.3f} {tp['pass_s']:>9.3f} "
        f"{ratio(sp['pass_s'], tp['pass_s']):>6.1f}x"
    )
    if tb:
        c = tb["pass"]["pass_s"]
        line += f" | {c:>12.3f} {ratio(c, tp['pass_s']):>6.1f}x"
    print(line + " | slatelake: maintenance() incl. lease + status record")
    line = (
        f"  {'connect (not in pass)':<22} {sp['connect_s']:>11.3f} {tp['connect_s']:>9.3f} "
        f"{ratio(sp['connect_s'], tp['connect_s']):>6.1f}x"
    )
    if tb:
        line += f" | {tb['pass']['connect_s']:>12.3f}"
    print(line)
    rfc, rfc_b = result.get("stock_rfc"), result.get("stock_rfc_batches")
    if rfc:
        print()
        print(
            "   against stock called in RFC 0021's shape (expiry 64 snapshots a call, the flush "
            "per table; with batches, merge and rewrite per table): what slatelake adds per call"
        )
        head = f"  {'step':<22} {'slatelake s':>11} {'stock rfc s':>11} {'ratio':>7}"
        if tb and rfc_b:
            head += f" | {'sl batches s':>12} {'stock rfc b s':>13} {'ratio':>7}"
        print(head + " | calls (stock rfc / with batches)")
        rows = [*STEPS, "six steps", "whole pass"]
        for step in rows:

            def secs(run: dict[str, Any], key: str = step) -> float:
                p = run["pass"]
                if key == "whole pass":
                    return p["pass_s"]
                if key == "six steps":
                    return sum(v["seconds"] for v in p["steps"].values() if "seconds" in v)
                return p["steps"].get(key, {}).get("seconds", float("nan"))

            a, b = secs(sl), secs(rfc)
            line = f"  {step:<22} {a:>11.3f} {b:>11.3f} {ratio(a, b):>6.1f}x"
            if tb and rfc_b:
                c, d = secs(tb), secs(rfc_b)
                line += f" | {c:>12.3f} {d:>13.3f} {ratio(c, d):>6.1f}x"
            calls = [
                str(r["pass"]["steps"].get(step, {}).get("calls", "-")) for r in (rfc, rfc_b) if r
            ]
            print(f"{line} | {' / '.join(calls)}")
    for label, run in [("slatelake", sl), ("stock", st)] + ([("batches", tb)] if tb else []):
        each = ", ".join(
            f"{r['pass_s']:.3f} (load {r['loadavg'][0]:.1f})" for r in run["pass"]["reps"]
        )
        print(f"  {label} passes in order, s (1-min load average after): {each}")
    print()
    print("   RSS (MB): current / high water of the pass child; build child peak apart")
    print(
        f"  {'side':<22} {'start':>13} {'before pass':>13} {'after pass':>13} "
        f"{'pass peak':>9} {'build peak':>10}"
    )
    runs = [("slatelake", sl), ("stock", st)] + ([("slatelake batches", tb)] if tb else [])
    for label, run in runs:
        p = run["pass"]

        def pair(r: dict[str, float]) -> str:
            return f"{r['current_mb']:.0f} / {r['high_water_mb']:.0f}"

        build = run["build"]
        build_peak = f"{build['rss']['high_water_mb']:.0f}" if isinstance(build, dict) else "-"
        print(
            f"  {label:<22} {pair(p['rss_start']):>13} {pair(p['rss_before']):>13} "
            f"{pair(p['rss_after']):>13} {p['peak_rss_mb']:>9.0f} {build_peak:>10}"
        )
    print("  slatelake per-step RSS (current / high water, from the progress lines):")
    print(
        "    "
        + ", ".join(
            f"{k} {v['rss_mb']:.0f}/{v['high_water_mb']:.0f}" for k, v in sp["steps"].items()
        )
    )
    print(
        "  stock per-step RSS (current): "
        + ", ".join(f"{k} {v['rss_mb']:.0f}" for k, v in tp["steps"].items())
    )
    print()
    print("   slatelake report (session.maintenance().to_dict())")
    rep = sp["report"]
    print(f"  trigger={rep['trigger']} work_pending={rep['work_pending']}")
    for s in rep["steps"]:
        print(f"  {s['step']:<22} {s['status']:<8} {s['detail']}")
    if tb:
        print("   slatelake report with MAINTENANCE_TABLE_BATCHES=true")
        for s in tb["pass"]["report"]["steps"][: len(STEPS)]:
            print(f"  {s['step']:<22} {s['status']:<8} {s['detail']}")
    print()
    print("   lake state after the pass")
    print(
        f"  {'side':<22} {'tables':>6} {'rows':>7} {'data files':>10} {'delete files':>12} "
        f"{'snapshots':>9} {'on disk':>7} {'disk KB':>8}"
    )
    for label, run in runs:
        s = run["pass"]["state"]
        print(
            f"  {label:<22} {len(s['tables']):>6} {s['rows']:>7} {s['live_data_files']:>10} "
            f"{s['live_delete_files']:>12} {s['meta']['ducklake_snapshot']:>9} "
            f"{s['disk_files']:>7} {s['disk_bytes'] / 1024:>8.0f}"
        )
    print(
        "  checks: X vs Y = same tables, rows (hashed), live data/delete files per table, "
        "metadata row counts, files on disk;\n  X vs the oracle = same tables and rows as plain "
        "DuckDB running the same statements"
    )
    print(
        "  (slatelake flushes table by table, and with TABLE_BATCHES merges and rewrites table "
        "by table,\n  each call its own DuckLake snapshot: more snapshots after the pass than "
        "stock's is by design)"
    )
    for label, diff in result["equivalence"].items():
        if diff:
            print(f"  DIFFERENCES {label} ({len(diff)}):")
            for d in diff[:12]:
                print(f"    {d}")
            if len(diff) > 12:
                print(f"    ... {len(diff) - 12} more (in the JSON)")
        else:
            print(f"  same: {label}")
    print()
    print("   build (not a goal)")
    print(
        f"  {'side':<22} {'total s':>7} {'stmts s':>7} {'fold s':>6} | per statement mean ms: "
        "create, inlined insert, parquet insert, delete, update, drop"
    )
    for label, run in runs[:2]:  # the TABLE_BATCHES pass ran on a copy of the slatelake build
        b = run["build"]
        kinds = ("create", "insert_inlined", "insert_parquet", "delete", "update", "drop")
        means = [b["by_kind"].get(k, {}).get("mean_ms", float("nan")) for k in kinds]
        per = ", ".join(f"{m:.1f}" for m in means)
        fold = f"{b['fold_s']:>6.2f}" if "fold_s" in b else f"{'-':>6}"
        print(f"  {label:<22} {b['seconds']:>7.1f} {b['statements_s']:>7.1f} {fold} | {per}")
    bs, bt = sl["build"]["state"], st["build"]["state"]
    print(
        f"  after build: snapshots slatelake {bs['meta']['ducklake_snapshot']} / stock "
        f"{bt['meta']['ducklake_snapshot']}, live data files {bs['live_data_files']} / "
        f"{bt['live_data_files']}, delete files {bs['live_delete_files']} / "
        f"{bt['live_delete_files']}, inlined rows live {bs['meta']['inlined_rows_live']} / "
        f"{bt['meta']['inlined_rows_live']}, files on disk {bs['disk_files']} / "
        f"{bt['disk_files']}"
    )
    if "table_batches_skipped" in result:
        print(f"  MAINTENANCE_TABLE_BATCHES run skipped: {result['table_batches_skipped']}")
    prof = result.get("profile")
    if prof:
        p = prof["pass"]
        print()
        print(
            f"== profile: the slatelake pass under cProfile ({p['pass_s']:.2f}s profiled, "
            f"{sp['pass_s']:.2f}s unprofiled) =="
        )
        for thread, text in p["profile"].items():
            print(f"-- {thread}")
            print(text)


def library_source() -> tuple[str, str]:
    """Where ``slatelake`` is imported from, and a digest of its Python sources."""
    import slatelake

    root = Path(slatelake.__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return str(root), digest.hexdigest()[:16]


def library_revision() -> dict[str, Any]:
    """The commit the library was measured at, any uncommitted library changes, and a
    digest of the sources actually imported (children import from the same place)."""

    def git(*args: str) -> str:
        proc = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True)
        return proc.stdout.strip() if proc.returncode == 0 else ""

    dirty = git("status", "--porcelain", "--", "layers/slatelake/slatelake").splitlines()
    root, digest = library_source()
    return {
        "commit": git("rev-parse", "--short", "HEAD") or f"(not a git checkout: {REPO})",
        "uncommitted": dirty,
        "imported_from": root,
        "source_sha256": digest,
    }


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        _block_absent_modules()
        return child_main(argv[1:])
    ap = argparse.ArgumentParser(
        prog="python -m tests.bench.maintenance",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--quick", action="store_true", help="8 tables, 4 commit rounds")
    ap.add_argument("--tables", type=int, help="tables (default 40; --quick 8)")
    ap.add_argument("--commits", type=int, help="INSERT rounds per table (default 6; --quick 4)")
    ap.add_argument(
        "--churn",
        choices=["full", "single"],
        default="full",
        help="full: some data files are deleted from twice; single: at most one DELETE or "
        "UPDATE per table (default full)",
    )
    ap.add_argument(
        "--reps", type=int, default=3, help="passes per side, each on the restored build (median)"
    )
    ap.add_argument("--no-batches", action="store_true", help="skip the TABLE_BATCHES run")
    ap.add_argument(
        "--parallel",
        help="also run the pass fanned out (maintain --parallel N) for each N of this "
        "comma-separated list, e.g. 1,2; compared with stock's serial pass in the RFC's shape",
    )
    ap.add_argument("--no-profile", action="store_true", help="skip the profiled run")
    ap.add_argument("--out", help="JSON path (default bench-results/maintenance[-quick].json)")
    ap.add_argument("--tmp", help="directory for the lakes (default: a temp dir)")
    ap.add_argument(
        "--without-pandas",
        action="store_true",
        help="children run as in the Lambda layer, without numpy, pandas and pyarrow "
        "(DuckDB's binding imports them when a query binds a parameter: ~80 MB of RSS)",
    )
    args = ap.parse_args(argv)
    if args.without_pandas:
        os.environ[WITHOUT_ENV] = ",".join(LAMBDA_ABSENT)
    tables = args.tables or (8 if args.quick else 40)
    commits = args.commits or (4 if args.quick else 6)
    if tables < 1 or commits < 2 or args.reps < 1:
        ap.error("need --tables >= 1, --commits >= 2 and --reps >= 1")
    try:
        fanned = [int(n) for n in args.parallel.split(",")] if args.parallel else []
    except ValueError:
        ap.error(f"--parallel {args.parallel!r}: expected worker counts, e.g. 1,2")
    if any(not 1 <= n <= 64 for n in fanned):
        ap.error("--parallel: worker counts from 1 to 64")
    suffix = ("-quick" if args.quick else "") + ("-single" if args.churn == "single" else "")
    suffix += "-without-pandas" if args.without_pandas else ""
    out_path = Path(args.out or f"bench-results/maintenance{suffix}.json")
    shape = (tables, commits, args.churn)

    from slatelake.ducklake import extensions

    statements, drops = workload(tables, commits, args.churn)
    kinds: dict[str, int] = defaultdict(int)
    for k, _ in statements:
        kinds[k] += 1
    result: dict[str, Any] = {
        **run_header(str(extensions.extension_path("ducklake"))),
        "config": {
            "quick": args.quick,
            "tables": tables,
            "commits": commits,
            "churn": args.churn,
            "statements": dict(kinds),
            "dropped": drops,
            "options": OPTIONS,
            "stock_calls": [sql for _, sql, _ in STOCK_CALLS],
            "settle_s": SETTLE_S,
            "reps": args.reps,
            "absent_modules": list(LAMBDA_ABSENT) if args.without_pandas else [],
        },
        "library": library_revision(),
    }
    if args.tmp:
        Path(args.tmp).mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="slatelake-maint-", dir=args.tmp or None))
    t_start = time.perf_counter()
    try:
        log(f"lakes under {root}; {len(statements)} statements per build ({dict(kinds)})")
        t0 = time.perf_counter()
        oracle = expected_contents(statements)
        result["oracle"] = {"seconds": time.perf_counter() - t0, "tables": oracle}
        reps = args.reps
        stock_build = build_side(root, "stock", "stock", shape, keep=True)  # RFC-shape passes
        more = reps > 1 or not (args.no_batches and args.no_profile)
        slate_build = build_side(root, "slate", "slate", shape, keep=more)
        # Passes interleaved (stock, slatelake, batches; again), so drift in the
        # machine's load hits every side alike.
        passes: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for _ in range(reps):
            passes["stock"].append(pass_once(root, "stock", "stock"))
            passes["stock_rfc"].append(pass_once(root, "stock", "stock", "--shape=rfc"))
            passes["slate"].append(pass_once(root, "slate", "slate"))
            for n in fanned:
                passes[f"parallel_{n}"].append(
                    pass_once(root, "slate", "slate", "--table-batches", f"--parallel={n}")
                )
            if not args.no_batches:
                passes["batches"].append(pass_once(root, "slate", "slate", "--table-batches"))
                passes["stock_rfc_batches"].append(
                    pass_once(root, "stock", "stock", "--shape=rfc-batches")
                )
        result["stock"] = {"build": stock_build, "pass": combine(passes["stock"])}
        # stock called as RFC 0021 has slatelake call DuckLake: what the shape
        # costs, apart from what slatelake adds to each call
        result["stock_rfc"] = {
            "build": "the stock build, restored from its pristine copy",
            "pass": combine(passes["stock_rfc"]),
        }
        if passes["stock_rfc_batches"]:
            result["stock_rfc_batches"] = {
                "build": "the stock build, restored from its pristine copy",
                "pass": combine(passes["stock_rfc_batches"]),
            }
        result["slate"] = {"build": slate_build, "pass": combine(passes["slate"])}
        if args.no_batches:
            result["table_batches_skipped"] = "--no-batches"
        else:
            result["slate_table_batches"] = {
                "build": "the slatelake build, restored from its pristine copy",
                "pass": combine(passes["batches"]),
            }
        for n in fanned:
            result[f"slate_parallel_{n}"] = {
                "build": "the slatelake build, restored from its pristine copy",
                "pass": combine(passes[f"parallel_{n}"]),
            }
        if not args.no_profile:
            profiled = pass_once(root, "slate", "slate", "--profile")
            result["profile"] = {"pass": combine([profiled])}
    finally:
        shutil.rmtree(root, ignore_errors=True)
    sl, st = result["slate"], result["stock"]
    checks = {
        "after the pass: slatelake vs stock": differences(
            sl["pass"]["state"], st["pass"]["state"], "slatelake", "stock"
        ),
        "before the pass (fresh connections): slatelake vs stock": differences(
            sl["build"]["state_reopened"], st["build"]["state_reopened"], "slatelake", "stock"
        ),
    }
    if "slate_table_batches" in result:
        checks["after the pass: slatelake TABLE_BATCHES vs stock"] = differences(
            result["slate_table_batches"]["pass"]["state"], st["pass"]["state"], "batches", "stock"
        )
    checks["after the pass: slatelake vs stock in the RFC's shape"] = differences(
        sl["pass"]["state"], result["stock_rfc"]["pass"]["state"], "slatelake", "stock rfc"
    )
    if "stock_rfc_batches" in result and "slate_table_batches" in result:
        checks["after the pass: slatelake TABLE_BATCHES vs stock in the RFC's shape"] = differences(
            result["slate_table_batches"]["pass"]["state"],
            result["stock_rfc_batches"]["pass"]["state"],
            "batches",
            "stock rfc batches",
        )
    for n in fanned:
        checks[f"after the pass: slatelake --parallel {n} vs stock in the RFC's shape"] = (
            differences(
                result[f"slate_parallel_{n}"]["pass"]["state"],
                result["stock_rfc"]["pass"]["state"],
                f"parallel {n}",
                "stock rfc",
            )
        )
    runs = [("stock", st), ("slatelake", sl)]
    if "slate_table_batches" in result:
        runs.append(("slatelake TABLE_BATCHES", result["slate_table_batches"]))
    runs += [
        (label, result[key])
        for label, key in (
            ("stock RFC shape", "stock_rfc"),
            ("stock RFC shape, batches", "stock_rfc_batches"),
        )
        if key in result
    ]
    for label, run in runs:
        whens = [("after the pass", run["pass"]["state"])]
        if isinstance(run["build"], dict):
            whens[:0] = [
                ("end of build, building connection", run["build"]["state"]),
                ("end of build, fresh connection", run["build"]["state_reopened"]),
            ]
        for when, state in whens:
            checks[f"{label} vs the oracle ({when})"] = against_oracle(state, oracle)
    for label, run in runs:
        checks[f"{label}: every pass ends in the same state as the first"] = run["pass"][
            "rep_differences"
        ]
    result["equivalence"] = checks
    sp, tp = result["slate"]["pass"], result["stock"]["pass"]
    result["summary"] = {
        "slate_pass_s": sp["pass_s"],
        "stock_pass_s": tp["pass_s"],
        "pass_ratio": ratio(sp["pass_s"], tp["pass_s"]),
        "stock_rfc_pass_s": result["stock_rfc"]["pass"]["pass_s"],
        "batches_ratio_rfc_shape": (
            ratio(
                result["slate_table_batches"]["pass"]["pass_s"],
                result["stock_rfc_batches"]["pass"]["pass_s"],
            )
            if "stock_rfc_batches" in result and "slate_table_batches" in result
            else None
        ),
        "pass_ratio_rfc_shape": ratio(sp["pass_s"], result["stock_rfc"]["pass"]["pass_s"]),
        "step_ratios": {
            s: ratio(sp["steps"].get(s, {}).get("seconds", float("nan")), tp["steps"][s]["seconds"])
            for s in STEPS
        },
        "parallel": {
            n: {
                "pass_s": result[f"slate_parallel_{n}"]["pass"]["pass_s"],
                "ratio_to_stock_rfc_serial": ratio(
                    result[f"slate_parallel_{n}"]["pass"]["pass_s"],
                    result["stock_rfc"]["pass"]["pass_s"],
                ),
                "peak_rss_mb": result[f"slate_parallel_{n}"]["pass"]["peak_rss_mb"],
            }
            for n in fanned
        },
        "slate_pass_peak_rss_mb": sp["peak_rss_mb"],
        "stock_pass_peak_rss_mb": tp["peak_rss_mb"],
        "slate_build_peak_rss_mb": result["slate"]["build"]["rss"]["high_water_mb"],
        "stock_build_peak_rss_mb": result["stock"]["build"]["rss"]["high_water_mb"],
        "equivalent": not any(result["equivalence"].values()),
        "equivalent_but_snapshot_counts": not any(
            d
            for diffs in result["equivalence"].values()
            for d in diffs
            if not d.startswith(("meta ducklake_snapshot:", "meta ducklake_snapshot_changes:"))
        ),
        "checks_failed": [k for k, v in result["equivalence"].items() if v],
    }
    result["wall_s"] = time.perf_counter() - t_start
    print_report(result)
    for n, fan in result["summary"]["parallel"].items():
        print(
            f"fanned out, {n} worker(s): pass {fan['pass_s']:.2f}s = "
            f"{fan['ratio_to_stock_rfc_serial']:.2f}x stock's serial pass in the RFC's shape "
            f"(the parent's peak RSS {fan['peak_rss_mb']:.0f} MB; workers not counted)"
        )
    lib = result["library"]
    lib["source_sha256_at_end"] = library_source()[1]
    lib["changed_during_run"] = lib["source_sha256_at_end"] != lib["source_sha256"]
    dirty = f", uncommitted: {' '.join(x.split()[-1] for x in lib['uncommitted'])}"
    print(
        f"\nlibrary at {lib['commit']}{dirty if lib['uncommitted'] else ''}, imported from "
        f"{lib['imported_from']}, sources sha256 {lib['source_sha256']}"
    )
    if lib["changed_during_run"]:
        print(
            f"WARNING: the library sources changed during the run (sha256 now "
            f"{lib['source_sha256_at_end']}); children may have run different code"
        )
    print(f"wall {result['wall_s']:.0f}s")
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(f"wrote {out_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
