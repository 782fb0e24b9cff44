"""The maintenance Lambda's figures: cold start to first step, pass duration, peak RSS.

Run from the repository root (not part of the test suite)::

    python -m tests.bench.lambda_pass [--quick] [--tables 40] [--commits 6]
                                      [--out bench-results/lambda.json]

The churned ~40-table lake of the maintenance
benchmark (``tests.bench.maintenance``, local files) is built once per side;
then a fresh Python process plays a cold Lambda container: it imports the
handler module exactly as Lambda does (its folder on sys.path) and invokes it
with the scheduled rule input template.yaml configures (the six DuckLake
steps with MAINTENANCE_TABLE_BATCHES, the sweep on). Measured in that
process: the interpreter start to the handler's ``first step starting`` line
(imports, event parsing, option bind, attach), the pass's own seconds, the
invocation's wall time and the process's peak RSS. The stock side runs the
same six DuckLake calls on a DuckDB-file catalog holding the same data, in
a process of its own, for the ratio.

``--files N`` (e.g. 100000) measures a large lake instead: stock DuckLake's
N one-row data files (the bridge benchmark's lake, cached under ``--dir``)
imported into a slatelake lake, then the same cold Lambda process twice,
before and after ``slatelake image`` (tests/bench/lambda_files.py). Goal:
cold start to first step <= 3 s with the image.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.bench.common import run_header
from tests.bench.maintenance import OPTIONS, REPO, SETTLE_S, build_side, log, pass_once, ratio
from tests.functions.conftest import powertools_env

FUNCTION_DIR = REPO / "functions" / "maintenance"

_CHILD = """
import io, json, sys, time
t_import = time.monotonic()
sys.path.insert(0, {function_dir!r})
import app
from slatelake.ducklake import extensions
from slatelake.maintenance import api as pass_api
imported_s = time.monotonic() - t_import
calls = {{"extensions.connect": [], "slatelake.connect": []}}

def _timed(owner, name, key):
    inner = getattr(owner, name)
    def wrapped(*a, **kw):
        t = time.monotonic()
        try:
            return inner(*a, **kw)
        finally:
            calls[key].append(round(time.monotonic() - t, 3))
    setattr(owner, name, wrapped)

_timed(extensions, "connect", "extensions.connect")  # every load goes through here
_timed(app.slatelake, "connect", "slatelake.connect")
first_step = []
_run = pass_api.run_request  # what lake.maintenance.run calls

def _watched_run(*a, on_progress, **kw):
    # the first step's start, as the handler's progress log reports it
    def watched(message, fields):
        if not first_step and message.startswith("step ") and message.endswith(" start"):
            first_step.append(time.monotonic() - t_import)
        return on_progress(message, fields)
    return _run(*a, on_progress=watched, **kw)

pass_api.run_request = _watched_run
buffer = io.StringIO()
app.logger.registered_handler.setStream(buffer)

class Context:
    aws_request_id = "bench"
    function_name = "slatelake-maintenance"
    memory_limit_in_mb = 1769
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:slatelake"
    def __init__(self):
        self.t0 = time.monotonic()
    def get_remaining_time_in_millis(self):
        return int((900 - (time.monotonic() - self.t0)) * 1000)

