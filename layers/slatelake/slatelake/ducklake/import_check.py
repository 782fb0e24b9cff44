"""What a stock DuckLake catalog must hold before ``import`` writes anything.

A catalog file is outside input: its rows decide which files the new lake
reads and, later, which files its cleanup and orphan steps delete. So every
invariant of the DuckLake spec that matters for that is checked here, on the
attached source, before the lake root or any data path is touched:

- every data file, delete file and file scheduled for deletion, resolved as
  DuckLake resolves it (a relative file against its table's path, a
  relative table path against its schema's, a relative schema path and a
  scheduled file against the data path; absolute ones as given; ``..``
  resolved as the file system does, symlinks included), lies inside the
  import's data path; an object store key has no empty, ``.`` or ``..``
  segment (keys are literal, clients disagree on such spellings), and no
  path holds a glob character or a control character;
- sizes and counts are non-negative, snapshot ranges well formed and no
  later than the catalog's newest snapshot;
- every referenced id exists (table, schema, data file, partition);
- names are legal: not empty, not ``.`` or ``..``, no control character,
  live names unique in their scope, a live ``main`` schema (DuckLake's
  loader needs it; without it every open fails);
- every data and delete file exists with the size its row records, found
  by one listing of the data path (pages of 1000 keys on S3), not a request
  per file.

A refusal is MisconfigurationError (the input is wrong; the lake is not
damaged, so CorruptionError, which turns maintenance off, does not fit) or,
for files that are not there, NotFoundError. It names the catalog, the
table, the row and the fix; the first few problems are listed and the rest
counted. Knows nothing of the lake being made.
"""

from __future__ import annotations

import unicodedata
from collections import defaultdict
from collections.abc import Iterable

from slatelake.ducklake.catalog_file import CatalogFile, SourceSchema
from slatelake.ducklake.guard import data_location
from slatelake.ducklake.import_paths import (
    DATA_FILE,
    DELETE_FILE,
    SHOWN,
    CheckedCatalog,
    ImportFile,
    Problems,
    i64,
    resolve_files,
    rows,
    src,
)
from slatelake.ducklake.sql import ident
from slatelake.store.location import LakeLocation, show_input
from slatelake.store.objects import ObjectClient

_NAMES = (  # (table, id column, name column)
    ("ducklake_schema", "schema_id", "schema_name"),
    ("ducklake_table", "table_id", "table_name"),
    ("ducklake_view", "view_id", "view_name"),
    ("ducklake_column", "column_id", "column_name"),
)
# (table, its row id, referencing column, referenced table, referenced column)
_REFERENCES = (
    (DATA_FILE, "data_file_id", "table_id", "ducklake_table", "table_id"),
    (DATA_FILE, "data_file_id", "partition_id", "ducklake_partition_info", "partition_id"),
    (DELETE_FILE, "delete_file_id", "table_id", "ducklake_table", "table_id"),
    (DELETE_FILE, "delete_file_id", "data_file_id", DATA_FILE, "data_file_id"),
    ("ducklake_table", "table_id", "schema_id", "ducklake_schema", "schema_id"),
    ("ducklake_view", "view_id", "schema_id", "ducklake_schema", "schema_id"),
    ("ducklake_column", "column_id", "table_id", "ducklake_table", "table_id"),
    ("ducklake_file_column_stats", "data_file_id", "data_file_id", DATA_FILE, "data_file_id"),
    ("ducklake_file_partition_value", "data_file_id", "data_file_id", DATA_FILE, "data_file_id"),
    ("ducklake_partition_info", "partition_id", "table_id", "ducklake_table", "table_id"),
    ("ducklake_table_stats", "table_id", "table_id", "ducklake_table", "table_id"),
)
_NON_NEGATIVE = (  # (table, row id, columns that count or measure)
    (DATA_FILE, "data_file_id", ("record_count", "file_size_bytes", "footer_size", "row_id_start")),
    (DELETE_FILE, "delete_file_id", ("delete_count", "file_size_bytes", "footer_size")),
    ("ducklake_table_stats", "table_id", ("record_count", "next_row_id", "file_size_bytes")),
    (
        "ducklake_file_column_stats",
        "data_file_id",
        ("column_size_bytes", "value_count", "null_count"),
    ),
)
_RANGED = (  # versioned rows whose snapshot range is checked
    ("ducklake_schema", "schema_id"),
    ("ducklake_table", "table_id"),
    ("ducklake_view", "view_id"),
    (DATA_FILE, "data_file_id"),
    (DELETE_FILE, "delete_file_id"),
)


