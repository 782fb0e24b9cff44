"""Where a stock DuckLake catalog's files are, resolved as DuckLake resolves them.

A relative data or delete file path is appended to its table's path, a
relative table path to its schema's, a relative schema path and a file
scheduled for deletion to the data path; an absolute one is taken as given
(a ``file://`` spelling as its path). Then a local path is resolved as the
file system resolves it when DuckDB opens it (``..`` and symlinks,
``os.path.realpath``) and must lie inside the data path; an object store
key must start with the data path's prefix and have no empty, ``.`` or
``..`` segment (keys are literal, and clients disagree on such spellings).
No path may hold a glob character (DuckDB would read a pattern) or a
control character. Schema and table paths are checked too: the lake writes
new files there. Problems are collected (``Problems``), not raised one by
one, so a refusal names them all; ``import_check`` raises. No I/O but the
attached catalog's rows.
"""

from __future__ import annotations

import os
import unicodedata
from collections import defaultdict
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

import duckdb

from slatelake.ducklake.catalog_file import CatalogFile, SourceSchema
from slatelake.ducklake.sql import ident, run
from slatelake.errors import MisconfigurationError, NotFoundError
from slatelake.store.location import LakeLocation, show_input

SHOWN = 5  # problems named in a refusal; the rest are counted
_GLOB = frozenset("*?[]{}\\")
DATA_FILE = "ducklake_data_file"
DELETE_FILE = "ducklake_delete_file"
SCHEDULED = "ducklake_files_scheduled_for_deletion"


@dataclass(frozen=True)
class ImportFile:
    """One data or delete file of the catalog, resolved."""

    table: str  # DATA_FILE or DELETE_FILE
    row_id: int
    path: str  # as DuckLake names it: /abs/path, or s3://bucket/key
    key: str  # the object's path in its store (ObjectClient), no leading slash
    size: int  # file_size_bytes as recorded (checked against the listing)


@dataclass(frozen=True)
class CheckedCatalog:
    """A catalog that passed: its data path and every file it names."""

    data_path: str
    location: LakeLocation
    files: tuple[ImportFile, ...]
    scheduled: tuple[str, ...]  # resolved paths of files scheduled for deletion
    # absolute schema and table paths: (table, row id, path as stored) -> store key
    directories: dict[tuple[str, int, str], str] = field(default_factory=dict)

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)


@dataclass
class Problems:
    """Refusal text collected across checks: the first few in full, a count."""

    source: str
    found: list[str] = field(default_factory=list)
    missing: bool = False

    def add(self, table: str, row: str, what: str, fix: str) -> None:
        self.found.append(f"{table} row {row}: {what}; {fix}")

    def raise_if_any(self) -> None:
        if not self.found:
            return
        shown = "\n  ".join(self.found[:SHOWN])
        more = len(self.found) - SHOWN
        tail = f"\n  ... and {more} more" if more > 0 else ""
        cls = NotFoundError if self.missing else MisconfigurationError
        raise cls(
            f"{self.source}: refusing to import a catalog that breaks DuckLake's rules "
            f"({len(self.found)} problem(s)); nothing was written:\n  {shown}{tail}"
        )


# -- rows --------------------------------------------------------------------------------
def rows(catalog: CatalogFile, sql: str, params: list[object] | None = None) -> list[tuple]:
    try:
        return run(catalog.con, sql, params or []).fetchall()
    except duckdb.Error as exc:
        raise MisconfigurationError(
            f"{catalog.path}: the catalog cannot be checked ({exc}); it is not a DuckLake 1.0 "
            "catalog slatelake can import"
        ) from None


def src(catalog: CatalogFile, table: str) -> str:
    return f"{ident(catalog.alias)}.{ident(table)}"


def i64(column: str) -> str:
    return f"CAST({ident(column)} AS BIGINT)"


# -- paths -------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Place:
    """Where resolved paths must land: the data path's store and root."""

    location: LakeLocation

    def inside(self, path: str, directory: bool = False) -> tuple[str, str] | str:
        """(path as DuckLake names it, store key) when ``path`` lies inside
        the data path (a ``directory`` may be the data path itself); else why not."""
        loc = self.location
        bad = sorted({ch for ch in path if ch in _GLOB})
        if bad:
            return f"holds {', '.join(map(repr, bad))}, which DuckDB reads as a glob"
        if any(unicodedata.category(ch) in ("Cc", "Cs") for ch in path):
            return "holds a control character"
        if loc.scheme == "file":
            local = _local(path)
            if local is None:
                return "is not a local absolute path, but the data path is local"
            real = os.path.realpath(local)  # `..` and symlinks, as opening the file does
            if not (real + "/").startswith("/" + loc.root + "/") or (
                real == "/" + loc.root and not directory
            ):
                return f"resolves to {real}, outside the data path"
            return real, real.lstrip("/")
        prefix = f"{loc.scheme}://{loc.bucket}/"
        if not path.startswith(prefix):
            return "is not in the data path's bucket"
        key = path[len(prefix) :].removesuffix("/") if directory else path[len(prefix) :]
        if any(part in ("", ".", "..") for part in key.split("/")):
            return "has an empty, '.' or '..' segment (object keys are literal)"
        if not (key + "/").startswith(loc.root + "/" if loc.root else "") or (
            key == loc.root and not directory
        ):
            return "is outside the data path"
        return path, key