t0 = time.monotonic()
out = app.handler({event!r}, Context())
wall = time.monotonic() - t0
lines = [json.loads(x) for x in buffer.getvalue().splitlines() if x.strip()]
print("RESULT " + json.dumps({{
    "ok": out["ok"],
    "report": out.get("result"),
    "error": out.get("error"),
    "imported_s": imported_s,
    "since_start_to_first_step_s": first_step[0] if first_step else None,
    "last_lines": [x["message"] for x in lines[-5:]],
    "invocation_wall_s": wall,
    # VmHWM: RUSAGE_SELF would include the benchmark driver's peak, carried over fork and exec
    "peak_rss_mb": next(int(x.split()[1]) for x in open("/proc/self/status")
                        if x.startswith("VmHWM:")) / 1024,
    "progress_lines": len(lines),
    "call_seconds": calls,
}}))
"""


def lambda_pass(lake: str, options: dict[str, str] | None = None) -> dict[str, Any]:
    event = {
        "trigger": "scheduled",
        "lake": lake,
        "options": {
            **(OPTIONS if options is None else options),
            "MAINTENANCE_TABLE_BATCHES": "true",
        },
    }
    code = _CHILD.format(function_dir=str(FUNCTION_DIR), event=event)
    time.sleep(SETTLE_S)  # a 1-second retention then covers all the churn
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        # the stack's lake and the Powertools settings, as template.yaml sets them
        env={**os.environ, **powertools_env(), "SLATELAKE_LAKE": lake},
    )
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit(f"lambda child failed:\n{proc.stderr[-3000:]}")
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
    out = json.loads(line.removeprefix("RESULT "))
    if not out["ok"] or out["since_start_to_first_step_s"] is None:
        raise SystemExit(f"the handler refused: {out['error']} (log: {out['last_lines']})")
    out["cold_start_to_first_step_s"] = out.pop("since_start_to_first_step_s")
    out["process_wall_s"] = wall
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m tests.bench.lambda_pass",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--quick", action="store_true", help="8 tables, 4 commit rounds")
    ap.add_argument("--tables", type=int, help="tables (default 40; --quick 8)")
    ap.add_argument("--commits", type=int, help="INSERT rounds per table (default 6; --quick 4)")
    ap.add_argument("--out", help="JSON path (default bench-results/lambda[-quick].json)")
    ap.add_argument("--files", type=int, help="a lake of this many data files instead")
    ap.add_argument("--s3", action="store_true", help="with --files: the lake on moto S3")
    ap.add_argument("--dir", help="with --files: cache for the stock lake (default: a temp dir)")
    args = ap.parse_args(argv)
    if args.files:
        from tests.bench.lambda_files import main_files

        return main_files(args.files, args.s3, args.dir, args.out)
    tables = args.tables or (8 if args.quick else 40)
    commits = args.commits or (4 if args.quick else 6)
    out_path = Path(args.out or f"bench-results/lambda{'-quick' if args.quick else ''}.json")
    shape = (tables, commits, "full")

    from slatelake.ducklake import extensions

    con = extensions.connect()
    version = con.execute(
        "SELECT extension_version FROM duckdb_extensions() WHERE extension_name = 'ducklake'"
    ).fetchone()[0]
    con.close()
    result: dict[str, Any] = {**run_header(version), "tables": tables, "commits": commits}
    with tempfile.TemporaryDirectory(prefix="slatelake-lambda-bench-") as tmp:
        root = Path(tmp)
        build_side(root, "slate", "slate", shape, keep=False)
        build_side(root, "stock", "stock", shape, keep=False)
        lake = (root / "slate" / "lake").as_uri()
        log("lambda: cold process, scheduled pass")
        slate = lambda_pass(lake)
        stock = pass_once(root, "stock", "stock")
    report = slate["report"]
    result["lambda"] = {k: v for k, v in slate.items() if k not in ("report",)} | {
        "pass_s": report["seconds"],
        "rss_hwm_mb_in_report": report["rss_hwm_mb"],
        "work_pending": report["work_pending"],
        "steps": {
            s["step"]: {"status": s["status"], "seconds": s["seconds"]} for s in report["steps"]
        },
    }
    result["stock"] = {"pass_s": stock["pass_s"], "peak_rss_mb": stock["peak_rss_mb"]}
    result["ratios"] = {
        "pass_s": ratio(report["seconds"], stock["pass_s"]),
        "peak_rss_mb": ratio(slate["peak_rss_mb"], stock["peak_rss_mb"]),
    }
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(result, indent=2, default=str))
    lam = result["lambda"]
    print(
        f"lambda ({tables} tables): cold start to first step "
        f"{lam['cold_start_to_first_step_s']:.2f}s "
        f"(handler import {lam['imported_s']:.2f}s); pass {lam['pass_s']:.2f}s vs stock "
        f"{stock['pass_s']:.2f}s ({result['ratios']['pass_s']:.2f}x); peak RSS "
        f"{lam['peak_rss_mb']:.0f} MB vs stock {stock['peak_rss_mb']:.0f} MB; "
        f"work_pending={lam['work_pending']}"
    )
    for step, entry in lam["steps"].items():
        print(f"  {step:<22} {entry['status']:<8} {entry['seconds']:.2f}s")
    print(f"wrote {out_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
