"""Capture's first read of each table it reads.

Which read comes first is decided by the table and what the log and the
counts say (``first_read``), before anything is read: the new snapshot,
file, statistics and inlined rows are found by their new ids or snapshots.
Each is a small DuckDB query whose cost is mostly fixed (~0.4 ms; a 1-row
INSERT makes six), so the reads known before capture's loop are split
between the session's helper cursor and its worker (``read_ahead.py``): the
worker takes every other one (``AHEAD``), and the loop takes each answer
when it reaches it. Capture runs after DuckDB's COMMIT, so the worker's
cursor sees what the helper cursor sees.
"""

from __future__ import annotations

from dataclasses import dataclass

from slatelake.catalog import registry
from slatelake.ducklake.change_scope import Scope
from slatelake.ducklake.sql import ident

SNAPSHOT_TABLES = {
    "ducklake_snapshot": "snapshot_id",
    "ducklake_snapshot_changes": "snapshot_id",
    "ducklake_schema_versions": "begin_snapshot",
}
FILE_TABLES = {"ducklake_data_file": "data_file_id", "ducklake_delete_file": "delete_file_id"}
# Statistics DuckLake updates in place, a few rows per table, for exactly the
# tables the new snapshot's changes name: read for those. (Not the inlined
# tables' registry: a flush drops older schema versions' tables after its
# commit, for tables its snapshot does not name.)
PER_TABLE = frozenset({"ducklake_table_stats", "ducklake_table_column_stats"})
FILE_CHILDREN = (
    "ducklake_file_column_stats",
    "ducklake_file_partition_value",
    "ducklake_file_variant_stats",
)

# How capture reads a table first (``first_read``).
FILES = "files"  # new file ids, and older files ended since S
SNAPSHOTS = "snapshots"  # new snapshots' rows
CHILDREN = "children"  # a new file's statistics, by its id
VERSIONED = "versioned"  # rows begun or ended since S
INLINE_DELETES = "inline-deletes"  # inlined deletes begun since S (only ever added)
PER_TABLE_READ = "per-table"  # the statistics of the tables the change names
EMPTIED = "emptied"  # an inlined table DuckLake emptied: the base's rows, read whole
DIFF = "diff"  # the whole table against the base
# the kinds whose read is of DuckLake's copy alone and known before the loop
AHEAD = frozenset({FILES, SNAPSHOTS, CHILDREN, VERSIONED, INLINE_DELETES})


@dataclass(frozen=True)
class FirstRead:
    """Capture's first read of a table: its kind, and the rows it asks for
    (``where``, and with ``also`` those too: the two never overlap)."""

    kind: str
    where: str = ""
    also: str | None = None


def first_read(
    table: str,
    columns: list[tuple[str, str]],
    count: int | None,
    scope: Scope,
    by_hand: bool,
) -> FirstRead:
    """The first read of ``table`` (``count``: its rows in DuckLake's copy, None
    when DuckLake only inserted into it; ``by_hand``: a statement of the
    user's wrote the metadata database, so a row may have changed in place)."""
    inline = registry.inline_table(table) is not None
    if count == 0 and inline:
        return FirstRead(EMPTIED)
    snap, next_file = scope.snap, scope.next_file
    names = [name for name, _ in columns]
    versioned = "begin_snapshot" in names
    if by_hand or snap < 0:
        return FirstRead(DIFF)
    if next_file is not None and table in FILE_TABLES:
        key = FILE_TABLES[table]
        # New files carry new ids (a rewritten delete file may keep an old
        # begin_snapshot, so begin > S is not enough); ended files keep
        # theirs. One read, split by id; its two halves each let DuckDB skip
        # row groups by their min/max (an OR of the two scanned every row: 7
        # ms against 0.9 at 100k files). When DuckLake only inserted, nothing
        # ended: the second half is not read.
        ended = f"WHERE end_snapshot > {int(snap)} AND {ident(key)} < {int(next_file)}"
        new = f"WHERE {ident(key)} >= {int(next_file)}"
        return FirstRead(FILES, new, None if count is None else ended)
    if table in SNAPSHOT_TABLES:
        return FirstRead(SNAPSHOTS, f"WHERE {ident(SNAPSHOT_TABLES[table])} > {int(snap)}")
    if table in FILE_CHILDREN and next_file is not None:
        return FirstRead(CHILDREN, f"WHERE data_file_id >= {int(next_file)}")
    if versioned and "end_snapshot" in names:
        if count is None:  # DuckLake only inserted: nothing ended
            return FirstRead(VERSIONED, f"WHERE begin_snapshot > {int(snap)}")
        return FirstRead(
            VERSIONED, f"WHERE begin_snapshot > {int(snap)} OR end_snapshot > {int(snap)}"
        )
    if versioned and inline:
        return FirstRead(INLINE_DELETES, f"WHERE begin_snapshot > {int(snap)}")
    if table in PER_TABLE and scope.table_filter():
        return FirstRead(PER_TABLE_READ, scope.table_filter())
    return FirstRead(DIFF)
