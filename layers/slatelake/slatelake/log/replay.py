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

A keyed replay (``read_key_tail``) is the same replay for a reader of a few
keys: the same slots, the same checks in the same order, the same change sets
applied or skipped, but each change set holds only the writes of those keys
(``decode_keys``). It streams: more GETs in flight than a full replay
(``KEY_READ_PARALLELISM``), but never more than ``KEY_READ_AHEAD_BYTES`` of
slots (by the listing's sizes) held ahead of the decode, so a reader of the
status record neither waits on one GET at a time nor holds the backlog.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from slatelake.errors import CorruptionError, StaleViewError
from slatelake.log.changeset import ChangeSet, Head, KeySelection, decode_envelope, decode_keys
from slatelake.log.slots import SlotInfo, SlotLog

READ_PARALLELISM = 8
# A keyed replay's GETs in flight, and the slot bytes it may hold ahead of its
# decode (at least one slot, whatever its size).
KEY_READ_PARALLELISM = 32
KEY_READ_AHEAD_BYTES = 64 << 20


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


def read_key_tail(log: SlotLog, head: Head, cursor: int, select: KeySelection) -> Tail:
    """``read_tail`` for a reader of the ``select`` keys: the same slots and
    checks, the same change sets applied or skipped, each holding only the
    writes of those keys (``decode_keys``).

    Errors come in ``read_tail``'s order: a view the folder truncated is
    stale whatever else is wrong, then a hole in the listing, then the first
    slot (by seq) that vanished or does not decode. So after the first bad
    slot no further slot is read; the truncation mark is still read after
    every slot that was."""
    infos = list(log.list_after(cursor))
    tail = Tail(head=head, last_seq=cursor)
    if not infos:
        return tail
    if infos[0].seq != cursor + 1:
        raise StaleViewError(
            f"commit log starts at slot {infos[0].seq} but the view needs slot {cursor + 1}"
        )
    hole = _hole(infos)
    failure: CorruptionError | None = None
    if hole is None:  # a hole is refused below, nothing need be read for it
        slots = _stream(log, infos)
        try:
            for seq, raw in slots:
                if raw is None:
                    failure = CorruptionError(
                        f"commit log hole: slot {seq} vanished while being read"
                    )
                    break
                try:
                    for cs in decode_keys(raw, seq, select, log.describe(seq)):
                        apply_continuity(tail, seq, cs)
                except CorruptionError as exc:  # FormatError too: after the mark, as replay does
                    failure = exc
                    break
                tail.last_seq = seq
        finally:
            slots.close()  # cancels the reads not yet started
    truncated = log.truncated_upto()  # after the reads: see the module docstring
    if truncated > cursor:
        raise StaleViewError(
            f"the folder truncated the commit log up to slot {truncated}, past this view's "
            f"slot {cursor}"
        )
    if hole is not None:
        raise hole
    if failure is not None:
        raise failure
    return tail


def _hole(infos: list[SlotInfo]) -> CorruptionError | None:
    for prev, info in zip(infos, infos[1:], strict=False):
        if info.seq != prev.seq + 1:
            return CorruptionError(
                f"commit log hole: slot {prev.seq + 1} is missing below present slot {info.seq}"
            )
    return None


def _stream(log: SlotLog, infos: list[SlotInfo]) -> Iterator[tuple[int, bytes | None]]:
    """Each slot's bytes in seq order, read ahead on a pool: at most
    ``KEY_READ_PARALLELISM`` GETs in flight and ``KEY_READ_AHEAD_BYTES`` of
    slots (by the listing's sizes; at least one slot) read or being read
    ahead of the caller. Closing it early cancels the reads not started."""
    if len(infos) == 1:  # no pool for one GET
        yield infos[0].seq, log.read_raw(infos[0].seq)
        return
    pool = ThreadPoolExecutor(
        min(KEY_READ_PARALLELISM, len(infos)), thread_name_prefix="slatelake-slots"
    )
    ahead: deque[tuple[SlotInfo, Future[bytes | None]]] = deque()
    queued = 0  # bytes of the slots in ``ahead``
    upcoming = iter(infos)
    following: SlotInfo | None = next(upcoming, None)
    refilling = False
    try:
        while ahead or following is not None:
            # refilled in bursts, once half drained: one hand-off per burst,
            # not one per slot, between this thread and the readers
            while following is not None and (
                not ahead
                or (
                    len(ahead) < KEY_READ_PARALLELISM * 2
                    and queued + following.size <= KEY_READ_AHEAD_BYTES
                    and (len(ahead) < KEY_READ_PARALLELISM or refilling)
                )
            ):
                refilling = True
                try:
                    future = pool.submit(log.read_raw, following.seq)
                except RuntimeError:  # the interpreter is exiting: see _read_all
                    future = Future()
                    future.set_result(log.read_raw(following.seq))
                ahead.append((following, future))
                queued += following.size
                following = next(upcoming, None)
            refilling = False
            info, future = ahead.popleft()
            queued -= info.size
            yield info.seq, future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


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
