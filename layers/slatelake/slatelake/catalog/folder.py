"""The folder: the one process holding the SlateDB writer.

It folds log slots into the store, whole slots per WriteBatch, each batch
also advancing ``sys/fold`` (the slot folded and the head it reached) (a range delete becomes a
delete of every key the store and the batch hold in the range, in the same
WriteBatch); flushes (the WAL is off: the log is the WAL); then truncates
slots that are folded, flushed, past every live reader lease and older than
the margin, always keeping the newest slot and raising the truncation mark
(log/slots.py) before deleting any, so a view whose lease lapsed finds out
it is stale. ``hold`` repeats this while SlateDB's compactor runs in the
same handle, which is what executes store merges others submit. Opening a
folder fences the previous one; a fenced folder's next flush raises
FencedError.

Images (log/images.py) bound truncation too: once any image exists, no slot
at or above the newest image's seq is deleted, because an open is the newest
image plus the slots after it, and it checks the image against the digest
of the image's own slot (``catalog/fold_slot.py``, ``Lake.slot_digest``).
Each fold batch also records that digest beside ``sys/fold``. The newest
image's seq only grows, so a seq this folder saw earlier is a safe (lower)
bound: images are LISTed again only when truncation wants past it, at most
every IMAGE_RELIST_S (a newer image waits that long to free slots;
retention, never safety). With no image seen yet,
they are LISTed at every truncation that has something to delete.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from slatelake.catalog.fold_slot import SYS_FOLD_SLOT, decode_fold_slot, encode_fold_slot
from slatelake.catalog.state import (
    SYS_FOLD,
    SYS_FORMAT,
    check_catalog_ranges,
    check_format,
    decode_fold,
    encode_fold,
)
from slatelake.errors import CorruptionError, FencedError, NotFoundError
from slatelake.log.changeset import Head
from slatelake.log.images import ImageBook
from slatelake.log.leases import DEFAULT_MARGIN_S, LeaseBook, truncation_bound
from slatelake.log.replay import StaleViewError, read_tail
from slatelake.log.slots import SlotLog
from slatelake.store.db import open_writer, store_exists
from slatelake.store.location import LakeLocation

log = logging.getLogger("slatelake.folder")
DEFAULT_BATCH_OPS = 50_000
IMAGE_RELIST_S = 30.0


@dataclass(frozen=True)
class FoldReport:
    slots: int
    change_sets: int
    operations: int
    batches: int
    seconds: float
    fold_seq: int
    head: Head
    truncated: int = 0


class Folder:
    def __init__(
        self,
        location: LakeLocation,
        margin_s: float = DEFAULT_MARGIN_S,
        batch_ops: int = DEFAULT_BATCH_OPS,
        settings: dict | None = None,
        fault: Callable[[str], None] | None = None,
        folded_before: tuple[int, float] | None = None,
    ) -> None:
        """``fault`` is called at each crash boundary (tests inject crashes there):
        ``after_write`` (a batch in the memtable), ``after_flush``, ``after_delete``.

        ``folded_before`` is ``(seq, wall-clock seconds)`` a previous holder
        recorded: slots up to ``seq`` were folded by then, so the margin of
        those slots runs from that time. Without it, a slot folded before this
        folder opened counts as folded when it opened (a short-lived folder
        then never truncates: a fold invocation of a few seconds would keep
        every slot)."""
        if not store_exists(location):
            raise NotFoundError(f"no slatelake lake at {location.url}")
        self.location = location
        self.log = SlotLog(location)
        self.leases = LeaseBook(location, self.log.client)
        self.images = ImageBook(location, self.log.client)
        self._image_seq: int | None = None  # the newest image's seq this folder knows
        self._images_listed_at = -IMAGE_RELIST_S
        self.margin_s = margin_s
        self.batch_ops = batch_ops
        self.writer = open_writer(location, settings)
        try:
            check_format(self.writer.get(SYS_FORMAT), location.url)
            raw = self.writer.get(SYS_FOLD)
            if raw is None:
                raise CorruptionError(f"{location.url}: the store has no fold cursor")
        except BaseException:
            self.writer.close()
            raise
        self.seq, self.head = decode_fold(raw)
        # the folded slot's digest (None: unknown, a lake folded by an older
        # release): the first unfolded slot must chain to it
        self._digest: str | None = self._fold_digest()
        self.flushed_seq = self.seq
        self._folded_at: dict[int, float] = {}
        self._started = time.monotonic()
        self._earlier: tuple[int, float] | None = None  # (seq, monotonic) folded before
        if folded_before is not None:
            seq, at = folded_before
            self._earlier = (seq, self._started - max(0.0, time.time() - at))
        self._fault = fault or (lambda boundary: None)
        self._mark = 0  # the truncation mark this folder last saw or wrote
        try:
            self._seed_mark()
        except BaseException:
            self.writer.close()
            raise

    def _fold_digest(self) -> str | None:
        raw = self.writer.get(SYS_FOLD_SLOT)
        if raw is None:
            return None
        at, digest = decode_fold_slot(raw)
        return digest if at == self.seq else None

    def _seed_mark(self) -> None:
        """Give a lake truncated before the mark existed one: the highest slot
        at or below the fold cursor that is gone was truncated, so a view from
        before then must be found stale. One GET (and a LIST when unmarked)."""
        try:
            self._mark = self.log.truncated_upto()
        except CorruptionError as exc:
            log.warning("%s; rewriting it at the fold cursor %d", exc, self.flushed_seq)
            self._write_mark(self.flushed_seq)
            return
        if self._mark or not self.seq:
            return
        kept = {info.seq for info in self.log.list_after(0) if info.seq <= self.seq}
        if len(kept) == self.seq:
            return  # never truncated
        self._write_mark(next(s for s in range(self.seq, 0, -1) if s not in kept))

    def _write_mark(self, upto: int) -> None:
        self.log.mark_truncated(upto)
        self._mark = upto

    def _raise_mark(self, upto: int) -> None:
        """Make the mark cover ``upto`` before anything up to it is deleted.

        Never lowers it: the stored value wins when higher (a newer folder's);
        rewritten when lower than what this folder wrote (a fenced folder's).
        """
        target = max(upto, self._mark)
        try:
            stored = self.log.truncated_upto()
        except CorruptionError as exc:
            log.warning("%s; rewriting it at the fold cursor %d", exc, self.flushed_seq)
            stored, target = -1, max(target, self.flushed_seq)
        if stored >= target:
            self._mark = stored
            return
        self._write_mark(target)

    def fold_once(self, truncate: bool = True) -> FoldReport:
        t0 = time.perf_counter()
        try:
            tail = read_tail(self.log, self.head, self.seq, cursor_digest=self._digest)
        except StaleViewError as exc:
            raise CorruptionError(
                f"{self.location.url}: {exc}, yet the store's fold cursor is {self.seq}; "
                "slots were removed before being folded"
            ) from None
        by_slot: dict[int, list] = {}
        for slot, cs in tail.applied:
            check_catalog_ranges(cs, slot)  # nothing of a damaged tail is folded
            by_slot.setdefault(slot, []).append(cs)
        slots = list(range(self.seq + 1, tail.last_seq + 1))
        pending: dict[bytes, bytes | None] = {}
        batches = operations = change_sets = 0
        head = self.head
        for slot in slots:
            for cs in by_slot.get(slot, []):
                for start, end in cs.ranges:  # ranges first, as CatalogState.apply
                    self._delete_range(start, end, pending)
                for key, value in cs.puts:
                    pending[key] = value
                for key in cs.deletes:
                    pending[key] = None
                head = cs.result
                operations += cs.operations
                change_sets += 1
            if len(pending) >= self.batch_ops or slot == slots[-1]:
                self._write(pending, slot, head, tail.digests[slot])
                self._fault("after_write")
                pending = {}
                batches += 1
        if slots:
            self.writer.flush()
            self._fault("after_flush")
            self.flushed_seq = self.seq
            now = time.monotonic()
            for slot in slots:
                self._folded_at[slot] = now
        truncated = self.truncate() if truncate else 0
        return FoldReport(
            len(slots),
            change_sets,
            operations,
            batches,
            time.perf_counter() - t0,
            self.seq,
            self.head,
            truncated,
        )

    def _delete_range(self, start: bytes, end: bytes, pending: dict[bytes, bytes | None]) -> None:
        """Delete every key in ``[start, end)`` as of this point of the fold:
        those pending in this batch and those stored (the writer reads its own
        unflushed batches). They go into the slot's WriteBatch, so the range
        lands atomically with the fold cursor; a slot is never split."""
        for key in [k for k in pending if start <= k < end]:
            pending[key] = None
        segment = start[:2]  # a range stays inside one kind of one subspace
        first = self.writer.seek_first(segment, start)
        if first is None or first[0] >= end:
            return
        pending[first[0]] = None
        for rows in self.writer.scan_prefix_batches(segment, start_after=first[0]):
            for key, _ in rows:
                if key >= end:
                    return
                pending[key] = None

    def _write(
        self, pending: dict[bytes, bytes | None], slot: int, head: Head, digest: str
    ) -> None:
        puts = [(k, v) for k, v in pending.items() if v is not None]
        deletes = [k for k, v in pending.items() if v is None]
        puts.append((SYS_FOLD, encode_fold(slot, head)))
        # the slot the cursor stands on, by digest: what an image cut here is bound to
        puts.append((SYS_FOLD_SLOT, encode_fold_slot(slot, digest)))
        self.writer.write(puts, deletes)
        self.seq, self.head, self._digest = slot, head, digest

    def truncate(self) -> int:
        """Delete slots the rule allows, never the newest; returns how many.

        Keeping the newest slot is what makes an empty listing past a view's
        cursor mean "nothing new" rather than "all of it truncated".
        """
        bound = truncation_bound(self.flushed_seq, self.leases.live())
        now = time.monotonic()
        slots = [info.seq for info in self.log.list_after(0)]
        doomed = []
        for seq in slots[:-1]:
            if seq > bound:
                break
            if now - self._folded_at.get(seq, self._fold_time(seq)) < self.margin_s:
                break
            doomed.append(seq)
        if doomed:
            image_seq = self._image_bound(doomed[-1] + 1)
            if image_seq is not None:  # its own slot stays: an open checks the image by it
                doomed = [seq for seq in doomed if seq < image_seq]
        if not doomed:
            return 0
        self._raise_mark(doomed[-1])
        for seq in doomed:
            self.log.delete(seq)
            self._fault("after_delete")
            self._folded_at.pop(seq, None)
        return len(doomed)

    def _fold_time(self, seq: int) -> float:
        """When a slot this folder did not fold was folded, at the latest."""
        if self._earlier is not None and seq <= self._earlier[0]:
            return self._earlier[1]
        return self._started

    def note_image(self, seq: int) -> None:
        """An image of slot ``seq`` is stored (the holder wrote it): truncation
        may go up to the slot below it without listing images again."""
        self._image_seq = seq if self._image_seq is None else max(self._image_seq, seq)

    def _image_bound(self, wanted: int) -> int | None:
        """The newest image's seq, the highest slot truncation may delete;
        None when there is no image (the rule is then as without images)."""
        now = time.monotonic()
        known = self._image_seq
        if known is not None and (known >= wanted or now - self._images_listed_at < IMAGE_RELIST_S):
            return known
        newest = self.images.newest()
        self._images_listed_at = now
        if newest is not None:
            self.note_image(newest.seq)
        return self._image_seq

    def hold(
        self,
        poll_s: float = 1.0,
        stop: threading.Event | None = None,
        on_fold: Callable[[FoldReport], None] | None = None,
    ) -> None:
        """Fold until ``stop`` is set. FencedError propagates: a newer folder won."""
        stop = stop or threading.Event()
        while not stop.is_set():
            report = self.fold_once()
            if on_fold is not None and (report.slots or report.truncated):
                on_fold(report)
            stop.wait(poll_s)

    def close(self) -> None:
        with contextlib.suppress(FencedError):
            self.writer.close()
