"""The data and delete files the catalog names, spelled as DuckLake's cleanup
and orphan steps name them (a full path or URL), read from the session's
copy of the metadata. The dry run's plan, a hold's file set and the delete
boundary all read paths here, so they compare equal."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from slatelake.ducklake.commit_flow import META_DB
from slatelake.ducklake.sql import ident

Resolver = Callable[[int, str, bool], str]
_FILES = ("ducklake_data_file", "ducklake_delete_file")


def path_resolver(con: Any) -> Resolver:
    """A file's path as DuckLake's cleanup prints it: the data path, then
    its schema's and its table's paths, then its own, each relative to the
    one before unless it says otherwise (the newest spelling of each)."""
    (root,) = con.execute(
        f"SELECT value FROM {ident(META_DB)}.ducklake_metadata "
        "WHERE key = 'data_path' AND scope IS NULL"
    ).fetchone() or ("",)
    schemas = {
        int(i): (str(p or ""), bool(r))
        for i, p, r in con.execute(
            "SELECT schema_id, arg_max(path, begin_snapshot), "
            f"arg_max(path_is_relative, begin_snapshot) FROM {ident(META_DB)}.ducklake_schema "
            "GROUP BY schema_id"
        ).fetchall()
    }
    tables = {
        int(i): (int(sid), str(p or ""), bool(r))
        for i, sid, p, r in con.execute(
            "SELECT table_id, arg_max(schema_id, begin_snapshot), "
            "arg_max(path, begin_snapshot), "
            f"arg_max(path_is_relative, begin_snapshot) FROM {ident(META_DB)}.ducklake_table "
            "GROUP BY table_id"
        ).fetchall()
    }

    def full(table_id: int, path: str, relative: bool) -> str:
        if not relative:
            return str(path)
        sid, tpath, trel = tables.get(int(table_id), (-1, "", True))
        if not trel:
            return tpath + path
        spath, srel = schemas.get(sid, ("", True))
        return (spath if not srel else str(root or "") + spath) + tpath + path

    return full


def files_at(con: Any, snapshot_id: int, onward: bool = False) -> list[str]:
    """Every data and delete file live at ``snapshot_id`` (``onward``: at it
    or at any later snapshot)."""
    full = path_resolver(con)
    rows: list[tuple[Any, ...]] = []
    # literals: binding a Python value imports pandas
    began_by = 2**62 if onward else int(snapshot_id)  # onward: a file begun later counts too
    for table in _FILES:
        rows += con.execute(
            f"SELECT table_id, path, path_is_relative FROM {ident(META_DB)}.{ident(table)} "
            f"WHERE begin_snapshot <= {int(began_by)} "
            f"AND (end_snapshot IS NULL OR end_snapshot > {int(snapshot_id)})"
        ).fetchall()
    return sorted({full(*r) for r in rows})


def referenced_files(con: Any) -> set[str]:
    """Every data and delete file a snapshot still in the catalog may read
    (a file's row stays until expiry schedules it for deletion)."""
    full = path_resolver(con)
    out: set[str] = set()
    for table in _FILES:
        rows = con.execute(
            f"SELECT table_id, path, path_is_relative FROM {ident(META_DB)}.{ident(table)}"
        ).fetchall()
        out.update(full(*r) for r in rows)
    return out