def _local(path: str) -> str | None:
    if path.startswith("file:"):
        parts = urlsplit(path)
        if parts.netloc not in ("", "localhost"):
            return None
        path = unquote(parts.path)
    return path if path.startswith("/") else None


def _joined(base: str, path: object, relative: object) -> str:
    """``path`` as DuckLake makes it absolute: appended to ``base`` when relative."""
    text = "" if path is None else str(path)
    return base + text if relative is None or bool(relative) else text


def resolve_files(
    catalog: CatalogFile,
    schema: SourceSchema,
    data_path: str,
    location: LakeLocation,
    problems: Problems,
) -> CheckedCatalog:
    place = _Place(location)
    fix = (
        "move the file into the data path and correct the row in the source catalog, or give "
        "--data-path where every file lies"
    )
    directories: dict[tuple[str, int, str], str] = {}

    def directory(table: str, row: str, rid: int, path: object, full: str, rel: object) -> None:
        """A schema or table path: where the lake writes new files, so inside too."""
        answer = place.inside(full, directory=True)
        if isinstance(answer, str):
            problems.add(
                table,
                f"{row}={rid}",
                f"path {show_input(path)} -> {full} {answer} (new files would be written there)",
                "correct the row in the source catalog, or give --data-path where it lies",
            )
        elif not (rel is None or bool(rel)):
            directories[(table, rid, str(path))] = answer[1]

    schema_paths: dict[int, set[str]] = defaultdict(set)
    for sid, path, rel in rows(
        catalog,
        f"SELECT {i64('schema_id')}, path, path_is_relative FROM {src(catalog, 'ducklake_schema')}",
    ):
        full = _joined(data_path, path, rel)
        directory("ducklake_schema", "schema_id", sid, path, full, rel)
        schema_paths[sid].add(full)
    table_paths: dict[int, set[str]] = defaultdict(set)
    for tid, sid, path, rel in rows(
        catalog,
        f"SELECT {i64('table_id')}, {i64('schema_id')}, path, path_is_relative FROM "
        f"{src(catalog, 'ducklake_table')}",
    ):
        for base in schema_paths.get(sid, ()):  # a missing schema: a reference problem
            full = _joined(base, path, rel)
            directory("ducklake_table", "table_id", tid, path, full, rel)
            table_paths[tid].add(full)
    files: list[ImportFile] = []
    for table, row_id in ((DATA_FILE, "data_file_id"), (DELETE_FILE, "delete_file_id")):
        if table not in schema.tables:
            continue
        for rid, tid, path, rel, size in rows(
            catalog,
            f"SELECT {i64(row_id)}, {i64('table_id')}, path, path_is_relative, "
            f"{i64('file_size_bytes')} FROM {src(catalog, table)}",
        ):
            if path is None or path == "":
                problems.add(table, f"{row_id}={rid}", "path is empty", fix)
                continue
            resolved = {_joined(base, path, rel) for base in table_paths.get(tid, ())}
            if not resolved and not (rel is None or bool(rel)):
                resolved = {str(path)}
            answers = [(full, place.inside(full)) for full in sorted(resolved)]
            wrong = [(full, a) for full, a in answers if isinstance(a, str)]
            if wrong:
                full, why = wrong[0]
                problems.add(
                    table, f"{row_id}={rid}", f"path {show_input(str(path))} -> {full} {why}", fix
                )
                continue
            if len({a for _, a in answers}) > 1:  # table versions disagree on where it is
                problems.add(
                    table,
                    f"{row_id}={rid}",
                    f"path {show_input(str(path))} resolves to several files ({len(answers)} "
                    "table or schema paths)",
                    "give the table one path in the source catalog",
                )
                continue
            if answers:
                (_, (named, key)) = answers[0]
                files.append(ImportFile(table, rid, named, key, int(size or 0)))
    scheduled: list[str] = []
    if SCHEDULED in schema.tables:
        for fid, path, rel in rows(
            catalog,
            f"SELECT {i64('data_file_id')}, path, path_is_relative FROM {src(catalog, SCHEDULED)}",
        ):
            full = _joined(data_path, path, rel)
            answer = place.inside(full)
            if isinstance(answer, str):
                problems.add(
                    SCHEDULED,
                    f"data_file_id={fid}",
                    f"path {show_input(str(path))} -> {full} {answer} (the first cleanup would "
                    "delete it)",
                    "delete the row in the source catalog",
                )
            else:
                scheduled.append(answer[0])
    return CheckedCatalog(data_path, location, tuple(files), tuple(scheduled), directories)


__all__ = [
    "DATA_FILE",
    "DELETE_FILE",
    "SCHEDULED",
    "SHOWN",
    "CheckedCatalog",
    "ImportFile",
    "Problems",
    "i64",
    "src",
    "resolve_files",
    "rows",
]
