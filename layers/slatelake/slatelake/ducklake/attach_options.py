"""How a session attaches its lake as DuckLake, and what a reload keeps.

DuckLake gets the data path as a plain absolute path for local data: 1.5.5's
orphan step compares ``file://`` data paths wrongly against the files it
lists and deletes live ones. A catalog that already stores a ``file://`` data
path is attached with the plain path and OVERRIDE_DATA_PATH. A past snapshot
is DuckLake's own SNAPSHOT_VERSION / SNAPSHOT_TIME. A reload keeps the
catalog and schema the user had in USE. DuckLake's OVERRIDE_DATA_PATH (read
the files from another place, a mirror or a mount, for this attach only) is
taken by read-only sessions: a writer writes where the catalog says, and
the maintenance steps, which go by the catalog's path, find what it wrote.
META_TYPE can only be ``duckdb``: the catalog lives in the lake's store and
a session works on it in DuckDB.

The data path reaching here is absolute or a URL (``guard.resolve_data_path``
resolved a relative one at connect), so the catalog stores a place every
process finds, not text each reads against its own directory. A catalog with
no data path is never attached without one: DuckLake would then fall back to
its default beside the metadata database, ``:memory:.files/`` for the
session's in-memory copy, a directory relative to whatever the current one is.
"""

from __future__ import annotations

from contextlib import suppress
from datetime import datetime
from typing import Any

import duckdb

from slatelake.catalog import registry
from slatelake.ducklake.duck_state import DuckState
from slatelake.ducklake.guard import ducklake_data_path
from slatelake.ducklake.sql import ident, literal, run
from slatelake.errors import MisconfigurationError

# DuckLake's refusal of a new catalog without a data path (where the
# metadata catalog is no DuckDB file to put one beside), word for word.
NO_DATA_PATH = (
    "Attempting to create a new ducklake instance but data_path is not set - "
    "set the DATA_PATH parameter to the desired location of the data files"
)


def data_path_options(
    url: str, data_path: str | None, state: DuckState, override: bool = False
) -> list[str]:
    """DATA_PATH (and OVERRIDE_DATA_PATH) for the ATTACH: DuckLake sees a
    plain absolute path for local data whatever spelling the catalog or
    the caller used; a data path other than the catalog's is refused, unless
    ``override`` (a read-only session reading the files from there)."""
    stored = stored_data_path(state)
    given = None if data_path is None else ducklake_data_path(data_path)
    if override and stored is not None and given is not None:
        return [f"DATA_PATH {literal(given)}", "OVERRIDE_DATA_PATH true"]
    if stored is None:
        if given is None:
            raise MisconfigurationError(_no_data_path(url, state))
        return [f"DATA_PATH {literal(given)}"]
    if given is not None and given != _normalized(stored):
        # DuckLake's own words first (its users, and its tests, look for them)
        raise MisconfigurationError(
            f'DATA_PATH parameter "{given}" does not match existing data path in the catalog '
            f'"{stored}"; connect without a data path (the lake keeps its own) or pass that one'
        )
    if not stored.startswith("file:"):
        return []  # DuckLake uses the stored path as written (object keys are literal)
    try:
        plain = ducklake_data_path(stored)
    except MisconfigurationError as exc:
        raise MisconfigurationError(
            f"{url}: the catalog's data path {stored!r} is not a usable local path, "
            f"so DuckLake's orphan step could delete live files ({exc})"
        ) from None
    return [f"DATA_PATH {literal(plain)}", "OVERRIDE_DATA_PATH true"]


def check_override(data_path: str | None, read_only: bool) -> None:
    """OVERRIDE_DATA_PATH asks for a data path and a read-only session."""
    if data_path is None:
        raise MisconfigurationError(
            "OVERRIDE_DATA_PATH reads the lake's files from the data path given: give DATA_PATH"
        )
    if not read_only:
        raise MisconfigurationError(
            "OVERRIDE_DATA_PATH is for reading a lake's files from another place (a mirror, a "
            "mount): a writable session writes where the lake's catalog says, so the lake's "
            "maintenance finds what it wrote; connect read-only, or without the override"
        )


