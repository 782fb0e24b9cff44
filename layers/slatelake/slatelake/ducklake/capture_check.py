"""The capture check (``SLATELAKE_VERIFY_CAPTURE=1``): DuckLake's copy of the
catalog against the committed base, every table, in one query.

The base advanced only by applying the committed change sets, so any
difference is a capture that missed or invented a row; tests run it after
every commit (``tests/ducklake/test_capture_check.py`` shows it naming each
kind of difference).
"""

from __future__ import annotations

import duckdb

from slatelake.catalog import registry
from slatelake.ducklake.duck_state import DuckState
from slatelake.ducklake.sql import ident
from slatelake.ducklake.tables import is_metadata_table, meta_tables
from slatelake.errors import CorruptionError


def verify(con: duckdb.DuckDBPyConnection, db: str, base: str, state: DuckState) -> None:
    """Every metadata table of ``db`` equals ``base`` at ``state``; raise
    naming the first that differs. One query compares every table's count
    and hash of all rows."""
    state.settle()
    based = {s.name for s in registry.TABLES} | state.inline_names()
    # by name: what DuckLake's copy names (its inlined-data list) and what the
    # state holds; a table slatelake does not know is capture's to refuse
    present = {t for t in meta_tables(con, db, known=based) if is_metadata_table(t)}
    for table in sorted(present ^ based):
        side = db if table in present else base
        if registry.inline_table(table) is not None or _any_rows(con, side, table):
            raise CorruptionError(
                f"capture check: {table} exists on one side only "
                f"({'DuckLake' if table in present else 'the committed state'})"
            )
    common = sorted(present & based)
    if not common:
        return
    sql = " UNION ALL ".join(
        f"SELECT {int(i)}, count(*), sum({_row_hash(table)})::HUGEINT "
        f"FROM {ident(side)}.{ident(table)} t"
        for i, (side, table) in enumerate([(db, t) for t in common] + [(base, t) for t in common])
    )
    sums = {r[0]: tuple(r[1:]) for r in con.execute(sql).fetchall()}
    for i, table in enumerate(common):
        if sums[i] != sums[i + len(common)]:
            raise CorruptionError(
                f"capture check: {table} in DuckDB differs from the committed state"
            )


def _any_rows(con: duckdb.DuckDBPyConnection, db: str, table: str) -> bool:
    sql = f"SELECT count(*) FROM {ident(db)}.{ident(table)}"
    return bool(con.execute(sql).fetchone()[0])


def _row_hash(table: str) -> str:
    """A row's hash: a registry table's columns hashed as arguments (a third
    cheaper than hashing the row as a struct; the registry fixes them on both
    sides), an inlined table's whole row, so a column on one side only shows."""
    spec = registry.BY_NAME.get(table)
    if spec is None:
        return "hash(t)"
    return f"hash({', '.join(ident(c) for c in spec.column_names)})"
