"""The live schemas and tables a policy row can name, by DuckLake's own ids.

A policy row for a schema or a table is keyed by ``schema_id`` or
``table_id`` (``ducklake_schema`` / ``ducklake_table``), not by name: a name
is only how the row is shown. DuckLake keeps a table's id across ``ALTER
TABLE ... RENAME`` and gives a re-created table a new one, so a policy
follows its table through a rename and ends with it at a drop. This module
reads the ids and current names live at the session's head (DuckLake's copy
of the catalog, one query); ``policy.py`` binds rows to them. Knows nothing
of policy fields; runs one read-only query and writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from slatelake.ducklake.session import META_DB, Session
from slatelake.ducklake.sql import ident


@dataclass(frozen=True)
class LiveNames:
    """Live schemas (id -> name) and tables (id -> (schema id, name)) at one head."""

    schemas: dict[int, str]
    tables: dict[int, tuple[int, str]]

    def schema_id(self, name: str) -> int | None:
        return next((i for i, n in self.schemas.items() if n == name), None)

    def table_id(self, schema: str, name: str) -> int | None:
        sid = self.schema_id(schema)
        return next(
            (i for i, (s, n) in self.tables.items() if s == sid and n == name),
            None,
        )

    def table_names(self, table_id: int) -> tuple[int, str, str] | None:
        """(schema id, schema name, table name) of a live table, else None."""
        found = self.tables.get(table_id)
        if found is None or found[0] not in self.schemas:
            return None
        return found[0], self.schemas[found[0]], found[1]


def live_names(session: Session) -> LiveNames:
    """Every live schema and table at the session's head, by id."""
    con = session.con.cursor()  # DuckLake's copy of the catalog, never the lake's catalog
    try:
        schemas = con.execute(
            f"SELECT schema_id, schema_name FROM {ident(META_DB)}.ducklake_schema "
            "WHERE end_snapshot IS NULL"
        ).fetchall()
        tables = con.execute(
            f"SELECT table_id, schema_id, table_name FROM {ident(META_DB)}.ducklake_table "
            "WHERE end_snapshot IS NULL"
        ).fetchall()
    finally:
        con.close()
    return LiveNames(
        {int(i): str(n) for i, n in schemas},
        {int(i): (int(s), str(n)) for i, s, n in tables},
    )