def check_meta_type(value: str | None) -> None:
    """DuckLake's META_TYPE: only ``duckdb`` applies to a slatelake lake."""
    if (value or "").strip().lower() != "duckdb":
        name = (value or "").strip().lower()
        raise MisconfigurationError(
            f"metadata type {name!r} (META_TYPE {value!r}) is not one a slatelake lake has: "
            "its catalog lives in its own store and a session works on it in DuckDB; "
            "leave META_TYPE out, or give 'duckdb'"
        )


def _no_data_path(url: str, state: DuckState) -> str:
    """Why a catalog without a data path needs one given (DuckLake's words
    for a catalog that is not a DuckDB file, which the lake's is not)."""
    fix = f"connect with a data path (slatelake sql {url} --data-path PATH)"
    if state.is_empty():
        return f"{url}: {NO_DATA_PATH}; {fix}"
    return f"{url}: the catalog records no data path, so DuckLake would guess one; {fix}"


def stored_data_path(state: DuckState) -> str | None:
    """The catalog's data path (ducklake_metadata, lake scope), if it has one."""
    spec = registry.BY_NAME["ducklake_metadata"]
    key, value, scope = (spec.index(c) for c in ("key", "value", "scope"))
    for row in state.rows(spec.name):
        if row[key] == "data_path" and row[scope] is None:
            return row[value]
    return None


def _normalized(data_path: str) -> str:
    """A stored data path in the spelling ``ducklake_data_path`` gives, when it has one."""
    try:
        return ducklake_data_path(data_path)
    except MisconfigurationError:
        return data_path


def pin_options(version: int | None, when: datetime | str | None) -> list[str]:
    """DuckLake's ATTACH options for a session at a past snapshot."""
    if version is not None and when is not None:
        raise MisconfigurationError(
            "Cannot specify both VERSION and TIMESTAMP: give snapshot_version or snapshot_time"
        )
    if version is not None:
        if not isinstance(version, int) or isinstance(version, bool) or version < 0:
            raise MisconfigurationError(
                f"snapshot_version {version!r}: expected a snapshot id, an integer >= 0"
            )
        return [f"SNAPSHOT_VERSION {int(version)}"]
    if when is None:
        return []
    if isinstance(when, datetime):
        text = when.isoformat()
    elif isinstance(when, str) and when.strip() and "\x00" not in when:
        text = when
    else:
        raise MisconfigurationError(
            f"snapshot_time {when!r}: expected a datetime or a timestamp such as "
            "'2026-12-01 10:00:00+00'"
        )
    # A private connection: the process's default one may sit in a user's aborted transaction.
    try:
        with duckdb.connect() as con:
            run(con, "SELECT CAST(? AS TIMESTAMPTZ)", [text]).fetchone()
    except duckdb.Error:
        raise MisconfigurationError(
            f"snapshot_time {when!r} is not a timestamp; use e.g. '2026-12-01 10:00:00+00'"
        ) from None
    return [f"SNAPSHOT_TIME {literal(text)}"]


def setting(con: duckdb.DuckDBPyConnection, name: str) -> Any:
    row = run(con, "SELECT current_setting(?)", [name]).fetchone()
    return None if row is None else row[0]


def global_settings(con: duckdb.DuckDBPyConnection) -> dict[str, str | None]:
    """The database's global settings (every connection to it shares them)."""
    rows = con.execute("SELECT name, value FROM duckdb_settings() WHERE scope = 'GLOBAL'")
    return {name: value for name, value in rows.fetchall()}


def current_use(con: duckdb.DuckDBPyConnection) -> tuple[str, str] | None:
    try:
        row = con.execute("SELECT current_database(), current_schema()").fetchone()
    except duckdb.Error:
        return None
    return None if row is None else (row[0], row[1])


def restore_use(con: duckdb.DuckDBPyConnection, where: tuple[str, str]) -> None:
    """USE the catalog and schema the user had chosen; where that is gone
    (another writer dropped the schema), the lake's default stays in use."""
    with suppress(duckdb.Error):
        con.execute(f"USE {ident(where[0])}.{ident(where[1])}")
