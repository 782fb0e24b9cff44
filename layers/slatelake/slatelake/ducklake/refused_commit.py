"""Commits slatelake refuses after DuckLake accepted them, and their files.

DuckLake 1.5.5 rebases a transaction over commits it missed and checks
conflicts pair by pair of change kinds. Some pairs that remove rows of the
same table are not checked, and committing both loses or resurrects rows
(measured on stock DuckLake too, same process, same catalog):

- a delete file written over a flush of inlined deletes (the flush dates its
  delete file back to the deletes' snapshot, so DuckLake's per-file check
  misses it): both delete files stay live and every row is read twice;
- an inlined delete over a delete file: rows deleted by both are subtracted
  twice;
- an inlined delete or a flush over a compaction (merge, rewrite): the
  deletes point at a file the compaction replaced.

So after DuckLake commits in the session's copy, and before the slot is
written, ``unsafe_rebase`` refuses a transaction that removed rows of a
table which a commit it was rebased over also removed rows of, in a pair
DuckLake does not check; and a compaction or flush rebased over any
snapshot at all: DuckLake's retry of a flush of inlined deletes writes the
delete file but leaves the inlined deletes in place (stock too), and a
later rewrite then brings the deleted rows back. Such a flush is recorded
as a plain ``deleted_from_table``, so the session does not rely on this
check for it: it runs DuckLake's maintenance functions in autocommit with
the commit lock already held (no retry can happen), and refuses before
COMMIT a transaction that called one and was overtaken. DuckLake's own
refusals stay its own.

A refused transaction's new files (data and delete files DuckLake wrote)
are removed, as DuckLake removes them when it refuses a commit itself.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from pathlib import PurePosixPath

import duckdb

from slatelake.catalog import registry
from slatelake.catalog.changes import RowChanges
from slatelake.ducklake.guard import data_location
from slatelake.ducklake.sql import ident, run
from slatelake.log.changeset import ChangeSet
from slatelake.store.location import LakeLocation
from slatelake.store.objects import ObjectClient

log = logging.getLogger("slatelake.session")

_CHANGE = re.compile(r"([a-z_]+):(\d+)")
DELETE_FILE = "deleted_from_table"
INLINED_DELETE = "inlined_delete"
FLUSH = frozenset({"flushed_inlined", "inline_flush"})
COMPACTION = frozenset({"merge_adjacent", "rewrite_delete", "compacted_table"})
# (ours, theirs) kind pairs that remove rows of one table and that DuckLake
# 1.5.5's conflict check lets through; either order is unsafe
_UNCHECKED = (
    # a flush dates its delete file back to the inlined deletes' snapshot, so
    # DuckLake's per-file check misses it: two delete files are never both kept
    (frozenset({DELETE_FILE}), frozenset({DELETE_FILE, INLINED_DELETE}) | FLUSH),
    (frozenset({INLINED_DELETE}) | FLUSH, COMPACTION),
)
_WORDS = {
    DELETE_FILE: "deleted from it",
    INLINED_DELETE: "deleted inlined rows from it",
    "flushed_inlined": "flushed its inlined data",
    "inline_flush": "flushed its inlined data",
    "merge_adjacent": "compacted it",
    "rewrite_delete": "compacted it",
    "compacted_table": "compacted it",
}


def table_changes(changes_made: str) -> dict[int, set[str]]:
    """DuckLake's ``changes_made`` text as {table id: change kinds}."""
    out: dict[int, set[str]] = {}
    for kind, table_id in _CHANGE.findall(changes_made or ""):
        out.setdefault(int(table_id), set()).add(kind)
    return out


