"""Every metadata table compared with the base in one query, for a capture
the query log cannot vouch for (``write_log.py``: logging turned off, an
unqualified write, a table slatelake does not know).

A table's signature is its row count plus what moves when its rows change.
The big tables only gain rows with new ids (ids are never reused) or end
rows, so their largest id and snapshots suffice; every other table is small
and hashed whole.
"""

from __future__ import annotations

import duckdb

from slatelake.ducklake.capture_reads import FILE_CHILDREN, FILE_TABLES, SNAPSHOT_TABLES
from slatelake.ducklake.sql import ident
from slatelake.ducklake.tables import is_metadata_table, meta_tables
from slatelake.errors import UnsupportedError


def present_tables(con: duckdb.DuckDBPyConnection, db: str) -> list[str]:
    """The metadata tables ``db`` holds, listed whole (``tables.meta_tables``:
    the database is hidden from DuckDB's listings); one slatelake does not
    know is refused (a catalog it cannot store whole is never committed)."""
    tables = meta_tables(con, db)
    unknown = sorted(t for t in tables if not is_metadata_table(t))
    if unknown:
        raise UnsupportedError(
            f"DuckLake created metadata tables slatelake does not know: {', '.join(unknown)}; "
            "refusing to commit a catalog it cannot store whole"
        )
    return sorted(tables)


def signatures_sql(parts: list[tuple[str, str]], counts_only: bool = False) -> str:
    """One query: per (database, table) of ``parts``, a row of its index in
    ``parts``, its count and three signature values (zeros with
    ``counts_only``)."""
    return " UNION ALL ".join(
        (
            f"SELECT {int(i)}, count(*), 0::HUGEINT, 0::HUGEINT, 0::HUGEINT "
            f"FROM {ident(db)}.{ident(table)}"
            if counts_only
            else _signature_sql(i, db, table)
        )
        for i, (db, table) in enumerate(parts)
    )


def _signature_sql(i: int, db: str, table: str) -> str:
    if table in FILE_TABLES:
        key = FILE_TABLES[table]
        parts = (
            f"max({ident(key)})::HUGEINT, max(begin_snapshot)::HUGEINT, max(end_snapshot)::HUGEINT"
        )
    elif table in SNAPSHOT_TABLES:
        parts = f"max({ident(SNAPSHOT_TABLES[table])})::HUGEINT, 0::HUGEINT, 0::HUGEINT"
    elif table in FILE_CHILDREN:
        parts = "max(data_file_id)::HUGEINT, 0::HUGEINT, 0::HUGEINT"
    else:
        parts = "sum(hash(t))::HUGEINT, 0::HUGEINT, 0::HUGEINT"
    return f"SELECT {int(i)}, count(*), {parts} FROM {ident(db)}.{ident(table)} t"