def check_catalog(
    catalog: CatalogFile, schema: SourceSchema, data_path: str, *, files_exist: bool = True
) -> CheckedCatalog:
    """Every check above, or the refusal; nothing is written either way."""
    problems = Problems(str(catalog.path))
    location = data_location(data_path)
    head = _head(catalog)
    _check_names(catalog, schema, problems)
    _check_live_names(catalog, schema, problems)
    _check_references(catalog, schema, problems)
    _check_counts(catalog, schema, head, problems)
    found = resolve_files(catalog, schema, data_path, location, problems)
    problems.raise_if_any()
    if files_exist:
        _check_present(found.files, location, problems)
        problems.raise_if_any()
    return found


def _head(catalog: CatalogFile) -> int:
    row = rows(
        catalog,
        f"SELECT max({i64('snapshot_id')}) FROM {src(catalog, 'ducklake_snapshot')}",
    )
    return -1 if not row or row[0][0] is None else int(row[0][0])


# -- names -------------------------------------------------------------------------------
def name_problem(name: object) -> str | None:
    """Why ``name`` cannot name a schema, table, view or column (None: it can)."""
    if not isinstance(name, str) or not name:
        return "the name is empty"
    if name in (".", ".."):
        return f"the name is {name!r}, which names a directory, not an object"
    for i, ch in enumerate(name):
        if unicodedata.category(ch) in ("Cc", "Cs"):
            return f"the name has a control character U+{ord(ch):04X} at position {i}"
    return None


def _check_names(catalog: CatalogFile, schema: SourceSchema, problems: Problems) -> None:
    for table, id_column, name_column in _NAMES:
        if table not in schema.tables:
            continue
        for row_id, name in rows(
            catalog,
            f"SELECT {i64(id_column)}, {ident(name_column)} FROM {src(catalog, table)}",
        ):
            why = name_problem(name)
            if why is not None:
                problems.add(
                    table,
                    f"{id_column}={row_id}",
                    f"{name_column} {show_input(name)}: {why}",
                    "rename it in the source catalog (ALTER ... RENAME with DuckLake) and import "
                    "again",
                )


def _check_live_names(catalog: CatalogFile, schema: SourceSchema, problems: Problems) -> None:
    """At the head: a live ``main`` schema, unique live schema names, unique
    live table and view names per schema, each in a live schema."""
    schemas = rows(
        catalog,
        f"SELECT {i64('schema_id')}, schema_name FROM {src(catalog, 'ducklake_schema')} "
        "WHERE end_snapshot IS NULL",
    )
    live_schemas = {sid for sid, _ in schemas}
    by_name: dict[str, list[int]] = defaultdict(list)
    for sid, name in schemas:
        by_name[name].append(sid)
    if "main" not in by_name:
        problems.add(
            "ducklake_schema",
            "(none)",
            "no live schema is named 'main', which DuckLake needs to open the catalog",
            "restore the 'main' schema's row in the source catalog",
        )
    for name, ids in sorted(by_name.items(), key=lambda item: str(item[0])):
        if len(ids) > 1:
            problems.add(
                "ducklake_schema",
                "schema_id=" + ",".join(map(str, sorted(ids))),
                f"live schemas share the name {show_input(name)}",
                "keep one live schema per name in the source catalog",
            )
    objects: list[tuple[str, str, int, int, str]] = []
    for table, id_column, name_column in _NAMES[1:3]:
        if table in schema.tables:
            objects += [
                (table, id_column, oid, sid, name)
                for oid, sid, name in rows(
                    catalog,
                    f"SELECT {i64(id_column)}, {i64('schema_id')}, {ident(name_column)} FROM "
                    f"{src(catalog, table)} WHERE end_snapshot IS NULL",
                )
            ]
    seen: dict[tuple[int, str], str] = {}
    for table, id_column, oid, sid, name in objects:
        row = f"{id_column}={oid}"
        if sid not in live_schemas:
            problems.add(
                table,
                row,
                f"live {show_input(name)} is in schema_id {sid}, which has no live schema row",
                "end the row or restore its schema in the source catalog",
            )
        if (sid, name) in seen:
            problems.add(
                table,
                row,
                f"{show_input(name)} is a second live object of that name in schema_id {sid} "
                f"(the other: {seen[(sid, name)]})",
                "keep one live object per name in the source catalog",
            )
        seen.setdefault((sid, name), f"{table} {row}")


