"""How DuckLake's copy of the catalog stands against the log: one record.

A session keeps two DuckDB databases: the committed catalog at its head and
DuckLake's working copy (``session.py``). Whether the copy must be rebuilt,
which head it was last brought to, the newest snapshot it holds, and when
the session last saw the log's end are facts about that copy, not about a
transaction (``txn_state.py``): the loader sets them, the statement and
commit code read them and mark the copy stale when DuckDB may hold what
the log does not. They live here together so no module keeps its own.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from slatelake.ducklake.txn_state import Began

if TYPE_CHECKING:
    from slatelake.ducklake.duck_state import DuckState
    from slatelake.log.changeset import ChangeSet, Head

# A refresh this recent lets the commit lock try at once (one LIST saved per
# write); a write that ran longer looks at the head again first.
FRESH_S = 1.0
# After a commit made without the lock was overtaken, writes take it for this long.
CONTENDED_S = 30.0


@dataclass
class CopyView:
    """DuckLake's copy of the catalog, as the session last left it."""

    # The copy must be rebuilt from the log before the next statement (DuckDB
    # may hold changes the log does not, or an interrupt left it unknown).
    stale: bool = False
    # The (head, last_seq) the copy was last brought to; None: reload it.
    synced: tuple[Head, int] | None = None
    # The newest snapshot the copy holds: past it, DuckDB committed a write
    # behind the session's back.
    copy_snapshot: int | None = None
    refreshed_at: float = float("-inf")  # monotonic; when the session last saw the log's end
    overtaken_at: float = float("-inf")  # monotonic; a commit made without the lock was refused
    others_at: float = float("-inf")  # monotonic; a refresh last found another committer's slot
    loads: int = 0  # how many times the copy was (re)built: a transaction's base is one load
    # While cursors share the copy: the change sets that reached it since
    # ``reached_before`` of them had (others' applied, and its own commits), so
    # a transaction open meanwhile is checked against all it rebases over.
    keeps_reached: bool = False
    reached: list[ChangeSet] = field(default_factory=list)
    reached_before: int = 0

    def began(self, shared: bool) -> Began:
        """Where the copy stands for a transaction beginning now."""
        return Began(self.loads, self.reached_before + len(self.reached), shared)

    def reloaded(self) -> None:
        """The copy was rebuilt: every transaction begun before lost its base."""
        self.loads += 1
        self.reached_before += len(self.reached)
        self.reached = []

    def reach(self, change_sets: list[ChangeSet]) -> None:
        """``change_sets`` reached the copy (kept once a cursor shares it; a
        transaction begun before counts from the first kept)."""
        if self.keeps_reached:
            self.reached.extend(change_sets)

    def reached_since(self, began: Began) -> list[ChangeSet]:
        """The change sets that reached the copy after ``began``, as kept."""
        return self.reached[max(0, began.reached - self.reached_before) :]

    def keep_reached_from(self, oldest: int | None) -> None:
        """Forget what no open transaction began before (``oldest``: the
        earliest ``Began.reached`` among them; None: none is open)."""
        drop = len(self.reached) if oldest is None else max(0, oldest - self.reached_before)
        if drop:
            del self.reached[:drop]
            self.reached_before += drop

    def caught_up(self, state: DuckState) -> None:
        """The copy now holds the catalog at ``state``'s head, and no more."""
        self.stale = False
        self.synced = (state.head, state.last_seq)
        self.copy_snapshot = state.head.snapshot_id

    def at_head(self, state: DuckState) -> bool:
        """Whether the copy was brought to ``state``'s head."""
        return (state.head, state.last_seq) == self.synced

    def just_refreshed(self) -> bool:
        """Whether the session looked at the log's head a moment ago (within
        ``FRESH_S``): the commit lock's first try then skips its own look."""
        return time.monotonic() - self.refreshed_at < FRESH_S

    def contended(self) -> bool:
        """Whether a commit made without the lock was overtaken within ``CONTENDED_S``."""
        return time.monotonic() - self.overtaken_at < CONTENDED_S

    def busy(self) -> bool:
        """Whether a commit of this session was overtaken, or a refresh found
        another committer's slot, within ``CONTENDED_S``: writes and
        maintenance calls then take the lock first."""
        return self.contended() or time.monotonic() - self.others_at < CONTENDED_S
