"""Oracle: one workload through slatelake and through stock DuckLake, compared
from a fresh read-only session (a fresh materialization from the store and the
log), every snapshot's state included, and at the end once more from a fresh
process. The default tier compares at checkpoints (the dump reads every
snapshot, so the last one covers the states in between); the long tier after
every statement."""

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
    """The dump from a new read-only session in this process: nothing of the
    writing session's DuckDB or views is shared (slatelake keeps no
    process-wide catalog state)."""
    with connect(url, read_only=True) as session:
        return json.loads(json.dumps(dump(session.con)))


def _child_dump(url: str) -> dict:
    """The dump from a child process: no state of this process at all."""
    proc = subprocess.run(
        [sys.executable, "-m", "tests.ducklake.oracle", url],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


# Opening a session and dumping every snapshot take ~2 s each: compare after
# these statements in the default tier (the middle of the workload and its end).
CHECKPOINTS = frozenset({4, 9, 13, len(WORKLOAD) - 1})


def _run_oracle(
    lake_url: str, data_path: str, stock_meta: Path, stock_data: str, every: bool = False
) -> None:
    stock = extensions.connect()
    stock.execute(f"ATTACH 'ducklake:{stock_meta}' AS lake (DATA_PATH '{stock_data}')")
    stock.execute("USE lake")
    session = connect(lake_url, data_path=data_path)
    try:
        for n, statement in enumerate(WORKLOAD):
            stock.execute(statement)
            session.sql(statement)
            if every or n in CHECKPOINTS:
                expected = json.loads(json.dumps(dump(stock)))
                assert _fresh_dump(lake_url) == expected, f"after: {statement}"
        assert _child_dump(lake_url) == expected, "from a fresh process, after the workload"
    finally:
        session.close()
        stock.close()


def _lake(store: str, tmp_path: Path, request: pytest.FixtureRequest) -> tuple[str, str, str]:
    """(lake URL, its data path, stock's data path) on ``store``."""
    if store == "file":
        return (tmp_path / "lake").as_uri(), f"{tmp_path}/data/", f"{tmp_path}/stock-data/"
    bucket, run = request.getfixturevalue("s3_bucket"), uuid.uuid4().hex[:8]
    return (
        f"s3://{bucket}/lake-{run}",
        f"s3://{bucket}/data-{run}/",
        f"s3://{bucket}/stock-data-{run}/",
    )


@pytest.mark.parametrize("store", ["file", "s3"])
def test_oracle_workload_matches_stock_ducklake(
    store: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLATELAKE_VERIFY_CAPTURE", "1")
    url, data, stock_data = _lake(store, tmp_path, request)
    _run_oracle(url, data, tmp_path / "stock.duckdb", stock_data)


@pytest.mark.long
@pytest.mark.parametrize("store", ["file", "s3"])
def test_oracle_workload_matches_stock_ducklake_after_every_statement(
    store: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLATELAKE_VERIFY_CAPTURE", "1")
    url, data, stock_data = _lake(store, tmp_path, request)
    _run_oracle(url, data, tmp_path / "stock.duckdb", stock_data, every=True)
