"""The holder's loop and its lease: fold the log every poll, ride out
transient failures, and write catalog images when due.

The holder is the one process holding a lake's SlateDB writer: a resident
``slatelake hold``, or the fold function for one invocation
(``maintenance/fold.py``). Both take the **holder lease** first
(``holder/lease-<generation>``, the pass lease's rules under another
directory), so they never fight: a live lease wins, and whoever finds it held
waits (the resident) or skips (the function). Its records also say how far
the holder folded and when, which lets the next holder truncate slots the
previous one folded without waiting out the margin again. The holder's
compactor executes the store merges a pass submits, and after each fold
``ImageCadence`` writes a catalog image when one is due and collects
superseded ones. What it says goes to callbacks (the CLI prints them), never
to a stream of its own.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from slatelake.catalog.folder import Folder, FoldReport
from slatelake.ducklake.image_writer import write_image
from slatelake.errors import AlreadyRunningError, Backoff, FencedError, SlatelakeError, retry
from slatelake.log.images import ImageBook, now_us
from slatelake.maintenance.flight import LeaseRecord, PassLease
from slatelake.store.location import LakeLocation
from slatelake.store.objects import ObjectClient

log = logging.getLogger("slatelake.images")

RETRY_AFTER_S = 60.0  # after a failed image, before the holder tries again

Event = dict[str, Any]
HOLDER_DIR = "holder"


class HolderLease(PassLease):
    """Who holds the lake's holder role, and how far it folded.

    Every record it writes carries ``folded_upto`` and ``folded_at`` (wall
    clock): every slot up to that seq was folded and flushed by then. A new
    holder carries the previous holder's pair forward until it folds itself,
    so the fact is never lost with a release or a crash."""

    directory = HOLDER_DIR
    noun = "holder lease"
    folded: tuple[int, float] | None = None  # (seq, wall-clock time), set per instance

    def _extra(self) -> dict[str, object]:
        if self.folded is None:
            return {}
        return {"folded_upto": self.folded[0], "folded_at": self.folded[1]}

    def note_fold(self, seq: int) -> None:
        """Everything up to ``seq`` is folded and flushed now. A seq already
        recorded keeps its older time (it was folded by then: the margin of
        those slots runs from it)."""
        if self.folded is None or seq > self.folded[0]:
            self.folded = (seq, time.time())

    def inherit(self, record: LeaseRecord | None) -> None:
        """Carry the previous holder's fold pair forward (before this one folds)."""
        pair = folded_of(record)
        if pair is not None and self.folded is None:
            self.folded = pair

    def _busy(self) -> AlreadyRunningError:
        record = self.current()
        return AlreadyRunningError(
            "another holder holds this lake"
            + (f" ({record.describe()})" if record else "")
            + "; it folds the log meanwhile"
        )


def folded_of(record: LeaseRecord | None) -> tuple[int, float] | None:
    """A holder record's ``(folded_upto, folded_at)``, when it has a sound one."""
    if record is None:
        return None
    upto, at = record.extra.get("folded_upto"), record.extra.get("folded_at")
    sound = isinstance(upto, int) and not isinstance(upto, bool) and upto >= 0
    if sound and isinstance(at, (int, float)) and 0 < at <= time.time() + 1:
        return upto, float(at)  # type: ignore[return-value]
    return None


def take_holder(
    location: LakeLocation, client: ObjectClient | None = None
) -> tuple[HolderLease, LeaseRecord | None]:
    """A holder lease carrying the previous record's fold pair, not yet taken;
    and that record (None when no holder ever ran)."""
    lease = HolderLease(location, client=client)
    record = lease.current()
    lease.inherit(record)
    return lease, record


