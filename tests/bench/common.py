"""What every benchmark records about the run, and the small helpers they share:
timing, medians, child processes measured with their own peak RSS, moto's S3
server on loopback."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def run_header(ducklake_extension: str) -> dict[str, Any]:
    import duckdb
    import slatedb

    return {
        "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
        },
        "versions": {
            "duckdb": duckdb.__version__,
            "slatedb": getattr(slatedb, "__version__", "0.17 (pinned)"),
            "ducklake_extension": ducklake_extension,
        },
    }


def write_result(result: dict[str, Any], out: str | Path) -> None:
    """The run's JSON, next to the printed report."""
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(f"wrote {path}")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def ratio(a: float, b: float) -> float:
    return a / b if b else float("inf")


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def vm_hwm_mb() -> float:
    """This process's peak resident set (VmHWM), MB; NaN where /proc has none."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


@dataclass(frozen=True)
class Measured:
    """A finished child process: its output, wall time and its own peak RSS."""

    returncode: int
    stdout: str
    stderr: str
    wall_s: float
    peak_rss_mb: float  # the child's VmHWM, as tests/bench/peak.py printed it (NaN if not)

    def last_json(self) -> Any:
        """The last stdout line that parses as JSON (what a ``--json`` verb printed)."""
        import json

        for line in reversed(self.stdout.strip().splitlines()):
            try:
                return json.loads(line)
            except ValueError:
                continue
        return None


def run_module(module: str, args: Sequence[str], env: dict[str, str] | None = None) -> Measured:
    """``python -m MODULE ARGS`` from the repository root, under tests/bench/peak.py
    so the child reports its own VmHWM (its stderr's marker line is taken out)."""
    from tests.bench.peak import MARK

    cmd = [sys.executable, "-m", "tests.bench.peak", module, *args]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - t0
    peak, kept = float("nan"), []
    for line in proc.stderr.splitlines():
        if line.startswith(MARK + " "):
            peak = float(line.split()[1])
        else:
            kept.append(line)
    return Measured(proc.returncode, proc.stdout, "\n".join(kept), wall, peak)


class Moto:
    """moto's S3 server on loopback (as tests/conftest.py starts it), with the
    S3 environment every child inherits pointing at it; ``stop`` restores it."""

    def __init__(self) -> None:
        from tests.conftest import S3_ENV, start_moto_server

        self.proc, self.endpoint = start_moto_server()
        self._saved = {k: os.environ.get(k) for k in (*S3_ENV, "AWS_ENDPOINT_URL")}
        os.environ.update(S3_ENV, AWS_ENDPOINT_URL=self.endpoint)

    def bucket(self, prefix: str = "bench") -> str:
        import boto3

        name = f"{prefix}-{uuid.uuid4().hex[:10]}"
        boto3.client("s3", endpoint_url=self.endpoint).create_bucket(Bucket=name)
        return name

    def peak_rss_mb(self) -> float:
        try:
            with open(f"/proc/{self.proc.pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1]) / 1024
        except OSError:
            pass
        return float("nan")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        for key, value in self._saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
