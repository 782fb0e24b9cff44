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

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import duckdb

from slatelake.catalog import registry
from slatelake.ducklake.session import META_DB, Session
from slatelake.ducklake.sql import ident, run
from slatelake.errors import ConflictError
from slatelake.maintenance.flush_rounding import WHY, rounded_by_flush
from slatelake.maintenance.option_values import Value
from slatelake.maintenance.options import StepConfig

TableName = tuple[str, str]  # (schema, table)
FLUSH = "flush_inlined_data"
T = TypeVar("T")


class Steps(Protocol):
    """What the guard uses of the steps (steps.py), which use the guard."""

    session: Session
    may_flush: bool
    only: TableName | None
    per_table: dict[str, dict[TableName, StepConfig]]
    log: Callable[[str], None]

    def flush_table(self, table: TableName | None) -> list[tuple[Any, ...]] | None: ...

    def call(
        self,
        function: str,
        columns: tuple[str, ...],
        args: dict[str, Value],
        scope: TableName | None = None,
    ) -> list[tuple[Any, ...]]: ...

    def statement(
        self,
        function: str,
        columns: tuple[str, ...],
        args: dict[str, Value],
        scope: TableName | None,
    ) -> str: ...

    def with_retry(self, what: str, fn: Callable[[], T]) -> T: ...


def tables_with_inlined_deletions(
    session: Session, only: TableName | None = None
) -> set[TableName]:
    """The live tables (``only``, when given, or any) with a data file that
    has inlined deletions in the session's copy of the catalog; the caller
    brings the session to the head first. One query, over the inlined-delete
    tables the session's state lists (``ducklake_inlined_delete_<table id>``),
    just the one for ``only``: a per-table rewrite costs its table, and
    nothing lists the database's tables (that walks DuckLake's catalog)."""
    tables = (registry.inline_table(n) for n in sorted(session.state.inline_names()))
    deletes = [t for t in tables if t and t.row_kind == registry.INLINE_DELETE_ROW_KIND]
    if not deletes:
        return set()
    # a cursor of its own: on the session's connection, whose default catalog
    # is the lake, each query first asks DuckLake (2.7 ms against 0.9)
    con = session.con.cursor()
    try:
        return _with_inlined_deletions(con, deletes, only)
    finally:
        con.close()


def _with_inlined_deletions(
    con: duckdb.DuckDBPyConnection, deletes: list[registry.InlineTable], only: TableName | None
) -> set[TableName]:
    if only is not None:
        row = run(
            con,
            f"""
            SELECT t.table_id FROM {ident(META_DB)}.ducklake_table t
            JOIN {ident(META_DB)}.ducklake_schema s ON s.schema_id = t.schema_id
            WHERE s.schema_name = ? AND t.table_name = ?
              AND t.end_snapshot IS NULL AND s.end_snapshot IS NULL
            """,
            list(only),
        ).fetchone()
        wanted = (int(row[0]),) if row is not None else None
        deletes = [t for t in deletes if t.ids == wanted]
    if not deletes:
        return set()
    pending = " UNION ALL ".join(
        f"SELECT file_id FROM {ident(META_DB)}.{ident(t.name)}" for t in deletes
    )
    rows = con.execute(
        f"""
        SELECT DISTINCT s.schema_name, t.table_name
        FROM {ident(META_DB)}.ducklake_data_file f
        JOIN {ident(META_DB)}.ducklake_table t USING (table_id)
        JOIN {ident(META_DB)}.ducklake_schema s ON s.schema_id = t.schema_id
        WHERE f.end_snapshot IS NULL AND t.end_snapshot IS NULL AND s.end_snapshot IS NULL
          AND f.data_file_id IN ({pending})
        """
    ).fetchall()
    return {(str(schema), str(table)) for schema, table in rows}


class LeftOut(Exception):
    """A table the rewrite leaves out: its files hold inlined deletions that
    this pass may not flush."""


