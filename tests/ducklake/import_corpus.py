"""The hostile-import corpus's shared parts: a stock DuckLake catalog made by
real DuckDB with the real ducklake extension, corrupted with plain SQL the
way the attack did it, and what the tests compare afterwards."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path

import boto3
import duckdb
import pytest

import slatelake
from slatelake.ducklake import extensions, transfer
from slatelake.ducklake.catalog_file import load_sqlite
from slatelake.errors import MisconfigurationError

WORKLOAD = [
    "CREATE SCHEMA s1",
    "CREATE TABLE s1.t (id INTEGER, v VARCHAR)",
    "INSERT INTO s1.t SELECT i, 'v' || i FROM range(0, 100) r(i)",
    "INSERT INTO s1.t SELECT i, 'v' || i FROM range(100, 200) r(i)",
    "DELETE FROM s1.t WHERE id % 10 = 0",  # delete files
    "CREATE TABLE m (x INTEGER)",
    "INSERT INTO m VALUES (1), (2), (3)",
]
COUNTS = {"s1.t": 180, "m": 3}
FULL_PASS = {
    "MAINTENANCE_CLEANUP_OLD_FILES_CLEANUP_ALL": "true",
    "MAINTENANCE_DELETE_ORPHANED_FILES_CLEANUP_ALL": "true",
    "MAINTENANCE_ORPHAN_AGE_FLOOR_OVERRIDE": "true",
}


def stock(root: Path, *corruption: str, sqlite: bool = False) -> tuple[Path, Path]:
    """A stock DuckLake catalog under ``root`` (Parquet only, no inlining),
    then ``corruption`` run on its file with plain DuckDB (no DuckLake)."""
    root.mkdir(parents=True, exist_ok=True)
    catalog, data = root / ("c.sqlite" if sqlite else "c.duckdb"), root / "data"
    spec = f"sqlite:{catalog}" if sqlite else str(catalog)
    con = extensions.connect()
    try:
        if sqlite:
            load_sqlite(con)
        con.execute(
            f"ATTACH 'ducklake:{spec}' AS lake (DATA_PATH '{data}/', DATA_INLINING_ROW_LIMIT 0)"
        )
        con.execute("USE lake")
        for statement in WORKLOAD:
            con.execute(statement)
        con.execute("USE memory")
        con.execute("DETACH lake")
    finally:
        con.close()
    if corruption:
        con = duckdb.connect()
        try:
            if sqlite:
                load_sqlite(con)
                con.execute(f"ATTACH '{catalog}' AS c (TYPE sqlite)")
            else:
                con.execute(f"ATTACH '{catalog}' AS c")
            con.execute("USE c")
            for statement in corruption:
                con.execute(statement)
        finally:
            con.close()
    return catalog, data


def files_of(root: Path) -> dict[str, str]:
    """Every file under ``root``, path -> sha256 (what must stay untouched)."""
    return {
        str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*") if p.is_file()
    }


def stock_counts(catalog: Path) -> dict[str, int]:
    """Row counts as stock DuckLake reads the source catalog."""
    con = extensions.connect()
    try:
        if catalog.suffix == ".sqlite":
            load_sqlite(con)
            con.execute(f"ATTACH 'ducklake:sqlite:{catalog}' AS lake (READ_ONLY)")
        else:
            con.execute(f"ATTACH 'ducklake:{catalog}' AS lake (READ_ONLY)")
        return {t: con.execute(f"SELECT count(*) FROM lake.{t}").fetchone()[0] for t in COUNTS}
    finally:
        con.close()


def lake_counts(url: str) -> dict[str, int]:
    with slatelake.connect(url, read_only=True) as s:
        return {t: s.sql(f"SELECT count(*) FROM {t}").fetchone()[0] for t in COUNTS}


def delete_everything_and_pass(url: str) -> None:
    """The attack's second half: every row deleted, snapshots expired, then a
    pass with cleanup and orphan deletion at any age."""
    with slatelake.connect(url) as s:
        for table in COUNTS:
            s.sql(f"DELETE FROM {table}")
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f+00")
    options = {**FULL_PASS, "MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN": now}
    slatelake.maintenance.run(url, options)


def refused(catalog: Path, url: str, error: type = MisconfigurationError, **kwargs: str) -> str:
    with pytest.raises(error) as err:
        transfer.import_catalog(catalog, url, **kwargs)
    return str(err.value)


def upload(data: Path, bucket: str, prefix: str) -> None:
    s3 = boto3.client("s3")
    for path in data.rglob("*"):
        if path.is_file():
            s3.upload_file(str(path), bucket, f"{prefix}/{path.relative_to(data)}")