def unsafe_rebase(ours: str, theirs: Iterable[ChangeSet]) -> str | None:
    """Why committing ``ours`` on top of ``theirs`` would lose rows, or None."""
    mine = table_changes(ours)
    if not mine:
        return None
    for cs in theirs:
        if not cs.mints_snapshot:
            continue
        for table_id, our_kinds in mine.items():
            hit_ours = our_kinds & (COMPACTION | FLUSH)
            if hit_ours:  # DuckLake's retry of these is wrong even beside other tables
                return (
                    f"attempting to {_verb(min(hit_ours))} table with index "
                    f'"{table_id}" - but another transaction has committed since this one '
                    "began, and DuckLake 1.5.5 does not redo a flush or compaction correctly "
                    "when it retries (run it again)"
                )
        for table_id, their_kinds in table_changes(cs.changes_made).items():
            our_kinds = mine.get(table_id)
            if not our_kinds:
                continue
            for a, b in _UNCHECKED:
                for first, second in ((a, b), (b, a)):
                    hit_ours, hit_theirs = our_kinds & first, their_kinds & second
                    if hit_ours and hit_theirs:
                        return (
                            f"attempting to {_verb(min(hit_ours))} table with index "
                            f'"{table_id}" - but another transaction has '
                            f"{_WORDS[min(hit_theirs)]} since this one began (DuckLake 1.5.5 "
                            "would commit both and lose rows)"
                        )
    return None


def _verb(kind: str) -> str:
    if kind in FLUSH:
        return "flush inlined data of"
    if kind in COMPACTION:
        return "compact"
    return "delete from"


def remove_new_files(
    con: duckdb.DuckDBPyConnection,
    meta: str,
    alias: str,
    data_path: str | None,
    changes: RowChanges,
) -> int:
    """Remove the data and delete files a refused transaction added (its
    captured rows), found through DuckLake's own listing of the tables (full
    paths, whatever the data path override) while DuckLake's copy still holds
    the transaction. Only files under the lake's data path are touched. Best
    effort: a file left behind is an orphan for the orphan step. Returns how
    many were removed."""
    names: set[str] = set()
    table_ids: set[int] = set()
    for table in _FILE_TABLES:
        spec = registry.BY_NAME[table]
        at_path, at_table = spec.index("path"), spec.index("table_id")
        for row in changes.inserted.get(table, ()):
            names.add(PurePosixPath(row[at_path]).name)
            table_ids.add(row[at_table])
    if data_path is None or not names:
        return 0
    location = data_location(data_path)
    client = ObjectClient(location)
    removed = 0
    for table_id in sorted(table_ids):
        try:
            for path in _listed(con, meta, alias, table_id):
                key = _key_under(location, path)
                if key is not None and PurePosixPath(key).name in names:
                    client.delete(key)
                    removed += 1
        except Exception as exc:  # the orphan step removes what is left
            log.warning("files of a refused commit to table %s left behind: %s", table_id, exc)
    return removed


_FILE_TABLES = ("ducklake_data_file", "ducklake_delete_file")


def _listed(con: duckdb.DuckDBPyConnection, meta: str, alias: str, table_id: int) -> list[str]:
    named = run(
        con,
        f"SELECT t.table_name, s.schema_name FROM {ident(meta)}.ducklake_table t "
        f"JOIN {ident(meta)}.ducklake_schema s ON s.schema_id = t.schema_id "
        "WHERE t.table_id = ? AND t.end_snapshot IS NULL",
        [table_id],
    ).fetchone()
    if named is None:
        return []
    rows = run(
        con,
        "SELECT data_file, delete_file FROM ducklake_list_files(?, ?, schema => ?)",
        [alias, named[0], named[1]],
    ).fetchall()
    return [p for row in rows for p in row if p]


def _key_under(location: LakeLocation, path: str) -> str | None:
    """The object key of ``path`` when it lies under ``location``, else None."""
    if location.scheme == "file":
        key = path.removeprefix("file://").lstrip("/")
    elif location.scheme == "s3" and path.startswith(f"s3://{location.bucket}/"):
        key = path[len(f"s3://{location.bucket}/") :]
    else:
        return None
    root = location.root.rstrip("/")
    inside = key.startswith(root + "/") if root else True
    return key if inside and "/../" not in f"/{key}/" else None
