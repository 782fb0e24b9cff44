"""A maintenance pass's memory, sampled at every commit it makes.

Run from the repository root (not part of the test suite; pytest ignores tests/bench)::

    python -m tests.bench.pass_memory [--tables 80] [--files 3] [--rows 40]
                                      [--every 10] [--tracemalloc] [--out FILE]
                                      [--set NAME=VALUE ...]

Why: a pass over 400 tables with MAINTENANCE_TABLE_BATCHES
grew its RSS with every commit. This builds a lake on local files of
--tables tables, each given --files INSERTs of --rows rows (each a Parquet
file, over DuckLake's inlining limit), folds it once, then runs one pass in
a child process: MERGE_ADJACENT_FILES with TABLE_BATCHES, one DuckLake call
and one commit per table. Before each table's call (so after every commit the
pass made) it samples:

- ``rss``: VmRSS from /proc/self/status, MB;
- ``malloc``: what glibc's malloc has handed out and not had back (mallinfo2), MB;
- ``catalog_rows``: rows in the pass session's metadata catalog (every
  ``ducklake_*`` table, as DuckDB estimates them);
- ``duck``: DuckDB's own accounting, sum of ``duckdb_memory()``, MB (and
  by tag: the buffer pool's use by kind);
- ``dbs``: databases attached to the pass's connection (``duckdb_databases()``);
- ``loads``: how many times the session rebuilt its in-memory catalog
  (``Session._load``, counted by a wrapper installed here, not in the module);
- ``objs``: objects the garbage collector tracks (every --every commits);
- with --tracemalloc, Python heap MB and, at the end, the top growth sites
  between the first and last sample.

The figures to compare: RSS per commit against catalog rows per commit. A
pass whose RSS grows while catalog rows, DuckDB memory and objects stay flat leaks
outside what it accounts for.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def malloc_mb() -> float:
    """Bytes malloc has handed out and not had back (glibc's mallinfo2: every
    arena plus mmapped chunks), MB: live native allocations, whoever made them
    (DuckDB, Rust, Python's large objects). RSS above it is free memory malloc
    keeps (fragmentation), not a leak."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = _MallInfo2
    except (OSError, AttributeError):
        return float("nan")
    info = libc.mallinfo2()
    return (info.uordblks + info.hblkhd) / (1 << 20)


def vm_rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def build(url: str, data: Path, tables: int, files: int, rows: int) -> None:
    """Tables t000..: one transaction each (CREATE and --files INSERTs, each
    its own Parquet file), then one fold so the pass starts from the store."""
    import slatelake
    from slatelake.catalog.folder import Folder
    from slatelake.store.location import LakeLocation

    with slatelake.connect(url, data_path=f"{data}/") as s:
        for t in range(tables):
            with s.transaction():
                s.sql(f"CREATE TABLE t{t:03d} (id INTEGER, v VARCHAR)")
                for f in range(files):
                    s.sql(
                        f"INSERT INTO t{t:03d} SELECT i, 'row ' || i "
                        f"FROM range({f * rows}, {(f + 1) * rows}) r(i)"
                    )
    folder = Folder(LakeLocation.parse(url), margin_s=0)
    try:
        folder.fold_once()
    finally:
        folder.close()


def run_pass(url: str, every: int, trace: bool, settings: list[str]) -> dict[str, Any]:
    """One pass in this process, sampled before each table's merge call;
    ``settings`` (NAME=VALUE) are SET on the pass's connection first."""
    from slatelake.ducklake import session as session_mod
    from slatelake.ducklake.commit_flow import META_DB
    from slatelake.ducklake.sql import ident, literal
    from slatelake.maintenance.options import ducklake_signatures, parse_options
    from slatelake.maintenance.runner import run_pass as run

    loads = [0]
    original_load = session_mod.Session._load

    def counting_load(self: Any) -> None:
        loads[0] += 1
        original_load(self)

    session_mod.Session._load = counting_load  # type: ignore[method-assign]
    if trace:
        tracemalloc.start(8)
    session = session_mod.Session(url)
    for setting in settings:
        name, _, value = setting.partition("=")
        session.con.execute(f"SET {ident(name)} = {literal(value)}")
    options = parse_options(
        {"MAINTENANCE_MERGE_ADJACENT_FILES": "true", "MAINTENANCE_TABLE_BATCHES": "true"},
        ducklake_signatures(session.con),
    )
    samples: list[dict[str, Any]] = []
    snaps: list[Any] = []

    def sample(message: str, numbers: dict[str, float]) -> None:
        if not message.startswith("merge_adjacent_files: "):
            return
        n = len(samples)
        state = session.state
        probe = session.con.cursor()  # of the connection the pass holds now; not its cursor
        try:
            duck = probe.execute("SELECT sum(memory_usage_bytes) FROM duckdb_memory()").fetchone()[
                0
            ]
            dbs = probe.execute("SELECT count(*) FROM duckdb_databases()").fetchone()[0]
            catalog_rows = probe.execute(
                "SELECT sum(estimated_size) FROM duckdb_tables() WHERE database_name = ?",
                [META_DB],
            ).fetchone()[0]
            tags = probe.execute(
                "SELECT tag, memory_usage_bytes FROM duckdb_memory() WHERE memory_usage_bytes > 0"
            ).fetchall()
        finally:
            probe.close()
        row: dict[str, Any] = {
            "commit": n,
            "seq": state.last_seq,
            "rss_mb": round(vm_rss_mb(), 1),
            "malloc_mb": round(malloc_mb(), 1),
            "duck_mb": round((duck or 0) / (1 << 20), 1),
            "catalog_rows": int(catalog_rows or 0),
            "dbs": dbs,
            "loads": loads[0],
            "duck_tags_mb": {str(t): round(b / (1 << 20), 1) for t, b in tags},
        }
        if n % every == 0:
            row["objs"] = len(gc.get_objects())
            if trace:
                row["py_mb"] = round(tracemalloc.get_traced_memory()[0] / (1 << 20), 1)
                snaps[:] = [snaps[0] if snaps else tracemalloc.take_snapshot()]
        samples.append(row)

    t0 = time.monotonic()
    report = run(session, options, on_progress=sample)
    out: dict[str, Any] = {
        "seconds": round(time.monotonic() - t0, 1),
        "outcome": [(s.step, s.status, s.detail) for s in report.steps if s.status != "skipped"],
        "samples": samples,
    }
    if trace and snaps:
        growth = tracemalloc.take_snapshot().compare_to(snaps[0], "traceback")[:5]
        out["py_growth"] = [
            {"kib": round(g.size_diff / 1024, 1), "count": g.count_diff, "at": str(g.traceback)}
            for g in growth
        ]
    session.close()
    return out


def print_table(result: dict[str, Any], every: int) -> None:
    cols = (
        "commit",
        "seq",
        "rss_mb",
        "malloc_mb",
        "catalog_rows",
        "duck_mb",
        "dbs",
        "loads",
        "objs",
    )
    print(" ".join(f"{c:>8}" for c in cols))
    for row in result["samples"]:
        if row["commit"] % every == 0 or row is result["samples"][-1]:
            print(" ".join(f"{row.get(c, ''):>8}" for c in cols))
    first, last = result["samples"][0], result["samples"][-1]
    commits = max(1, last["commit"] - first["commit"])
    print(
        f"over {commits} commits: rss {first['rss_mb']} -> {last['rss_mb']} MB "
        f"({(last['rss_mb'] - first['rss_mb']) / commits * 1024:.0f} KiB/commit); malloc "
        f"{first['malloc_mb']} -> {last['malloc_mb']} MB; "
        f"catalog rows {first['catalog_rows']} -> {last['catalog_rows']}; "
        f"duckdb {first['duck_mb']} -> {last['duck_mb']} MB "
        f"(by tag: {first['duck_tags_mb']} -> {last['duck_tags_mb']}); "
        f"loads {first['loads']} -> {last['loads']}; pass {result['seconds']}s"
    )
    for g in result.get("py_growth", []):
        print(f"  python heap +{g['kib']} KiB ({g['count']:+d} blocks) at {g['at']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=80)
    parser.add_argument("--files", type=int, default=3)
    parser.add_argument("--rows", type=int, default=40)
    parser.add_argument("--every", type=int, default=10, help="print (and count objects) every N")
    parser.add_argument("--tracemalloc", action="store_true")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a DuckDB setting for the pass's connection, e.g. enable_external_file_cache=false",
    )
    parser.add_argument("--out", type=Path)
    parser.add_argument("--child", help=argparse.SUPPRESS)  # the pass, in its own process
    args = parser.parse_args()
    if args.child:
        json.dump(run_pass(args.child, args.every, args.tracemalloc, args.set), sys.stdout)
        return
    with tempfile.TemporaryDirectory(prefix="pass-memory-") as tmp:
        url = (Path(tmp) / "lake").as_uri()
        t0 = time.monotonic()
        build(url, Path(tmp) / "data", args.tables, args.files, args.rows)
        print(f"built {args.tables} tables x {args.files} files in {time.monotonic() - t0:.0f}s")
        child = [sys.executable, "-m", "tests.bench.pass_memory", "--child", url]
        child += ["--every", str(args.every)] + (["--tracemalloc"] if args.tracemalloc else [])
        child += [f"--set={setting}" for setting in args.set]
        done = subprocess.run(child, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            sys.exit(f"the pass failed:\n{done.stderr[-4000:]}")
        result = json.loads(done.stdout)
    print_table(result, args.every)
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
