"""The lake's commit lock: one DuckLake commit at a time, across processes.

Why a lock: each session keeps its own copy of DuckLake's metadata. DuckLake
rebases a transaction onto commits it can see in that copy (its own retry
path: a snapshot id taken, then its conflict check and fresh ids), but not
onto a commit that reaches the log between the copy's refresh and the slot
write. Holding this lock from that refresh to the slot write closes the
window, so DuckLake's rules, not a lost slot race, decide what conflicts.

The lock is a sys record committed through the log like any head-preserving
change. Taking it is a put; two takers on the same head race for the same
key, so the log's overlap rule refuses the second. The owner's commit
carries the release (a delete of the same key), so a commit lands only while
its lock stands: a lock broken by another taker makes the late commit
overlap that taker's put, and the log refuses it.

An owner that vanished (a killed process) is outlived: a waiter that has
seen the same record for the record's TTL on its own monotonic clock takes
the lock over. No two clocks are compared. A slow owner broken that way
finds its commit refused (ConflictError), never doubled.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from slatelake.catalog.state import CatalogView
from slatelake.durations import env_duration
from slatelake.errors import (
    Backoff,
    CommitLockBusyError,
    ConflictError,
    CorruptionError,
)
from slatelake.log.changeset import ChangeSet
from slatelake.store import values
from slatelake.store.keys import Subspace, encode_key

if TYPE_CHECKING:
    from slatelake.catalog.lake import Lake

log = logging.getLogger("slatelake.commit_lock")

LOCK_KEY = encode_key(Subspace.SYS, 0x05)
LOCK_TABLE = "sys/commit_lock"
_KIND = 0x05
TTL_ENV = "SLATELAKE_COMMIT_LOCK_TTL_S"
WAIT_ENV = "SLATELAKE_COMMIT_LOCK_WAIT_S"
DEFAULT_TTL_S = 60.0
DEFAULT_WAIT_S = 300.0
MAX_TTL_S = 3600.0


@dataclass(frozen=True)
class LockRecord:
    token: str
    owner: str
    ttl_s: float

    def encode(self) -> bytes:
        return values.frame(_KIND, [self.token, self.owner, self.ttl_s])

    @classmethod
    def decode(cls, raw: bytes) -> LockRecord:
        fields = values.unframe(raw, _KIND, "sys/commit_lock")
        if (
            not isinstance(fields, list)
            or len(fields) != 3
            or not all(isinstance(f, str) for f in fields[:2])
            or not _valid_ttl(fields[2])
        ):
            raise CorruptionError(
                "sys/commit_lock is unreadable; it lapses like any lock, or remove it with "
                "a commit that deletes the key"
            )
        return cls(fields[0], fields[1], float(fields[2]))


def _valid_ttl(value: object) -> bool:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return ok and math.isfinite(value) and 0 < value <= MAX_TTL_S  # type: ignore[arg-type]


def seconds_from_env(name: str, default: float) -> float:
    """A duration setting (``30``, ``90s``, ``2m``), positive, at most MAX_TTL_S."""
    return env_duration(name, default, maximum=MAX_TTL_S) or default


class CommitLock:
    """Take and give back the lake's commit lock for one committer."""

    def __init__(
        self,
        lake: Lake,
        owner: str | None = None,
        ttl_s: float | None = None,
        wait_s: float | None = None,
    ) -> None:
        self.lake = lake
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}"
        self.ttl_s = ttl_s if ttl_s is not None else seconds_from_env(TTL_ENV, DEFAULT_TTL_S)
        self.wait_s = wait_s if wait_s is not None else seconds_from_env(WAIT_ENV, DEFAULT_WAIT_S)
        self.token: str | None = None
        self._mine: set[str] = set()  # tokens this committer took (a release that failed)
        self._seen: tuple[bytes, float] | None = None  # a record, first seen (monotonic)
        self._poll = Backoff(first_s=0.005, factor=1.5, cap_s=0.1, jitter=0.5)

    @property
    def held(self) -> bool:
        return self.token is not None

    def acquire(self, state: CatalogView, fresh: bool = False) -> None:
        """Take the lock, waiting while another committer holds it; ``state``
        is brought to the log's head (with the lock record) on return.

        ``fresh``: the caller refreshed ``state`` a moment ago, so the first
        try writes at once (a commit that landed meanwhile takes the slot,
        and the try is lost and made again from the head, as any race is)."""
        if self.token is not None:
            return
        started = time.monotonic()
        polls = 0
        while True:
            if not fresh:
                self.lake.refresh(state, rematerialize=False)
            fresh = False
            raw = self.lake.read_sys(state, LOCK_KEY)
            if raw is None or self._free(raw):
                if self._take(state):
                    return
                polls = 0  # another taker won the same head: look again at once
                continue
            waited = time.monotonic() - started
            if waited > self.wait_s:
                raise CommitLockBusyError(self._busy(raw, waited))
            polls += 1
            time.sleep(self._poll.delay(polls))

    def _free(self, raw: bytes) -> bool:
        """True when ``raw`` may be taken over: ours from an earlier failed
        release, unreadable, or seen unchanged for its TTL."""
        now = time.monotonic()
        try:
            record = LockRecord.decode(raw)
        except CorruptionError:
            record = None
        if record is not None and record.token in self._mine:
            return True
        if self._seen is None or self._seen[0] != raw:
            self._seen = (raw, now)
            return False
        ttl = record.ttl_s if record is not None else self.ttl_s
        if now - self._seen[1] < ttl:
            return False
        log.warning(
            "taking over the commit lock held by %s: unchanged for %.0f s",
            record.owner if record else "an unreadable record",
            now - self._seen[1],
        )
        return True

    def _take(self, state: CatalogView) -> bool:
        token = uuid.uuid4().hex
        cs = ChangeSet(
            base=state.head,
            puts=((LOCK_KEY, LockRecord(token, self.owner, self.ttl_s).encode()),),
            tables=(LOCK_TABLE,),
            changes_made="commit_lock",
        )
        try:
            self.lake.commit_change_set(state, cs)
        except ConflictError:
            return False
        self.token = token
        self._mine.add(token)
        self._seen = None
        return True

    def _busy(self, raw: bytes, waited: float) -> str:
        try:
            who = LockRecord.decode(raw).owner
        except CorruptionError:
            who = "an unreadable record"
        return (
            f"the lake's commit lock is held by {who}; waited {waited:.0f} s "
            f"({WAIT_ENV}); an owner that is gone is taken over after its TTL, retry later"
        )

    def released(self) -> None:
        """The owner's commit landed, and it carried the release (a refused
        commit gives the lock back with ``release``)."""
        if self.token is not None:
            self._mine.discard(self.token)
        self.token = None

    def release(self, state: CatalogView) -> None:
        """Give the lock back with a commit of its own (nothing else to commit).
        Best effort: a release that fails leaves a record this committer
        takes back at once and others after its TTL."""
        token, self.token = self.token, None
        if token is None:
            return
        try:
            raw = self.lake.read_sys(state, LOCK_KEY)
            if raw is None or LockRecord.decode(raw).token != token:
                self._mine.discard(token)
                return  # taken over meanwhile: not ours to delete
            cs = ChangeSet(
                base=state.head,
                deletes=(LOCK_KEY,),
                tables=(LOCK_TABLE,),
                changes_made="commit_lock",
            )
            self.lake.commit_change_set(state, cs)
            self._mine.discard(token)
        except Exception as exc:  # the next acquire by this committer takes it back
            log.warning("the commit lock was not released (%s); it lapses after its TTL", exc)
