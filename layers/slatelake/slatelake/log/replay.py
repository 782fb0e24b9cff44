"""Reading the tail of the log past a cursor, refusing damage.

Integrity rules: slots past the cursor must be contiguous (a hole below a
present slot is corruption, never an end of log); each slot's chain link
(``prev``, log/changeset.py) must name the slot before it as the reader has
it (``check_chain``); each slot must decode with
its checksum and name its own seq (log/changeset.py), so a damaged slot or a
copy of another one is corruption naming the slot; each change set's base head
must equal the running view (apply), be behind it (already folded: skip), and
never be ahead (corruption).

A listing is not a snapshot, so a gap in it is first asked about by GET
(``_fill_gaps``). A local store lists a directory with readdir, which makes
no promise about entries created while it runs: with writers committing, a
listing can miss slot N and show slot N+1, written a moment later (ext4
returns entries in hash order). A GET of a slot is exact (a slot lands whole:
a hard link on local files, a conditional PUT on S3), so a gap whose slots a
GET finds is filled and costs nothing more; only a slot that a GET still
misses after ``HOLE_WAIT_S`` (a store slower to show a write than to list
it) is a hole. A committer writes slot N+1 only after it saw slot N, so a
slot N+1 without slot N is never a commit still in flight.

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

import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from slatelake.errors import CorruptionError, StaleViewError
from slatelake.log.changeset import (
    ChangeSet,
    Head,
    KeySelection,
    chain_link,
    decode_envelope,
    decode_keys,
)
from slatelake.log.slots import SlotInfo, SlotLog, slot_digest

READ_PARALLELISM = 8
# A keyed replay's GETs in flight, and the slot bytes it may hold ahead of its
# decode (at least one slot, whatever its size).
KEY_READ_PARALLELISM = 32
KEY_READ_AHEAD_BYTES = 64 << 20
# How long a slot missing from a listing below a listed one is looked for by
# GET before it counts as a hole (a GET finds a slot a local listing skipped
# at once; the wait covers a store slower to show a write than to list it).
HOLE_WAIT_S = 2.0
_HOLE_LOOK_S = 0.05  # the first pause between looks; doubled each time


@dataclass
class Tail:
    """What a replay found: the change sets to apply and where it ended."""

    head: Head
    last_seq: int
    applied: list[tuple[int, ChangeSet]] = field(default_factory=list)
    skipped: int = 0
    # ``slot_digest`` of each slot read (a full replay's; a keyed one keeps none)
    digests: dict[int, str] = field(default_factory=dict)


def read_tail(
    log: SlotLog,
    head: Head,
    cursor: int,
    upto: int | None = None,
    cursor_digest: str | None = None,
) -> Tail:
    """Replay slots after ``cursor`` (up to ``upto``) over a view at ``head``.

    ``cursor_digest``: the ``slot_digest`` of slot ``cursor`` as the view
    applied it, when known; the chain (``prev``) of the first slot read must
    name it, and each later slot's the slot before it in this tail."""
    infos = [i for i in log.list_after(cursor) if upto is None or i.seq <= upto]
    tail = Tail(head=head, last_seq=cursor)
    if not infos:
        return tail
    infos, found = _fill_gaps(log, infos, cursor)
    unread = [i.seq for i in infos if i.seq not in found]
    found.update(zip(unread, _read_all(log, unread), strict=True))
    truncated = log.truncated_upto()  # after the reads: see the module docstring
    if truncated > cursor:
        raise _truncated_past(truncated, cursor)
    before = cursor_digest
    for info in infos:
        seq, raw = info.seq, found[info.seq]
        if raw is None:
            raise CorruptionError(f"commit log hole: slot {seq} vanished while being read")
        change_sets = decode_envelope(raw, seq, log.describe(seq))
        check_chain(log, seq, chain_link(raw), before)
        for cs in change_sets:
            apply_continuity(tail, seq, cs)
        tail.digests[seq] = before = slot_digest(raw)
        tail.last_seq = seq
    return tail


