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
lease ``lost``; the pass checks that at every boundary and stops. A pass's
records also name its run (``run_id``) and the step it is at (``step``):
``note_step`` beats at once when a step starts, so ``lease show`` and a
killed pass's last record say where it was. ``taken_over`` keeps the record
a take superseded: the next pass reads a dead run's last heartbeat from it.
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
from dataclasses import dataclass

from slatelake.durations import env_duration
from slatelake.errors import (
    AlreadyRunningError,
    AmbiguousWriteError,
    Backoff,
    LeaseLiveError,
    MisconfigurationError,
    PermissionDeniedError,
    SlatelakeError,
    StoreTimeoutError,
    StoreUnavailableError,
    retry,
)
from slatelake.maintenance.lease_record import (
    BROKEN,
    HELD,
    RELEASED,
    STALE_BEATS,
    UNREADABLE,
    LeaseRecord,
)
from slatelake.maintenance.lease_record import decode_record as _decode
from slatelake.store.location import LakeLocation
from slatelake.store.objects import ObjectClient

__all__ = [  # the record's names stay importable from here
    "BROKEN",
    "HELD",
    "RELEASED",
    "STALE_BEATS",
    "UNREADABLE",
    "BreakResult",
    "LeaseRecord",
    "PassLease",
    "break_lease",
    "default_ttl_s",
    "process_lock",
]

log = logging.getLogger("slatelake.maintenance")
LEASE_DIR = "maintenance"
DEFAULT_TTL_S = 60.0
TTL_ENV = "SLATELAKE_PASS_LEASE_TTL_S"
BEATS_PER_TTL = 12
_RELIST_ATTEMPTS = 10
# A release that meets a store error tries again this often, within this
# long: a transient fault must not hold the lease for its TTL. A timeout or
# a refusal ends it at once (the store, or the invocation's deadline, gives no
# more time); the lease then lapses at its expiry.
RELEASE_ATTEMPTS = 5
RELEASE_WINDOW_S = 5.0
_RELEASE_BACKOFF = Backoff(first_s=0.2, factor=2.0, cap_s=1.0, jitter=0.2)
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


