"""Reading the tail of the log past a cursor, refusing damage.

Integrity rules: slots past the cursor must be contiguous (a hole below a
present slot is corruption, never an end of log); each change set's base head
must equal the running view (apply), be behind it (already folded: skip), and
never be ahead (corruption). A first slot beyond cursor+1 means the view is
older than the log's truncation point: StaleViewError, re-read the store.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from slatelake.errors import CorruptionError, SlatelakeError
from slatelake.log.changeset import ChangeSet, Head
from slatelake.log.slots import SlotLog

READ_PARALLELISM = 8


class StaleViewError(SlatelakeError):
    """Slots the view needs were already truncated; re-read the store."""

    retryable = True


@dataclass
class Tail:
    """What a replay found: the change sets to apply and where it ended."""

    head: Head
    last_seq: int
    applied: list[tuple[int, ChangeSet]] = field(default_factory=list)
    skipped: int = 0


def read_tail(log: SlotLog, head: Head, cursor: int, upto: int | None = None) -> Tail:
    """Replay slots after ``cursor`` (up to ``upto``) over a view at ``head``."""
    seqs = [s.seq for s in log.list_after(cursor) if upto is None or s.seq <= upto]
    tail = Tail(head=head, last_seq=cursor)
    if not seqs:
        return tail
    if seqs[0] != cursor + 1:
        raise StaleViewError(
            f"commit log starts at slot {seqs[0]} but the view needs slot {cursor + 1}"
        )
    for prev, seq in zip(seqs, seqs[1:], strict=False):
        if seq != prev + 1:
            raise CorruptionError(
                f"commit log hole: slot {prev + 1} is missing below present slot {seq}"
            )
    for seq, envelope in zip(seqs, _read_all(log, seqs), strict=True):
        if envelope is None:
            raise CorruptionError(f"commit log hole: slot {seq} vanished while being read")
        for cs in envelope:
            apply_continuity(tail, seq, cs)
        tail.last_seq = seq
    return tail


def apply_continuity(tail: Tail, seq: int, cs: ChangeSet) -> None:
    view = tail.head
    if cs.base == view:
        tail.applied.append((seq, cs))
        tail.head = cs.result
    elif cs.base.batch_seq < view.batch_seq:
        tail.skipped += 1
    else:
        raise CorruptionError(
            f"commit log slot {seq}: change set {cs.txn_id} validated against head "
            f"{cs.base.snapshot_id}/{cs.base.batch_seq}, ahead of the view "
            f"{view.snapshot_id}/{view.batch_seq}"
        )


def _read_all(log: SlotLog, seqs: list[int]) -> list[list[ChangeSet] | None]:
    if len(seqs) == 1:
        return [log.read(seqs[0])]
    with ThreadPoolExecutor(min(READ_PARALLELISM, len(seqs))) as pool:
        return list(pool.map(log.read, seqs))
