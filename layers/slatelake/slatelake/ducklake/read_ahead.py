"""Reads on a worker's cursor while the session's helper cursor reads too.

A small DuckDB query's cost is mostly fixed (~0.4 ms on a 2-core machine),
and DuckDB answers two at once on two connections of one database. The
session keeps one worker (a thread and a cursor of its own, made on first
use): capture reads every other one of a change's first reads on it
(``capture_reads.py``), and a write that runs beside its look at the log
asks it whether DuckDB committed anything behind the session's back.
The worker's cursor autocommits, so it sees what is committed, as the helper
cursor does outside a transaction. Each answer is taken once, by its SQL.
A capture that raised part way waits for its own reads not taken
(``drain``), leaving the others'; a question asked again is read again (an
answer never taken may be out of date); the session's close ends the worker.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import suppress

import duckdb

from slatelake.catalog.rows import Row
from slatelake.errors import UnsupportedError


def rows_of(con: duckdb.DuckDBPyConnection, table: str, sql: str) -> list[Row]:
    """The rows ``sql`` reads of ``table``, as tuples."""
    try:
        return [tuple(r) for r in con.execute(sql).fetchall()]
    except duckdb.InvalidInputException as exc:
        raise UnsupportedError(f"{table}: a column type cannot be captured ({exc})") from exc


class ReadAhead:
    """Reads run on a worker's cursor while the caller runs its own; each
    answer is taken once, by the SQL it was asked for (module doc)."""

    def __init__(self) -> None:
        self._cursor: duckdb.DuckDBPyConnection | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._ahead: dict[str, Future[list[Row]]] = {}

    def submit(self, con: duckdb.DuckDBPyConnection, table: str, sql: str) -> None:
        """Read ``sql`` on the worker (its cursor is made from ``con`` once); an
        earlier answer to it never taken is dropped: it may be out of date."""
        stale = self._ahead.pop(sql, None)
        if stale is not None:
            with suppress(Exception):
                stale.result()
        if self._pool is None:
            self._cursor = con.cursor()
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="slatelake-read-ahead")
        cursor = self._cursor
        assert cursor is not None
        self._ahead[sql] = self._pool.submit(rows_of, cursor, table, sql)

    def take(self, sql: str) -> list[Row] | None:
        """The answer to ``sql`` if it was read ahead (its error raised here),
        else None."""
        future = self._ahead.pop(sql, None)
        return None if future is None else future.result()

    def drain(self, asked: Iterable[str] | None = None) -> None:
        """Wait for the reads of ``asked`` (every read, with None) not taken (a
        capture that raised part way), dropping their answers: the worker is
        idle before its caller goes on, and another caller's reads stay."""
        keys = list(self._ahead) if asked is None else [k for k in asked if k in self._ahead]
        for key in keys:
            with suppress(Exception):  # the caller that asked has already failed
                self._ahead.pop(key).result()

    def close(self) -> None:
        self.drain()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        if self._cursor is not None:
            with suppress(duckdb.Error):  # the database was closed with its connection
                self._cursor.close()
            self._cursor = None