class _Withdrawn(StoreUnavailableError):
    """A claim whose PUT got no answer was withdrawn: its generation holds
    this owner's ``released`` record, so nothing of the claim stands."""


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
        self._wrote = False  # a claim was sent: a record of ours may stand, even unanswered
        self._forfeited = False  # lost by our own unanswered renewal, not to another process
        self._lock = threading.Lock()  # one write at a time: heartbeat vs release
        self._beat_stop = threading.Event()
        self._wake = threading.Event()  # a stop, or a step to beat now
        self._beat: threading.Thread | None = None
        # What a pass's records say beside the lease: its run and current step.
        self.run_id: int | None = None
        self.step: str | None = None
        # The newest record when this owner took the lease (another owner's).
        self.taken_over: LeaseRecord | None = None

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
        """Fields written into every record: a pass's run and step (a
        subclass writes its own)."""
        extra: dict[str, object] = {}
        if self.run_id is not None:
            extra["run_id"] = self.run_id
        if self.step is not None:
            extra["step"] = self.step
        return extra

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
        after the record landed deletes it before raising. When neither the
        answer nor the read back comes, the claim raises AmbiguousWriteError
        and ``release`` (which ``acquire`` calls then) gives back whatever of
        it landed. Collecting older generations is best effort: only the
        newest one counts.
        """
        path = self._path(generation)
        wanted = json.loads(body)["state"]
        self._wrote = True
        try:
            created = self.client.put_if_absent(path, body)
        except AmbiguousWriteError as exc:
            raw = self._read_back(generation, str(exc))
            if raw is None:
                try:
                    raw = self._withdraw(generation)
                except AmbiguousWriteError:
                    self._forfeit(generation)
                    raise
            if raw is None:
                raise _Withdrawn(
                    f"{self.noun} generation {generation}: {exc}; the claim was withdrawn, "
                    "so nothing holds the lease: retry the pass"
                ) from None
            if not self._ours(generation, raw, wanted):
                return False
            created = True
        if not created:  # an earlier send of ours may have landed: read it back
            raw = self._read_back(generation, "the object was already there")
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

    def _read_back(self, generation: int, why: str) -> bytes | None:
        """The record at ``generation`` after a claim whose answer was unclear;
        AmbiguousWriteError when it cannot be read (a renewal's heartbeat
        tries the same generation again; ``release`` settles the rest)."""
        try:
            return self.client.get(self._path(generation))
        except SlatelakeError as exc:
            raise AmbiguousWriteError(
                f"{self.noun} generation {generation}: {why}, and reading it back failed "
                f"({exc}); whether the claim landed is unknown: it is released once readable, "
                f"or lapses at its expiry ({self.ttl_s:g}s)"
            ) from None

    def _ours(self, generation: int, raw: bytes, state: str) -> bool:
        record = _decode(generation, raw)
        return record.owner == self.owner and record.state == state

    def _forfeit(self, generation: int) -> None:
        """A renewal whose claim was withdrawn (or may land late) leaves a
        released record as the newest: the lease is free to others from now
        on, so it is no longer this owner's, whatever its last expiry says."""
        if self.generation is not None and self._lost is None:
            self._forfeited = True
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
            if record is not None and record.owner != self.owner:
                self.taken_over = record
            self.generation, self._expires_at, self._lost = generation, expires_at, None
            return True

    def acquire(
        self, wait_s: float = 0.0, poll_s: float = 0.5, stop: threading.Event | None = None
    ) -> None:
        """Take the lease, trying every ``poll_s`` for up to ``wait_s`` seconds;
        AlreadyRunningError naming the owner when it stays taken, or at once
        when ``stop`` is set while waiting (a signalled ``slatelake maintain``
        must not sit out another pass's wait)."""

        def take() -> None:
            if not self.try_acquire():
                raise AlreadyRunningError(f"the {self.noun} is taken")

        try:
            retry(
                take,
                attempts=math.ceil(wait_s / max(poll_s, 0.001)) + 2,  # the deadline ends it
                backoff=Backoff(first_s=poll_s, factor=1.0, cap_s=poll_s, jitter=0.0),
                on=AlreadyRunningError,
                deadline_s=wait_s,
                wait=time.sleep if stop is None else stop.wait,
                give_up=lambda _exc, _n: self._busy(),
            )
        except AmbiguousWriteError:
            # The claim may have landed: a released record after it, when it
            # did, so no one waits out its TTL.
            self.release()
            raise
        except AlreadyRunningError as exc:
            if stop is None or not stop.is_set() or self.generation is not None:
                raise
            raise AlreadyRunningError(
                f"stopped while waiting for the {self.noun} ({exc}); nothing ran"
            ) from None

    @property
    def ref(self) -> str:
        """This owner's name for the lease, ``<directory>/<owner>``: what a
        commit lock taken under it records (catalog/commit_lock.py), so a
        waiter breaks that lock once this lease is released or taken over."""
        return f"{self.directory}/{self.owner}"

    def _busy(self) -> AlreadyRunningError:
        record = self.current()
        return AlreadyRunningError(
            "maintenance already running on this lake"
            + (f" ({record.describe()})" if record else "")
            + "; retry later"
        )

    def renew(self) -> bool:
        """Write the next generation of a held lease. False (and ``lost`` set)
        when another process wrote it first: the lease is no longer ours.

        A renewal withdrawn (its PUT got no answer and nothing landed: the
        generation now holds our own ``released`` record) claims the next
        generation at once with create-if-absent: whoever creates it first
        holds, so the owner keeps the lease only if no one else took it. If
        that claim fails too, the owner counts itself lost (``_forfeit``):
        the released record left the lease free."""
        with self._lock:
            if self.generation is None or self._lost is not None:
                return False
            generation = self.generation + 1
            expires_at = time.time() + self.ttl_s
            try:
                claimed = self._claim(generation, self._record(HELD, expires_at))
            except _Withdrawn as exc:
                log.warning(
                    "%s renewal withdrawn, claiming the next generation: %s", self.noun, exc
                )
                generation += 1
                try:
                    claimed = self._claim(generation, self._record(HELD, expires_at))
                except SlatelakeError:
                    self._forfeit(generation - 1)
                    raise
            if claimed:
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
    def note_step(self, step: str) -> None:
        """The pass starts ``step``: the heartbeat renews now (not at its next
        interval), its record naming the step. Never waits for the store."""
        self.step = step
        self._wake.set()

    def start_heartbeat(self) -> None:
        """Renew every ``heartbeat_s`` (and at each ``note_step``) in a
        background thread until release."""
        if self._beat is not None:
            return
        self._beat_stop.clear()
        self._wake.clear()
        self._beat = threading.Thread(
            target=self._heartbeat, name="slatelake-lease-heartbeat", daemon=True
        )
        self._beat.start()

    def stop_heartbeat(self, timeout: float | None = None) -> None:
        beat, self._beat = self._beat, None
        if beat is None:
            return
        self._beat_stop.set()
        self._wake.set()
        if beat is not threading.current_thread():
            beat.join(self.ttl_s if timeout is None else timeout)

    def _heartbeat(self) -> None:
        while True:
            self._wake.wait(self.heartbeat_s)
            self._wake.clear()
            if self._beat_stop.is_set():
                return
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
        """Stop the heartbeat and, when the newest record is this owner's held
        one, write a ``released`` record after it. That covers a pass that
        ends cleanly, and one whose claim or renewal got no answer (it may
        have landed, even after its withdrawal failed: ``lost`` is then set,
        but what landed is still this owner's to give back). Nothing when the
        lease expired unrenewed or another process wrote after it: it may be
        theirs by now. Store errors are retried briefly (``RELEASE_ATTEMPTS``
        within ``RELEASE_WINDOW_S``); a lease not released lapses at its
        expiry, a TTL after its last renewal. Never raises: it runs in
        ``finally`` blocks, where the error that ended the pass comes first."""
        self.stop_heartbeat()
        if not self._lock.acquire(timeout=self.ttl_s):  # a renewal stuck in a store call
            log.warning("%s not released (it expires on its own): store busy", self.noun)
            return
        try:
            lost = self.lost is not None and not self._forfeited
            self.generation = None
            if self._wrote and not lost:
                self._let_go()
        except Exception as exc:  # not a store error: still never the caller's problem
            log.warning("%s not released (it lapses at its expiry): %s", self.noun, exc)
        finally:
            self._lock.release()

    def _let_go(self) -> None:
        """Write ``released`` after the newest record while it is ours and held."""
        ends = time.monotonic() + RELEASE_WINDOW_S
        why = "the lease kept changing"
        for attempt in range(1, RELEASE_ATTEMPTS + 1):
            try:
                record = self.current()
                if record is None or record.owner != self.owner or record.state != HELD:
                    return  # nothing of ours holds it
                if self._claim(record.generation + 1, self._record(RELEASED, 0.0)):
                    return
                continue  # another record landed first (a late one of ours?): look again
            except (StoreTimeoutError, PermissionDeniedError) as exc:
                why = str(exc)
                break  # no more time, or refused: trying again cannot help
            except SlatelakeError as exc:
                why = str(exc)
            if time.monotonic() >= ends:
                break
            time.sleep(_RELEASE_BACKOFF.delay(attempt))
        log.warning(
            "%s not released (it lapses at its expiry, %gs after its last renewal): %s",
            self.noun,
            self.ttl_s,
            why,
        )


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
        body = breaker._record(
            BROKEN,
            0.0,
            broke_owner=record.owner,
            broke_run_id=record.run_id,
            broke_step=record.step,
            broke_heartbeat_at=record.heartbeat_at,
        )
        if breaker._claim(generation, body):
            return BreakResult(record, generation, f"broke {record.describe(now)}")
    raise AlreadyRunningError("the maintenance lease kept changing while breaking it; retry")
