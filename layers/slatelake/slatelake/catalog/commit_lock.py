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

A lock taken under a lease (a maintenance pass's: ``CommitLock.lease``, set
by the runner) names it in the record, and dies with it: a waiter that has
seen the record unchanged for ``LEASE_CHECK_S`` reads that lease, and when
its newest record is no longer the owner's live one (released, broken,
taken over, or past its expiry: the lease's own rule, the one every taker
of it applies) breaks the lock at once. So a SIGKILLed pass blocks commits
for as long as its pass lease, not the lock's TTL. A record
whose lease cannot be read waits out the TTL as before; the lease is read
here by its record format only (``maintenance/flight.py`` writes it).
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
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
# How long a waiter sees one lock record before reading the lease it names,
# and then how often it reads it again (each read is a LIST and a GET).
LEASE_CHECK_S = 0.5
# ``<lease directory>/<owner>``: a directory of generational lease records
# (``lease-<20 digits>``, JSON with ``owner`` and ``state``) under the lake root.
_LEASE_REF = re.compile(r"[a-z][a-z_]{0,31}/[0-9a-f]{32}")
_LEASE_RELISTS = 5


@dataclass(frozen=True)
class LockRecord:
    """The lock's record; ``lease`` names the lease it was taken under
    (``<directory>/<owner>``), None for a plain committer. A record without
    one is written in the three-field form older readers know."""

    token: str
    owner: str
    ttl_s: float
    lease: str | None = None

    def encode(self) -> bytes:
        fields: list[object] = [self.token, self.owner, self.ttl_s]
        if self.lease is not None:
            fields.append(self.lease)
        return values.frame(_KIND, fields)

    @classmethod
    def decode(cls, raw: bytes) -> LockRecord:
        fields = values.unframe(raw, _KIND, "sys/commit_lock")
        if (
            not isinstance(fields, list)
            or len(fields) not in (3, 4)
            or not all(isinstance(f, str) for f in fields[:2])
            or not _valid_ttl(fields[2])
            or (len(fields) == 4 and not isinstance(fields[3], str))
        ):
            raise CorruptionError(
                "sys/commit_lock is unreadable; it lapses like any lock, or remove it with "
                "a commit that deletes the key"
            )
        lease = fields[3] if len(fields) == 4 else None
        return cls(fields[0], fields[1], float(fields[2]), lease)


def _valid_ttl(value: object) -> bool:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return ok and math.isfinite(value) and 0 < value <= MAX_TTL_S  # type: ignore[arg-type]


def _is_generation(name: str) -> bool:
    return name.startswith("lease-") and name[6:].isdigit()


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
        # The lease this committer's locks are taken under (``<directory>/<owner>``):
        # a lock left behind is broken once that lease is released or taken over.
        self.lease: str | None = None
        self._mine: set[str] = set()  # tokens this committer took (a release that failed)
        self._seen: tuple[bytes, float] | None = None  # a record, first seen (monotonic)
        self._lease_read_at = 0.0  # when the seen record's lease was last read (monotonic)
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
            self._seen, self._lease_read_at = (raw, now), now
            return False
        if (
            record is not None
            and record.lease is not None
            and now - self._lease_read_at >= LEASE_CHECK_S
        ):
            self._lease_read_at = now
            gone = self._lease_gone(record.lease)
            if gone is not None:
                log.warning("taking over the commit lock held by %s: %s", record.owner, gone)
                return True
        ttl = record.ttl_s if record is not None else self.ttl_s
        if now - self._seen[1] < ttl:
            return False
        log.warning(
            "taking over the commit lock held by %s: unchanged for %.0f s",
            record.owner if record else "an unreadable record",
            now - self._seen[1],
        )
        return True

    def _lease_gone(self, ref: str) -> str | None:
        """Why the lease ``ref`` no longer stands (its newest record is
        released, broken, another owner's, or expired), or None: it stands,
        or cannot be read (then the TTL decides, as for any record). The
        expiry is compared with this host's clock, as every taker of the
        lease compares it: the lock lasts no longer than the lease."""
        if not _LEASE_REF.fullmatch(ref):
            return None  # not a lease this version knows how to read
        directory, owner = ref.split("/")
        prefix = self.lake.location.path(directory) + "/"
        client = self.lake.log.client
        try:
            for _ in range(_LEASE_RELISTS):
                names = [i.path[len(prefix) :] for i in client.list(prefix)]
                generations = sorted(int(n[6:]) for n in names if _is_generation(n))
                if not generations:
                    return f"its lease {ref} has no record left"
                raw = client.get(f"{prefix}lease-{generations[-1]:020d}")
                if raw is not None:
                    break  # else superseded and collected between LIST and GET
            else:
                return None
            doc = json.loads(raw)
            newest_owner, state = str(doc["owner"]), str(doc.get("state", "held"))
            expires_at = float(doc["expires_at"])
        except Exception as exc:  # unreadable: the TTL decides
            log.warning("the commit lock's lease %s not read: %s", ref, exc)
            return None
        if newest_owner != owner:
            return f"its lease {ref} was taken over (generation {generations[-1]}: {state})"
        if state != "held":
            return f"its lease {ref} was {state}"
        if expires_at <= time.time():
            return f"its lease {ref} expired {time.time() - expires_at:.1f}s ago unrenewed"
        return None

    def _take(self, state: CatalogView) -> bool:
        token = uuid.uuid4().hex
        record = LockRecord(token, self.owner, self.ttl_s, self.lease)
        cs = ChangeSet(
            base=state.head,
            puts=((LOCK_KEY, record.encode()),),
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
