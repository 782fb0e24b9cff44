"""Reader leases and the truncation rule.

A committer or reader whose view of the store is at fold cursor F needs every
slot after F. It says so with a lease object ``readers/<id>`` holding F and an
expiry; it refreshes the lease well before expiry and deletes it on close.

The folder deletes a slot only when all hold:
- it is at or below the *flushed* fold cursor (the store has it durably);
- it is at or below every live lease's cursor;
- it was folded at least ``margin`` ago (covers a view opened but not yet
  leased, and a lease write still in flight);
- it is not the newest slot (so an empty listing means "nothing new").
Expired leases are ignored (and removed): a holder that vanished cannot pin
the log forever; its view then finds itself stale through the truncation mark
(log/slots.py) instead of missing slots. ``Lake.refresh`` renews the lease, so
only a view that neither refreshes nor materializes for a TTL loses it.

A lease also lets a committer skip reading the truncation mark after it wins a
slot (``ReaderLease.pins_since``): a slot after the lease's fold, absent when
the committer last looked at the log's end, cannot have been truncated while
the lease was live in every folder's eyes. That holds while the committer's
and folders' wall clocks agree within ``CLOCK_SKEW_S``; past it the mark is
read as before.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass

from slatelake.store.location import LakeLocation
from slatelake.store.objects import ObjectClient

READERS_DIR = "readers"
DEFAULT_TTL_S = 600.0
DEFAULT_MARGIN_S = 30.0
ADVANCE_STEP = 64
# How far a folder's wall clock may run ahead of a committer's before a lease
# the committer counts on could look expired to the folder.
CLOCK_SKEW_S = 120.0


def now_us() -> int:
    return time.time_ns() // 1000


@dataclass(frozen=True)
class Lease:
    reader_id: str
    fold: int
    expires_at_us: int


class LeaseBook:
    def __init__(self, location: LakeLocation, client: ObjectClient | None = None) -> None:
        self.client = client if client is not None else ObjectClient(location)
        self.prefix = location.path(READERS_DIR) + "/"

    def write(self, reader_id: str, fold: int, ttl_s: float = DEFAULT_TTL_S) -> Lease:
        lease = Lease(reader_id, fold, now_us() + int(ttl_s * 1_000_000))
        body = json.dumps({"fold": lease.fold, "expires_at_us": lease.expires_at_us})
        self.client.put(self.prefix + reader_id, body.encode())
        return lease

    def drop(self, reader_id: str) -> None:
        self.client.delete(self.prefix + reader_id)

    def live(self, at_us: int | None = None) -> list[Lease]:
        at = now_us() if at_us is None else at_us
        out = []
        for info in self.client.list(self.prefix):
            raw = self.client.get(info.path)
            if raw is None:
                continue
            try:
                doc = json.loads(raw)
                lease = Lease(
                    info.path[len(self.prefix) :], int(doc["fold"]), int(doc["expires_at_us"])
                )
            except (ValueError, KeyError, TypeError):
                continue  # an unreadable lease pins nothing; it will expire by age
            if lease.expires_at_us > at:
                out.append(lease)
            else:
                self.client.delete(info.path)
        return out


class ReaderLease:
    """A held lease that refreshes itself at half its time to live."""

    def __init__(self, book: LeaseBook, ttl_s: float = DEFAULT_TTL_S) -> None:
        self.book = book
        self.ttl_s = ttl_s
        self.reader_id = uuid.uuid4().hex
        self.lease: Lease | None = None
        # monotonic time from which a record of this lease has pinned every
        # slot after its fold without a gap (None: no record written)
        self.live_since: float | None = None

    def hold(self, fold: int) -> None:
        """Pin slots after ``fold``, the cursor of the view now relied on.

        Writes only when there is no lease, when it is past half its life, or
        when the view moved ``ADVANCE_STEP`` slots: a pin that lags is merely
        conservative, so most materializations cost no PUT.
        """
        lease = self.lease
        due = lease is None or lease.expires_at_us - now_us() < int(self.ttl_s * 500_000)
        if due or fold < lease.fold or fold - lease.fold >= ADVANCE_STEP:
            written = self.book.write(self.reader_id, fold, self.ttl_s)
            # the pin ran on without a gap only when the record replaced one
            # still surely live, and pins at least as much
            gapless = (
                lease is not None
                and written.fold >= lease.fold
                and now_us() < lease.expires_at_us - int(CLOCK_SKEW_S * 1_000_000)
            )
            if not gapless or self.live_since is None:
                self.live_since = time.monotonic()
            self.lease = written

    def pins_since(self, since: float) -> bool:
        """Whether this lease has pinned every slot after its fold since the
        monotonic time ``since`` and is still live, with ``CLOCK_SKEW_S`` to
        spare, in any folder's eyes: no folder can have truncated such a slot
        in between."""
        lease, live_since = self.lease, self.live_since
        if lease is None or live_since is None or live_since > since:
            return False
        return now_us() < lease.expires_at_us - int(CLOCK_SKEW_S * 1_000_000)

    def release(self) -> None:
        if self.lease is not None:
            self.lease, self.live_since = None, None
            self.book.drop(self.reader_id)


def truncation_bound(flushed_fold: int, leases: list[Lease]) -> int:
    """The highest seq the rule allows deleting (before the time margin)."""
    bound = flushed_fold
    for lease in leases:
        bound = min(bound, lease.fold)
    return bound
