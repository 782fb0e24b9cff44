"""Capture's fallback: one metadata table of DuckLake's copy diffed whole
against the committed base, for a change no predicate explains (DuckLake
deleted rows outright: an expiry, a flush; the files a merge or cleanup
deletes are found by their vanished ids first, ``Capture._vanished``).

A small table is read from both sides in one query and compared in Python
(a DuckDB ``EXCEPT ALL`` costs ~10 ms however small the table); a big one is
diffed by ``EXCEPT ALL`` in DuckDB. The caller brings the base up to date
first (``DuckState.settle``).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import duckdb

from slatelake.catalog import registry
from slatelake.catalog.changes import RowChanges
from slatelake.catalog.rows import Row
from slatelake.ducklake.sql import ident
from slatelake.ducklake.tables import select_list
from slatelake.errors import UnsupportedError

# Above this many rows (on either side) a whole-table diff runs in DuckDB.
SMALL_TABLE = 20_000


def diff(
    con: duckdb.DuckDBPyConnection,
    db: str,
    base: str,
    table: str,
    columns: list[tuple[str, str]],
    changes: RowChanges,
    rows: int,
) -> None:
    """Add to ``changes`` what ``table`` gained and lost in ``db`` against
    ``base``; ``rows`` is the larger side's row count, as far as known. An
    inlined table's rows keep their identity across an UPDATE, so they are
    matched by it."""
    inline = registry.inline_table(table)
    if rows > SMALL_TABLE and inline is None:
        added, removed = _except_all(con, db, base, table, columns)
        changes.insert(table, *added)
        changes.delete(table, *removed)
        return
    cols = select_list(columns, inline=inline is not None)
    both = _both(con, db, base, table, cols)
    old = [r[1:] for r in both if not r[0]]
    new = [r[1:] for r in both if r[0]]
    if inline is not None:
        old_by_id = {_identity(inline, r): r for r in old}
        new_by_id = {_identity(inline, r): r for r in new}
        changes.insert(table, *(r for i, r in new_by_id.items() if old_by_id.get(i) != r))
        changes.delete(table, *(r for i, r in old_by_id.items() if i not in new_by_id))
        return
    gone = Counter(old)
    gone.subtract(new)
    added_rows = Counter(new)
    added_rows.subtract(old)
    changes.insert(table, *added_rows.elements())
    changes.delete(table, *gone.elements())


def _both(con: duckdb.DuckDBPyConnection, db: str, base: str, table: str, cols: str) -> list[Row]:
    """Both sides' rows of ``table`` in one query, each led by "is DuckLake's"."""
    sql = (
        f"SELECT true, {cols} FROM {ident(db)}.{ident(table)} UNION ALL "
        f"SELECT false, {cols} FROM {ident(base)}.{ident(table)}"
    )
    try:
        return [tuple(r) for r in con.execute(sql).fetchall()]
    except duckdb.InvalidInputException as exc:
        raise UnsupportedError(f"{table}: a column type cannot be captured ({exc})") from exc


def _except_all(
    con: duckdb.DuckDBPyConnection, db: str, base: str, table: str, columns: list[tuple[str, str]]
) -> tuple[list[Row], list[Row]]:
    """Rows only in DuckLake's copy, and rows only in the base (multisets), in one query."""
    cols = select_list(columns)
    a = f"{ident(db)}.{ident(table)}"
    b = f"{ident(base)}.{ident(table)}"
    try:
        rows = con.execute(
            f"(SELECT true, * FROM (SELECT {cols} FROM {a} EXCEPT ALL SELECT {cols} FROM {b})) "
            f"UNION ALL (SELECT false, * FROM "
            f"(SELECT {cols} FROM {b} EXCEPT ALL SELECT {cols} FROM {a}))"
        ).fetchall()
    except duckdb.InvalidInputException as exc:
        raise UnsupportedError(f"{table}: a column type cannot be captured ({exc})") from exc
    return [tuple(r[1:]) for r in rows if r[0]], [tuple(r[1:]) for r in rows if not r[0]]


def _identity(table: registry.InlineTable, row: Row) -> tuple[Any, ...]:
    return tuple(row[i] for i in table.identity)
