"""A stock DuckLake catalog in a file, opened read-only for ``import``.

A DuckDB file and a SQLite file are told apart by their headers; anything
else is refused naming the file. SQLite needs DuckDB's sqlite extension,
loaded from its pinned wheel (``duckdb-extension-sqlite-scanner``, the
extension ``ATTACH ... (TYPE sqlite)`` loads) like every other extension:
nothing downloads. ``CatalogFile.schema`` checks what the file holds before
a row is read: DuckLake's tables (a file without them is not a DuckLake
catalog), a catalog version slatelake supports, no table slatelake does not
know, and each registry table's columns.

A SQLite catalog keeps an inlined-data table's user columns as text (a
struct as DuckDB renders it, a timestamp as ISO text). ``inline_columns``
types them the way DuckLake types the same table in a DuckDB catalog: from
the table's ``ducklake_column`` rows alive at a snapshot of that schema
version (nested types rebuilt from their child columns). A type DuckLake 1.0
does not define is refused, naming the table and column.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from slatelake.catalog import registry
from slatelake.ducklake import extensions
from slatelake.ducklake.sql import ident, literal, run
from slatelake.ducklake.tables import table_columns, type_sql
from slatelake.errors import MisconfigurationError, NotFoundError, UnsupportedError
from slatelake.store.location import show_input

SOURCE_DB = "__slatelake_source"
SQLITE_EXTENSION = "sqlite_scanner"
# The DuckLake catalog versions whose tables the registry describes.
SUPPORTED_VERSIONS = ("1.0",)
_DUCKDB_MAGIC = b"DUCK"  # at offset 8 of a DuckDB database file
_SQLITE_MAGIC = b"SQLite format 3\x00"
# DuckLake 1.0's primitive column types, as DuckDB names them.
_PRIMITIVES = {
    "boolean": "BOOLEAN",
    "int8": "TINYINT",
    "int16": "SMALLINT",
    "int32": "INTEGER",
    "int64": "BIGINT",
    "uint8": "UTINYINT",
    "uint16": "USMALLINT",
    "uint32": "UINTEGER",
    "uint64": "UBIGINT",
    "int128": "HUGEINT",
    "uint128": "UHUGEINT",
    "float32": "FLOAT",
    "float64": "DOUBLE",
    "time": "TIME",
    "timetz": "TIMETZ",
    "date": "DATE",
    "timestamp": "TIMESTAMP",
    "timestamptz": "TIMESTAMPTZ",
    "timestamp_s": "TIMESTAMP_S",
    "timestamp_ms": "TIMESTAMP_MS",
    "timestamp_ns": "TIMESTAMP_NS",
    "interval": "INTERVAL",
    "varchar": "VARCHAR",
    "blob": "BLOB",
    "json": "JSON",
    "uuid": "UUID",
}
_DECIMAL = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")
_INLINE_SYSTEM = 3  # row_id, begin_snapshot, end_snapshot


@dataclass(frozen=True)
class CatalogFile:
    path: Path
    kind: str  # "duckdb" | "sqlite"
    con: duckdb.DuckDBPyConnection
    alias: str = SOURCE_DB

    def schema(self) -> SourceSchema:
        return read_schema(self)


@dataclass
class SourceSchema:
    tables: set[str]  # registry tables present
    inline: set[str]  # inlined-data and inlined-delete tables
    version: str
    data_path: str | None
    # filled on first use by inline_columns (SQLite only)
    _columns: list[tuple] | None = field(default=None, repr=False)
    _versions: dict[int, int] | None = field(default=None, repr=False)


def local_file(path: str | os.PathLike[str], what: str, fix: str) -> Path:
    """An absolute local path from outside text: not a URL, not empty, no NUL
    and nothing that is not UTF-8 text (neither reaches a file name)."""
    text = os.fspath(path)
    if not isinstance(text, str) or not text:
        raise MisconfigurationError(f"{what} {show_input(text)}: give a file path")
    if "://" in text:
        raise MisconfigurationError(f"{what} {show_input(text)}: {fix}")
    if "\x00" in text or any(0xD800 <= ord(ch) <= 0xDFFF for ch in text):
        raise MisconfigurationError(
            f"{what} {show_input(text)}: not UTF-8 text without NUL; respell the path"
        )
    return Path(text).expanduser().absolute()


def catalog_kind(path: Path) -> str:
    """'duckdb' or 'sqlite' from the file's header; refuses anything else."""
    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except FileNotFoundError:
        raise NotFoundError(
            f"catalog file {path} does not exist; give the path of a DuckLake catalog "
            "(a DuckDB or SQLite file)"
        ) from None
    except IsADirectoryError:
        raise MisconfigurationError(
            f"catalog {path} is a directory; give the DuckLake catalog file itself"
        ) from None
    except OSError as exc:
        raise MisconfigurationError(
            f"catalog file {path} cannot be read ({exc.strerror or exc}); check its permissions"
        ) from None
    if head[8:12] == _DUCKDB_MAGIC:
        return "duckdb"
    if head == _SQLITE_MAGIC:
        return "sqlite"
    raise MisconfigurationError(
        f"catalog file {path} is neither a DuckDB nor a SQLite database; give a DuckLake "
        "catalog file"
    )