def check_chain(log: SlotLog, seq: int, prev: str, before: str | None) -> None:
    """Slot ``seq`` names (``prev``) the digest of the slot before it as its
    writer saw it; ``before`` is that slot's digest as this reader has it
    (None: unknown). Both known and different: that slot was replaced after
    slot ``seq`` was written, or cut and its seq reused, and one history
    has silently dropped a commit: CorruptionError naming both."""
    if prev and before is not None and prev != before:
        raise CorruptionError(
            f"{log.describe(seq)} was written after a slot {seq - 1} with digest {prev}, but "
            f"the slot {seq - 1} this reader has has digest {before}: slot {seq - 1} was "
            "replaced, or deleted and its seq written again, outside slatelake, and the log "
            "forked there; nothing is applied past it. Restore the slots from a backup or "
            "object versioning, or restore the lake"
        )


def _truncated_past(truncated: int, cursor: int) -> StaleViewError:
    return StaleViewError(
        f"the folder truncated the commit log up to slot {truncated}, past this view's "
        f"slot {cursor}"
    )


def _fill_gaps(
    log: SlotLog, infos: list[SlotInfo], cursor: int
) -> tuple[list[SlotInfo], dict[int, bytes | None]]:
    """The listed slots after ``cursor`` with every seq the listing skipped
    below its last one looked up by GET, and the bytes those GETs read.

    A gap a GET fills was a listing that is not a snapshot (module
    docstring). One a GET does not fill is stale when the truncation mark
    covers it (read then, not only after the slots), else looked for again
    until ``HOLE_WAIT_S``; still missing, it is a missing first slot
    (StaleViewError, as before: the store's fold may have moved past it) or
    a hole below a present slot (CorruptionError naming it)."""
    listed = {i.seq for i in infos}
    if len(listed) == infos[-1].seq - cursor:
        return infos, {}  # contiguous: the common case costs nothing
    found: dict[int, bytes | None] = {}
    deadline = time.monotonic() + HOLE_WAIT_S
    pause = _HOLE_LOOK_S
    while True:
        missing = _first_missing(log, listed, found, cursor, infos[-1].seq)
        if missing is None:
            break
        truncated = log.truncated_upto()
        if truncated > cursor:
            raise _truncated_past(truncated, cursor)
        if time.monotonic() >= deadline:
            above = min(s for s in listed if s > missing)
            if missing == cursor + 1:
                raise StaleViewError(
                    f"commit log starts at slot {above} but the view needs slot {missing}"
                )
            raise CorruptionError(
                f"commit log hole: slot {missing} is missing below present slot {above} "
                f"(looked for by GET for {HOLE_WAIT_S:g}s); it was deleted outside slatelake: "
                "restore the object from a backup or versioning, or restore the lake"
            )
        time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
        pause *= 2
    filled = [SlotInfo(s, len(raw), 0) for s, raw in found.items() if raw is not None]
    return sorted([*infos, *filled], key=lambda i: i.seq), found


def _first_missing(
    log: SlotLog, listed: set[int], found: dict[int, bytes | None], cursor: int, last: int
) -> int | None:
    """GET the seqs up to ``last`` neither listed nor found yet, in order,
    until one is absent; that seq, or None when every gap is filled."""
    for seq in range(cursor + 1, last):
        if seq in listed or found.get(seq) is not None:
            continue
        found[seq] = raw = log.read_raw(seq)
        if raw is None:
            return seq
    return None


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
    infos, found = _fill_gaps(log, infos, cursor)
    failure: CorruptionError | None = None
    slots = _stream(log, infos, found)
    try:
        for seq, raw in slots:
            if raw is None:
                failure = CorruptionError(f"commit log hole: slot {seq} vanished while being read")
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
        raise _truncated_past(truncated, cursor)
    if failure is not None:
        raise failure
    return tail


def _stream(
    log: SlotLog, infos: list[SlotInfo], known: dict[int, bytes | None]
) -> Iterator[tuple[int, bytes | None]]:
    """Each slot's bytes in seq order, read ahead on a pool: at most
    ``KEY_READ_PARALLELISM`` GETs in flight and ``KEY_READ_AHEAD_BYTES`` of
    slots (by the listing's sizes; at least one slot) read or being read
    ahead of the caller; a slot in ``known`` (read while filling a gap) is
    not read again. Closing it early cancels the reads not started."""
    if len(infos) == 1:  # no pool for one GET
        seq = infos[0].seq
        yield seq, known[seq] if seq in known else log.read_raw(seq)
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
                    if following.seq in known:
                        future = Future()
                        future.set_result(known[following.seq])
                    else:
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
