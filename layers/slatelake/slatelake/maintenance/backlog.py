"""The backlog a lake carries between holders: what every pass and every fold
publishes, so a dashboard shows a log nobody folds long before opens slow down.

Five numbers, read without loading the catalog: one LIST of the log, one of
the images, the fold cursor (one store read, or the folder's own), and the
compactor's state (one admin read).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

from slatelake.catalog.state import SYS_FOLD, decode_fold
from slatelake.errors import CorruptionError
from slatelake.log.images import ImageBook
from slatelake.log.slots import SlotLog
from slatelake.store.db import open_reader
from slatelake.store.location import LakeLocation, Located, location_of
from slatelake.store.merge import merges_in_flight


@dataclass(frozen=True)
class Backlog:
    """``unfolded_slots`` past the fold cursor, ``log_bytes`` of every slot the
    log retains, ``oldest_unfolded_age_s`` of the first unfolded slot (0 when
    none), ``image_lag_slots`` an open replays past the newest image (every
    slot when there is none), ``store_merges_pending`` the compactor still
    owes."""

    unfolded_slots: int
    log_bytes: int
    oldest_unfolded_age_s: float
    image_lag_slots: int
    store_merges_pending: int
    last_slot: int
    fold_cursor: int
    image_seq: int | None

    def to_dict(self) -> dict[str, object]:
        doc = asdict(self)
        doc["oldest_unfolded_age_s"] = round(self.oldest_unfolded_age_s, 3)
        return doc


def fold_cursor(location: LakeLocation) -> int:
    """The store's fold cursor, through a reader (no writer, nothing fenced)."""
    reader = open_reader(location)
    try:
        raw = reader.get(SYS_FOLD)
    finally:
        reader.close()
    if raw is None:
        raise CorruptionError(f"{location.url}: the store has no fold cursor")
    return decode_fold(raw)[0]


def measure(location: LakeLocation, fold_seq: int | None = None) -> Backlog:
    """The lake's backlog now. ``fold_seq``: the fold cursor when the caller
    holds it (the folder), else it is read from the store."""
    slots = list(SlotLog(location).list_after(0))
    cursor = fold_cursor(location) if fold_seq is None else fold_seq
    newest = ImageBook(location).newest()
    last = slots[-1].seq if slots else cursor
    unfolded = [s for s in slots if s.seq > cursor]
    age = 0.0
    if unfolded:
        age = max(0.0, time.time() - unfolded[0].last_modified_us / 1_000_000)
    image_seq = newest.seq if newest is not None else None
    return Backlog(
        unfolded_slots=max(0, last - cursor),
        log_bytes=sum(s.size for s in slots),
        oldest_unfolded_age_s=age,
        image_lag_slots=max(0, last - (image_seq or 0)),
        store_merges_pending=len(merges_in_flight(location)),
        last_slot=last,
        fold_cursor=cursor,
        image_seq=image_seq,
    )


def backlog_of(lake: str | LakeLocation | Located) -> Backlog:
    """The lake's backlog now (``measure`` for a URL, a location or a handle)."""
    return measure(location_of(lake))