def load_sqlite(con: duckdb.DuckDBPyConnection) -> None:
    """DuckDB's sqlite extension from its pinned wheel (never downloaded)."""
    con.execute(f"LOAD {literal(str(extensions.extension_path(SQLITE_EXTENSION)))}")


def open_catalog_file(
    con: duckdb.DuckDBPyConnection, source: str | os.PathLike[str]
) -> CatalogFile:
    """Attach a catalog file read-only on ``con`` under ``SOURCE_DB``. Not
    hidden, unlike a session's own databases: ``con`` is import's own (no
    user statement runs on it), and ``read_schema`` lists the file's tables,
    every one, to refuse one slatelake does not know."""
    path = local_file(
        source, "catalog", "import reads a local DuckDB or SQLite file; download it first"
    )
    kind = catalog_kind(path)
    try:
        if kind == "sqlite":
            load_sqlite(con)
            con.execute(
                f"ATTACH {literal(str(path))} AS {ident(SOURCE_DB)} (TYPE sqlite, READ_ONLY)"
            )
        else:
            con.execute(f"ATTACH {literal(str(path))} AS {ident(SOURCE_DB)} (READ_ONLY)")
    except duckdb.Error as exc:
        raise MisconfigurationError(f"catalog file {path} cannot be opened ({exc})") from None
    return CatalogFile(path=path, kind=kind, con=con)


def read_schema(catalog: CatalogFile) -> SourceSchema:
    con, path = catalog.con, catalog.path
    listed = run(
        con,
        "SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = ?",
        [catalog.alias],
    ).fetchall()
    names = {t for s, t in listed if s == "main"}
    if "ducklake_metadata" not in names or "ducklake_snapshot" not in names:
        raise MisconfigurationError(
            f"{path} is a {catalog.kind} database but not a DuckLake catalog (it has no "
            "ducklake_metadata and ducklake_snapshot tables)"
        )
    known = {spec.name for spec in registry.TABLES}
    unknown = sorted(
        f"{s}.{t}"
        for s, t in listed
        if s != "main" or (t not in known and registry.inline_table(t) is None)
    )
    if unknown:
        raise UnsupportedError(
            f"{path}: holds tables slatelake does not know: {', '.join(unknown)}; refusing to "
            "import a catalog it cannot keep whole"
        )
    version = _metadata(catalog, "version")
    if version is None:
        raise MisconfigurationError(
            f"{path}: ducklake_metadata has no 'version' record, so it is not a DuckLake "
            "catalog slatelake can read"
        )
    if version not in SUPPORTED_VERSIONS:
        older = _version_key(version) < _version_key(SUPPORTED_VERSIONS[0])
        raise UnsupportedError(
            f"{path}: DuckLake catalog version {version!r} is not one slatelake supports "
            f"({', '.join(SUPPORTED_VERSIONS)}); "
            + (
                "attach it once read-write with DuckLake 1.5.5, which migrates older "
                "catalogs, and import again"
                if older
                else "upgrade slatelake to import it"
            )
        )
    tables = names & known
    for name in sorted(tables):
        spec = registry.BY_NAME[name]
        present = [c for c, _ in table_columns(con, catalog.alias, name)]
        if sorted(present) != sorted(spec.column_names):
            raise UnsupportedError(
                f"{path}: table {name} has columns {present}, not DuckLake 1.0's "
                f"{list(spec.column_names)}; refusing to import it"
            )
    return SourceSchema(
        tables=tables,
        inline={t for t in names if registry.inline_table(t) is not None},
        version=version,
        data_path=_metadata(catalog, "data_path"),
    )


def _version_key(version: str | None) -> tuple[int, ...]:
    """A version's numbers for ordering; unreadable sorts as newest (refuse, upgrade)."""
    try:
        return tuple(int(part) for part in (version or "").split("."))
    except ValueError:
        return (1 << 30,)


def _metadata(catalog: CatalogFile, key: str) -> str | None:
    row = run(
        catalog.con,
        f"SELECT value FROM {ident(catalog.alias)}.ducklake_metadata "
        "WHERE key = ? AND scope IS NULL",
        [key],
    ).fetchone()
    return None if row is None else row[0]


