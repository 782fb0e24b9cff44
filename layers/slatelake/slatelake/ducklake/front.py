"""A connection's way in to a session's statement runner: statements and transactions.

A session's own connection and each of its cursors (``session_cursor.py``)
is a *front*: a DuckDB connection to the session's database, a transaction
state (``Txn``) and a ``StatementRunner`` of its own, over the session's one
copy of DuckLake's catalog and one committer. Every call a front makes runs
``_serve``d: under the session's lock, with the committer told which
connection and transaction it commits. A transaction's statements are
separate calls, so fronts interleave between them as DuckDB's connections
do; a commit never interleaves with another.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from types import FrameType
from typing import Any, Self

from slatelake.ducklake.duck_errors import duckdb_errors
from slatelake.ducklake.statement_flow import StatementRunner
from slatelake.ducklake.txn_state import Txn


class RunnerFront:
    """Statements and transactions of one connection, through its runner."""

    _runner: StatementRunner
    _txn: Txn

    def _serve(self) -> AbstractContextManager[None]:
        """Hold the session for one call of this front's."""
        raise NotImplementedError

    @property
    def txn(self) -> Txn:
        """This connection's transaction state."""
        return self._txn

    def _statements(
        self, query: str, params: Any, writes: bool | None, frame: FrameType | None, pending: bool
    ) -> Any:
        """Run SQL through the statement runner (the commit path); ``frame``:
        the caller's, where DuckDB's replacement scans find Python names."""
        with self._serve(), duckdb_errors():
            return self._runner.statements(query, params, writes, frame, pending)

    def _ready_to_read(self) -> None:
        """What a statement's read does first (``StatementRunner.ready_to_read``)."""
        with self._serve(), duckdb_errors():
            self._runner.ready_to_read()

    def begin(self) -> Self:
        """``BEGIN``, as DuckDB's ``begin``."""
        with self._serve(), duckdb_errors():
            self._runner.transaction_statement("BEGIN")
        return self

    def commit(self) -> Self:
        """``COMMIT``, as DuckDB's ``commit``: under the lake's commit lock
        (nothing to do outside a transaction, as in DuckDB)."""
        if self._txn.open:
            with self._serve(), duckdb_errors():
                self._runner.transaction_statement("COMMIT")
        return self

    def rollback(self) -> Self:
        with self._serve(), duckdb_errors():
            self._runner.transaction_statement("ROLLBACK")
        return self

    @property
    def in_transaction(self) -> bool:
        return self._txn.open

    @contextmanager
    def transaction(self) -> Iterator[Self]:
        """Group statements into one DuckLake transaction and one change set.
        The block's own statements are calls of their own: the session is not
        held across the block, only across its BEGIN and its COMMIT."""
        with self._serve(), duckdb_errors():
            self._runner.begin_block()
        try:
            try:
                yield self
            except BaseException:
                with self._serve():
                    self._runner.end_failed_transaction()
                raise
            with self._serve(), duckdb_errors():
                self._runner.commit_block()
        finally:
            self._runner.unmark_write()