@dataclass
class ImageCadence:
    """When the holder writes an image, and collecting old ones after.

    Due when ``every_slots`` slots were folded since the newest image, or it
    is older than ``max_age_s`` and something was folded since (0 turns a
    trigger off; ``slatelake.admin`` holds the defaults). Only a flushed fold
    is imaged. ``on_event`` hears
    ``{"image": {...}}`` for an image written and ``{"images_collected":
    [...]}``; ``on_error`` a failure, which is retried after RETRY_AFTER_S and
    never stops folding (a fenced holder still stops: that is the fold's
    answer)."""

    location: LakeLocation
    every_slots: int
    max_age_s: float
    grace_s: float
    on_event: Callable[[Event], None] | None = None
    on_error: Callable[[str], None] | None = None
    _seq: int | None = None  # the newest image's seq (None: not yet listed)
    _at_us: int = 0  # when it was stored (the store's clock, or ours for our own)
    _retry_at: float = 0.0
    _collect_at: float = 0.0
    _book: ImageBook | None = field(default=None, repr=False)

    @property
    def enabled(self) -> bool:
        return self.every_slots > 0 or self.max_age_s > 0

    def book(self) -> ImageBook:
        if self._book is None:
            self._book = ImageBook(self.location)
        return self._book

    def due(self, fold_seq: int, at_us: int) -> bool:
        if self._seq is None or fold_seq <= self._seq:
            return False
        if self.every_slots and fold_seq - self._seq >= self.every_slots:
            return True
        return bool(self.max_age_s) and at_us - self._at_us >= self.max_age_s * 1_000_000

    def tick(self, folder: Folder) -> None:
        """One look after a fold: write an image if due, then collect."""
        if not self.enabled or time.monotonic() < self._retry_at:
            return
        try:
            if self._seq is None:
                newest = self.book().newest()
                self._seq = newest.seq if newest is not None else 0
                self._at_us = newest.last_modified_us if newest is not None else 0
            if folder.seq == folder.flushed_seq and self.due(folder.seq, now_us()):
                self._write(folder)
            if time.monotonic() >= self._collect_at:
                self._collect()
        except FencedError:
            raise
        except Exception as exc:  # noqa: BLE001 - an image never stops folding
            self._retry_at = time.monotonic() + RETRY_AFTER_S
            log.error("catalog image of %s failed: %s", self.location.url, exc)
            if self.on_error is not None:
                self.on_error(
                    f"catalog image failed ({type(exc).__name__}: {exc}); folding goes on, "
                    f"next try in {RETRY_AFTER_S:g}s"
                )

    def _write(self, folder: Folder) -> None:
        result = write_image(self.location, reader=folder.writer, book=self.book())
        if result.info is not None:
            self._seq = result.info.seq
            self._at_us = now_us() if result.written else result.info.last_modified_us
            folder.note_image(result.info.seq)
        if result.written and result.info is not None:
            self._collect_at = 0.0  # the one just superseded starts its grace
            self._say(
                {
                    "image": {
                        "seq": result.info.seq,
                        "head": {
                            "snapshot_id": result.head.snapshot_id,
                            "batch_seq": result.head.batch_seq,
                        },
                        "bytes": result.info.size,
                        "path": result.info.url,
                        "seconds": round(result.seconds, 3),
                    }
                }
            )

    def _collect(self) -> None:
        gone = self.book().collect(grace_s=self.grace_s)
        # Nothing more can become collectable before a newer image's grace ends.
        self._collect_at = time.monotonic() + min(self.grace_s, 60.0)
        if gone:
            self._say({"images_collected": [i.url for i in gone]})

    def _say(self, event: Event) -> None:
        if self.on_event is not None:
            self.on_event(event)


def hold(
    folder: Folder,
    poll_s: float,
    stop: threading.Event,
    retries: int,
    images: ImageCadence | None = None,
    on_fold: Callable[[FoldReport], None] | None = None,
    on_retry: Callable[[int, BaseException, float], None] | None = None,
    lease: HolderLease | None = None,
) -> None:
    """Fold every ``poll_s`` seconds until ``stop`` is set. ``lease``, the
    holder lease this holder took, records each fold; lost (another holder
    took over after this one stalled past its TTL), the loop ends with
    FencedError. A transient store
    failure (``retryable``) is retried ``retries`` times in a row with backoff
    (twice the poll, doubling, at most 30 s; one holder per lake, so no
    jitter); then, or at once for a terminal one, the error propagates: a
    supervisor restarts the holder, or a person reads why. ``on_fold`` hears
    each fold that folded or truncated something; ``images`` looks after each."""
    backoff = Backoff(first_s=poll_s * 2, factor=2.0, cap_s=30.0, jitter=0.0)
    while not stop.is_set():
        try:
            report = retry(
                folder.fold_once,
                attempts=retries + 1,
                backoff=backoff,
                between=on_retry,
                wait=stop.wait,
            )
        except SlatelakeError:
            if stop.is_set():  # stopped while waiting to retry: a stop, not a failure
                return
            raise
        if lease is not None:
            lease.note_fold(folder.flushed_seq)
            if lease.lost is not None:
                raise FencedError(f"{folder.location.url}: the holder lease was lost: {lease.lost}")
        if (report.slots or report.truncated) and on_fold is not None:
            on_fold(report)
        if images is not None:
            images.tick(folder)
        stop.wait(poll_s)
