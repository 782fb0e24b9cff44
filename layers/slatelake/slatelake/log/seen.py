"""The slots one handle has seen, by digest: what makes a cut tail loud.

A handle (``catalog/lake.py``) remembers ``slot_digest`` of the newest
``SEEN_SLOTS`` slots it read or wrote. Its commits chain to them (the slot
before names it, log/changeset.py version 3); its replays check them:
- a slot it saw that now has another digest was replaced (CorruptionError);
- a tail that ends below the highest slot it saw lost its newest slots, since
  the folder never deletes the newest slot (CorruptionError naming the first
  one gone; a listing that skipped it, or a truncation under a stale view, is
  told apart first by one GET and the truncation mark: StaleViewError);
- a commit that wins a seq it saw taken won it because the slot there was
  deleted: it is withdrawn, never acknowledged at a seq once taken
  (ConflictError when the folder truncated it under a stale view, else
  CorruptionError).
All of it is memory: no request unless a check fails. What it cannot see is
a cut slot this handle never saw; the chain makes that loud for the handles
that did see it, and for every reader once a slot is written on top of it.
"""

from __future__ import annotations

import contextlib

from slatelake.errors import ConflictError, CorruptionError, StaleViewError
from slatelake.log.slots import SlotLog

SEEN_SLOTS = 4096
_RESTORE = (
    "restore it from a backup or object versioning, or restore the lake; nothing is "
    "committed at its seq meanwhile"
)


class SeenSlots:
    def __init__(self, log: SlotLog) -> None:
        self.log = log
        # seq -> slot_digest; the committer adds the slots it writes and reads
        self.chain: dict[int, str] = {}
        self.high = 0  # the highest slot seen

    def digest(self, seq: int) -> str | None:
        return self.chain.get(seq)

    def check_tail(
        self, cursor: int, last_seq: int, digests: dict[int, str], reached: int = 0
    ) -> None:
        """A replay past ``cursor`` that ended at ``last_seq`` and read slots
        of these ``digests``: refused when it shows a slot replaced or the
        newest slots seen gone (module docstring); remembered otherwise.
        ``reached``: a seq the log is known to have reached otherwise (the
        store's fold cursor, read before the listing)."""
        for seq, found in digests.items():
            if self.chain.get(seq, found) != found:
                raise CorruptionError(
                    f"{self.log.describe(seq)} changed since this handle read or wrote it "
                    f"(digest {self.chain[seq]}, now {found}): it was replaced outside "
                    f"slatelake and the commit it held is lost; {_RESTORE}"
                )
        self.chain.update(digests)
        self.high = max(self.high, last_seq, reached)
        if cursor < self.high and last_seq < self.high:
            self._refuse_cut(last_seq + 1)
        self._prune()

    def _refuse_cut(self, seq: int) -> None:
        if self.log.read_raw(seq) is not None:
            raise StaleViewError(f"{self.log.describe(seq)} was not listed; read again")
        upto = self.log.truncated_upto()
        if upto >= seq:
            raise StaleViewError(
                f"the folder truncated the commit log up to slot {upto}, past slot {seq}"
            )
        raise CorruptionError(
            f"commit log cut: {self.log.describe(seq)} is gone and no slot follows it, yet "
            f"the log reached slot {self.high} (this handle saw it, or the store folded it): "
            "the newest slots were deleted "
            f"outside slatelake and the commits they held are lost; {_RESTORE}"
        )

    def check_won(self, seq: int, high_before: int, txn_id: str) -> None:
        """A commit won slot ``seq``; ``high_before`` is ``high`` as it
        started. A seq this handle saw taken was deleted since: the slot is
        withdrawn (deleted, best effort: left behind, readers meet the fork)
        and the commit refused."""
        if seq > high_before:
            self.high = max(self.high, seq)
            self._prune()
            return
        self.chain.pop(seq, None)
        with contextlib.suppress(Exception):
            self.log.delete(seq)
        upto = self.log.truncated_upto()
        if upto >= seq:
            raise ConflictError(
                f"commit log slot {seq} was already truncated by the folder (up to slot "
                f"{upto}): this view is stale; nothing was committed, re-run on a fresh view"
            )
        raise CorruptionError(
            f"commit log cut: {self.log.describe(seq)} held a commit this handle saw, and was "
            "gone when this commit won its seq: the tail was deleted outside slatelake. This "
            f"commit (txn {txn_id}) was withdrawn, not committed; {_RESTORE}"
        )

    def _prune(self) -> None:
        if len(self.chain) > 2 * SEEN_SLOTS:
            floor = self.high - SEEN_SLOTS
            for seq in [s for s in self.chain if s <= floor]:
                del self.chain[seq]
