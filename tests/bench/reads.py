"""A read through a slatelake session against stock DuckLake, the DuckDB way.

``sql(q).fetchall()`` (a relation: DuckDB binds it when made and again when
fetched) and ``execute(q).fetchall()`` (bound once), on a slatelake lake and
on stock DuckLake over a DuckDB-file catalog, in one process, same data.
Prints medians in ms and the ratios; ``--json`` prints one object.

    bash scripts/bench reads [--runs 50] [--tables 1] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import slatelake
from slatelake.ducklake import extensions
from slatelake.ducklake.sql import literal

WARMUP = 10


def _median_ms(fn: Callable[[], Any], runs: int) -> float:
    times = []
    for _ in range(runs + WARMUP):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return round(statistics.median(times[WARMUP:]), 2)


def _fill(run: Callable[[str], Any], tables: int) -> None:
    for i in range(tables):
        run(f"CREATE TABLE t{i} (i INTEGER, v VARCHAR)")
        run(f"INSERT INTO t{i} SELECT r, 'x' || r FROM range(100) r(r)")


def measure(runs: int, tables: int) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="slatelake-bench-reads-"))
    query = "SELECT count(*) FROM t0"
    out: dict[str, Any] = {"runs": runs, "tables": tables}
    with slatelake.connect(f"file://{root}/lake", data_path=f"{root}/data/") as session:
        _fill(session.sql, tables)
        out["slatelake_sql_ms"] = _median_ms(lambda: session.sql(query).fetchall(), runs)
        out["slatelake_execute_ms"] = _median_ms(lambda: session.execute(query).fetchall(), runs)
    con = extensions.connect()
    try:
        catalog = literal(f"ducklake:{root}/stock.ducklake")
        con.execute(f"ATTACH {catalog} AS stock (DATA_PATH {literal(f'{root}/stock/')})")
        con.execute("USE stock")
        _fill(con.execute, tables)
        out["stock_sql_ms"] = _median_ms(lambda: con.sql(query).fetchall(), runs)
        out["stock_execute_ms"] = _median_ms(lambda: con.execute(query).fetchall(), runs)
    finally:
        con.close()
    for how in ("sql", "execute"):
        out[f"{how}_ratio"] = round(out[f"slatelake_{how}_ms"] / out[f"stock_{how}_ms"], 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--tables", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = measure(args.runs, args.tables)
    if args.json:
        print(json.dumps(result))
        return
    for how in ("sql", "execute"):
        print(
            f"{how}(q).fetchall(): slatelake {result[f'slatelake_{how}_ms']} ms, "
            f"stock {result[f'stock_{how}_ms']} ms, {result[f'{how}_ratio']}x"
        )


if __name__ == "__main__":
    main()