# -- inlined tables' columns --------------------------------------------------------------
def inline_columns(
    con: duckdb.DuckDBPyConnection, catalog: CatalogFile, schema: SourceSchema, name: str
) -> list[tuple[str, str]]:
    """An inlined table's (column, DuckDB type) pairs: as the file declares
    them for a DuckDB catalog; rebuilt from ``ducklake_column`` for SQLite."""
    declared = table_columns(con, catalog.alias, name)
    if catalog.kind == "duckdb":
        return declared
    inline = registry.inline_table(name)
    assert inline is not None, name
    if inline.row_kind != registry.INLINE_ROW_KIND:  # inlined deletes: ids only
        return [(column, "BIGINT") for column, _ in declared]
    table_id, version = inline.ids
    snapshot = _snapshot_of_version(catalog, schema, table_id, version, name)
    user = _columns_at(con, catalog, schema, name, table_id, snapshot)
    system = [(column, "BIGINT") for column, _ in declared[:_INLINE_SYSTEM]]
    names = [column for column, _ in declared[_INLINE_SYSTEM:]]
    if names != [column for column, _ in user]:
        raise UnsupportedError(
            f"{catalog.path}: inlined table {name} has columns {names}, but table {table_id} "
            f"had {[c for c, _ in user]} at schema version {version}; cannot type its rows"
        )
    return system + [(c, type_sql(con, name, c, t)) for c, t in user]


def _snapshot_of_version(
    catalog: CatalogFile, schema: SourceSchema, table_id: int, version: int, name: str
) -> int:
    """A snapshot at which the catalog was at ``version``: a retained one, else
    the table's recorded schema-version change."""
    if schema._versions is None:
        rows = catalog.con.execute(
            f"SELECT CAST(schema_version AS BIGINT), max(CAST(snapshot_id AS BIGINT)) FROM "
            f"{ident(catalog.alias)}.ducklake_snapshot GROUP BY 1"
        ).fetchall()
        schema._versions = {int(v): int(s) for v, s in rows}
    if version in schema._versions:
        return schema._versions[version]
    row = run(
        catalog.con,
        f"SELECT min(CAST(begin_snapshot AS BIGINT)) FROM "
        f"{ident(catalog.alias)}.ducklake_schema_versions "
        "WHERE CAST(table_id AS BIGINT) = ? AND CAST(schema_version AS BIGINT) = ?",
        [table_id, version],
    ).fetchone()
    if row is None or row[0] is None:
        raise UnsupportedError(
            f"{catalog.path}: no snapshot of schema version {version} is left to type inlined "
            f"table {name} from"
        )
    return int(row[0])


def _columns_at(
    con: duckdb.DuckDBPyConnection,
    catalog: CatalogFile,
    schema: SourceSchema,
    name: str,
    table_id: int,
    snapshot: int,
) -> list[tuple[str, str]]:
    """A table's top-level columns alive at ``snapshot``, in order, with their
    DuckDB types (nested ones built from their children)."""
    if schema._columns is None:
        schema._columns = con.execute(
            "SELECT CAST(table_id AS BIGINT), CAST(column_id AS BIGINT), "
            "CAST(begin_snapshot AS BIGINT), CAST(end_snapshot AS BIGINT), "
            "CAST(column_order AS BIGINT), column_name, column_type, "
            f"CAST(parent_column AS BIGINT) FROM {ident(catalog.alias)}.ducklake_column"
        ).fetchall()
    children: dict[int | None, list[tuple]] = defaultdict(list)
    for tid, cid, begin, end, order, cname, ctype, parent in schema._columns:
        if tid == table_id and begin <= snapshot and (end is None or end > snapshot):
            children[parent].append((order, cid, cname, ctype))
    for members in children.values():
        members.sort()

    def render(cid: int, cname: str, ctype: str) -> str:
        kind = ctype.lower()
        if kind in _PRIMITIVES:
            return _PRIMITIVES[kind]
        decimal = _DECIMAL.match(kind)
        if decimal:
            return f"DECIMAL({int(decimal.group(1))}, {int(decimal.group(2))})"
        kids = [render(k, n, t) for _, k, n, t in children.get(cid, [])]
        names = [n for _, _, n, _ in children.get(cid, [])]
        if kind == "list" and len(kids) == 1:
            return f"{kids[0]}[]"
        if kind == "map" and len(kids) == 2:
            return f"MAP({kids[0]}, {kids[1]})"
        if kind == "struct" and kids:
            fields = ", ".join(f"{ident(n)} {k}" for n, k in zip(names, kids, strict=True))
            return f"STRUCT({fields})"
        raise UnsupportedError(
            f"{catalog.path}: inlined table {name}: column {cname!r} has type {ctype!r}, which "
            "slatelake cannot rebuild from a SQLite catalog"
        )

    return [(cname, render(cid, cname, ctype)) for _, cid, cname, ctype in children[None]]
