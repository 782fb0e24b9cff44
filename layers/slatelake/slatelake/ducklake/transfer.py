"""Leaving and arriving: a lake to a stock DuckLake catalog file, and back.

``export_catalog`` writes the lake at its head as a stock DuckLake catalog in
a new DuckDB file: every ``ducklake_*`` table of a read-only session's
metadata database (live and ended rows, inlined-data tables included) with
DuckLake's own DDL (primary keys, NOT NULLs), so plain DuckDB with the
ducklake extension attaches ``ducklake:FILE``, reads every table at every
retained snapshot, and can go on writing to it. The file is written under a
temporary name in the target's directory, checkpointed, and linked to its
name only when whole (an existing file is never replaced), so a failure
leaves nothing half written. Data files stay where they are: the catalog's
data path is written as DuckLake finds files with it, a plain absolute path
for local data (a ``file://`` spelling is rewritten; DuckLake 1.5.5 compares
those wrongly) and an ``s3://`` URL as stored (the reader brings httpfs and
credentials). slatelake's own records (equality indexes) are not DuckLake's
and are not exported.

``import_catalog`` lays down a new lake from a stock DuckLake 1.0 catalog in
a DuckDB file or, with the pinned ``duckdb-extension-sqlite-scanner`` wheel,
a SQLite file (told apart by their headers). Every table is read with the
registry's columns and types (SQLite keeps timestamps, UUIDs and booleans as
text and integers; they are cast back), a table slatelake does not know or a
catalog version it does not support is refused by name, and the rows go
straight into the store as folded state (``catalog/bootstrap.py``). A SQLite
catalog's inlined-data tables hold text, so their columns are typed from the
table's ``ducklake_column`` rows at that schema version, as DuckLake types
them in a DuckDB catalog. The data path is the catalog's own unless one is
given (data moved, e.g. uploaded to S3); either way it must be absolute,
must not overlap the lake root, and is stored in its normalized spelling
(``ducklake_data_path``), so DuckLake names files the way the checks and the
borrowed record do.

Before anything is written, the catalog is checked (``import_check``): every
file inside the data path, sizes non-negative, ids resolving, names legal,
files there. Then the files are either copied to a data path of the new
lake's own (``copy_data``, ``import_copy``), or left shared and recorded as
borrowed (``catalog/borrowed.py``) in the same write that lays the lake
down, so no cleanup or orphan step of the new lake deletes a file the
source catalog still reads until ``slatelake release-borrowed`` says so.
An export shares the lake's files the other way round; its report says so.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from slatelake.catalog import registry
from slatelake.catalog.bootstrap import Bootstrap, BootstrapReport, check_empty_root
from slatelake.catalog.borrowed import BORROWED_KEY, BorrowedFiles, encode_borrowed
from slatelake.catalog.registry import TIMESTAMPTZ
from slatelake.catalog.rows import Row
from slatelake.ducklake import extensions
from slatelake.ducklake.catalog_file import (
    CatalogFile,
    SourceSchema,
    inline_columns,
    local_file,
    open_catalog_file,
)
from slatelake.ducklake.guard import check_overlap, data_location, ducklake_data_path
from slatelake.ducklake.import_check import check_catalog
from slatelake.ducklake.import_copy import CopyPlan, copy_files, plan_copy, rewrite_rows
from slatelake.ducklake.import_paths import CheckedCatalog
from slatelake.ducklake.sql import ident, literal, run
from slatelake.ducklake.tables import create_sql, inline_value_sql, meta_tables, select_list
from slatelake.errors import MisconfigurationError, NotFoundError
from slatelake.store.location import LakeLocation

log = logging.getLogger("slatelake.transfer")
EXPORT_DB = "__slatelake_export"
FETCH_ROWS = 10_000
DATA_PATH_KEY = "data_path"
EXPORT_SHARES = (
    "the exported catalog shares this lake's data files (nothing was copied): a later "
    "cleanup or orphan pass in the lake may delete files the export still references; copy "
    "the files to keep the export readable"
)
IMPORT_BORROWS = (
    "the new lake borrows the source catalog's data files (nothing was copied): its cleanup "
    "and orphan steps leave the {count} borrowed files alone until `slatelake "
    "release-borrowed` releases them; files the source writes into the data path from now "
    "on are not borrowed, and the source's own cleanup may delete files the lake writes "
    "there: stop writing the source, or import again with --copy-data"
)


@dataclass(frozen=True)
class ExportReport:
    """What ``export_catalog`` wrote."""

    lake: str
    path: str
    snapshot_id: int
    tables: dict[str, int]
    rows: int
    bytes: int
    data_path: str | None
    seconds: float
    shares_data_files: bool = True  # the export points at the lake's own files
    warning: str = EXPORT_SHARES

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "seconds": round(self.seconds, 3)}


@dataclass(frozen=True)
class ImportReport:
    """What ``import_catalog`` laid down, and whether its files are its own
    (``copied_files``) or borrowed from the source (``borrowed_files``)."""

    source: str
    kind: str  # "duckdb" | "sqlite"
    lake: str
    snapshot_id: int
    tables: dict[str, int]
    rows: int
    keys: int
    data_path: str
    seconds: float
    source_data_path: str = ""
    files_checked: int = 0
    copied_files: int = 0
    copied_bytes: int = 0
    borrowed_files: int = 0
    warning: str | None = None
    # the lake's own tables as a user sees them: schema.table -> live rows
    # (``tables``/``rows`` above count DuckLake's metadata tables and rows)
    lake_tables: dict[str, int] = field(default_factory=dict)

    @property
    def lake_rows(self) -> int:
        return sum(self.lake_tables.values())

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "lake_rows": self.lake_rows, "seconds": round(self.seconds, 3)}


# -- export ----------------------------------------------------------------------------
def export_catalog(lake_url: str, path: str | os.PathLike[str]) -> ExportReport:
    """Write the lake at its head as a stock DuckLake catalog in a new DuckDB file."""
    from slatelake.ducklake.session import META_DB, Session

    started = time.perf_counter()
    LakeLocation.parse(lake_url)
    target = _export_target(path)
    temp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:12]}.tmp")
    with Session(lake_url, read_only=True) as session:
        con = session.con
        try:
            con.execute(f"ATTACH {literal(str(temp))} AS {ident(EXPORT_DB)}")
            try:
                tables = _copy_tables(con, META_DB, session.state.inline_names())
                data_path = _exported_data_path(con)
                snapshot_id = _one(
                    con, f"SELECT max(snapshot_id) FROM {ident(EXPORT_DB)}.ducklake_snapshot"
                )
                con.execute(f"CHECKPOINT {ident(EXPORT_DB)}")
            finally:
                con.execute(f"DETACH DATABASE IF EXISTS {ident(EXPORT_DB)}")
            _publish(temp, target)
        except BaseException:
            _remove(temp)
            raise
    return ExportReport(
        lake=lake_url,
        path=str(target),
        snapshot_id=snapshot_id,
        tables=tables,
        rows=sum(tables.values()),
        bytes=target.stat().st_size,
        data_path=data_path,
        seconds=time.perf_counter() - started,
    )


def _export_target(path: str | os.PathLike[str]) -> Path:
    target = local_file(
        path,
        "export target",
        "export writes a local DuckDB file; give a file path (copy it to object storage "
        "afterwards)",
    )
    if target.exists() or target.is_symlink():
        raise MisconfigurationError(
            f"export target {target} already exists; export writes a new file: choose "
            "another name or delete it"
        )
    if not target.parent.is_dir():
        raise NotFoundError(
            f"export target {target}: directory {target.parent} does not exist; create it first"
        )
    return target


def _copy_tables(con: duckdb.DuckDBPyConnection, meta_db: str, known: set[str]) -> dict[str, int]:
    """Every ``ducklake_*`` table: the registry's with DuckLake's DDL (an absent
    one empty), inlined-data tables with their own column types. The tables
    are found by name (``meta_tables``: the metadata database is hidden from
    DuckDB's listings); ``known``: the inlined tables the session's base holds."""
    present = meta_tables(con, meta_db, known)
    counts: dict[str, int] = {}
    for spec in registry.TABLES:
        con.execute(create_sql(EXPORT_DB, spec))
        if spec.name in present:
            con.execute(
                f"INSERT INTO {ident(EXPORT_DB)}.{ident(spec.name)} BY NAME "
                f"SELECT * FROM {ident(meta_db)}.{ident(spec.name)}"
            )
    known = {spec.name for spec in registry.TABLES}
    for name in sorted(present - known):
        if name.startswith("ducklake_"):
            con.execute(
                f"CREATE TABLE {ident(EXPORT_DB)}.{ident(name)} AS "
                f"SELECT * FROM {ident(meta_db)}.{ident(name)}"
            )
    for name in sorted(known | {n for n in present if n.startswith("ducklake_")}):
        counts[name] = _one(con, f"SELECT count(*) FROM {ident(EXPORT_DB)}.{ident(name)}")
    return counts


def _exported_data_path(con: duckdb.DuckDBPyConnection) -> str | None:
    """The data path as stock DuckLake must find the files: a local one plain
    and absolute (a ``file://`` spelling rewritten), an object store URL as is."""
    row = run(
        con,
        f"SELECT value FROM {ident(EXPORT_DB)}.ducklake_metadata WHERE key = ? AND scope IS NULL",
        [DATA_PATH_KEY],
    ).fetchone()
    if row is None:
        return None
    stored = row[0]
    try:
        plain = ducklake_data_path(stored)
    except MisconfigurationError:
        log.warning("export: the catalog's data path %r is kept as stored", stored)
        return stored
    if plain != stored:
        run(
            con,
            f"UPDATE {ident(EXPORT_DB)}.ducklake_metadata SET value = ? "
            "WHERE key = ? AND scope IS NULL",
            [plain, DATA_PATH_KEY],
        )
    return plain


def _publish(temp: Path, target: Path) -> None:
    """Give the finished file its name, never over an existing one."""
    try:
        os.link(temp, target)
    except FileExistsError:
        raise MisconfigurationError(
            f"export target {target} appeared while exporting; nothing was replaced"
        ) from None
    except OSError:  # a file system without hard links: check, then rename
        if target.exists():
            raise MisconfigurationError(
                f"export target {target} appeared while exporting; nothing was replaced"
            ) from None
        os.rename(temp, target)
        return
    temp.unlink()


def _remove(temp: Path) -> None:
    for leftover in (temp, temp.with_name(temp.name + ".wal")):
        try:
            leftover.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("export: could not remove %s (%s)", leftover, exc)


def _one(con: duckdb.DuckDBPyConnection, sql: str) -> Any:
    row = con.execute(sql).fetchone()
    return None if row is None else row[0]


# -- import ----------------------------------------------------------------------------
def import_catalog(
    source: str | os.PathLike[str],
    lake_url: str,
    data_path: str | None = None,
    copy_data: str | None = None,
) -> ImportReport:
    """Lay down a new lake at ``lake_url`` from a stock DuckLake catalog file.

    ``data_path``: where the catalog's files are now (default: its own data
    path). ``copy_data``: an empty data path to copy them to, which becomes
    the lake's; without it the files are recorded as borrowed."""
    started = time.perf_counter()
    LakeLocation.parse(lake_url)
    if data_path is not None:
        data_location(data_path)
    if copy_data is not None:
        data_location(copy_data)
    con = extensions.connect()
    try:
        catalog = open_catalog_file(con, source)
        schema = catalog.schema()
        # one spelling (symlinks, `..`, file:// resolved) for the catalog, the
        # check and the borrowed record, so DuckLake names files as they were recorded
        effective = ducklake_data_path(_import_data_path(catalog, schema, data_path))
        check_overlap(lake_url, effective)
        check_empty_root(LakeLocation.parse(lake_url))  # before any file is copied
        checked = check_catalog(catalog, schema, effective)
        plan = None if copy_data is None else plan_copy(checked, copy_data, lake_url)
        copied = None if plan is None else copy_files(plan, checked)
        borrowed = None
        if plan is None:
            borrowed = BorrowedFiles(
                tuple(f.path for f in checked.files), str(catalog.path), time.time_ns() // 1000
            )
        report = _bootstrap(
            con, catalog, schema, lake_url, effective, _Arrival(checked, plan, borrowed)
        )
    finally:
        con.close()
    return ImportReport(
        source=str(catalog.path),
        kind=catalog.kind,
        lake=lake_url,
        snapshot_id=report.head.snapshot_id,
        tables=report.rows,
        rows=sum(report.rows.values()),
        keys=report.keys,
        data_path=effective if plan is None else plan.target_path,
        seconds=time.perf_counter() - started,
        source_data_path=effective,
        files_checked=len(checked.files),
        copied_files=0 if copied is None else copied.files,
        copied_bytes=0 if copied is None else copied.bytes,
        borrowed_files=0 if borrowed is None else len(borrowed),
        warning=None if borrowed is None else IMPORT_BORROWS.format(count=len(borrowed)),
        lake_tables=_lake_tables(lake_url),
    )


def _lake_tables(lake_url: str) -> dict[str, int]:
    """Every live table of the new lake with its rows at the head, read as a
    user would (DuckLake answers counts from its metadata)."""
    from slatelake.ducklake.session import Session

    with Session(lake_url, read_only=True) as session:
        out: dict[str, int] = {}
        for schema, table in session.live_tables():
            row = session.con.execute(
                f"SELECT count(*) FROM {ident(session.alias)}.{ident(schema)}.{ident(table)}"
            ).fetchone()
            out[f"{schema}.{table}"] = int(row[0]) if row else 0
        return out


@dataclass(frozen=True)
class _Arrival:
    """How the files arrive: copied (``plan``) or borrowed (``borrowed``)."""

    checked: CheckedCatalog
    plan: CopyPlan | None
    borrowed: BorrowedFiles | None


class _ImportBootstrap(Bootstrap):
    """A bootstrap that also lays down the borrowed-files record, in the same
    writes as the rows, before ``finish`` makes the lake exist: no moment
    has the lake without it."""

    def add_borrowed(self, borrowed: BorrowedFiles) -> None:
        self._put(BORROWED_KEY, encode_borrowed(borrowed))


def _import_data_path(catalog: CatalogFile, schema: SourceSchema, given: str | None) -> str:
    """The data path the new lake keeps: the given one (normalized), else the
    catalog's, which must be absolute (a relative one names no place once the
    catalog has moved)."""
    if given is not None:
        return ducklake_data_path(given)
    stored = schema.data_path
    if stored is None:
        raise MisconfigurationError(
            f"{catalog.path}: the catalog records no data path; give the data files' "
            "location with --data-path"
        )
    try:
        data_location(stored)
    except MisconfigurationError:
        raise MisconfigurationError(
            f"{catalog.path}: the catalog's data path {stored!r} is not an absolute path "
            "or URL; give the data files' location with --data-path"
        ) from None
    return stored


def _bootstrap(
    con: duckdb.DuckDBPyConnection,
    catalog: CatalogFile,
    schema: SourceSchema,
    lake_url: str,
    data_path: str,
    arrival: _Arrival,
) -> BootstrapReport:
    plan = arrival.plan
    if plan is not None:
        data_path = plan.target_path
    boot = _ImportBootstrap(lake_url)
    with boot:
        try:
            if arrival.borrowed:  # none when copied, or when no file is named
                boot.add_borrowed(arrival.borrowed)
            for spec in registry.TABLES:
                if spec.name not in schema.tables:
                    continue  # absent from the file: slatelake holds it empty
                rows = _registry_rows(con, catalog, spec)
                if plan is not None:
                    rows = rewrite_rows(plan, arrival.checked, spec, rows)
                if spec.name == "ducklake_metadata":
                    rows = _with_data_path(spec, rows, data_path)
                boot.add_table(spec.name, rows)
            for name in sorted(schema.inline):
                columns = inline_columns(con, catalog, schema, name)
                boot.add_table(name, _inline_rows(con, catalog, name, columns), columns)
            return boot.finish()
        except BaseException:
            log.warning(
                "import into %s stopped part way; the root holds a partial import: delete it "
                "before importing again",
                lake_url,
            )
            raise


def _registry_rows(
    con: duckdb.DuckDBPyConnection, catalog: CatalogFile, spec: registry.TableSpec
) -> Iterator[Row]:
    """A registry table's rows in its column order, each value cast to the
    registry's type (exact for a DuckDB catalog; SQLite's text and integers
    become timestamps, UUIDs and booleans), TIMESTAMPTZ as epoch µs."""
    select = ", ".join(_cast(name, typ) for name, typ in spec.columns)
    return _fetch(con, catalog, spec.name, select)


def _inline_rows(
    con: duckdb.DuckDBPyConnection,
    catalog: CatalogFile,
    name: str,
    columns: list[tuple[str, str]],
) -> Iterator[Row]:
    """An inlined table's rows as the session fetches them: its column types
    (cast to them from a SQLite catalog's text), each value in its
    ``inline_form`` (tables.py), the form the session stores."""
    if catalog.kind == "sqlite":
        select = ", ".join(
            inline_value_sql(f"CAST({ident(column)} AS {typ})", typ) for column, typ in columns
        )
    else:
        select = select_list(columns, inline=True)
    return _fetch(con, catalog, name, select)


def _cast(column: str, typ: str) -> str:
    """``column`` cast to ``typ``, TIMESTAMPTZ as epoch µs. ``typ`` is a registry
    type constant or a type DuckDB's parser re-rendered (``type_sql``), never
    text from outside."""
    expr = f"CAST({ident(column)} AS {typ})"
    return f"epoch_us({expr})" if typ.upper() == TIMESTAMPTZ else expr


def _fetch(
    con: duckdb.DuckDBPyConnection, catalog: CatalogFile, table: str, select: str
) -> Iterator[Row]:
    cursor = con.cursor()
    try:
        cursor.execute(f"SELECT {select} FROM {ident(catalog.alias)}.{ident(table)}")
    except duckdb.Error as exc:
        cursor.close()
        raise MisconfigurationError(
            f"{catalog.path}: table {table} cannot be read as DuckLake 1.0 defines it ({exc})"
        ) from None
    try:
        while True:
            batch = cursor.fetchmany(FETCH_ROWS)
            if not batch:
                return
            yield from (tuple(r) for r in batch)
    finally:
        cursor.close()


def _with_data_path(spec: registry.TableSpec, rows: Iterator[Row], value: str) -> Iterator[Row]:
    """ducklake_metadata with the lake-scope data path set to ``value`` (the
    record added when the catalog had none)."""
    key, scope, at = spec.index("key"), spec.index("scope"), spec.index("value")
    found = False
    for row in rows:
        if row[key] == DATA_PATH_KEY and row[scope] is None:
            row, found = row[:at] + (value,) + row[at + 1 :], True
        yield row
    if not found:
        yield tuple({key: DATA_PATH_KEY, at: value}.get(i) for i in range(spec.width))


__all__ = [
    "ExportReport",
    "ImportReport",
    "export_catalog",
    "import_catalog",
]
