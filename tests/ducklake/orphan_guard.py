"""A guard around DuckLake's orphan step: no file the catalog references may go.

DuckLake's ``delete_orphaned_files`` deletes what it lists under the data path
and cannot match to the catalog. When it matches wrongly (a ``file://`` data
path on 1.5.5) it deletes live files, and ``count(*)`` still answers from the
metadata, so the loss shows only on a read. The guard therefore records, before
the step, every data and delete file the catalog references (resolved against
the stored data path, the schema and table paths), the files present under the
data path, and every row of every table; after the step it asserts that every
referenced file is still there and every table reads back the same rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from slatelake.ducklake.sql import ident

META = "__slatelake_meta"


@dataclass(frozen=True)
class LakeFiles:
    """What the catalog references and what the data path holds, at one moment."""

    data_path: str  # as stored in ducklake_metadata
    referenced: frozenset[str]  # every data and delete file row, as a full path or URL
    present: frozenset[str]  # every file under the data path, same spelling
    rows: dict[str, list[tuple[Any, ...]]]  # every live table's rows, sorted


def _join(base: str, path: str, relative: bool | None) -> str:
    return base + path if relative else path


def _canonical(path: str) -> str:
    """One spelling per file: a local path without ``file://``, an s3 URL as is."""
    if path.startswith("file://"):
        return unquote(urlparse(path).path)
    return path


def _referenced(session: Any) -> tuple[str, set[str]]:
    q = session.sql
    (data_path,) = q(
        f"SELECT value FROM {ident(META)}.ducklake_metadata "
        "WHERE key = 'data_path' AND scope IS NULL"
    ).fetchone()
    base = data_path if data_path.endswith("/") else data_path + "/"
    schemas = {
        sid: _join(base, path, rel)
        for sid, path, rel in q(
            f"SELECT schema_id, path, path_is_relative FROM {ident(META)}.ducklake_schema"
        ).fetchall()
    }
    tables = {
        tid: _join(schemas[sid], path, rel)
        for tid, sid, path, rel in q(
            f"SELECT table_id, schema_id, path, path_is_relative FROM {ident(META)}.ducklake_table"
        ).fetchall()
    }
    files = set()
    for table in ("ducklake_data_file", "ducklake_delete_file"):
        for tid, path, rel in q(
            f"SELECT table_id, path, path_is_relative FROM {ident(META)}.{ident(table)}"
        ).fetchall():
            files.add(_canonical(_join(tables[tid], path, rel)))
    return data_path, files


def _present(data_path: str) -> set[str]:
    """Every file under the data path: a directory walk, or an S3 listing."""
    if data_path.startswith("s3://"):
        import boto3

        url = urlparse(data_path)
        prefix = url.path.lstrip("/")
        pages = boto3.client("s3").get_paginator("list_objects_v2")
        return {
            f"s3://{url.netloc}/{obj['Key']}"
            for page in pages.paginate(Bucket=url.netloc, Prefix=prefix)
            for obj in page.get("Contents", [])
        }
    root = Path(_canonical(data_path))
    return {str(p) for p in root.rglob("*") if p.is_file()} if root.exists() else set()


def _rows(session: Any) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table: a read of a missing file fails here."""
    names = session.sql(
        "SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = ?",
        [session.alias],
    ).fetchall()
    out = {}
    for schema, table in sorted(names):
        rel = f"{ident(session.alias)}.{ident(schema)}.{ident(table)}"
        out[f"{schema}.{table}"] = sorted(session.sql(f"SELECT * FROM {rel}").fetchall(), key=repr)
    return out


def lake_files(session: Any) -> LakeFiles:
    data_path, referenced = _referenced(session)
    return LakeFiles(
        data_path, frozenset(referenced), frozenset(_present(data_path)), _rows(session)
    )


def assert_live_files_kept(before: LakeFiles, after: LakeFiles) -> None:
    """Every file referenced before or after is present after; every row reads back."""
    assert before.referenced, "the guard needs a lake with data files to mean anything"
    missing = sorted((before.referenced | after.referenced) - after.present)
    assert not missing, f"the orphan step deleted {len(missing)} live files: {missing[:3]}"
    assert after.rows == before.rows


@contextmanager
def orphan_step_guard(session: Any) -> Iterator[LakeFiles]:
    """Wrap an orphan step: yields the files before it, checks after it."""
    before = lake_files(session)
    missing = sorted(before.referenced - before.present)
    assert not missing, f"live files missing before the orphan step: {missing[:3]}"
    yield before
    assert_live_files_kept(before, lake_files(session))
