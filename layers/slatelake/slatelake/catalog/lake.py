"""A lake handle for committers and readers: materialize, refresh, commit.

A handle fences nothing. It reads the store through a ``DbReader`` (which
writes nothing), replays the log past the store's fold cursor, and commits by
writing slots. It holds a reader lease so the folder never truncates a slot
its view still needs.

It remembers the digest of each recent slot it read or wrote (log/seen.py):
its commits chain to them (log/changeset.py), its replays check the chain
against them, and a slot it saw that is later gone with nothing after it,
or that it wins again, is a cut tail: CorruptionError naming the seq, never
"no more commits" and never an acknowledged commit at a seq already taken.

Creating a lake is the one moment a handle opens the store writer: to lay
down the format stamp and the empty head.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from slatelake.catalog.changes import RowChanges, build_change_set
from slatelake.catalog.fold_slot import SYS_FOLD_SLOT, decode_fold_slot
from slatelake.catalog.state import (
    CATALOG_SUBSPACES,
    EMPTY_HEAD,
    SYS_FOLD,
    SYS_FORMAT,
    CatalogState,
    CatalogView,
    check_catalog_ranges,
    check_format,
    decode_fold,
    encode_fold,
    encode_format,
)
from slatelake.durations import env_duration
from slatelake.errors import (
    CorruptionError,
    MisconfigurationError,
    NotFoundError,
    PermissionDeniedError,
    ReadOnlyError,
    StaleViewError,
    retry,
)
from slatelake.log.changeset import ChangeSet, Head, KeySelection
from slatelake.log.committer import Committed, Committer
from slatelake.log.leases import DEFAULT_TTL_S, LeaseBook, ReaderLease
from slatelake.log.replay import Tail, read_key_tail, read_tail
from slatelake.log.seen import SeenSlots
from slatelake.log.slots import SlotLog, slot_digest
from slatelake.store.db import StoreReader, open_reader, open_writer, store_exists
from slatelake.store.keys import Subspace
from slatelake.store.location import LakeLocation

STALE_VIEW_RETRIES = 3
READER_LEASE_TTL_ENV = "SLATELAKE_READER_LEASE_TTL"
# A won slot is vouched for by the reader lease only this soon after the look
# it was absent at: well inside the folder's default truncation margin (30 s),
# so a folder would have to ignore that too to truncate it.
VOUCH_SPAN_S = 10.0
T = TypeVar("T")
log = logging.getLogger("slatelake.lake")


@dataclass(frozen=True)
class LogSummary:
    head: Head
    last_slot: int
    fold_cursor: int
    retained_slots: int
    retained_bytes: int
    catalog_rows: int

    @property
    def unfolded_slots(self) -> int:
        return self.last_slot - self.fold_cursor


def reader_lease_ttl() -> float:
    """A reader lease's life (``SLATELAKE_READER_LEASE_TTL``, default 10
    minutes): how long a killed reader's slots and pins outlive it."""
    return env_duration(READER_LEASE_TTL_ENV, DEFAULT_TTL_S, maximum=86400.0) or DEFAULT_TTL_S


