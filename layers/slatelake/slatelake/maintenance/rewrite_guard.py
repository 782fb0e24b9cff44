"""Why a rewrite flushes inlined deletions first (DuckLake 1.5.5).

DuckLake's ``rewrite_data_files`` ends a data file and writes its live rows
anew, but leaves the file's inlined deletions in place. A later
``flush_inlined_data`` writes them as a second delete file of the ended
file, live from the deletion's snapshot, beside the delete file that was
live then; DuckLake scans a data file once per live delete file, so time
travel to the snapshots between that deletion and the rewrite counts the
file's rows twice. Stock DuckLake does the same on its own catalog
(``tests/maintenance/test_rewrite_guard.py``). So a pass's rewrite call
runs only when, asked with the commit lock held, no file in its scope has
inlined deletions; otherwise the pass flushes that scope first and asks
again, or, when it may not flush it, leaves the table out and says so.
Nothing commits between the question and the rewrite's commit.
"""

from __future__ import annotations

from slatelake.ducklake.session import META_DB, Session
from slatelake.ducklake.sql import ident
from slatelake.maintenance.health import inlined_counts

TableName = tuple[str, str]  # (schema, table)


def tables_with_inlined_deletions(session: Session) -> set[TableName]:
    """The live tables with a data file that has inlined deletions in the
    session's copy of the catalog (two queries to count them, one to name
    their tables); the caller brings the session to the head first."""
    _, per_file = inlined_counts(session.con)
    if not per_file:
        return set()
    rows = session.con.execute(
        f"""
        SELECT DISTINCT s.schema_name, t.table_name
        FROM {ident(META_DB)}.ducklake_data_file f
        JOIN {ident(META_DB)}.ducklake_table t USING (table_id)
        JOIN {ident(META_DB)}.ducklake_schema s ON s.schema_id = t.schema_id
        WHERE f.end_snapshot IS NULL AND t.end_snapshot IS NULL AND s.end_snapshot IS NULL
          AND list_contains(CAST(? AS BIGINT[]), f.data_file_id)
        """,
        [sorted(per_file)],
    ).fetchall()
    return {(str(schema), str(table)) for schema, table in rows}
