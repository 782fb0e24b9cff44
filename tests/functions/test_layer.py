"""The layer build and the SAM template (issue 7 acceptance 8).

Both builds download the pinned wheels from the package registry: the one
for this machine's architecture and Python is then imported and used with
nothing but the layer on sys.path; the deploy target (python3.12, arm64) is
held to Lambda's 250 MB unzipped limit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import slatelake
from tests.functions.conftest import FUNCTION_DIR, ROOT

LIMIT = 250 * 1024 * 1024


def _build(out: Path, *args: str) -> dict:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "layers" / "build_layer.py"), "--out", str(out), "--json"]
        + list(args),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_acceptance_8_deploy_target_layer_is_under_the_unzipped_limit(tmp_path: Path) -> None:
    report = _build(tmp_path / "layer", "--arch", "arm64", "--python", "3.12")
    assert report["arch"] == "arm64" and report["python"] == "3.12"
    assert 50 * 1024 * 1024 < report["total_bytes"] < LIMIT
    site = tmp_path / "layer" / "python"
    assert any(p.name.startswith("_duckdb.cpython-312-aarch64") for p in site.iterdir())
    assert (site / "slatelake" / "__init__.py").is_file()


def test_acceptance_8_host_layer_imports_and_runs_the_handler_alone(tmp_path: Path) -> None:
    import platform

    arch = "arm64" if platform.machine() in ("aarch64", "arm64") else "x86_64"
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    report = _build(tmp_path / "layer", "--arch", arch, "--python", python)
    assert report["total_bytes"] < LIMIT
    lake = (tmp_path / "lake").as_uri()
    with slatelake.connect(lake, data_path=f"{tmp_path / 'data'}/") as s:
        s.sql("CREATE TABLE t (id INTEGER)")
        s.sql("INSERT INTO t VALUES (1), (2)")
    script = f"""
import json, sys
sys.path[:0] = [{str(tmp_path / "layer" / "python")!r}, {str(FUNCTION_DIR)!r}]
import slatelake, duckdb
assert slatelake.__file__.startswith({str(tmp_path)!r}), slatelake.__file__
assert duckdb.__file__.startswith({str(tmp_path)!r}), duckdb.__file__
from slatelake.ducklake.extensions import connect
con = connect()
spill = con.execute("SELECT current_setting('temp_directory')").fetchone()[0]
assert spill == {str(tmp_path / "spill")!r}, spill
loaded = sorted(r[0] for r in con.execute(
    "SELECT extension_name FROM duckdb_extensions() WHERE loaded"
).fetchall())
import app
class Ctx:
    aws_request_id = "layer-check"
    function_name = "slatelake-maintenance"
    memory_limit_in_mb = 1769
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:slatelake"
    def get_remaining_time_in_millis(self):
        return 600000
event = {{"lake": {lake!r}, "options": {{"MAINTENANCE_FLUSH_INLINED_DATA": "true"}}}}
out = app.handler(event, Ctx())
print("RESULT " + json.dumps({{"loaded": loaded, "out": out}}))
"""
    # -S: no site-packages, so only the layer and the standard library are importable.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    proc = subprocess.run(
        [sys.executable, "-S", "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        env={
            **env,
            "HOME": str(tmp_path),
            "SLATELAKE_DUCKDB_TEMP_DIRECTORY": str(tmp_path / "spill"),
            "SLATELAKE_LAKE": lake,  # the stack's lake: the only one it maintains
        },
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
    result = json.loads(line.removeprefix("RESULT "))
    assert {"ducklake", "httpfs"} <= set(result["loaded"])
    assert result["out"]["ok"] is True, result["out"]
    flush = next(s for s in result["out"]["result"]["steps"] if s["step"] == "flush_inlined_data")
    assert flush["status"] == "ran" and flush["counts"]["rows_flushed"] == 2


@pytest.mark.timeout(600)
def test_acceptance_8_sam_validate_lint_passes() -> None:
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts" / "sam"), "validate", "--lint", "-t", "template.yaml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert "is a valid SAM Template" in proc.stdout + proc.stderr
