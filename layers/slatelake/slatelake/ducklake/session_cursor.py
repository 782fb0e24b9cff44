"""A cursor of a session: another DuckDB connection on the same copy of the lake.

As DuckDB's ``cursor()`` is a second connection to the same database, a
session's cursor is a second connection to the session's database: the same
attached DuckLake (one catalog instance, as stock DuckLake's connections
share one), the same hidden copies, log, lock and lease, and a transaction
of its own. What DuckDB decides between two connections of one DuckLake, it
decides here too: a flush racing another's open flush is refused at the
statement ("Conflict on tuple deletion"), ``ducklake_last_committed_snapshot``
is the instance's.

What slatelake adds (``front.py``, ``commit_flow.py``): the session serves
one call at a time, so commits never interleave; a transaction records where
the copy stood when it began (``txn_state.Began``), and its COMMIT is checked
against every change set that reached the copy since (a sibling's commit,
others' applied by a sibling's refresh), not only those applied at its
COMMIT; if the copy was rebuilt meanwhile (a reload), the COMMIT is refused
and nothing lands. A transaction open while cursors share the copy captures
its change by comparing every table, since a sibling's capture may have read
its early writes from DuckDB's query log.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, suppress
from typing import TYPE_CHECKING, Any, Protocol

import duckdb

from slatelake.ducklake.attach_options import current_use, restore_use
from slatelake.ducklake.connection_api import ConnectionApi
from slatelake.ducklake.front import RunnerFront
from slatelake.ducklake.results import Results
from slatelake.ducklake.statement_flow import Attached, StatementRunner
from slatelake.ducklake.through import Through
from slatelake.ducklake.txn_state import Txn

if TYPE_CHECKING:
    from slatelake.catalog.lake import Lake
    from slatelake.ducklake.commit_flow import Committer
    from slatelake.ducklake.copy_view import CopyView
    from slatelake.ducklake.duck_state import DuckState
    from slatelake.ducklake.write_log import WriteLog


class Host(Protocol):
    """What a cursor reads of its session (``Session``)."""

    url: str
    alias: str
    read_only: bool
    data_path: str | None
    lake: Lake
    state: DuckState
    con: duckdb.DuckDBPyConnection
    log: WriteLog
    metadata_writes: bool

    @property
    def attached_lakes(self) -> Attached: ...

    def refresh(self) -> None: ...

    def internal_databases(self) -> frozenset[str]: ...

    def serving(self, front: Any) -> AbstractContextManager[None]: ...

    def left(self, front: Any) -> None: ...

    def cursor(self) -> Any: ...


class SessionCursor(RunnerFront, ConnectionApi):
    """A second connection on a session's copy of the lake (see the module);
    it answers DuckDB's connection API as the session does."""

    def __init__(self, host: Host, committer: Committer, view: CopyView) -> None:
        self._host = host
        self.con = host.con.cursor()
        try:
            where = current_use(host.con)  # where the session's names point
            if where is not None:
                restore_use(self.con, where)
            self._txn = Txn()
            self._runner = StatementRunner(self, committer, Results(self.con), self._txn, view)
        except BaseException:
            self.con.close()
            raise
        self.closed = False

    def _serve(self) -> AbstractContextManager[None]:
        return self._host.serving(self)

    # -- what the statement runner reads (statement_flow.StatementHost): the
    # session's, read through (a reload replaces its ``state``) -----------------
    url = Through("_host")
    alias = Through("_host")
    read_only = Through("_host")
    data_path = Through("_host")
    lake = Through("_host")
    state = Through("_host")
    log = Through("_host")
    metadata_writes = Through("_host")

    @property
    def attached_lakes(self) -> Attached:
        return self._host.attached_lakes

    @property
    def shared(self) -> bool:
        return True

    def refresh(self) -> None:
        """Bring the session (and so this cursor) to the log's head."""
        with self._serve():
            self._host.refresh()

    def internal_databases(self) -> frozenset[str]:
        return self._host.internal_databases()

    def _cursor(self) -> Any:
        """DuckDB's cursor of a cursor: another connection to the same database."""
        return self._host.cursor()

    def close(self) -> None:
        """Roll back an open transaction (as DuckDB's close does) and close
        the connection; the session and its other cursors go on."""
        if self.closed:
            return
        self.closed = True
        try:
            if self._txn.open:
                with self._serve(), suppress(duckdb.Error):
                    self._runner.end_failed_transaction()
            self._runner.unmark_write()
        finally:
            try:
                self._close_cursors()
                self.con.close()
            finally:
                self._host.left(self)

    def __enter__(self) -> SessionCursor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
