"""Where a session stands with transactions: one state, changed only here.

A session is in autocommit, or inside a transaction it opened for a
``session.transaction()`` block, or inside one a ``BEGIN`` statement opened
(a *raw* transaction, ended by the caller's COMMIT or ROLLBACK). Either kind
may have been poisoned by a statement that failed after DuckDB ran it: a
block then refuses every further statement, a raw transaction leaves them
to DuckDB, and both roll back at their end and say so. Beside the state, an
open transaction remembers whether it called one of DuckLake's maintenance
functions: its COMMIT then refuses to rebase (``commit_flow.py``); and,
for a session with cursors sharing its copy (``session_cursor.py``), where
the copy stood when it began (``Began``). Every
change of these goes through ``Txn``'s methods, so what the statement and
commit code see is one value, not several flags set in several files.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class TxnState(Enum):
    """Whether a transaction is open on the session, of which kind, and whether
    a statement in it failed."""

    NONE = "none"  # autocommit: each statement commits by itself
    BLOCK = "block"  # opened by ``session.transaction()``; the block commits
    BLOCK_FAILED = "block_failed"  # a statement failed: the block refuses the rest
    RAW = "raw"  # opened by BEGIN (SQL or ``session.begin()``); COMMIT commits
    RAW_FAILED = "raw_failed"  # a statement failed: the COMMIT rolls back

    @property
    def open(self) -> bool:
        return self is not TxnState.NONE

    @property
    def raw(self) -> bool:
        return self in (TxnState.RAW, TxnState.RAW_FAILED)

    @property
    def failed(self) -> bool:
        return self in (TxnState.BLOCK_FAILED, TxnState.RAW_FAILED)


_FAILED = {TxnState.BLOCK: TxnState.BLOCK_FAILED, TxnState.RAW: TxnState.RAW_FAILED}


@dataclass(frozen=True)
class Began:
    """Where DuckLake's copy stood when a transaction began (``CopyView``)."""

    load: int = 0  # the copy's load: a reload since drops the transaction's base
    reached: int = 0  # change sets that had reached the copy: those since are rebased over
    # another connection shared the copy (a cursor): its captures may have read
    # this transaction's early writes from DuckDB's query log, so COMMIT compares
    # every table instead of trusting the log
    shared: bool = False


@dataclass(frozen=True)
class Ended:
    """A transaction as it was when it ended."""

    state: TxnState
    called_maintenance: bool  # it called one of DuckLake's maintenance functions
    began: Began = Began()


@dataclass
class Txn:
    """The session's transaction state and its transitions."""

    state: TxnState = TxnState.NONE
    called_maintenance: bool = False
    began: Began = Began()

    @property
    def open(self) -> bool:
        return self.state.open

    def begin(self, raw: bool, began: Began) -> None:
        """A transaction opened (DuckDB accepted the BEGIN) on the copy as ``began``."""
        self.state = TxnState.RAW if raw else TxnState.BLOCK
        self.called_maintenance = False
        self.began = began

    def share(self) -> None:
        """A cursor now shares the copy with this open transaction."""
        if self.state.open:
            self.began = Began(self.began.load, self.began.reached, shared=True)

    def fail(self) -> None:
        """A statement of the open transaction failed after DuckDB ran it."""
        self.state = _FAILED.get(self.state, self.state)

    def note_maintenance_call(self) -> None:
        """The open transaction called one of DuckLake's maintenance functions."""
        if self.state.open:
            self.called_maintenance = True

    def end(self) -> Ended:
        """The transaction ended (about to commit, or rolled back): back to
        autocommit. Returns what it was, for its COMMIT to judge."""
        ended = Ended(self.state, self.called_maintenance, self.began)
        self.state, self.called_maintenance, self.began = TxnState.NONE, False, Began()
        return ended
