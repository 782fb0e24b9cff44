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
Expired leases are ignored (and removed): a reader that vanished cannot pin
the log forever; its view then finds itself stale through the truncation mark
(log/slots.py) instead of missing slots. ``Lake.refresh`` renews the lease, so
only a view that neither refreshes nor materializes for a TTL loses it.

A lease also lets a committer skip reading the truncation mark after it wins a
slot (``ReaderLease.pins_since``): a slot after the lease's fold, absent when
the committer last looked at the log's end, cannot have been truncated while
the lease was live in every folder's eyes. That holds while the committer's
and folders' wall clocks agree within ``CLOCK_SKEW_S``; past it the mark is
read as before.

A lease also says when its reader started writing data files not yet
committed (``writing_since_us``), so the orphan step spares every file newer
than the oldest live writer's start, whatever age it was given: in-flight
writes are known, not guessed. The mark is written before the first data
file of a write can land, renewed by a heartbeat while a write runs longer
than half the lease's life, and cleared lazily (by the next renewal after
the write ended): a stale mark only spares more.

A lease also carries the reader's snapshot pins (``Pin``): snapshots it
reads (or, ``onward``, every snapshot from one on, a change feed's start)
that expiry must leave and cleanup must not take. The heartbeat renews a
lease with pins however idle its reader, so a pin lives as long as the
process; a killed reader's pins lapse with its lease.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid
from dataclasses import dataclass

from slatelake.store.location import LakeLocation
from slatelake.store.objects import ObjectClient

READERS_DIR = "readers"
# The files a reader's pinned snapshots were read through, one object per
# reader (``pins/<id>``): kept beside the lease, which stays small.
PIN_FILES_DIR = "pins"
DEFAULT_TTL_S = 600.0
DEFAULT_MARGIN_S = 30.0
ADVANCE_STEP = 64
# How far a folder's wall clock may run ahead of a committer's before a lease
# the committer counts on could look expired to the folder.
CLOCK_SKEW_S = 120.0


def now_us() -> int:
    return time.time_ns() // 1000


@dataclass(frozen=True)
class Pin:
    """A snapshot a reader pins; ``onward``: and every later one."""

    snapshot_id: int
    onward: bool = False
    since_us: int = 0  # when it was pinned
    owner: str = ""  # who pinned it, in words (user@host pid N)

    def to_list(self) -> list[object]:
        return [self.snapshot_id, self.onward, self.since_us, self.owner]

    @classmethod
    def from_list(cls, raw: object) -> Pin:
        """Read back from a lease record; ValueError when malformed."""
        if not isinstance(raw, list) or len(raw) != 4:
            raise ValueError("a pin is [snapshot_id, onward, since_us, owner]")
        snapshot, onward, since, owner = raw
        if not (isinstance(snapshot, int) and not isinstance(snapshot, bool) and snapshot >= 0):
            raise ValueError("a pin's snapshot id is a whole number")
        if not isinstance(onward, bool) or not isinstance(since, int) or not isinstance(owner, str):
            raise ValueError("a pin's fields are [int, bool, int, str]")
        return cls(snapshot, onward, since, owner)


@dataclass(frozen=True)
class Lease:
    reader_id: str
    fold: int
    expires_at_us: int
    # when the reader's oldest write still in flight began (None: none)
    writing_since_us: int | None = None
    pins: tuple[Pin, ...] = ()


class LeaseBook:
    def __init__(self, location: LakeLocation, client: ObjectClient | None = None) -> None:
        self.client = client if client is not None else ObjectClient(location)
        self.prefix = location.path(READERS_DIR) + "/"
        self.pins_prefix = location.path(PIN_FILES_DIR) + "/"

    def write_pin_files(self, reader_id: str, paths: list[str]) -> None:
        self.client.put(self.pins_prefix + reader_id, json.dumps(sorted(paths)).encode())

    def pin_files(self, reader_id: str) -> list[str] | None:
        """The files a reader recorded for its pins (None: none recorded).
        A record that does not decode raises ValueError: what it keeps is
        unknown, and the caller must not delete on a guess."""
        raw = self.client.get(self.pins_prefix + reader_id)
        if raw is None:
            return None
        paths = json.loads(raw)
        if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
            raise ValueError(f"pin files of reader {reader_id} do not decode")
        return paths

    def write(
        self,
        reader_id: str,
        fold: int,
        ttl_s: float = DEFAULT_TTL_S,
        writing_since_us: int | None = None,
        pins: tuple[Pin, ...] = (),
    ) -> Lease:
        expires = now_us() + int(ttl_s * 1_000_000)
        lease = Lease(reader_id, fold, expires, writing_since_us, pins)
        doc: dict[str, object] = {"fold": lease.fold, "expires_at_us": lease.expires_at_us}
        if writing_since_us is not None:
            doc["writing_since_us"] = writing_since_us
        if pins:
            doc["pins"] = [pin.to_list() for pin in pins]
        self.client.put(self.prefix + reader_id, json.dumps(doc).encode())
        return lease

    def drop(self, reader_id: str, pinned: bool = False) -> None:
        self.client.delete(self.prefix + reader_id)
        if pinned:
            self.client.delete(self.pins_prefix + reader_id)

    def live(self, at_us: int | None = None, prune: bool = True) -> list[Lease]:
        """The leases not yet expired. ``prune``: delete the expired ones met
        (False for a reader that must write nothing: a dry run, a guard)."""
        at = now_us() if at_us is None else at_us
        out = []
        for info in self.client.list(self.prefix):
            raw = self.client.get(info.path)
            if raw is None:
                continue
            try:
                doc = json.loads(raw)
                since = doc.get("writing_since_us")
                lease = Lease(
                    info.path[len(self.prefix) :],
                    int(doc["fold"]),
                    int(doc["expires_at_us"]),
                    None if since is None else int(since),
                    tuple(Pin.from_list(p) for p in doc.get("pins", [])),
                )
            except (ValueError, KeyError, TypeError, AttributeError):
                continue  # an unreadable lease pins nothing; it will expire by age
            if lease.expires_at_us > at:
                out.append(lease)
            elif prune:
                self.client.delete(info.path)
                if lease.pins:
                    self.client.delete(self.pins_prefix + lease.reader_id)
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
        self._lock = threading.Lock()  # the heartbeat writes beside the owner
        self._writes = 0  # writes in flight
        self._writing_since: int | None = None  # when the oldest of them began
        self._pins: tuple[Pin, ...] = ()
        self._pin_files: set[str] = set()  # as recorded in ``pins/<id>``
        self._beat: threading.Thread | None = None
        self._stop = threading.Event()

    def hold(self, fold: int) -> None:
        """Pin slots after ``fold``, the cursor of the view now relied on.

        Writes only when there is no lease, when it is past half its life, or
        when the view moved ``ADVANCE_STEP`` slots: a pin that lags is merely
        conservative, so most materializations cost no PUT.
        """
        with self._lock:
            lease = self.lease
            if self._due(lease) or fold < lease.fold or fold - lease.fold >= ADVANCE_STEP:
                self._write(fold)

    def begin_write(self, fold: int) -> None:
        """Say a write is starting (before its first data file can land): the
        record carries the start of the oldest write in flight. A PUT only
        when the record does not already carry an earlier mark; raises the
        store's error when it cannot be written, so the write does not start
        unannounced."""
        with self._lock:
            if self._writes == 0:
                self._writing_since = now_us()
            self._writes += 1
            lease = self.lease
            marked = lease is not None and lease.writing_since_us is not None
            if not marked or self._due(lease):
                try:
                    self._write(fold if lease is None else min(fold, lease.fold))
                except BaseException:
                    self._end_write()
                    raise
            self._start_heartbeat()

    @property
    def pins(self) -> tuple[Pin, ...]:
        return self._pins

    def set_pins(self, pins: tuple[Pin, ...], fold: int) -> None:
        """Write the record now with ``pins`` (raises the store's error when
        it cannot be written: a pin not written must not be relied on); the
        heartbeat keeps a record with pins alive while the process lives."""
        with self._lock:
            before = self._pins
            self._pins = pins
            lease = self.lease
            try:
                self._write(fold if lease is None else min(fold, lease.fold))
            except BaseException:
                self._pins = before
                raise
            self._start_heartbeat()

    def record_pin_files(self, paths: list[str]) -> None:
        """Add ``paths`` to the files this reader's pins were read through
        (a PUT only when the set grew; the store's error is raised: a file
        not recorded must not be relied on)."""
        with self._lock:
            grown = self._pin_files.union(paths)
            if grown != self._pin_files:
                self.book.write_pin_files(self.reader_id, list(grown))
                self._pin_files = grown

    def _start_heartbeat(self) -> None:
        """Start the renewing thread once (the lock held)."""
        if self._beat is None:
            self._beat = threading.Thread(
                target=self._heartbeat,
                args=(self._stop,),
                name=f"lease-{self.reader_id[:8]}",
                daemon=True,
            )
            self._beat.start()

    @property
    def writing(self) -> bool:
        """Whether a write of this lease's reader is in flight."""
        return self._writes > 0

    def end_write(self) -> None:
        """A write ended (committed or not). The mark stays in the record
        until the next renewal: a stale mark only spares more."""
        with self._lock:
            self._end_write()

    def _end_write(self) -> None:
        self._writes = max(0, self._writes - 1)
        if self._writes == 0:
            self._writing_since = None

    def _due(self, lease: Lease | None) -> bool:
        return lease is None or lease.expires_at_us - now_us() < int(self.ttl_s * 500_000)

    def _write(self, fold: int) -> None:
        """Write the record (the lock held)."""
        lease = self.lease
        written = self.book.write(self.reader_id, fold, self.ttl_s, self._writing_since, self._pins)
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

    def _heartbeat(self, stop: threading.Event) -> None:
        """Renew the record while a write runs, or pins are held, past half
        the lease's life (a long INSERT, an idle pinned reader renew nothing
        themselves); best effort, as every renewal."""
        while not stop.wait(self.ttl_s / 8):
            with self._lock:
                lease = self.lease
                busy = self._writes or self._pins
                if busy and lease is not None and self._due(lease):
                    # best effort: the owner's next renewal or write says so
                    with contextlib.suppress(Exception):
                        self._write(lease.fold)

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
        self._stop.set()
        with self._lock:
            self._stop, self._beat = threading.Event(), None
            recorded = bool(self._pin_files)
            self._writes, self._writing_since, self._pins = 0, None, ()
            self._pin_files = set()
            if self.lease is not None:
                self.lease, self.live_since = None, None
                self.book.drop(self.reader_id, pinned=recorded)


def oldest_write(leases: list[Lease]) -> int | None:
    """When the oldest write in flight among live leases began (epoch
    microseconds; None: no live lease says it is writing)."""
    marks = [lease.writing_since_us for lease in leases if lease.writing_since_us is not None]
    return min(marks) if marks else None


def truncation_bound(flushed_fold: int, leases: list[Lease]) -> int:
    """The highest seq the rule allows deleting (before the time margin)."""
    bound = flushed_fold
    for lease in leases:
        bound = min(bound, lease.fold)
    return bound


def pinned(leases: list[Lease]) -> tuple[dict[int, list[str]], int | None]:
    """Exact pins (snapshot id -> reader ids) and the lowest ``onward`` pin
    (None: none) among ``leases``."""
    exact: dict[int, list[str]] = {}
    onward: int | None = None
    for lease in leases:
        for pin in lease.pins:
            if pin.onward:
                onward = pin.snapshot_id if onward is None else min(onward, pin.snapshot_id)
            else:
                exact.setdefault(pin.snapshot_id, []).append(lease.reader_id)
    return exact, onward
