"""Oracle: one workload through slatelake and through stock DuckLake, compared
after every statement from a fresh process (a fresh materialization)."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from slatelake.ducklake import extensions
from slatelake.ducklake.session import connect
from tests.conftest import subprocess_env
from tests.ducklake.oracle import WORKLOAD, dump


def _fresh_dump(url: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "tests.ducklake.oracle", url],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _run_oracle(lake_url: str, data_path: str, stock_meta: Path, stock_data: str) -> None:
    stock = extensions.connect()
    stock.execute(f"ATTACH 'ducklake:{stock_meta}' AS lake (DATA_PATH '{stock_data}')")
    stock.execute("USE lake")
    session = connect(lake_url, data_path=data_path)
    try:
        for statement in WORKLOAD:
            stock.execute(statement)
            session.sql(statement)
            expected = json.loads(json.dumps(dump(stock)))
            assert _fresh_dump(lake_url) == expected, f"after: {statement}"
    finally:
        session.close()
        stock.close()


def test_oracle_workload_matches_stock_ducklake_on_local_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLATELAKE_VERIFY_CAPTURE", "1")
    _run_oracle(
        (tmp_path / "lake").as_uri(),
        f"{tmp_path}/data/",
        tmp_path / "stock.duckdb",
        f"{tmp_path}/stock-data/",
    )


def test_oracle_workload_matches_stock_ducklake_on_s3(
    tmp_path: Path, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLATELAKE_VERIFY_CAPTURE", "1")
    run = uuid.uuid4().hex[:8]
    _run_oracle(
        f"s3://{s3_bucket}/lake-{run}",
        f"s3://{s3_bucket}/data-{run}/",
        tmp_path / "stock.duckdb",
        f"s3://{s3_bucket}/stock-data-{run}/",
    )
