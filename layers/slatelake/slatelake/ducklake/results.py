"""What a statement hands back: DuckDB's own objects, as DuckDB hands them back.

A read is DuckDB's lazy relation. A write runs to completion and commits
before the caller gets anything, so its result must not re-run anything
when it is fetched: its rows are materialized first, by DuckDB where DuckDB
can (the rows of ``RETURNING`` or ``CALL``), into a temporary table for a
``SELECT`` that writes (DuckLake's table functions), and as a one-row
relation for DuckDB's row count. pyarrow is never needed for any of it.

Replacement scans (a pandas or Arrow object named in the query) resolve in
the caller's frame, as DuckDB resolves them: ``in_scope`` runs the DuckDB
call from a frame that sees the caller's names.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable
from types import FrameType
from typing import Any

import duckdb

from slatelake.ducklake.sql import ident
from slatelake.errors import UnsupportedError

# Temporary tables holding the rows of SELECTs that wrote; the oldest are
# dropped beyond this many, so a long-lived session stays flat.
RESULT_TABLES_KEPT = 16
RESULT_TABLE_PREFIX = "__slatelake_result_"
_LAST = "__slatelake_last_result"
_FROM_LAST = "FROM __slatelake_last_result"
ST = duckdb.StatementType
# Statements DuckDB answers with a row count (or a success flag), unless RETURNING.
ROW_COUNT_KINDS = frozenset(
    {ST.INSERT, ST.UPDATE, ST.DELETE, ST.MERGE_INTO, ST.CREATE, ST.DROP, ST.ALTER, ST.COPY}
)
_SCALAR_TYPE = re.compile(r"[A-Z]+(?: [A-Z]+)*")
_FN, _ARGS, _KWARGS = "__slatelake_fn__", "__slatelake_args__", "__slatelake_kwargs__"
_CALL = f"{_FN}(*{_ARGS}, **{_KWARGS})"

Relation = duckdb.DuckDBPyRelation


def in_scope(frame: FrameType | None, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call ``fn`` (a DuckDB method) from a frame whose names are ``frame``'s.

    DuckDB's replacement scan looks up an unknown table name in the Python
    frame that called it, which would be the session's own; evaluating the
    call with the caller's globals and a copy of its locals makes that frame
    the caller's, so ``INSERT INTO t SELECT * FROM my_df`` finds ``my_df``
    exactly where DuckDB would. The evaluated text is a constant."""
    if frame is None:
        return fn(*args, **kwargs)
    scope = dict(frame.f_locals)
    scope.update({_FN: fn, _ARGS: args, _KWARGS: kwargs})
    return eval(_CALL, frame.f_globals, scope)  # noqa: S307 - constant text, values as objects


def has_returning(query: str) -> bool:
    """Whether a statement returns rows with ``RETURNING`` (DuckDB's tokenizer:
    the word inside a string or a comment does not count)."""
    lowered = query.lower()
    return any(
        kind == duckdb.token_type.keyword and lowered.startswith("returning", at)
        for at, kind in duckdb.tokenize(query)
    )


def _scalar_type(name: str) -> str:
    """A type DuckDB reported for a row count or flag, checked to be a plain
    type name (letters and spaces) before it is written into a CAST."""
    if not _SCALAR_TYPE.fullmatch(name):
        raise UnsupportedError(f"a statement reported a column of type {name}, not a row count")
    return name


def _constants(row: tuple[Any, ...], types: list[str]) -> str | None:
    """A row of counts and flags as SQL constants cast to their reported
    types (a flag as 0 or 1); None if a value is of another kind (then it
    is bound)."""
    parts = []
    for value, t in zip(row, types, strict=True):
        if value is None:
            parts.append(f"CAST(NULL AS {t})")
        elif isinstance(value, int):
            parts.append(f"CAST({int(value)} AS {t})")
        else:
            return None
    return ", ".join(parts)


class Results:
    """The materialized results of one session's writes."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        self._tables: deque[str] = deque()
        self._made = 0

    def write(
        self, query: str, params: Any, kinds: set[Any], frame: FrameType | None
    ) -> Relation | None:
        """Run a write and return its result, materialized."""
        con = self.con
        if kinds == {ST.SELECT}:
            return self._select_into_table(query, params, frame)
        if kinds <= ROW_COUNT_KINDS and not has_returning(query):
            cursor = in_scope(frame, con.execute, query, params)
            return self.rows(cursor.description, cursor.fetchall())
        return in_scope(frame, con.sql, query, params=params)  # DuckDB materializes it

    def _select_into_table(self, query: str, params: Any, frame: FrameType | None) -> Relation:
        """Run a SELECT once, keeping its rows (types exact) in a temporary table."""
        self._drop_oldest()
        self._made += 1
        name = f"{RESULT_TABLE_PREFIX}{self._made}"
        create = f"CREATE TEMP TABLE {ident(name)} AS {query}"
        in_scope(frame, self.con.execute, create, params)
        self._tables.append(name)
        return self.con.sql(f"FROM temp.main.{ident(name)}")

    def _drop_oldest(self) -> None:
        while len(self._tables) >= RESULT_TABLES_KEPT:
            self.con.execute(f"DROP TABLE IF EXISTS temp.main.{ident(self._tables.popleft())}")

    def rows(self, description: Any, rows: list[tuple[Any, ...]]) -> Relation | None:
        """A materialized relation of what DuckDB reports for a statement
        without a result set of its own (``Count`` BIGINT, ``Success``
        BOOLEAN): the values are bound as parameters, which makes DuckDB run
        it at once, and cast back to the reported types."""
        if description is None:
            return None
        types = [_scalar_type(str(d[1])) for d in description]
        names = ", ".join(ident(d[0]) for d in description)
        if not rows:
            nulls = ", ".join(f"CAST(NULL AS {t})" for t in types)
            return self.con.sql(f"SELECT * FROM (VALUES ({nulls})) AS t({names}) LIMIT 0")
        constants = [_constants(one, types) for one in rows]
        if all(c is not None for c in constants):
            # constants: a lazy relation that recomputes only them (a fifth
            # of the cost of binding parameters, which runs it at once)
            values = ", ".join(f"({row})" for row in constants)
            return self.con.sql(f"SELECT * FROM (VALUES {values}) AS t({names})")
        row = ", ".join(f"CAST(? AS {t})" for t in types)
        values = ", ".join([f"({row})"] * len(rows))
        flat = [value for one in rows for value in one]
        return self.con.sql(f"SELECT * FROM (VALUES {values}) AS t({names})", params=flat)

    def pend(self, relation: Relation | None) -> duckdb.DuckDBPyConnection:
        """The connection with ``relation``'s rows as its pending result, as
        DuckDB's ``execute`` leaves it."""
        if relation is None:
            return self.con
        # a replacement scan of the relation itself: DuckDB copies its rows
        scope = {_FN: self.con.execute, _ARGS: (_FROM_LAST,), _KWARGS: {}, _LAST: relation}
        return eval(_CALL, {}, scope)  # noqa: S307 - constant text, values as objects
