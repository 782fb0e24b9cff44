"""Statements benchmark: what one autocommitted statement costs through a
slatelake session against stock DuckLake, and how that cost grows with the
number of tables in the lake (the goal: every statement at stock speed,
however many tables). Not part of the test suite; run from the repository root::

    bash scripts/bench statements [--tables 1,40,200] [--reps 3] [--n 9]
                                  [--dir DIR] [--quick] [--out bench-results/statements.json]

Per table count N:

- **Lakes** (built once, not compared): two lakes holding the same tables,
  ``t000..`` ``(id INTEGER, grp INTEGER, v VARCHAR, x DOUBLE)``, N of them,
  each with 2 inlined rows and one 200-row Parquet file, plus ``wide`` (one
  20,000-row Parquet file), the table every measured statement hits. Stock:
  DuckLake on a DuckDB-file catalog, extensions from
  ``slatelake.ducklake.extensions.connect()`` (the pinned wheels, offline).
  Slatelake: ``slatelake.connect(file URL, data_path=...)``. Both are built
  in transactions of --batch tables (one commit each: statement by
  statement, 200 tables through slatelake is slow today), the same batches
  on both sides; build times are recorded. The slatelake lake is folded
  (``slatelake fold --margin 0``) after the build and after every measuring
  child, as a holder would: each child opens a folded lake, not a log that
  grows run after run. Fold times are recorded, not compared.
- **Measured**, in a FRESH child process per side per rep (what a user's
  script sees: the session's caches built from scratch): open the lake (timed
  apart, never compared), one warm-up statement (a 1-row INSERT), then each
  of the five kinds --n times in a row, each autocommitted (slatelake:
  ``session.sql(stmt)``; stock: ``con.execute(stmt).fetchall()``); the clock
  covers exactly that call, and the child reports each kind's median:
  ``insert_1`` a 1-row INSERT (inlined: DuckLake's default limit is 10 rows);
  ``insert_5k`` 5,000 rows (one Parquet file); ``delete`` 3 rows of wide's
  Parquet file (a delete file); ``update`` 2 rows of it; ``create`` a table
  under a new name (the n new tables are dropped after, untimed, so later
  reps see N + 1 live tables again). Ids come from a token counter, so every
  statement changes the lake (the child checks 1 inserted, 3 deleted, 2
  updated...); both sides get the same tokens, so after each rep both
  ``wide`` tables must agree, and at the end a fresh process on each side
  must see the same rows and data and delete files in every table.
- **Interleaving**: per rep the slatelake child, then the stock child, so
  drift (other work on shared cores) hits both; each child records the load
  average when it ends.

Report: per N and kind the median over reps of the per-child medians
(slatelake ms, stock ms, ratio); per kind the slatelake growth from the
smallest to the largest N. The goals: every ratio <= 2x stock,
growth 1 -> 200 tables <= 1.3x. Without --dir the lakes live in a temp
directory removed at the end; with --dir they are kept and reused
(``N-tables/built.json``, written last, marks a finished build and holds the
next free token), so a reused lake carries earlier runs' statements too.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.bench.common import (
    log,
    median,
    ratio,
    run_header,
    run_module,
    vm_hwm_mb,
    write_result,
)

KINDS = ("insert_1", "insert_5k", "delete", "update", "create")
LABELS = {
    "insert_1": "1-row INSERT (inlined)",
    "insert_5k": "INSERT 5,000 rows (Parquet)",
    "delete": "DELETE 3 rows",
    "update": "UPDATE 2 rows",
    "create": "CREATE TABLE",
}
COLUMNS = "(id INTEGER, grp INTEGER, v VARCHAR, x DOUBLE)"
SMALL_ROWS, FILE_ROWS = 2, 200  # per table t...: inlined rows, then one Parquet file
WIDE_ROWS = 20_000  # wide's Parquet file: ids 0..19999
DELETE_SPAN = 10_000  # DELETEs take 3 ids a token from [0, 10000)
UPDATE_BASE = 10_000  # UPDATEs take 2 ids a token from [10000, 20000)
BULK_BASE, BULK_ROWS = 1_000_000, 5_000
ONE_BASE = 100_000_000
MAX_TOKEN = DELETE_SPAN // 3
GOAL_RATIO = 2.0
GOAL_GROWTH = 1.3


# -- statements ------------------------------------------------------------------------------------
def rows_sql(table: str, start: int, stop: int) -> str:
    return (
        f"INSERT INTO {table} SELECT i, i % 7, 'v' || i, i * 0.5 FROM range({start}, {stop}) r(i)"
    )


def statement(kind: str, token: int) -> tuple[str, list[tuple[Any, ...]] | None]:
    """The SQL of one measured statement for ``token``, and the rows it must return."""
    if not 0 <= token < MAX_TOKEN:
        raise SystemExit(f"token {token} out of range; remove the --dir cache to rebuild")
    if kind == "insert_1":
        sql = f"INSERT INTO wide VALUES ({ONE_BASE + token}, {token % 7}, 'one {token}', {token}.5)"
        return sql, [(1,)]
    if kind == "insert_5k":
        start = BULK_BASE + token * BULK_ROWS
        return rows_sql("wide", start, start + BULK_ROWS), [(BULK_ROWS,)]
    if kind == "delete":
        ids = ", ".join(str(3 * token + k) for k in range(3))
        return f"DELETE FROM wide WHERE id IN ({ids})", [(3,)]
    if kind == "update":
        ids = ", ".join(str(UPDATE_BASE + 2 * token + k) for k in range(2))
        return f"UPDATE wide SET v = v || '*', x = x + 1 WHERE id IN ({ids})", [(2,)]
    if kind == "create":
        return f"CREATE TABLE new_{token:06d} {COLUMNS}", None
    raise ValueError(kind)


def table_names(tables: int) -> list[str]:
    width = max(3, len(str(tables - 1)))
    return [f"t{i:0{width}d}" for i in range(tables)]


# -- one side's lake, in a child -------------------------------------------------------------------
class Side:
    """A connection to one side's lake in ``directory``; ``run`` autocommits a
    statement and returns its rows, ``batch`` groups statements into one commit."""

    def __init__(self, kind: str, directory: Path) -> None:
        self.kind = kind
        self.session: Any = None
        if kind == "stock":
            from slatelake.ducklake import extensions
            from slatelake.ducklake.sql import literal

            self.con = extensions.connect()
            meta, data = directory / "stock.duckdb", directory / "stock-data"
            self.con.execute(
                f"ATTACH {literal(f'ducklake:{meta}')} AS lake (DATA_PATH {literal(f'{data}/')})"
            )
            self.con.execute("USE lake")
        else:
            import slatelake

            url = (directory / "slate").as_uri()
            self.session = slatelake.connect(url, data_path=f"{directory / 'slate-data'}/")
            self.con = self.session.con

    def run(self, sql: str) -> list[tuple[Any, ...]]:
        if self.session is not None:
            return self.session.sql(sql).fetchall()
        return self.con.execute(sql).fetchall()

    @contextmanager
    def batch(self) -> Iterator[None]:
        if self.session is not None:
            with self.session.transaction():
                yield
            return
        self.con.execute("BEGIN TRANSACTION")
        yield
        self.con.execute("COMMIT")

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        """A read on the DuckDB connection (commits nothing)."""
        return self.con.execute(sql).fetchall()

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
        else:
            self.con.close()


def lake_summary(side: Side, tables: list[str]) -> dict[str, Any]:
    """Rows and id sums per table, data and delete files per table: both sides must agree."""
    rows = side.query(
        " UNION ALL ".join(
            f"SELECT '{t}', count(*), coalesce(sum(id), 0), coalesce(sum(x), 0) FROM {t}"
            for t in ["wide", *tables]
        )
    )
    files = side.query(
        "SELECT table_name, file_count, delete_file_count FROM ducklake_table_info('lake') "
        "ORDER BY table_name"
    )
    return {
        "rows": {name: [n, ids, round(x, 3)] for name, n, ids, x in rows},
        "files": {name: [f, d] for name, f, d in files},
    }


def child_build(kind: str, directory: Path, tables: int, batch: int) -> dict[str, Any]:
    names = table_names(tables)
    t0 = time.perf_counter()
    side = Side(kind, directory)
    opened = time.perf_counter() - t0
    commits: list[float] = []
    c0 = time.perf_counter()
    with side.batch():
        side.run(f"CREATE TABLE wide {COLUMNS}")
        side.run(rows_sql("wide", 0, WIDE_ROWS))
    commits.append(time.perf_counter() - c0)
    for at in range(0, tables, batch):
        c0 = time.perf_counter()
        with side.batch():
            for i, name in enumerate(names[at : at + batch], start=at):
                side.run(f"CREATE TABLE {name} {COLUMNS}")
                base = i * 1_000
                side.run(rows_sql(name, base, base + SMALL_ROWS))
                side.run(rows_sql(name, base + SMALL_ROWS, base + SMALL_ROWS + FILE_ROWS))
        commits.append(time.perf_counter() - c0)
    built = time.perf_counter() - t0
    summary = lake_summary(side, names)
    side.close()
    return {
        "open_s": opened,
        "seconds": built,
        "commits": len(commits),
        "commit_s": commits,
        "summary": summary,
        "vm_hwm_mb": vm_hwm_mb(),
    }


def child_measure(kind: str, directory: Path, n: int, token: int) -> dict[str, Any]:
    """Open (timed apart), one warm-up INSERT, then each kind n times in a row."""
    t0 = time.perf_counter()
    side = Side(kind, directory)
    opened = time.perf_counter() - t0
    warm_sql, _ = statement("insert_1", token + n)
    w0 = time.perf_counter()
    side.run(warm_sql)
    warm = time.perf_counter() - w0
    spent: dict[str, list[float]] = {k: [] for k in KINDS}
    drops: list[float] = []
    for what in KINDS:  # n in a row of each kind: a kind's steady cost, not the switch
        for i in range(n):
            sql, wanted = statement(what, token + i)
            s0 = time.perf_counter()
            got = side.run(sql)
            spent[what].append(time.perf_counter() - s0)
            if wanted is not None and got != wanted:
                raise SystemExit(f"{kind}: {sql!r} returned {got}, not {wanted}")
    for i in range(n):  # untimed: the lake keeps N + 1 live tables
        d0 = time.perf_counter()
        side.run(f"DROP TABLE new_{token + i:06d}")
        drops.append(time.perf_counter() - d0)
    wide = side.query("SELECT count(*), sum(id), sum(x), count(*) FILTER (v LIKE '%*') FROM wide")
    side.close()
    return {
        "open_s": opened,
        "warmup_s": warm,
        "median_s": {k: median(v) for k, v in spent.items()},
        "seconds": spent,
        "drop_median_s": median(drops),
        "wide": list(wide[0]),
        "vm_hwm_mb": vm_hwm_mb(),
        "loadavg": os.getloadavg(),
    }


def child_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="statements --child")
    ap.add_argument("mode", choices=["build", "measure", "check"])
    ap.add_argument("side", choices=["slate", "stock"])
    ap.add_argument("dir")
    ap.add_argument("--tables", type=int, default=1)
    ap.add_argument("--batch", type=int, default=20)
    ap.add_argument("--n", type=int, default=9)
    ap.add_argument("--token", type=int, default=0)
    a = ap.parse_args(argv)
    if a.mode == "build":
        out = child_build(a.side, Path(a.dir), a.tables, a.batch)
    elif a.mode == "measure":
        out = child_measure(a.side, Path(a.dir), a.n, a.token)
    else:  # what a fresh open sees (slatelake: the folded store), untimed
        side = Side(a.side, Path(a.dir))
        out = lake_summary(side, table_names(a.tables))
        side.close()
    print(json.dumps(out, default=str), flush=True)
    return 0


# -- the parent ------------------------------------------------------------------------------------
def child(*args: str) -> dict[str, Any]:
    """A child of this module, under tests/bench/peak.py: its JSON, wall and peak RSS."""
    m = run_module("tests.bench.statements", ["--child", *args])
    out = m.last_json()
    if m.returncode != 0 or not isinstance(out, dict):
        raise SystemExit(f"child {' '.join(args)} failed ({m.returncode}):\n{m.stderr[-4000:]}")
    return out | {"process_wall_s": m.wall_s, "process_peak_rss_mb": m.peak_rss_mb}


def fold(directory: Path) -> float:
    """``slatelake fold --margin 0`` on the slatelake lake (a holder's work); its wall."""
    m = run_module("slatelake.cli", ["fold", (directory / "slate").as_uri(), "--margin", "0"])
    if m.returncode != 0:
        raise SystemExit(f"slatelake fold failed ({m.returncode}):\n{m.stderr[-4000:]}")
    return m.wall_s


def prepare(directory: Path, tables: int, batch: int) -> dict[str, Any]:
    """Both lakes of ``tables`` tables in ``directory``, built unless a finished
    build is there; returns its record (``next_token`` included)."""
    done = directory / "built.json"
    if done.is_file():
        record = json.loads(done.read_text())
        log(f"{tables} tables: reusing {directory} (next token {record['next_token']})")
        return record | {"reused": True}
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    record: dict[str, Any] = {"tables": tables, "batch": batch, "next_token": 0}
    for kind in ("slate", "stock"):
        log(f"{tables} tables: building the {kind} lake ({batch} tables a commit)")
        built = child("build", kind, str(directory), f"--tables={tables}", f"--batch={batch}")
        log(
            f"{tables} tables: {kind} built in {built['seconds']:.1f}s "
            f"({built['commits']} commits, slowest {max(built['commit_s']):.2f}s)"
        )
        record[kind] = built
    sl, st = record["slate"]["summary"], record["stock"]["summary"]
    if differences(sl, st):
        raise SystemExit(f"{tables} tables: the two builds differ: {differences(sl, st)}")
    record["fold_s"] = [fold(directory)]
    done.write_text(json.dumps(record, default=str))
    return record | {"reused": False}


def differences(slate: dict[str, Any], stock: dict[str, Any]) -> list[str]:
    """What two lake summaries disagree on: (what, table): slatelake / stock."""
    return [
        f"{what} {name}: {slate[what].get(name)} / {stock[what].get(name)}"
        for what in ("rows", "files")
        for name in sorted(set(slate[what]) | set(stock[what]))
        if slate[what].get(name) != stock[what].get(name)
    ][:10]


def reserve(directory: Path, count: int) -> int:
    """Take ``count`` tokens from the lake's counter (saved first: a failed
    child never gets its tokens handed out again)."""
    done = directory / "built.json"
    record = json.loads(done.read_text())
    token = record["next_token"]
    record["next_token"] = token + count
    done.write_text(json.dumps(record, default=str))
    return token


def bench_size(root: Path, tables: int, args: argparse.Namespace) -> dict[str, Any]:
    directory = root / f"{tables}-tables"
    record = prepare(directory, tables, args.batch)
    runs: dict[str, list[dict[str, Any]]] = {"slate": [], "stock": []}
    folds: list[float] = []
    for rep in range(args.reps):
        token = reserve(directory, args.n + 1)
        for kind in ("slate", "stock"):
            out = child("measure", kind, str(directory), f"--n={args.n}", f"--token={token}")
            runs[kind].append(out)
            if kind == "slate":
                folds.append(fold(directory))
        sl, st = runs["slate"][-1], runs["stock"][-1]
        if sl["wide"] != st["wide"]:
            raise SystemExit(
                f"{tables} tables, rep {rep}: wide differs: {sl['wide']} / {st['wide']}"
            )
        log(
            f"{tables} tables, rep {rep + 1}/{args.reps}: "
            + ", ".join(
                f"{k} {sl['median_s'][k] * 1000:.0f}/{st['median_s'][k] * 1000:.0f}" for k in KINDS
            )
            + f" ms (slatelake/stock); load {st['loadavg'][0]:.2f}"
        )
    sl, st = (child("check", k, str(directory), f"--tables={tables}") for k in ("slate", "stock"))
    if differences(sl, st):
        raise SystemExit(f"{tables} tables: reopened, the lakes differ: {differences(sl, st)}")
    result: dict[str, Any] = {"tables": tables, "build": record, "folds_s": folds, "kinds": {}}
    for what in KINDS:
        sl = [r["median_s"][what] for r in runs["slate"]]
        st = [r["median_s"][what] for r in runs["stock"]]
        result["kinds"][what] = {
            "slate_ms": median(sl) * 1000,
            "stock_ms": median(st) * 1000,
            "ratio": ratio(median(sl), median(st)),
            "slate_reps_ms": [s * 1000 for s in sl],
            "stock_reps_ms": [s * 1000 for s in st],
        }
    result["runs"] = runs
    return result


def growth(result: dict[str, Any]) -> dict[str, dict[str, float]]:
    sizes = result["sizes"]
    if len(sizes) < 2:
        return {}
    first, last = sizes[0]["kinds"], sizes[-1]["kinds"]
    return {
        k: {
            "slate": ratio(last[k]["slate_ms"], first[k]["slate_ms"]),
            "stock": ratio(last[k]["stock_ms"], first[k]["stock_ms"]),
        }
        for k in KINDS
    }


def print_report(result: dict[str, Any]) -> None:
    cfg = result["config"]
    sizes = result["sizes"]
    print()
    print(
        f"## Statements: slatelake vs stock DuckLake (DuckDB-file catalog), local files, "
        f"medians over {cfg['reps']} reps of per-process medians of {cfg['n']}; "
        "tables: t... tables besides `wide`"
    )
    print()
    print("| tables | statement | slatelake ms | stock ms | ratio | slatelake reps ms |")
    print("|---:|---|---:|---:|---:|---|")
    for size in sizes:
        for k in KINDS:
            v = size["kinds"][k]
            reps = ", ".join(f"{x:.0f}" for x in v["slate_reps_ms"])
            print(
                f"| {size['tables']} | {LABELS[k]} | {v['slate_ms']:.1f} | {v['stock_ms']:.1f} "
                f"| {v['ratio']:.1f}x | {reps} |"
            )
    grow = result["growth"]
    if grow:
        a, b = sizes[0]["tables"], sizes[-1]["tables"]
        print()
        print(f"| statement | slatelake growth {a} -> {b} tables | stock growth |")
        print("|---|---:|---:|")
        for k in KINDS:
            print(f"| {LABELS[k]} | {grow[k]['slate']:.2f}x | {grow[k]['stock']:.2f}x |")
    print()
    print("| tables | build slatelake s | build stock s | commits | fold after build s |")
    print("|---:|---:|---:|---:|---:|")
    for size in sizes:
        b = size["build"]
        reused = " (reused)" if b.get("reused") else ""
        print(
            f"| {size['tables']}{reused} | {b['slate']['seconds']:.1f} | "
            f"{b['stock']['seconds']:.1f} | {b['slate']['commits']} | {b['fold_s'][0]:.1f} |"
        )
    print()
    print("Goals:")
    for v in result["verdicts"]:
        met = {True: "MET", False: "MISSED", None: "n/a"}[v["met"]]
        print(f"- [{met}] {v['goal']}: {v['measured']}")
    loads = [r["loadavg"][0] for s in sizes for side in s["runs"].values() for r in side]
    print()
    print(
        f"1-min load average after each child: {min(loads):.2f} .. {max(loads):.2f} "
        f"(start {result['loadavg_start'][0]:.2f}, end {result['loadavg_end'][0]:.2f}); "
        f"{result['machine']['cpus']} CPUs; wall {result['wall_s']:.0f}s"
    )


def verdicts(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Every ratio <= 2x stock; growth smallest -> largest N <= 1.3x (stated for
    1 -> 200 tables: ``met`` is None when the run did not span that)."""
    sizes, grow = result["sizes"], result["growth"]
    worst = max((s["kinds"][k]["ratio"], s["tables"], k) for s in sizes for k in KINDS)
    out = [
        {
            "goal": f"every statement <= {GOAL_RATIO:g}x stock",
            "measured": f"worst {worst[0]:.1f}x ({LABELS[worst[2]]}, {worst[1]} tables)",
            "met": worst[0] <= GOAL_RATIO,
        }
    ]
    if grow:
        a, b = sizes[0]["tables"], sizes[-1]["tables"]
        top = max((g["slate"], k) for k, g in grow.items())
        out.append(
            {
                "goal": f"slatelake growth 1 -> 200 tables <= {GOAL_GROWTH:g}x",
                "measured": f"worst {top[0]:.2f}x ({LABELS[top[1]]}, {a} -> {b} tables)",
                "met": top[0] <= GOAL_GROWTH if a <= 1 and b >= 200 else None,
            }
        )
    return out


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="bash scripts/bench statements",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--tables", default="1,40,200", help="table counts, commas")
    ap.add_argument("--reps", type=int, default=3, help="child processes per side per size")
    ap.add_argument("--n", type=int, default=9, help="statements of each kind per child")
    ap.add_argument("--batch", type=int, default=20, help="tables per building commit")
    ap.add_argument("--quick", action="store_true", help="--tables 1,10 --reps 1 --n 3")
    ap.add_argument("--dir", help="keep the lakes here and reuse them (default: temp, removed)")
    ap.add_argument("--out", default="bench-results/statements.json")
    args = ap.parse_args(argv)
    if args.quick:
        args.tables, args.reps, args.n = "1,10", 1, 3
    args.sizes = sorted({int(s) for s in args.tables.split(",") if s.strip()})
    if not args.sizes or min(args.sizes) < 1 or args.reps < 1 or args.n < 1 or args.batch < 1:
        ap.error("--tables needs counts >= 1; --reps, --n and --batch at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return child_main(argv[1:])
    args = parse_args(argv)
    from slatelake.ducklake import extensions
    from tests.bench.bridge import library_revision

    result: dict[str, Any] = {
        **run_header(str(extensions.extension_path("ducklake"))),
        "library": library_revision(),
        "config": {
            "tables": args.sizes,
            "reps": args.reps,
            "n": args.n,
            "batch": args.batch,
            "table": f"t... {COLUMNS}: {SMALL_ROWS} inlined rows + one {FILE_ROWS}-row file",
            "wide": f"one {WIDE_ROWS}-row Parquet file; every measured statement hits it",
            "env": {k: v for k, v in os.environ.items() if k.startswith("SLATELAKE_")},
        },
        "loadavg_start": os.getloadavg(),
        "sizes": [],
    }
    own = args.dir is None
    root = Path(args.dir or tempfile.mkdtemp(prefix="slatelake-statements-"))
    root.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    try:
        log(f"lakes under {root}")
        for tables in args.sizes:
            result["sizes"].append(bench_size(root, tables, args))
    finally:
        if own:
            shutil.rmtree(root, ignore_errors=True)
    result["loadavg_end"] = os.getloadavg()
    result["growth"] = growth(result)
    result["verdicts"] = verdicts(result)
    result["wall_s"] = time.perf_counter() - t_start
    print_report(result)
    write_result(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