class Lake:
    def __init__(
        self,
        location: LakeLocation,
        read_only: bool = False,
        max_operations: int | None = None,
    ) -> None:
        self.location = location
        self.read_only = read_only
        self.log = SlotLog(location)
        self.committer = Committer(self.log, max_operations)
        self.lease = ReaderLease(LeaseBook(location, self.log.client), reader_lease_ttl())
        self._lease_refused = False  # a read-only role that may not write readers/
        self._reader: StoreReader | None = None
        # (seq, monotonic time): the log was seen to end at seq then (no slot after it)
        self._looked: tuple[int, float] | None = None
        self._looker: ThreadPoolExecutor | None = None  # ``look_beside``'s worker
        # the slots this handle read or wrote: its commits chain to them
        self.seen = SeenSlots(self.log)

    # -- lifecycle -------------------------------------------------------
    @classmethod
    def create(cls, url: str) -> Lake:
        """Lay down an empty lake: format stamp, empty head, fold cursor 0."""
        location = LakeLocation.parse(url)
        if store_exists(location):
            raise MisconfigurationError(f"a lake already exists at {url}; open it instead")
        writer = open_writer(location)
        try:
            check_format(writer.get(SYS_FORMAT), url)
            if writer.get(SYS_FOLD) is None:
                writer.write(
                    [
                        (SYS_FORMAT, encode_format()),
                        (SYS_FOLD, encode_fold(0, EMPTY_HEAD)),
                    ]
                )
                writer.flush()
        finally:
            writer.close()
        return cls(location)

    @classmethod
    def open(
        cls,
        url: str,
        read_only: bool = False,
        max_operations: int | None = None,
        seen: bool = False,
    ) -> Lake:
        """``seen``: the caller has just found the store there (no second look)."""
        location = LakeLocation.parse(url)
        if not seen and not store_exists(location):
            raise NotFoundError(
                f"no slatelake lake at {url}; create it with `slatelake init {url}`"
            )
        lake = cls(location, read_only=read_only, max_operations=max_operations)
        check_format(lake.reader().get(SYS_FORMAT), url)
        return lake

    def close(self) -> None:
        """Release the reader lease, best effort: it only holds truncation back
        and lapses at its TTL, so a failed delete never fails the work that
        came before the close; the store reader is closed either way."""
        if self._looker is not None:
            self._looker.shutdown(wait=True)
            self._looker = None
        try:
            self.lease.release()
        except Exception as exc:
            log.warning(
                "reader lease of %s not deleted at close (%s); it lapses at its TTL",
                self.location.url,
                exc,
            )
        finally:
            if self._reader is not None:
                self._reader.close()
                self._reader = None

    def __enter__(self) -> Lake:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def reader(self, fresh: bool = False) -> StoreReader:
        if fresh and self._reader is not None:
            self._reader.close()
            self._reader = None
        if self._reader is None:
            self._reader = open_reader(self.location)
        return self._reader

    # -- reading ---------------------------------------------------------
    def materialize(self) -> CatalogState:
        """Every catalog row at the log's head: store view plus replay. A view
        the folder truncated under it is re-read on a fresh store reader; one
        still stale after that means slots are missing: corruption."""
        return self._fresh_when_stale(self._materialize_once)

    def _fresh_when_stale(self, read: Callable[[], T]) -> T:
        """``read`` again on a fresh store reader while the log was truncated
        under its view; still stale after that, slots are missing: corruption."""
        return retry(
            read,
            attempts=STALE_VIEW_RETRIES,
            on=StaleViewError,
            between=lambda *_: self.reader(fresh=True),
            give_up=lambda exc, tries: CorruptionError(
                f"{self.location.url}: {exc}; the store's fold cursor did not catch up after "
                f"{tries} fresh reads, so the log is missing slots"
            ),
        )

    def _materialize_once(self) -> CatalogState:
        reader = self.reader()
        raw = reader.get(SYS_FOLD)
        if raw is None:
            raise CorruptionError(f"{self.location.url}: the store has no fold cursor")
        seq, head = decode_fold(raw)
        self._renew_reader_lease(seq)
        state = CatalogState(head=head, last_seq=seq)
        for sub in CATALOG_SUBSPACES:
            for batch in reader.scan_prefix_batches(bytes((sub,))):
                state.load(batch)
        folded = reader.get(SYS_FOLD_SLOT)  # the folded slot's digest: the chain's start
        at, digest = decode_fold_slot(folded) if folded is not None else (-1, "")
        # StaleViewError: truncated under this view
        tail = self._read_tail(head, seq, digest if at == seq else None)
        for slot, cs in tail.applied:
            state.apply(cs, slot)
        state.last_seq = tail.last_seq
        return state

    def slot_digest(self, seq: int) -> str | None:
        """The digest (``log.slots.slot_digest``) of slot ``seq`` as the log
        holds it: the store's fold-slot record when the fold cursor stands
        on it (no request: the store reader is open), else the slot itself
        while it is retained (one GET); None when neither can say (truncated,
        and the fold moved on). What a catalog image cut at ``seq`` is
        checked against before it is trusted."""
        stored = self.reader().get(SYS_FOLD_SLOT)
        if stored is not None:
            at, digest = decode_fold_slot(stored)
            if at == seq:
                return digest
        raw = self.log.read_raw(seq)
        return None if raw is None else slot_digest(raw)

    def tail_after(self, head: Head, seq: int, digest: str | None = None) -> Tail:
        """The log past a view at ``(head, seq)`` (a catalog image's, whose
        slot has ``digest``), its slots pinned by this handle's reader lease.
        StaleViewError when the folder already truncated slots the view needs;
        CorruptionError when the log ends below the store's fold cursor (its
        newest slots were cut: the folder never deletes the newest)."""
        self._renew_reader_lease(seq)
        folded, _ = self._fold(self.reader())  # before the listing: it must reach it
        return self._read_tail(head, seq, digest, reached=folded)

    def _read_tail(self, head: Head, seq: int, digest: str | None = None, reached: int = 0) -> Tail:
        """The log past ``seq``, noting when its end was seen (``_pinned``),
        checked against the slots this handle saw before (log/seen.py).
        ``digest``: slot ``seq``'s as the view has it (the store's fold
        record, an image's binding); ``reached``: a seq the log is known to
        have reached (the store's fold cursor, read before the listing)."""
        looked = time.monotonic()
        known = digest or self.seen.digest(seq)
        tail = read_tail(self.log, head, seq, cursor_digest=known)
        found = dict(tail.digests)
        if known is not None:
            found[seq] = known  # what the next commit chains to
        self.seen.check_tail(seq, tail.last_seq, found, reached)
        self._saw_end(tail.last_seq, looked)
        return tail

    def _saw_end(self, seq: int, at: float) -> None:
        if self._looked is None or self._looked[1] <= at:
            self._looked = (seq, at)

    def _pinned(self, seq: int) -> bool:
        """Whether slot ``seq``, just won, cannot lie below the truncation
        mark, so the committer need not read it. It was absent when this
        handle last saw the log's end, so whoever wrote it before (a slot the
        folder then truncated) wrote it after that look; the reader lease has
        pinned every slot after its fold (at most the view's seq) since before
        the look, and is still live with the clock-skew allowance to spare.
        And the look was less than ``VOUCH_SPAN_S`` ago, inside the folder's
        margin: a slot written since has not been folded that long."""
        looked = self._looked
        if looked is None or seq <= looked[0]:
            return False
        return time.monotonic() - looked[1] < VOUCH_SPAN_S and self.lease.pins_since(looked[1])

    def _renew_reader_lease(self, seq: int) -> None:
        """Pin the slots this view needs. Best effort when read-only: a
        read-only role may not be allowed to write ``readers/``; the folder's
        truncation margin then covers a short read."""
        try:
            self.lease.hold(seq)
            self._lease_refused = False
        except Exception as exc:
            if not self.read_only:
                raise
            # a refusal stands (not asked again); an outage is retried at the next refresh
            self._lease_refused = isinstance(exc, PermissionError | PermissionDeniedError)
            log.warning(
                "reader lease not written for %s (%s); relying on the truncation margin%s",
                self.location.url,
                exc,
                "" if self._lease_refused else " until the next refresh writes it",
            )

    def refresh(self, state: CatalogView, rematerialize: bool = True) -> CatalogView:
        """Bring ``state`` to the log's head in place; one LIST when nothing changed.

        Renews the reader lease first (a PUT only past half its life), so a view
        that idles and refreshes keeps its slots; one whose lease lapsed anyway
        is found stale by ``read_tail`` and re-materialized from the store, or,
        with ``rematerialize`` False, StaleViewError goes to the caller (a
        session reopens from the newest image instead).
        """
        if not self._lease_refused:
            self._renew_reader_lease(state.last_seq)
        try:
            tail = self._read_tail(state.head, state.last_seq)
        except StaleViewError:
            if not rematerialize:
                raise
            fresh = self.materialize()
            state.replace_with(fresh)
            return state
        state.apply_tail(tail.applied)
        state.last_seq = tail.last_seq
        return state

    def look_beside(self, state: CatalogView) -> Callable[[], bool]:
        """Start a look at the log's end past ``state`` on a worker thread,
        for the caller to run a statement meanwhile; the call returned waits
        for it and says whether the log moved past the view (its errors are
        raised there). The reader lease is renewed first, as ``refresh`` does;
        a look that finds nothing new counts as one for ``_pinned``."""
        if not self._lease_refused:
            self._renew_reader_lease(state.last_seq)
        seq = state.last_seq

        def look() -> bool:
            started = time.monotonic()
            # the folder never deletes the newest slot: nothing listed, nothing new
            moved = next(iter(self.log.list_after(seq)), None) is not None
            if not moved:
                self._saw_end(seq, started)
            return moved

        if self._looker is None:
            self._looker = ThreadPoolExecutor(1, thread_name_prefix="slatelake-look")
        return self._looker.submit(look).result

    def read_sys(self, state: CatalogView, key: bytes) -> bytes | None:
        """A sys record as of ``state``: the log tail's last write, else the store's."""
        if key in state.sys_overlay:
            return state.sys_overlay[key]
        return self.reader().get(key)

    def read_sys_at_head(self, key: bytes) -> bytes | None:
        """A sys record at the log's head without loading the catalog: the
        store's value, then the last write of it in the log tail (one LIST and
        the tail's slots), so reading a status record costs no materialization."""
        return self.read_sys_many_at_head([key])[key]

    def read_sys_many_at_head(self, keys: Iterable[bytes]) -> dict[bytes, bytes | None]:
        """Several sys records at the log's head, the tail read once for all.

        Each unfolded slot is read once (a GET; they stream, ``read_key_tail``)
        and checked as a replay checks it, but only these keys' writes are
        taken from it: no slot's catalog rows are built, nothing of the
        catalog is loaded."""
        wanted = _sys_keys(keys)
        return self._fresh_when_stale(lambda: self._read_sys_once(wanted))

    def read_sys_index_at_head(
        self, index_key: bytes, named: Callable[[bytes | None], list[bytes]], under: bytes
    ) -> tuple[bytes | None, dict[bytes, bytes | None]]:
        """A sys record that lists others (the run history's or the audit
        log's index) and the records ``named`` picks from its value (a page,
        every key under the prefix ``under``), at the log's head, with one
        read of the tail for both. Returns the index's value and the records.

        Exact as two reads at the head are: the store is read before the log
        is listed (as ``read_sys_many_at_head`` reads it), so the tail holds
        all the store lacks. The page ``named`` picks from the store's index
        is read from the store then, and the tail keeps every write under
        ``under``. An index only gains ids at its new end, each written with
        its record, and drops its oldest, so a record on the head's page is
        the tail's own write or on the store's page."""
        _sys_keys([index_key, under])
        return self._fresh_when_stale(lambda: self._read_index_once(index_key, named, under))

    def _fold(self, reader: StoreReader) -> tuple[int, Head]:
        raw = reader.get(SYS_FOLD)
        if raw is None:
            raise CorruptionError(f"{self.location.url}: the store has no fold cursor")
        return decode_fold(raw)

    def _read_sys_once(self, keys: list[bytes]) -> dict[bytes, bytes | None]:
        reader = self.reader()
        seq, head = self._fold(reader)
        # before the log is listed: the tail then holds all the store lacks
        found = {key: reader.get(key) for key in keys}
        found.update(self._sys_writes(head, seq, KeySelection(frozenset(keys))))
        return found

    def _read_index_once(
        self, index_key: bytes, named: Callable[[bytes | None], list[bytes]], under: bytes
    ) -> tuple[bytes | None, dict[bytes, bytes | None]]:
        reader = self.reader()
        seq, head = self._fold(reader)
        stored_index = reader.get(index_key)
        try:
            guessed = named(stored_index)
        except CorruptionError:  # the tail may rewrite it; the head's index decides below
            guessed = []
        stored = {key: reader.get(key) for key in guessed}
        writes = self._sys_writes(head, seq, KeySelection(frozenset((index_key,)), (under,)))
        index = writes.get(index_key, stored_index)
        found = {}
        for key in named(index):
            if key in writes:
                found[key] = writes[key]
            elif key in stored:
                found[key] = stored[key]
            else:  # beyond what an index's writer does (see above): read as it is now
                found[key] = reader.get(key)
        return index, found

    def _sys_writes(self, head: Head, seq: int, select: KeySelection) -> dict[bytes, bytes | None]:
        """The last write of each selected sys key in the log past ``seq``
        (a delete as None), by the change sets a replay applies. A range over
        sys is damage there (``check_catalog_ranges``), so it is here too."""
        writes: dict[bytes, bytes | None] = {}
        for slot, cs in read_key_tail(self.log, head, seq, select).applied:
            check_catalog_ranges(cs, slot)
            writes.update(cs.puts)
            writes.update(dict.fromkeys(cs.deletes))
        return writes

    def summary(self) -> LogSummary:
        """Head, fold cursor and what the log retains: one view, one LIST."""
        state = self.materialize()
        fold_seq, _ = decode_fold(self.reader().get(SYS_FOLD) or b"")
        slots = list(self.log.list_after(0))
        return LogSummary(
            head=state.head,
            last_slot=state.last_seq,
            fold_cursor=fold_seq,
            retained_slots=len(slots),
            retained_bytes=sum(s.size for s in slots),
            catalog_rows=state.row_count(),
        )

    # -- writing ---------------------------------------------------------
    def commit(
        self,
        state: CatalogView,
        changes: RowChanges,
        mints_snapshot: bool,
        changes_made: str = "",
    ) -> Committed:
        """Commit row changes made against ``state``; advances ``state`` on success."""
        self._writable()
        cs = build_change_set(state, changes, mints_snapshot, changes_made)
        return self.commit_change_set(state, cs)

    def commit_change_set(self, state: CatalogView, cs: ChangeSet) -> Committed:
        self._writable()
        looked = time.monotonic()
        high = self.seen.high
        committed = self.committer.commit(
            cs, state.last_seq + 1, pinned=self._pinned, chain=self.seen.chain
        )
        # a seq this handle saw taken is never acknowledged again
        self.seen.check_won(committed.seq, high, cs.txn_id)
        # the slot was absent at ``looked``, so no slot after it existed then
        self._saw_end(committed.seq, looked)
        if committed.seq == state.last_seq + 1:
            state.apply(committed.change_set, committed.seq)
        else:  # rebased past other commits: pick them up with ours
            self.refresh(state)
        return committed

    def _writable(self) -> None:
        if self.read_only:
            raise ReadOnlyError(
                f"{self.location.url} is open read-only; reopen without read_only to commit"
            )


def _sys_keys(keys: Iterable[bytes]) -> list[bytes]:
    """``keys`` once each, all in the sys subspace: only sys records are read
    this way (a catalog row needs the catalog's range deletes applied too)."""
    wanted = list(dict.fromkeys(keys))
    for key in wanted:
        if key[:1] != bytes((Subspace.SYS,)):
            raise ValueError(f"key {key.hex()} is not a sys record")
    return wanted
