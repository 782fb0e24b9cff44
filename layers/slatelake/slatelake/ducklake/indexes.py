"""Equality indexes on a Session: create, drop, list, lookup, and the write hook.

The definitions and keys are the catalog's (catalog/indexes.py); this module
adds what needs DuckDB: reading indexed values and row ids through DuckLake,
and rendering a value to its key component with the column's own cast, so a
lookup and the write path always agree.

- ``create_index`` takes an id from DuckLake's catalog counter and writes the
  definition plus an entry for every live row in one head-preserving change
  set; a lost race re-runs it on a fresh view. The session reloads its
  DuckDB catalog afterwards, because DuckLake must see the bumped counter.
- ``index_writes`` runs in every commit of a DuckLake transaction: entries for
  the rows it inserted (Parquet files and inlined rows alike, read through
  ``ducklake_table_changes``) and the ends of definitions whose table or
  column it dropped go into the same change set as the data.
- ``lookup`` reads candidate row ids from the index and asks DuckLake for the
  live rows among them still holding the value: entries of deleted or updated
  rows, and digest collisions, are filtered there. Row ids are stable across
  compaction, so entries never need rewriting.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import unquote, urlsplit

import duckdb

from slatelake.catalog import indexes as idx
from slatelake.catalog import registry
from slatelake.catalog.changes import RowChanges, build_change_set
from slatelake.catalog.rows import Row
from slatelake.catalog.state import CatalogView
from slatelake.ducklake.sql import ident, run, value_sql
from slatelake.errors import (
    ConflictError,
    MisconfigurationError,
    NotFoundError,
    PermissionDeniedError,
    ReadOnlyError,
    SlatelakeError,
    StoreError,
    StoreUnavailableError,
    UnsupportedError,
    retry,
)
from slatelake.log.changeset import ChangeSet
from slatelake.store.location import show_input

if TYPE_CHECKING:
    from slatelake.catalog.lake import Lake
    from slatelake.ducklake.capture import Captured
    from slatelake.log.committer import Committed


class Session(Protocol):
    """What the index verbs need of a session (``ducklake.session.Session``
    has it); named here so this module does not import the session."""

    alias: str
    read_only: bool
    lake: Lake
    con: duckdb.DuckDBPyConnection
    state: CatalogView

    @property
    def in_transaction(self) -> bool: ...

    def refresh(self) -> None: ...

    def commit_change_set(self, cs: ChangeSet) -> Committed: ...

    def catalog_changed(self) -> None: ...


CREATE_ATTEMPTS = 5
NESTED = ("struct", "list", "map", "array", "union", "variant")
_INSERTED = "change_type IN ('insert', 'update_postimage')"
# DuckLake's changes_made entries for rows added to a table (UPDATE included)
INSERT_CHANGES = frozenset({"inserted_into_table", "inlined_insert"})


_FILE = re.compile(r"""(?:reading|writing|file|on|to) ['"]([^'"]+)['"]|URL (\S+?): """)
# httpfs's spellings of a status: "(HTTP 403 Forbidden)", "(HTTP code 403)", "returned
# HTTP 403", and DuckLake's file removal's "Failed to remove files: HTTP 403 (Forbidden)"
_HTTP = re.compile(
    r"\(HTTP (\d{3})([^)]*)\)|\(HTTP code (\d{3})\)|returned HTTP (\d{3})"
    r"|\bHTTP (\d{3}) \(([A-Za-z ]+)\)"
)
# httpfs's method, when it names one; without a status, the connection failed.
_METHOD = re.compile(r"for HTTP (GET|HEAD|PUT|POST|DELETE) ")
_VERBS = {"PUT": "writing", "POST": "writing", "DELETE": "deleting"}
_S3_SAID = re.compile(r"\n\n([A-Za-z]+: [^\n]{0,160})")


def _data_object(raw: str) -> str:
    """A data file as a user names it: ``s3://bucket/key`` for an S3 request
    URL (path or virtual-hosted style), the path itself for a local file."""
    if not raw.startswith(("http://", "https://")):
        return raw
    parts = urlsplit(raw)
    host, path = parts.hostname or "", unquote(parts.path).lstrip("/")
    if ".s3" in host and host.endswith("amazonaws.com"):
        return f"s3://{host.split('.s3', 1)[0]}/{path}"
    return f"s3://{path}"


def translate_data_error(what: str, exc: duckdb.Error) -> SlatelakeError | None:
    """DuckDB's error on a data file (httpfs or the file system) as a typed
    slatelake error in one line naming the file: 401/403 and EACCES are
    PermissionDeniedError, a missing file NotFoundError, a 5xx, a dropped
    connection or a timeout StoreUnavailableError (retryable), any other
    failure naming a file or a request StoreError. None for an I/O error
    that names neither (DuckDB refusing a value, as "Parquet files do not
    support negative intervals"): it stays DuckDB's, as on stock."""
    text = str(exc)
    found = _FILE.search(text)
    named = found or _HTTP.search(text) or _METHOD.search(text)
    if not named and "Permission denied" not in text and "No such file" not in text:
        return None
    obj = _data_object(found.group(1) or found.group(2)) if found else "a data file"
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    status = _HTTP.search(text)
    method = _METHOD.search(text)
    verb = _VERBS.get(method.group(1), "reading") if method else "reading"
    if "Failed to remove files" in text:  # DuckLake's cleanup and orphan deletes
        verb = "deleting"
    said = _S3_SAID.search(text)
    code = int(next(g for g in status.group(1, 3, 4, 5) if g)) if status else None
    if status is None:
        cause = first.split(" for HTTP ", 1)[0].rsplit(": ", 1)[-1]
    else:
        said_as = status.group(2) or (f" {status.group(6)}" if status.group(6) else "")
        cause = f"HTTP {code}{said_as}"
    if said is not None and status is not None:
        cause += f", {said.group(1)}"
    if code in (401, 403) or "Permission denied" in text:
        return PermissionDeniedError(
            f"{what}: {verb} {obj}: access denied ({cause}); check that the credentials in "
            "the environment may read and write the lake's data path"
        )
    if code == 404 or "No such file" in text:
        return NotFoundError(
            f"{what}: {obj} is missing ({cause}); if it is a file of the lake's data path, "
            "it was removed outside DuckLake"
        )
    if (code is not None and (code >= 500 or code in (408, 429))) or (
        code is None and method is not None
    ):
        return StoreUnavailableError(f"{what}: {verb} {obj}: no usable answer ({cause})")
    return StoreError(f"{what}: {verb} {obj} failed ({cause})")


@contextmanager
def data_errors(what: str) -> Iterator[None]:
    """Where slatelake reads data files on a caller's behalf (index builds,
    lookups, the write hook), DuckDB's I/O errors come out typed."""
    try:
        yield
    except duckdb.IOException as exc:
        translated = translate_data_error(what, exc)
        if translated is None:
            raise
        raise translated from None


@dataclass(frozen=True)
class IndexInfo:
    """A live index as a user names it."""

    name: str
    index_id: int
    schema: str
    table: str
    column: str
    kind: str


@dataclass(frozen=True)
class _Target:
    schema: str
    table: str
    table_id: int
    column: str
    column_id: int
    column_type: str  # DuckLake's name (int32, varchar, ...)


# -- names -------------------------------------------------------------------
def _split(table: str) -> tuple[str, str]:
    schema, dot, name = table.rpartition(".")
    return (schema, name) if dot else ("main", name)


@dataclass(frozen=True)
class _Table:
    schema: str
    table: str
    table_id: int


def _resolve_table(state: CatalogView, table: str) -> _Table:
    schema_name, table_name = _split(table)
    schemas = registry.spec("ducklake_schema")
    schema_ids = {
        r[0]: r[schemas.index("schema_name")]
        for r in state.rows(schemas.name)
        if r[schemas.index("end_snapshot")] is None
    }
    tables = registry.spec("ducklake_table")
    matches = [
        tid
        for tid, row in idx.live_tables(state).items()
        if row[tables.index("table_name")] == table_name
        and schema_ids.get(row[tables.index("schema_id")]) == schema_name
    ]
    if not matches:
        raise NotFoundError(f"no table {table!r} in this lake")
    return _Table(schema_name, table_name, matches[0])


def _resolve(state: CatalogView, table: str, column: str) -> _Target:
    found = _resolve_table(state, table)
    tid = found.table_id
    cols = registry.spec("ducklake_column")
    for (t, cid), row in idx.live_columns(state).items():
        if (
            t == tid
            and row[cols.index("column_name")] == column
            and row[cols.index("parent_column")] is None
        ):
            ctype = row[cols.index("column_type")]
            return _Target(found.schema, found.table, tid, column, cid, ctype)
    raise NotFoundError(f"table {table!r} has no column {column!r}")


def _names(state: CatalogView) -> dict[tuple[int, int], tuple[str, str, str]]:
    """(table_id, column_id) -> (schema, table, column) for live columns."""
    schemas = registry.spec("ducklake_schema")
    tables = registry.spec("ducklake_table")
    cols = registry.spec("ducklake_column")
    schema_names = {
        r[0]: r[schemas.index("schema_name")]
        for r in state.rows(schemas.name)
        if r[schemas.index("end_snapshot")] is None
    }
    live = idx.live_tables(state)
    out = {}
    for (tid, cid), row in idx.live_columns(state).items():
        if tid in live:
            trow = live[tid]
            schema = schema_names.get(trow[tables.index("schema_id")], "?")
            out[(tid, cid)] = (
                schema,
                trow[tables.index("table_name")],
                row[cols.index("column_name")],
            )
    return out


def _relation(session: Session, target: _Table | _Target) -> str:
    return f"{ident(session.alias)}.{ident(target.schema)}.{ident(target.table)}"


def _value_sql(kind: int, column: str) -> str:
    """The expression whose result is the key component's source."""
    return f"CAST({ident(column)} AS {'BIGINT' if kind == idx.EXACT else 'VARCHAR'})"


def _key_type(kind: int) -> duckdb.DuckDBPyType:
    # Constants, not duckdb.sqltype: that asks the process's default connection.
    return duckdb.sqltypes.BIGINT if kind == idx.EXACT else duckdb.sqltypes.VARCHAR


def _entries(kind: int, index_id: int, rows: list[tuple[Any, Any]]) -> list[tuple[bytes, bytes]]:
    return [(idx.entry_key(kind, index_id, idx.component(kind, v), rid), b"") for rid, v in rows]


# -- verbs -------------------------------------------------------------------
def _writable(session: Session, verb: str) -> None:
    if session.read_only:
        raise ReadOnlyError(f"this session is read-only and refuses {verb}; reconnect read-write")
    if session.in_transaction:
        raise MisconfigurationError(f"{verb} runs outside an explicit transaction; commit first")


def _name(what: str, value: object) -> str:
    """A name from outside (table, column, index): text the catalog can store
    (UTF-8, no NUL), refused naming it otherwise."""
    if not isinstance(value, str):
        raise MisconfigurationError(f"{what} {show_input(value)} is not text")
    if "\x00" in value:
        raise MisconfigurationError(f"{what} {show_input(value)} contains a NUL byte")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise MisconfigurationError(
            f"{what} {show_input(value)} is not valid UTF-8 (a lone surrogate)"
        ) from None
    return value


def create_index(session: Session, table: str, column: str, name: str | None = None) -> IndexInfo:
    """Define the index and write its entries in one change set; a lost race
    re-runs it on a fresh view (CREATE_ATTEMPTS in all)."""
    _writable(session, "create_index")
    table, column = _name("table", table), _name("column", column)
    name = None if name is None else _name("index name", name)

    def attempt() -> IndexInfo:
        session.refresh()
        state = session.state
        target = _resolve(state, table, column)
        if target.column_type.lower().startswith(NESTED):
            raise UnsupportedError(
                f"{target.table}.{column} is {target.column_type}; equality indexes hold scalar "
                "columns only"
            )
        index_name = name or f"{target.table}_{column}_idx"
        for live in idx.live_definitions(state):
            if live.name == index_name:
                raise MisconfigurationError(f"an index named {index_name!r} already exists")
            if (live.table_id, live.column_id) == (target.table_id, target.column_id):
                raise MisconfigurationError(
                    f"{target.table}.{column} is already indexed by {live.name!r}"
                )
        kind = idx.kind_for(target.column_type)
        changes, defn = idx.define(state, target.table_id, target.column_id, index_name, kind)
        with session.con.cursor() as cur, data_errors(f"create_index {index_name}"):
            rows = cur.execute(
                f"SELECT rowid, {_value_sql(kind, column)} FROM {_relation(session, target)} "
                f"WHERE {ident(column)} IS NOT NULL"
            ).fetchall()
        cs = build_change_set(state, changes, False, f"slatelake:create_index:{index_name}")
        cs = replace(cs, puts=cs.puts + tuple(_entries(kind, defn.index_id, rows)))
        session.commit_change_set(cs)
        session.catalog_changed()  # DuckLake must see the bumped next_catalog_id
        return IndexInfo(
            index_name, defn.index_id, target.schema, target.table, column, idx.KIND_NAMES[kind]
        )

    return retry(attempt, attempts=CREATE_ATTEMPTS, on=ConflictError)


def drop_index(session: Session, name: str) -> IndexInfo:
    """End the definition; its entries stay until the sweep reclaims them."""
    _writable(session, "drop_index")

    def attempt() -> IndexInfo:
        session.refresh()
        state = session.state
        found = [d for d in idx.live_definitions(state) if d.name == name]
        if not found:
            raise NotFoundError(f"no live index named {name!r}; `slatelake index list` shows them")
        info = _info(state, found[0])
        changes = RowChanges()
        idx.end(changes, found[0], state.head.snapshot_id)
        cs = build_change_set(state, changes, False, f"slatelake:drop_index:{name}")
        session.commit_change_set(cs)
        return info

    return retry(attempt, attempts=CREATE_ATTEMPTS, on=ConflictError)


def _info(state: CatalogView, defn: idx.IndexDef) -> IndexInfo:
    schema, table, column = _names(state).get((defn.table_id, defn.column_id), ("?", "?", "?"))
    return IndexInfo(defn.name, defn.index_id, schema, table, column, idx.KIND_NAMES[defn.kind])


def list_indexes(session: Session) -> list[IndexInfo]:
    session.refresh()
    return [_info(session.state, d) for d in idx.live_definitions(session.state)]


def lookup(session: Session, table: str, column: str, value: Any) -> list[Row]:
    """The live rows of ``table`` whose ``column`` equals ``value``, found
    through the index and read through DuckLake."""
    if value is None:
        raise MisconfigurationError("an equality index holds no NULLs; query `IS NULL` instead")
    table, column = _name("table", table), _name("column", column)
    if not session.in_transaction:
        session.refresh()
    state = session.state
    target = _resolve(state, table, column)
    found = [
        d
        for d in idx.live_definitions(state)
        if (d.table_id, d.column_id) == (target.table_id, target.column_id)
    ]
    if not found:
        raise NotFoundError(
            f"no live index on {target.table}.{column}; create one with "
            f"`slatelake index create LAKE {target.table} {column}`"
        )
    with session.con.cursor() as cur, data_errors(f"lookup {target.table}.{column}"):
        return _lookup(session, cur, state, target, found[0], value)


def column_names(session: Session, table: str) -> list[str]:
    """The columns of ``table`` ('t' or 'schema.t'), as a lookup returns them."""
    table = _name("table", table)
    if not session.in_transaction:
        session.refresh()
    target = _resolve_table(session.state, table)
    with session.con.cursor() as cur:
        return list(cur.sql(f"SELECT * FROM {_relation(session, target)} LIMIT 0").columns)


def _lookup(
    session: Session,
    cur: Any,
    state: CatalogView,
    target: _Target,
    defn: idx.IndexDef,
    value: Any,
) -> list[Row]:
    column = target.column
    rel = _relation(session, target)
    # The value cast to the column's type, then rendered as the index renders it;
    # built as expressions (the column's type travels as a type, not as SQL text).
    ctype = cur.sql(f"SELECT {ident(column)} FROM {rel} LIMIT 0").types[0]
    refused = MisconfigurationError(
        f"value {show_input(value)} does not fit {target.table}.{column} ({ctype})"
    )
    try:
        spelled = value_sql(value)  # a Python value bound would import pandas (sql.py)
        typed = (
            duckdb.ConstantExpression(value) if spelled is None else duckdb.SQLExpression(spelled)
        ).cast(ctype)
        (rendered,) = cur.sql("SELECT 1").select(typed.cast(_key_type(defn.kind))).fetchone()
    except (
        duckdb.ConversionException,
        duckdb.NotImplementedException,
        RuntimeError,  # a lone surrogate, from the binding
        TypeError,
        ValueError,  # an integer past Python's digit limit
        OverflowError,
    ):
        raise refused from None
    if rendered is None:  # a cast that yields NULL (NaN to an integer) matches nothing typed
        raise refused
    prefix = idx.value_prefix(defn.kind, defn.index_id, idx.component(defn.kind, rendered))
    row_ids = idx.entry_row_ids(session.lake.reader(), state, prefix)
    if not row_ids:
        return []
    return [
        tuple(r)
        for r in run(
            cur,
            f"SELECT * FROM {rel} WHERE rowid IN (SELECT unnest(?::BIGINT[])) "
            f"AND {_value_sql(defn.kind, column)} = ? ORDER BY rowid",
            [row_ids, rendered],
        ).fetchall()
    ]


# -- the write hook ----------------------------------------------------------
def index_writes(session: Session, captured: Captured) -> ChangeSet:
    """The change set of a captured DuckLake transaction, with its index
    writes: definition ends for dropped tables/columns, entries for new rows."""
    state = session.state
    changes = captured.changes
    if not idx.has_definitions(state):
        return build_change_set(state, changes, captured.mints_snapshot, captured.changes_made)
    ended = {d.index_id for d in idx.cascade(state, changes)}
    live = [d for d in idx.live_definitions(state) if d.index_id not in ended]
    puts: list[tuple[bytes, bytes]] = []
    touched = _touched_tables(captured.changes_made)
    if captured.mints_snapshot and touched:
        snap = state.head.snapshot_id + 1
        names = _names(state)
        with session.con.cursor() as cur, data_errors("index entries of the commit"):
            for defn in live:
                if defn.table_id not in touched or (defn.table_id, defn.column_id) not in names:
                    continue
                schema, table, column = names[(defn.table_id, defn.column_id)]
                rows = run(
                    cur,
                    f"SELECT rowid, {_value_sql(defn.kind, column)} FROM ducklake_table_changes("
                    f"?, ?, ?, ?, ?) WHERE {_INSERTED} AND {ident(column)} IS NOT NULL",
                    [session.alias, schema, table, snap, snap],
                ).fetchall()
                puts += _entries(defn.kind, defn.index_id, rows)
    cs = build_change_set(state, changes, captured.mints_snapshot, captured.changes_made)
    return replace(cs, puts=cs.puts + tuple(puts)) if puts else cs


def _touched_tables(changes_made: str) -> set[int]:
    """Tables the transaction inserted rows into (Parquet or inlined), from
    DuckLake's own ``changes_made``. Flush, merge and rewrite keep row ids and
    values, so their snapshots need no entries and are not read."""
    out = set()
    for token in changes_made.split(","):
        change, _, table_id = token.partition(":")
        if change in INSERT_CHANGES and table_id.isdigit():
            out.add(int(table_id))
    return out
