"""Single flight: at most one pass per lake, in a process and across processes.

In a process, a lock per canonical lake URL (two spellings of one lake share
it). Across processes (two Lambda invocations, the holder process and a shell), a lease
in the bucket built only on create-if-absent: ``maintenance/lease-<generation>``
objects, the newest generation saying who holds the lease and until when.
Every change -- take, renew, release, break -- creates the next generation,
and the object store lets exactly one writer create it. What keeps that safe
on a store that also deletes:

- the newest generation is never deleted, so generations only grow (a
  release writes a ``released`` record; it does not delete its own);
- a reader whose newest record vanished between LIST and GET lists again
  (a newer generation superseded it), never reading it as free;
- a writer that created generation g lists again and holds only if g is
  still the newest: a slow taker that re-created a collected generation
  below a live one loses;
- whoever just wrote the newest generation collects the older ones.

The lease's owner renews by heartbeat, a thread writing the next generation every
``ttl / 12`` seconds (5 s at the 60 s default), so a dead owner (SIGKILL, a
lost host) is replaced about a minute later. A renewal that finds the next
generation taken, or that cannot renew before the lease expires, marks the
lease ``lost``; the pass checks that at every boundary and stops.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field

from slatelake.durations import env_duration
from slatelake.errors import (
    AlreadyRunningError,
    AmbiguousWriteError,
    Backoff,
    LeaseLiveError,
    MisconfigurationError,
    SlatelakeError,
    StoreUnavailableError,
    retry,
)
from slatelake.store.location import LakeLocation
from slatelake.store.objects import ObjectClient

log = logging.getLogger("slatelake.maintenance")
LEASE_DIR = "maintenance"
DEFAULT_TTL_S = 60.0
TTL_ENV = "SLATELAKE_PASS_LEASE_TTL_S"
BEATS_PER_TTL = 12
# A heartbeat older than this many intervals is stale: ``lease break`` may break it.
STALE_BEATS = 3
HELD, RELEASED, BROKEN, UNREADABLE = "held", "released", "broken", "unreadable"
_RELIST_ATTEMPTS = 10
_RECORD_KEYS = frozenset(
    {"owner", "state", "expires_at", "heartbeat_at", "heartbeat_s", "pid", "host"}
)
_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def process_lock(url: str) -> threading.Lock:
    """The in-process lock of a lake; ``url`` must be the canonical spelling."""
    with _locks_guard:
        return _locks.setdefault(url, threading.Lock())


def default_ttl_s() -> float:
    """``SLATELAKE_PASS_LEASE_TTL_S`` when set (seconds, at least one: the
    heartbeat writes twelve times per TTL), else ``DEFAULT_TTL_S``."""
    ttl = env_duration(TTL_ENV, DEFAULT_TTL_S) or DEFAULT_TTL_S
    if ttl < 1:
        raise MisconfigurationError(f"{TTL_ENV}={ttl:g}s: must be at least 1s, e.g. 60s")
    return ttl


@dataclass(frozen=True)
class LeaseRecord:
    """The newest lease record. ``state`` is held, released, broken or
    unreadable; only a held record whose expiry is ahead holds the lease."""

    generation: int
    owner: str
    expires_at: float
    state: str = HELD
    heartbeat_at: float = 0.0
    heartbeat_s: float = 0.0
    pid: int | None = None
    host: str = ""
    # What the owner said beside the lease (a holder's fold cursor and when).
    extra: dict[str, object] = field(default_factory=dict)

    def held(self, now: float | None = None) -> bool:
        return self.state == HELD and self.expires_at > (time.time() if now is None else now)

    def heartbeat_fresh(self, now: float | None = None) -> bool:
        """Held, and the owner beat within STALE_BEATS intervals (a record
        without a heartbeat, from an older slatelake, is never fresh)."""
        now = time.time() if now is None else now
        return (
            self.held(now)
            and self.heartbeat_s > 0
            and now - self.heartbeat_at < STALE_BEATS * self.heartbeat_s
        )

    def describe(self, now: float | None = None) -> str:
        now = time.time() if now is None else now
        who = f"owner {self.owner[:8] or '?'}"
        if self.pid is not None:
            who += f" (pid {self.pid} on {self.host or '?'})"
        if self.state != HELD:
            return f"lease generation {self.generation}: {self.state} by {who}"
        beat = "no heartbeat recorded"
        if self.heartbeat_at:
            beat = f"last heartbeat {now - self.heartbeat_at:.1f}s ago"
        left = self.expires_at - now
        expiry = f"expires in {left:.1f}s" if left > 0 else f"expired {-left:.1f}s ago"
        return f"lease generation {self.generation} held by {who}, {beat}, {expiry}"


@dataclass(frozen=True)
class BreakResult:
    """What ``break_lease`` did: ``broken`` is the record it ended (None when
    there was nothing to break), ``generation`` the record it wrote."""

    broken: LeaseRecord | None
    generation: int | None
    detail: str


class PassLease:
    """The pass lease. Subclasses name another role's lease by ``directory``
    and ``noun`` (the holder's, ``maintenance/holder.py``); the rules are one."""

    directory = LEASE_DIR
    noun = "maintenance lease"

    def __init__(
        self,
        location: LakeLocation,
        ttl_s: float | None = None,
        client: ObjectClient | None = None,
    ) -> None:
        self.client = client if client is not None else ObjectClient(location)
        self.prefix = location.path(self.directory) + "/"
        self.ttl_s = default_ttl_s() if ttl_s is None else ttl_s
        self.heartbeat_s = self.ttl_s / BEATS_PER_TTL
        self.owner = uuid.uuid4().hex
        self.generation: int | None = None
        self._expires_at = 0.0
        self._lost: str | None = None
        self._lock = threading.Lock()  # one write at a time: heartbeat vs release
        self._beat_stop = threading.Event()
        self._beat: threading.Thread | None = None

    # -- reading ---------------------------------------------------------------
    def _path(self, generation: int) -> str:
        return f"{self.prefix}lease-{generation:020d}"

    def _generations(self) -> list[int]:
        out = []
        for info in self.client.list(self.prefix):
            name = info.path[len(self.prefix) :]
            if name.startswith("lease-") and name[6:].isdigit():
                out.append(int(name[6:]))
        return sorted(out)

    def current(self) -> LeaseRecord | None:
        """The newest record; None when no lease was ever written."""
        for _ in range(_RELIST_ATTEMPTS):  # not ``retry``: a vanished record is an answer
            generations = self._generations()
            if not generations:
                return None
            raw = self.client.get(self._path(generations[-1]))
            if raw is None:
                continue  # superseded and collected between LIST and GET: list again
            return _decode(generations[-1], raw)
        raise AlreadyRunningError(
            f"the {self.noun} under {self.prefix} changed {_RELIST_ATTEMPTS} times while "
            "being read; retry"
        )

    @property
    def lost(self) -> str | None:
        """Why this owner may no longer act on its lease (None while it
        holds it): another process took it, or it expired unrenewed (a
        process stalled past its TTL must not act before its heartbeat
        notices)."""
        if self._lost is None and self.generation is not None and time.time() >= self._expires_at:
            self._lost = "the lease expired before its heartbeat renewed it (a stalled process?)"
        return self._lost

    # -- writing ---------------------------------------------------------------
    def _extra(self) -> dict[str, object]:
        """Fields a subclass writes into every record it makes."""
        return {}

    def _record(self, state: str, expires_at: float, **extra: object) -> bytes:
        doc = {
            **self._extra(),
            "owner": self.owner,
            "state": state,
            "expires_at": expires_at,
            "heartbeat_at": time.time(),
            "heartbeat_s": self.heartbeat_s,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            **extra,
        }
        return json.dumps(doc).encode()

    def _claim(self, generation: int, body: bytes) -> bool:
        """Create ``generation`` and check it is the newest; collect older ones.

        A claim that raises never leaves its record held: a PUT whose answer
        was lost is settled by reading the record back (ours: claimed) or, when
        absent, by creating it first as released (``_withdraw``); a failure
        after the record landed deletes it before raising. Collecting
        older generations is best effort: only the newest one counts.
        """
        path = self._path(generation)
        wanted = json.loads(body)["state"]
        try:
            created = self.client.put_if_absent(path, body)
        except AmbiguousWriteError as exc:
            raw = self.client.get(path)
            if raw is None:
                try:
                    raw = self._withdraw(generation)
                except AmbiguousWriteError:
                    self._forfeit(generation)
                    raise
            if raw is None:
                self._forfeit(generation)
                raise StoreUnavailableError(
                    f"{self.noun} generation {generation}: {exc}; the claim was withdrawn, "
                    "so nothing holds the lease: retry the pass"
                ) from None
            if not self._ours(generation, raw, wanted):
                return False
            created = True
        if not created:
            raw = self.client.get(path)
            # Ours after all (an earlier PUT that reported an error had landed)? Our
            # own withdrawal (a released record) is not a claim of a held lease.
            if raw is None or not self._ours(generation, raw, wanted):
                return False
        try:
            generations = self._generations()
            if not generations or generations[-1] != generation:
                if generations and generations[-1] > generation:
                    self.client.delete(path)  # a collected one re-created
                return False
        except BaseException:
            with contextlib.suppress(Exception):
                self.client.delete(path)
            raise
        for older in generations[:-1]:
            try:
                self.client.delete(self._path(older))
            except SlatelakeError as exc:
                log.warning("older %s %s not collected: %s", self.noun, older, exc)
                break  # the next claim collects it
        return True

    def _ours(self, generation: int, raw: bytes, state: str) -> bool:
        record = _decode(generation, raw)
        return record.owner == self.owner and record.state == state

    def _forfeit(self, generation: int) -> None:
        """A renewal whose claim was withdrawn (or may land late) leaves a
        released record as the newest: the lease is free to others from now
        on, so it is no longer this owner's, whatever its last expiry says."""
        if self.generation is not None and self._lost is None:
            self._lost = (
                f"the renewal to generation {generation} got no answer and was withdrawn as a "
                "released record, so the lease is free and no longer this process's"
            )

    def _withdraw(self, generation: int) -> bytes | None:
        """Settle a create whose answer was lost and which reads back absent.

        The write may still be in flight (a proxy or a slow link holding it)
        and land after this claim gave up, holding the lease until its expiry.
        Creating the same object first, as a released record, makes that late
        write fail its create-if-absent. None when withdrawn; else the record
        there now (the late write landed after all, or another taker's).

        When the withdrawal fails too, a release is sent as the next
        generation: it supersedes the claim if both land late (a store that
        holds every write delivers them in order), and if the claim never
        lands it is a released record, free to take. Best effort."""
        path = self._path(generation)
        try:
            if self.client.put_if_absent(path, self._record(RELEASED, 0.0)):
                return None
            return self.client.get(path)
        except SlatelakeError as exc:
            try:
                self.client.put_if_absent(self._path(generation + 1), self._record(RELEASED, 0.0))
            except SlatelakeError as late:
                log.warning("%s %s: the release after it failed: %s", self.noun, path, late)
            raise AmbiguousWriteError(
                f"{self.noun} {path}: a claim's answer was lost and withdrawing it failed "
                f"({exc}); a release was sent after it, but if the claim lands and the release "
                f"does not, it holds the lease until it expires ({self.ttl_s:g}s): "
                "`slatelake lease break` ends it once its heartbeat is stale"
            ) from None

    def try_acquire(self) -> bool:
        """Take the lease if it is free (or already ours: then renew it)."""
        with self._lock:
            record = self.current()
            now = time.time()
            if record is not None and record.held(now) and record.owner != self.owner:
                return False
            generation = 1 if record is None else record.generation + 1
            expires_at = now + self.ttl_s
            if not self._claim(generation, self._record(HELD, expires_at)):
                return False
            self.generation, self._expires_at, self._lost = generation, expires_at, None
            return True

    def acquire(self, wait_s: float = 0.0, poll_s: float = 0.5) -> None:
        """Take the lease, trying every ``poll_s`` for up to ``wait_s`` seconds;
        AlreadyRunningError naming the owner when it stays taken."""

        def take() -> None:
            if not self.try_acquire():
                raise AlreadyRunningError(f"the {self.noun} is taken")

        retry(
            take,
            attempts=math.ceil(wait_s / max(poll_s, 0.001)) + 2,  # the deadline ends it
            backoff=Backoff(first_s=poll_s, factor=1.0, cap_s=poll_s, jitter=0.0),
            on=AlreadyRunningError,
            deadline_s=wait_s,
            give_up=lambda _exc, _n: self._busy(),
        )

    def _busy(self) -> AlreadyRunningError:
        record = self.current()
        return AlreadyRunningError(
            "maintenance already running on this lake"
            + (f" ({record.describe()})" if record else "")
            + "; retry later"
        )

    def renew(self) -> bool:
        """Write the next generation of a held lease. False (and ``lost`` set)
        when another process wrote it first: the lease is no longer ours."""
        with self._lock:
            if self.generation is None or self._lost is not None:
                return False
            generation = self.generation + 1
            expires_at = time.time() + self.ttl_s
            if self._claim(generation, self._record(HELD, expires_at)):
                self.generation, self._expires_at = generation, expires_at
                return True
            self._lost = f"another process wrote lease generation {generation}"
        try:
            record = self.current()
        except Exception:  # the reason above stands without the details
            record = None
        if record is not None:
            self._lost += f" ({record.describe()})"
        return False

    # -- heartbeat -----------------------------------------------------------------
    def start_heartbeat(self) -> None:
        """Renew every ``heartbeat_s`` in a background thread until release."""
        if self._beat is not None:
            return
        self._beat_stop.clear()
        self._beat = threading.Thread(
            target=self._heartbeat, name="slatelake-lease-heartbeat", daemon=True
        )
        self._beat.start()

    def stop_heartbeat(self, timeout: float | None = None) -> None:
        beat, self._beat = self._beat, None
        if beat is None:
            return
        self._beat_stop.set()
        if beat is not threading.current_thread():
            beat.join(self.ttl_s if timeout is None else timeout)

    def _heartbeat(self) -> None:
        while not self._beat_stop.wait(self.heartbeat_s):
            try:
                if not self.renew():
                    if self._lost is not None:
                        log.warning("%s lost: %s", self.noun, self._lost)
                    return
            except Exception as exc:  # a store error: the next beat tries again
                if time.time() < self._expires_at:
                    log.warning("%s renewal failed, retrying: %s", self.noun, exc)
                    continue
                self._lost = f"the lease expired while renewals failed ({exc})"
                log.warning("%s lost: %s", self.noun, self._lost)
                return

    # -- ending ----------------------------------------------------------------
    def release(self) -> None:
        """Stop the heartbeat and write a ``released`` record as the next
        generation (nothing when the lease was lost: it is someone else's)."""
        self.stop_heartbeat()
        if not self._lock.acquire(timeout=self.ttl_s):  # a renewal stuck in a store call
            log.warning("%s not released (it expires on its own): store busy", self.noun)
            return
        try:
            generation, self.generation = self.generation, None
            if generation is None or self._lost is not None:
                return
            self._claim(generation + 1, self._record(RELEASED, 0.0))
        except Exception as exc:  # the lease then lapses at its expiry
            log.warning("%s not released (it expires on its own): %s", self.noun, exc)
        finally:
            self._lock.release()


def break_lease(location: LakeLocation, client: ObjectClient | None = None) -> BreakResult:
    """End a lease whose owner stopped beating (a SIGKILLed pass), so the
    next pass need not wait for its expiry. Refused with LeaseLiveError while
    the owner's heartbeat is fresh."""
    breaker = PassLease(location, client=client)
    for _ in range(_RELIST_ATTEMPTS):  # not ``retry``: a lost claim is an answer, look again
        record = breaker.current()
        now = time.time()
        if record is None or not record.held(now):
            what = record.describe(now) if record else "no lease was ever written"
            return BreakResult(None, None, f"nothing to break: {what}")
        if record.heartbeat_fresh(now):
            raise LeaseLiveError(
                f"refusing to break a live pass: {record.describe(now)}; its heartbeat is "
                f"younger than {STALE_BEATS} intervals ({STALE_BEATS * record.heartbeat_s:g}s). "
                "Stop that process (a stopped pass releases its lease) or wait for it to finish"
            )
        generation = record.generation + 1
        body = breaker._record(BROKEN, 0.0, broke_owner=record.owner)
        if breaker._claim(generation, body):
            return BreakResult(record, generation, f"broke {record.describe(now)}")
    raise AlreadyRunningError("the maintenance lease kept changing while breaking it; retry")


def _decode(generation: int, raw: bytes) -> LeaseRecord:
    try:
        doc = json.loads(raw)
        pid = doc.get("pid")
        return LeaseRecord(
            generation,
            str(doc["owner"]),
            float(doc["expires_at"]),
            state=str(doc.get("state", HELD)),
            heartbeat_at=float(doc.get("heartbeat_at") or 0.0),
            heartbeat_s=float(doc.get("heartbeat_s") or 0.0),
            pid=int(pid) if pid is not None else None,
            host=str(doc.get("host") or ""),
            extra={k: v for k, v in doc.items() if k not in _RECORD_KEYS},
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return LeaseRecord(generation, "", 0.0, state=UNREADABLE)  # counts as free
