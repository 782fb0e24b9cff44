"""Reading the tail of the log past a cursor, refusing damage.

Integrity rules: slots past the cursor must be contiguous (a hole below a
present slot is corruption, never an end of log); each slot must decode with
its checksum and name its own seq (log/changeset.py), so a damaged slot or a
copy of another one is corruption naming the slot; each change set's base head
must equal the running view (apply), be behind it (already folded: skip), and
never be ahead (corruption).

Staleness: a view whose needed slots were truncated (its lease lapsed) is
stale, StaleViewError: re-read the store. An empty listing is truly "nothing
new" because the folder always keeps the newest slot. A non-empty one is
checked against the truncation mark, read *after* the slots' bytes: any slot
read that was deleted and re-created (an orphan of another history) had its
seq truncated before that, so the mark already covers it and the view is
declared stale instead of applying it.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from slatelake.errors import CorruptionError, StaleViewError
from slatelake.log.changeset import ChangeSet, Head, decode_envelope
from slatelake.log.slots import SlotLog

READ_PARALLELISM = 8


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
    raws = _read_all(log, seqs)
    truncated = log.truncated_upto()  # after the reads: see the module docstring
    if truncated > cursor:
        raise StaleViewError(
            f"the folder truncated the commit log up to slot {truncated}, past this view's "
            f"slot {cursor}"
        )
    for prev, seq in zip(seqs, seqs[1:], strict=False):
        if seq != prev + 1:
            raise CorruptionError(
                f"commit log hole: slot {prev + 1} is missing below present slot {seq}"
            )
    for seq, raw in zip(seqs, raws, strict=True):
        if raw is None:
            raise CorruptionError(f"commit log hole: slot {seq} vanished while being read")
        for cs in decode_envelope(raw, seq, log.describe(seq)):
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


def _read_all(log: SlotLog, seqs: list[int]) -> list[bytes | None]:
    if len(seqs) == 1:
        return [log.read_raw(seqs[0])]
    try:
        with ThreadPoolExecutor(min(READ_PARALLELISM, len(seqs))) as pool:
            return list(pool.map(log.read_raw, seqs))
    except RuntimeError:
        # Once the interpreter exits, no pool takes work, but a pass still
        # finishing then must read its tail (a read's own error recurs below).
        return [log.read_raw(seq) for seq in seqs]
