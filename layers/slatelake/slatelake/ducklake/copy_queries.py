"""What the session asks of DuckLake's copy of the catalog, by SQL on it.

The maintenance layer and the retention holds ask whether a snapshot,
schema or table is there, which tables are live, what the listed files
weigh and which scheduled deletions a held snapshot still needs. These are
reads of the session's own metadata database (``META_DB``) on its helper
cursor, apart from committing (``commit_flow.py``) and from running the
user's statements (``statement_flow.py``).
"""

from __future__ import annotations

from collections.abc import Iterable

import duckdb

from slatelake.ducklake.commit_flow import META_DB
from slatelake.ducklake.sql import ident, run


class CopyQueries:
    """Reads of DuckLake's copy of the catalog on the session's helper cursor."""

    def __init__(self, cursor: duckdb.DuckDBPyConnection, meta_db: str = META_DB) -> None:
        self._cursor = cursor
        self._meta_db = meta_db  # the session's metadata database

    def snapshots_present(self, ids: Iterable[int]) -> set[int]:
        """Which of ``ids`` are snapshots in DuckLake's copy of the catalog (at
        the head inside ``commit_under_lock``'s build)."""
        wanted = sorted({int(i) for i in ids})
        if not wanted:
            return set()
        rows = run(
            self._cursor,
            f"SELECT snapshot_id FROM {ident(self._meta_db)}.ducklake_snapshot "
            "WHERE list_contains(?, snapshot_id)",
            [wanted],
        ).fetchall()
        return {int(r[0]) for r in rows}

    def catalog_has(self, schema: str, table: str | None = None) -> bool:
        """Whether the live catalog (DuckLake's copy) has the schema, or the
        table in it."""
        if table is None:
            sql = (
                f"SELECT count(*) FROM {ident(self._meta_db)}.ducklake_schema "
                "WHERE schema_name = ? AND end_snapshot IS NULL"
            )
            params: list[str] = [schema]
        else:
            sql = (
                f"SELECT count(*) FROM {ident(self._meta_db)}.ducklake_table t "
                f"JOIN {ident(self._meta_db)}.ducklake_schema s USING (schema_id) "
                "WHERE s.schema_name = ? AND t.table_name = ? "
                "AND t.end_snapshot IS NULL AND s.end_snapshot IS NULL"
            )
            params = [schema, table]
        return bool(run(self._cursor, sql, params).fetchone()[0])

    def live_tables(self) -> list[tuple[str, str]]:
        """(schema, table) of every live table, from DuckLake's copy of the
        catalog (no per-table work, unlike ``duckdb_tables()``)."""
        rows = self._cursor.execute(
            f"SELECT s.schema_name, t.table_name FROM {ident(self._meta_db)}.ducklake_table t "
            f"JOIN {ident(self._meta_db)}.ducklake_schema s USING (schema_id) "
            "WHERE t.end_snapshot IS NULL AND s.end_snapshot IS NULL ORDER BY 1, 2"
        ).fetchall()
        return [(str(a), str(b)) for a, b in rows]

    def catalog_file_bytes(self) -> int:
        """Bytes of every data and delete file the catalog lists (live or kept
        by history); files scheduled for deletion are no longer counted, as
        DuckLake drops their sizes when it schedules them."""
        return int(
            self._cursor.execute(
                f"SELECT (SELECT coalesce(sum(file_size_bytes), 0) "
                f"FROM {ident(self._meta_db)}.ducklake_data_file) + "
                f"(SELECT coalesce(sum(file_size_bytes), 0) "
                f"FROM {ident(self._meta_db)}.ducklake_delete_file)"
            ).fetchone()[0]
        )

    def held_files_scheduled(self, snapshot_ids: Iterable[int]) -> list[str]:
        """Paths of files scheduled for deletion that one of ``snapshot_ids``
        still references (a data or delete file live at that snapshot): none
        in a sound catalog; the cleanup fail-safe asks before deleting."""
        held = sorted({int(i) for i in snapshot_ids})
        if not held:
            return []
        rows = run(
            self._cursor,
            f"""
            WITH files AS (
                SELECT data_file_id AS id, begin_snapshot, end_snapshot
                FROM {ident(self._meta_db)}.ducklake_data_file
                UNION ALL
                SELECT delete_file_id, begin_snapshot, end_snapshot
                FROM {ident(self._meta_db)}.ducklake_delete_file
            )
            SELECT DISTINCT s.path
            FROM {ident(self._meta_db)}.ducklake_files_scheduled_for_deletion s
            JOIN files f ON f.id = s.data_file_id, unnest(?::BIGINT[]) h(snapshot_id)
            WHERE f.begin_snapshot <= h.snapshot_id
              AND (f.end_snapshot IS NULL OR f.end_snapshot > h.snapshot_id)
            ORDER BY 1
            """,
            [held],
        ).fetchall()
        return [str(r[0]) for r in rows]
