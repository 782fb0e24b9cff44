"""Which tables a flush of inlined data would change (DuckLake 1.5.5).

DuckDB's Parquet writer stores a HUGEINT or UHUGEINT, at any depth of a
nested type, as DOUBLE. A flush of inlined rows holding one brings back
every value past 2^53 rounded, and HUGEINT's minimum makes the table
unreadable; stock DuckLake does the same on its own catalog
(``tests/maintenance/test_flush_rounding.py``). The pass never loses a
value, so its flushes (the flush step's, and the rewrite guard's before a
rewrite) leave such a table's inlined rows where they are and say so. A
table whose inlined rows are all gone, or whose 128-bit columns were
dropped, flushes as any other.

``waiting`` says what a flush would write per table, counted as DuckLake
counts it, so a dry run's plan matches the pass that follows it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import duckdb

from slatelake.catalog import registry
from slatelake.ducklake.session import META_DB, Session
from slatelake.ducklake.sql import ident, run

TableName = tuple[str, str]  # (schema, table)
# DuckLake's names for HUGEINT and UHUGEINT in ducklake_column.column_type
WIDE_TYPES = ("int128", "uint128")
WHY = (
    "a flush would round their HUGEINT values (DuckLake writes them to Parquet as DOUBLE); "
    "ducklake_flush_inlined_data on the table, by hand, accepts that"
)


def rounded_by_flush(session: Session, only: TableName | None = None) -> set[TableName]:
    """The live tables (``only``, when given) with a live HUGEINT or UHUGEINT
    column that hold inlined rows, in the session's copy of the catalog. No
    query when no table holds inlined rows; else one over the columns (0.5 ms
    on 40 tables), and more only for a table that has such a column."""
    inline: dict[int, list[str]] = {}
    for name in session.state.inline_names():
        table = registry.inline_table(name)
        if table is not None and table.row_kind == registry.INLINE_ROW_KIND:
            inline.setdefault(table.ids[0], []).append(name)
    if not inline:
        return set()
    # a cursor of its own: on the session's connection, whose default catalog
    # is the lake, each query first asks DuckLake
    con = session.con.cursor()
    try:
        wide = run(
            con,
            f"SELECT DISTINCT table_id FROM {ident(META_DB)}.ducklake_column "
            "WHERE end_snapshot IS NULL AND list_contains(?, column_type)",
            [list(WIDE_TYPES)],
        ).fetchall()
        ids = sorted({int(r[0]) for r in wide} & set(inline))
        if not ids:
            return set()
        named = _live_names(con, ids)
        out: set[TableName] = set()
        for table_id, schema, table in named:
            found = (str(schema), str(table))
            if only is not None and found != only:
                continue
            if any(
                con.execute(f"SELECT 1 FROM {ident(META_DB)}.{ident(n)} LIMIT 1").fetchone()
                for n in inline[int(table_id)]
            ):
                out.add(found)
        return out
    finally:
        con.close()


def reason(session: Session, table: TableName | None) -> str | None:
    """Why a flush of ``table`` (None: every table) must not run now; the
    callers name the tables themselves."""
    return WHY if rounded_by_flush(session, table) else None


@dataclass(frozen=True)
class Waiting:
    """What a flush of one table would write. ``rows``: every row of its
    inlined-data tables, ended ones too (the flush writes them, with a
    delete file, so time travel still reaches them), which is what
    DuckLake's ``rows_flushed`` counts. ``deletions``: inlined deletions of
    rows in its data files, which the flush writes as delete files and
    ``rows_flushed`` does not count."""

    rows: int
    deletions: int

    @property
    def changes(self) -> bool:
        """Whether the flush commits anything (a table with neither commits nothing)."""
        return self.rows > 0 or self.deletions > 0


def waiting(session: Session, only: TableName | None = None) -> dict[TableName, Waiting]:
    """Each live table (``only``, when given) with anything inlined, in the
    session's copy of the catalog. No query when no inlined table exists;
    else one naming the live tables and one counting every inlined table
    (a UNION ALL), whatever the number of tables."""
    inline: dict[int, list[tuple[int, str]]] = {}
    for name in session.state.inline_names():
        table = registry.inline_table(name)
        if table is not None and table.row_kind in (
            registry.INLINE_ROW_KIND,
            registry.INLINE_DELETE_ROW_KIND,
        ):
            inline.setdefault(table.ids[0], []).append((table.row_kind, name))
    if not inline:
        return {}
    con = session.con.cursor()  # a cursor of its own, as rounded_by_flush says
    try:
        named = _live_names(con, sorted(inline))
        live = {int(i): (str(s), str(t)) for i, s, t in named}
        live = {i: n for i, n in live.items() if only is None or n == only}
        parts = [
            f"SELECT {int(kind)} AS kind, {int(table_id)} AS id, count(*) AS n "
            f"FROM {ident(META_DB)}.{ident(name)}"
            for table_id in sorted(live)
            for kind, name in sorted(inline[table_id])
        ]
        counts: dict[int, list[int]] = {}
        if parts:
            for kind, table_id, n in con.execute(" UNION ALL ".join(parts)).fetchall():
                found = counts.setdefault(int(table_id), [0, 0])
                found[0 if kind == registry.INLINE_ROW_KIND else 1] += int(n)
    finally:
        con.close()
    return {
        live[i]: Waiting(rows, deletions)
        for i, (rows, deletions) in counts.items()
        if rows or deletions
    }


def _live_names(con: duckdb.DuckDBPyConnection, ids: list[int]) -> list[tuple[Any, ...]]:
    """(table_id, schema, table) of the live tables among ``ids``."""
    return run(
        con,
        f"""
        SELECT t.table_id, s.schema_name, t.table_name
        FROM {ident(META_DB)}.ducklake_table t
        JOIN {ident(META_DB)}.ducklake_schema s ON s.schema_id = t.schema_id
        WHERE t.end_snapshot IS NULL AND s.end_snapshot IS NULL
          AND list_contains(?, t.table_id)
        """,
        [ids],
    ).fetchall()