# -- references and counts ----------------------------------------------------------------
def _check_references(catalog: CatalogFile, schema: SourceSchema, problems: Problems) -> None:
    for table, row_id, column, target, target_column in _REFERENCES:
        if table not in schema.tables:
            continue
        # an absent referenced table holds no ids: every reference dangles
        exists = (
            f"EXISTS (SELECT 1 FROM {src(catalog, target)} r "
            f"WHERE CAST(r.{ident(target_column)} AS BIGINT) = CAST(o.{ident(column)} AS BIGINT))"
            if target in schema.tables
            else "false"
        )
        for rid, ref in rows(
            catalog,
            f"SELECT CAST(o.{ident(row_id)} AS BIGINT), CAST(o.{ident(column)} AS BIGINT) "
            f"FROM {src(catalog, table)} o WHERE o.{ident(column)} IS NOT NULL AND NOT {exists} "
            f"LIMIT {SHOWN + 1}",
        ):
            problems.add(
                table,
                f"{row_id}={rid}",
                f"{column} {ref} names no row of {target} (a dangling id: DuckLake would "
                "silently drop what it holds)",
                f"restore the {target} row or delete this one in the source catalog",
            )


def _check_counts(
    catalog: CatalogFile, schema: SourceSchema, head: int, problems: Problems
) -> None:
    for table, row_id, columns in _NON_NEGATIVE:
        if table not in schema.tables:
            continue
        for column in columns:
            for rid, value in rows(
                catalog,
                f"SELECT {i64(row_id)}, {i64(column)} FROM {src(catalog, table)} "
                f"WHERE {i64(column)} < 0 LIMIT {SHOWN + 1}",
            ):
                problems.add(
                    table,
                    f"{row_id}={rid}",
                    f"{column} is {value}, below zero (reads would fail casting it)",
                    "correct the row in the source catalog",
                )
    for table, row_id in _RANGED:
        if table not in schema.tables:
            continue
        for rid, begin, end in rows(
            catalog,
            f"SELECT {i64(row_id)}, {i64('begin_snapshot')}, {i64('end_snapshot')} FROM "
            f"{src(catalog, table)} WHERE begin_snapshot IS NULL OR {i64('begin_snapshot')} < 0 "
            f"OR {i64('begin_snapshot')} > ? OR {i64('end_snapshot')} < {i64('begin_snapshot')} "
            f"OR {i64('end_snapshot')} > ? LIMIT {SHOWN + 1}",
            [head, head],
        ):
            problems.add(
                table,
                f"{row_id}={rid}",
                f"snapshot range [{begin}, {end}) is not within the catalog's snapshots 0-{head}",
                "correct the row in the source catalog",
            )


# -- the files themselves ------------------------------------------------------------------
def _check_present(files: Iterable[ImportFile], location: LakeLocation, problems: Problems) -> None:
    """Every file there with its recorded size: one listing of the data path."""
    files = list(files)
    if not files:
        return
    prefix = location.root + "/" if location.root else ""
    listed = {info.path: info.size for info in ObjectClient(location).list(prefix)}
    for f in files:
        size = listed.get(f.key)
        row = f"{'data_file_id' if f.table == DATA_FILE else 'delete_file_id'}={f.row_id}"
        if size is None:
            problems.missing = True
            problems.add(
                f.table,
                row,
                f"file {f.path} does not exist",
                "restore it, or give --data-path where the files are now",
            )
        elif size != f.size:
            problems.add(
                f.table,
                row,
                f"file {f.path} holds {size} bytes, but the row records file_size_bytes "
                f"{f.size} (reads would fail)",
                "restore the file the catalog wrote, or correct the row",
            )


__all__ = ["CheckedCatalog", "ImportFile", "check_catalog", "name_problem"]