class RewriteGuard:
    """A rewrite never ends a file that still has inlined deletions
    (rewrite_guard.py): each rewrite call runs only if, with the commit lock
    held, no file in its scope has any; otherwise the scope is flushed first
    (when the pass may flush it) and the call asked again, or the table is
    left out. Other steps' calls pass straight through."""

    ATTEMPTS = 3

    def __init__(self, steps: Steps, step: str, skip: set[TableName]) -> None:
        self.steps, self.step = steps, step
        self.flushed = self.flushes = 0
        self.flushed_scopes: set[str] = set()
        self.left_out: set[TableName] = set()
        self._own = steps.per_table.get(FLUSH) or {}
        self._rounding: set[TableName] = set()  # a flush would round them: never flushed here
        if step != "rewrite_data_files":
            return
        steps.session.refresh()
        self._rounding = rounded_by_flush(steps.session, steps.only)
        found = tables_with_inlined_deletions(steps.session, steps.only) - skip
        self.left_out = {t for t in found if not self._may_flush(t)}
        for schema, table in sorted(self.left_out):
            why = WHY if (schema, table) in self._rounding else "they are not flushed"
            steps.log(f"{step}: leaves out {schema}.{table}: inlined deletions; {why}")

    @property
    def lake_wide(self) -> bool:
        """Whether one lake-wide call may serve: every table flushes alike."""
        return self.step != "rewrite_data_files" or (
            self.steps.may_flush and not self._own and not self._rounding
        )

    def _may_flush(self, table: TableName) -> bool:
        return (
            self.steps.may_flush
            and table not in self._rounding
            and (table not in self._own or self._own[table].enabled)
        )

    def call(
        self, cols: tuple[str, ...], args: dict[str, Value], table: TableName | None
    ) -> list[tuple[Any, ...]]:
        steps = self.steps
        if self.step != "rewrite_data_files":
            return steps.call(self.step, cols, args, scope=table)
        sql = steps.statement(self.step, cols, args, table)
        for _ in range(self.ATTEMPTS):
            result, reason = steps.session.run_maintenance_unless(
                sql, lambda: self._unflushed(table)
            )
            if reason is None:
                return result.fetchall() if result is not None else []
            if table is not None and not self._may_flush(table):
                raise LeftOut(reason)
            if not self._flush(table):
                if table is None:  # a table gained such rows during the pass
                    raise ConflictError(f"rewrite_data_files: no lake-wide flush: {WHY}")
                self._rounding.add(table)
                raise LeftOut(f"its inlined rows stay: {WHY}")
        raise ConflictError(
            f"rewrite_data_files: inlined deletions kept arriving in {self._name(table)} "
            f"between {self.ATTEMPTS} flushes and the rewrite; nothing was rewritten, run it again"
        )

    def _unflushed(self, table: TableName | None) -> str | None:
        """Asked under the commit lock, on the head: why the call may not run."""
        found = tables_with_inlined_deletions(self.steps.session, table)
        if not found:
            return None
        names = ", ".join(f"{s}.{t}" for s, t in sorted(found))
        return f"inlined deletions in {names} are not flushed"

    def _flush(self, table: TableName | None) -> bool:
        """Flush the scope; False when a flush would round a value (nothing ran)."""
        rows = self.steps.with_retry(
            f"flush {self._name(table)} before the rewrite",
            lambda: self.steps.flush_table(table),
        )
        if rows is None:
            return False
        self.flushed += sum(int(r[0]) for r in rows)
        self.flushes += 1
        self.flushed_scopes.add(self._name(table))
        return True

    @staticmethod
    def _name(table: TableName | None) -> str:
        return "every table" if table is None else f"{table[0]}.{table[1]}"

    def said(self) -> str:
        out = ""
        if self.flushes:  # DuckLake counts the inserted rows it flushed, not deletions
            names = ", ".join(sorted(self.flushed_scopes))
            out = (
                f"; flushed {names} first: inlined deletions "
                f"({self.flushes} flushes, {self.flushed} inserted rows)"
            )
        unflushed = self.left_out - self._rounding
        if unflushed:
            names = ", ".join(f"{s}.{t}" for s, t in sorted(unflushed))
            out += (
                f"; left out {names}: their inlined deletions are not flushed (this pass does "
                "not flush them), and DuckLake 1.5.5 would leave them to a later flush that "
                "makes time travel count the rewritten files twice"
            )
        rounding = self.left_out & self._rounding
        if rounding:
            names = ", ".join(f"{s}.{t}" for s, t in sorted(rounding))
            out += f"; left out {names}: their inlined deletions wait for a flush, and {WHY}"
        return out
