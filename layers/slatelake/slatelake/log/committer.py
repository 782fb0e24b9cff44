"""Committing a change set: race for the next slot, resolve ambiguity.

- Won: the slot PUT was acknowledged; the commit is durable.
- Lost: read the winner. A change set whose keys the winner did not touch
  rebases onto the winner's head and retries at the next seq (bounded
  attempts, jittered backoff), unless it mints a DuckLake snapshot and the
  winner minted one or rewrote a snapshot row: a snapshot never lands on a
  catalog it has not seen. Overlapping keys or two
  snapshots raise ConflictError: its author re-runs on a fresh view.
- Ambiguous (the PUT failed after it may have landed): re-read the slot and
  look for our txn id. Every outcome is durable-and-discoverable or
  never-happened; nothing is applied twice.
- Truncated: a won slot at or below the folder's truncation mark was
  re-created after the folder deleted it, below the fold cursor, where nothing
  folds it: the view was stale. The slot is removed and ConflictError raised;
  no commit is ever acknowledged there. The mark is read after each win
  unless the caller vouches that its reader lease pinned the slot.
- Over the operation limit: OperationLimitError before anything is written.
- Chained: each slot names the digest of the slot before it as the
  committer saw it (``chain``, log/changeset.py version 3): the slot its
  view ended at, or the winner it just read. A winner whose own link names
  another slot before it than the one the committer has is a forked log:
  CorruptionError, nothing written past it.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from slatelake.errors import (
    AmbiguousWriteError,
    Backoff,
    ConflictError,
    CorruptionError,
    MisconfigurationError,
    OperationLimitError,
    retry,
)
from slatelake.log.changeset import ChangeSet, Head, encode_envelope
from slatelake.log.replay import check_chain
from slatelake.log.slots import SlotLog, slot_digest

DEFAULT_MAX_OPERATIONS = 250_000
MAX_OPERATIONS_ENV = "SLATELAKE_MAX_CHANGESET_OPS"


def max_operations_from_env() -> int:
    raw = os.environ.get(MAX_OPERATIONS_ENV)
    if not raw:
        return DEFAULT_MAX_OPERATIONS
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise MisconfigurationError(f"{MAX_OPERATIONS_ENV}={raw!r}: expected a positive integer")
    return value


@dataclass(frozen=True)
class Committed:
    seq: int
    head: Head
    change_set: ChangeSet
    attempts: int


class Committer:
    def __init__(
        self,
        log: SlotLog,
        max_operations: int | None = None,
        max_attempts: int = 16,
        backoff_s: float = 0.01,
        ambiguous_rereads: int = 5,
    ) -> None:
        self.log = log
        self.max_operations = max_operations or max_operations_from_env()
        self.max_attempts = max_attempts
        self.backoff_s = backoff_s
        self.ambiguous_rereads = ambiguous_rereads
        # After the n-th lost race: anywhere up to backoff_s * 2**n, at most 64 * backoff_s.
        self._race_backoff = Backoff(
            first_s=2 * backoff_s, factor=2.0, cap_s=64 * backoff_s, jitter=1.0
        )
        # Between looks at a slot or the truncation mark.
        self._look_backoff = Backoff(first_s=backoff_s, factor=1.0, cap_s=backoff_s, jitter=0.0)

    def check_limit(self, cs: ChangeSet) -> None:
        if cs.operations > self.max_operations:
            raise OperationLimitError(cs.operations, self.max_operations)

    def commit(
        self,
        cs: ChangeSet,
        seq: int,
        pinned: Callable[[int], bool] | None = None,
        chain: dict[int, str] | None = None,
    ) -> Committed:
        """Write ``cs`` at ``seq`` (the slot after the committer's view).

        ``pinned(seq)``: the caller vouches that the slot it won cannot lie
        below the truncation mark (its reader lease pinned it), which saves
        reading the mark; without it, or when it says no, the mark is read.

        ``chain`` maps seqs to the ``slot_digest`` the caller has of them:
        the slot before ``seq`` is named in ours ("" when absent), and the
        winners read and the slot won are added to it.

        Not ``retry``: a lost race is an answer, not an error; each attempt
        writes the next slot with a rebased change set, and the one error
        here (ConflictError) ends the loop instead of repeating it."""
        self.check_limit(cs)
        chain = {} if chain is None else chain
        for attempt in range(1, self.max_attempts + 1):
            outcome, winner = self._attempt(cs, seq, chain)
            if outcome:
                if pinned is None or not pinned(seq):
                    try:
                        self._refuse_if_truncated(cs, seq)
                    except ConflictError:
                        chain.pop(seq, None)  # withdrawn: not a slot of the log
                        raise
                return Committed(seq, cs.result, cs, attempt)
            cs = self._rebase_or_raise(cs, seq, winner)
            seq += 1
            time.sleep(self._race_backoff.delay(attempt))
            # slots written meanwhile: rebase past them without racing for each
            # (one GET per slot), or a busy log outruns every attempt
            while (later := self._reread(seq, chain)) is not None:
                cs = self._rebase_or_raise(cs, seq, later)
                seq += 1
        raise ConflictError(
            f"gave up after {self.max_attempts} lost races for the commit log; "
            "the lake is busy, retry later"
        )

    def _attempt(
        self, cs: ChangeSet, seq: int, chain: dict[int, str]
    ) -> tuple[bool, list[ChangeSet]]:
        """Write the slot, then look at it: won, lost (the winner's change sets),
        or never happened (write again). A write-then-look protocol, not a
        retried call, so not ``retry``; its looks (``_reread``) are."""
        # the seq and the link are checksummed: encoded per attempt
        data = encode_envelope([cs], seq, chain.get(seq - 1, ""))
        for _ in range(self.ambiguous_rereads):
            try:
                if self.log.try_write(seq, data):
                    chain[seq] = slot_digest(data)
                    return True, []
            except AmbiguousWriteError:
                existing = self._reread(seq, chain)
                if existing is None:
                    continue  # never happened: try the same seq again
                if any(w.txn_id == cs.txn_id for w in existing):
                    return True, []
                return False, existing
            winner = self._reread(seq, chain)
            if winner is None:
                continue  # a winner that vanished (truncated is impossible here): retry
            if any(w.txn_id == cs.txn_id for w in winner):
                return True, []
            return False, winner
        raise AmbiguousWriteError(
            f"commit log slot {seq}: the outcome of the write stayed unknown after "
            f"{self.ambiguous_rereads} attempts; the change set {cs.txn_id} was not applied twice "
            "and can be looked up by its txn id"
        )

    def _refuse_if_truncated(self, cs: ChangeSet, seq: int) -> None:
        """Withdraw a slot the folder had already truncated (one GET of the mark).

        The folder raises the mark before deleting, so a slot this commit
        created at a truncated seq is seen as such here.
        """
        upto = self._truncation_mark(cs, seq)
        if upto < seq:
            return
        # Best effort: left behind, readers still refuse it and the folder deletes it.
        with contextlib.suppress(Exception):
            self.log.delete(seq)
        raise ConflictError(
            f"commit log slot {seq} was already truncated by the folder (up to slot {upto}): "
            "this view is stale (its reader lease lapsed); nothing was committed, "
            "re-run on a fresh view"
        )

    def _truncation_mark(self, cs: ChangeSet, seq: int) -> int:
        """The mark, looked at until it reads; any failure to read it (a
        refusal at once, a transient one after the last look) leaves the
        commit's fate unknown: AmbiguousWriteError."""
        try:
            return retry(
                self.log.truncated_upto,
                attempts=self.ambiguous_rereads,
                backoff=self._look_backoff,
            )
        except Exception as exc:
            raise AmbiguousWriteError(
                f"commit log slot {seq}: written, but the truncation mark could not be read "
                f"({exc}), so whether it landed below the fold is unknown; the change set "
                f"{cs.txn_id} can be looked up by its txn id"
            ) from exc

    def _reread(self, seq: int, chain: dict[int, str]) -> list[ChangeSet] | None:
        """The slot's change sets (None: absent), its digest added to ``chain``
        and its link checked against it. A refused or corrupt read is raised
        at once; a transient one is looked at again, then ambiguous."""
        found = retry(
            lambda: self.log.read_chained(seq),
            attempts=self.ambiguous_rereads,
            backoff=self._look_backoff,
            give_up=lambda exc, tries: AmbiguousWriteError(
                f"commit log slot {seq}: could not re-read it after {tries} attempts: {exc}"
            ),
        )
        if found is None:
            return None
        change_sets, prev, digest = found
        try:
            check_chain(self.log, seq, prev, chain.get(seq - 1))
        except CorruptionError:
            # the slot this view chained to was truncated (an orphan another
            # stale committer made there): a stale view, not a fork
            if self.log.truncated_upto() >= seq - 1:
                raise ConflictError(
                    f"commit log slot {seq - 1} this view ended at was truncated by the "
                    "folder: the view is stale; nothing was committed, re-run on a fresh view"
                ) from None
            raise
        chain[seq] = digest
        return change_sets

    def _rebase_or_raise(self, cs: ChangeSet, seq: int, winner: list[ChangeSet]) -> ChangeSet:
        first = winner[0]
        # A snapshot is made on the catalog it saw: it rebases past head-preserving
        # winners (a status record, a lock, a sweep, an expiry), never past another
        # snapshot or a write of the head snapshot's row (an index's catalog id).
        if cs.mints_snapshot and any(w.mints_snapshot or w.puts_snapshot_rows for w in winner):
            raise ConflictError(
                f"commit log slot {seq} was taken by txn {first.txn_id} "
                f"({first.changes_made or 'a concurrent commit'}); re-run on a fresh view"
            )
        if first.base != cs.base:
            raise ConflictError(
                f"commit log slot {seq}: the winner validated against head "
                f"{first.base.batch_seq}, this change set against {cs.base.batch_seq}; "
                "the view is stale, re-run on a fresh view"
            )
        head = cs.base
        for w in winner:
            if cs.overlaps(w):  # a range delete overlaps every key inside it
                raise ConflictError(
                    f"commit log slot {seq}: txn {w.txn_id} changed the same keys; "
                    "re-run on a fresh view"
                )
            head = w.result if w.base == head else head
        return cs.rebased(head)
