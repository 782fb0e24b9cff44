"""Typed failures, grouped by domain, shared by every layer, and the one retry helper.

Every class declares ``retryable``: True when running the same operation
again can succeed (a lost race, a store that did not answer), False when it
cannot (damage, a refusal, a bad input). ``retry`` is the one place that
reads the flag: every loop that retries on an error goes through it (the few
loops that go round on an answer, such as a lost slot race or a lease record
superseded between LIST and GET, say why they do not). Messages name
the thing that failed (an object, a slot, a lake) and, where there is one,
the fix. Only ``ConflictError`` carries the wording DuckLake's own retry loop
treats as a retryable conflict. Foreign errors (obstore, SlateDB, DuckDB) are
translated into these where slatelake calls them; their text never decides
anything above that boundary. Imports nothing of slatelake.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


class SlatelakeError(Exception):
    """Base of every error slatelake raises on purpose."""

    retryable = False


# -- races and views -----------------------------------------------------------
class ConflictError(SlatelakeError):
    """Another commit won the race for the same log slot or the same keys.

    The message contains "conflict" (DuckLake's retry logic matches on
    "Transaction conflict"); the caller re-materializes and re-runs.
    """

    retryable = True

    def __init__(self, detail: str) -> None:
        super().__init__(f"Transaction conflict - {detail}")


class CommitLockBusyError(ConflictError):
    """The lake's commit lock stayed held by another committer past the wait
    (``SLATELAKE_COMMIT_LOCK_WAIT_S``); nothing was committed."""

    retryable = True  # the holder commits or its TTL runs out


class StaleViewError(SlatelakeError):
    """Slots the view needs were already truncated; re-read the store."""

    retryable = True


class AlreadyRunningError(SlatelakeError):
    """Another pass holds this lake's maintenance lease; a later try may find it free."""

    retryable = True


class LeaseLiveError(AlreadyRunningError):
    """``lease break`` refused: the owner's heartbeat is fresh, it is alive."""

    retryable = False


class LeaseLostError(AlreadyRunningError):
    """A fanned-out pass's phase found its run's lease no longer held (it
    lapsed, or another pass took it): it does nothing; the next pass
    records the run failed."""

    retryable = False


# -- what is stored ---------------------------------------------------------------
class CorruptionError(SlatelakeError):
    """Stored bytes are not what slatelake wrote: bad framing, holes, damage."""

    retryable = False


class FormatError(CorruptionError):
    """The lake was written by a newer (unknown) slatelake format."""

    retryable = False


class FencedError(SlatelakeError):
    """A newer folder took over the SlateDB writer; this one must stop."""

    retryable = False


# -- what was asked ---------------------------------------------------------------
class ReadOnlyError(SlatelakeError):
    """A write was attempted through a read-only handle."""

    retryable = False


class MisconfigurationError(SlatelakeError):
    """An input (URL, option, path) is invalid; the message names it."""

    retryable = False


class MaintenanceConfigError(MisconfigurationError):
    """A maintenance option is wrong; the message names it. CLI exit status 2."""

    retryable = False


class MaintenanceDisabledError(MaintenanceConfigError):
    """Maintenance is switched off (``SLATELAKE_MAINTENANCE_ENABLED=false``):
    a pass was asked for anyway. Retrying cannot help until it is switched on."""

    retryable = False


class NotFoundError(SlatelakeError):
    """The lake (or an object it needs, or its bucket) does not exist."""

    retryable = False


class HeldSnapshotError(SlatelakeError):
    """A commit would expire a snapshot that a retention hold protects; nothing
    was committed. Leave the snapshot out, or remove the hold first."""

    retryable = False


class PinnedSnapshotError(HeldSnapshotError):
    """A commit would expire a snapshot a live reader pins; nothing was
    committed. Leave it out; the pin ends when its reader closes or its
    lease lapses."""

    retryable = False


class UnsupportedError(SlatelakeError):
    """The request is valid but this build cannot serve it."""

    retryable = False


class StepFailed(SlatelakeError):
    """A maintenance step could not complete. The pass records it in its report
    (and the status window) and goes on or stops per RFC 0021's abort rule;
    ``pending`` says whether work remains for a later pass."""

    retryable = False

    def __init__(self, message: str, pending: bool = True) -> None:
        super().__init__(message)
        self.pending = pending


class MergeIncompleteError(SlatelakeError):
    """A store merge that had to complete is still pending or failed. ``report``
    is the merge's report (what each subspace did), so a caller can show it."""

    retryable = True  # the holder's compactor may finish it

    def __init__(self, message: str, report: object = None) -> None:
        super().__init__(message)
        self.report = report


class OperationLimitError(SlatelakeError):
    """A change set holds more operations than the configured cap allows.

    Raised before anything is written. Callers that can split their work
    (expiry batches) halve and retry; others report it. Running the same
    change set again cannot help, so it is terminal.
    """

    retryable = False

    def __init__(self, operations: int, limit: int) -> None:
        self.operations = operations
        self.limit = limit
        super().__init__(
            f"change set has {operations} operations, over the limit of {limit}; "
            "split the work into smaller batches or raise SLATELAKE_MAX_CHANGESET_OPS"
        )


# -- the object store ---------------------------------------------------------------
class StoreError(SlatelakeError):
    """The object store (or SlateDB over it) refused or failed an operation."""

    retryable = False


class StoreUnavailableError(StoreError):
    """The store did not answer usably: a 5xx, a refused or reset connection.

    Transient by nature, so retryable; the store clients already retried it
    (bounded) before this was raised, so a caller retries only a few times."""

    retryable = True


class StoreTimeoutError(StoreUnavailableError):
    """A store call got no answer within its deadline (``SLATELAKE_STORE_TIMEOUT_S``,
    or the caller's own deadline, whichever came first). The call was cancelled."""

    retryable = True


class PermissionDeniedError(StoreError):
    """The store refused the credentials (403, 401, an expired token, EACCES).

    Terminal: retrying with the same credentials cannot help. Nothing was written."""

    retryable = False


class AmbiguousWriteError(StoreError):
    """A PUT failed after it may have reached the store: it may have landed.

    Retryable only as the log does it: look for the write (its txn id) before
    writing again. A statement must never be re-run blindly on this error."""

    retryable = True


# -- the retry helper -----------------------------------------------------------------
def is_retryable(exc: BaseException) -> bool:
    """True for a slatelake error that declares retrying can help. Anything
    else (a foreign error nobody translated, a bug) is terminal."""
    return isinstance(exc, SlatelakeError) and exc.retryable


@dataclass(frozen=True)
class Backoff:
    """The wait after the n-th failure: ``first_s`` times ``factor`` to the
    power n-1, capped at ``cap_s``, of which the share ``jitter`` is drawn at
    random (0 waits exactly, 1 anywhere from 0 to the whole wait), so racing
    processes spread out instead of colliding again in step."""

    first_s: float = 0.05
    factor: float = 2.0
    cap_s: float = 5.0
    jitter: float = 0.5

    def __post_init__(self) -> None:
        if self.first_s < 0 or self.factor < 1 or self.cap_s < 0 or not 0 <= self.jitter <= 1:
            raise ValueError(f"{self}: waits are >= 0, factor >= 1, jitter within [0, 1]")

    def delay(self, failures: int) -> float:
        base = min(self.cap_s, self.first_s * self.factor ** max(0, failures - 1))
        return base * (1.0 - self.jitter * random.random())


NO_WAIT = Backoff(first_s=0.0, jitter=0.0)
# (attempt that failed, its error, the wait before the next attempt) -> None
Between = Callable[[int, BaseException, float], None]


def retry(
    fn: Callable[[], T],
    *,
    attempts: int,
    backoff: Backoff = NO_WAIT,
    on: type[BaseException] | tuple[type[BaseException], ...] = SlatelakeError,
    retry_if: Callable[[BaseException], bool] = is_retryable,
    deadline_s: float | None = None,
    deadline_at: float | None = None,
    between: Between | None = None,
    wait: Callable[[float], object] = time.sleep,
    give_up: Callable[[BaseException, int], BaseException] | None = None,
) -> T:
    """Call ``fn`` until it returns, at most ``attempts`` times.

    A failure is retried only when it is an instance of ``on`` (a loop names
    the errors it knows how to recover from) and ``retry_if`` says so (by
    default the error's own ``retryable`` flag); anything else is raised at
    once, unchanged, as is an interrupt. Between attempts: ``between(attempt,
    error, wait_s)`` (log, re-materialize), then ``wait(wait_s)``; a ``wait``
    that returns True (``threading.Event.wait`` on a stop request) abandons
    the retry and raises the last error. The deadline, ``deadline_s`` from
    now or ``deadline_at`` in ``time.monotonic()`` time (the earlier wins), cuts
    a wait short so the last attempt starts at it; a failure at or past it
    ends the retry. Once attempts or time run out, the last error is raised,
    or ``give_up(error, attempts_made)`` when given (raised from it), so a
    caller can say what the exhaustion means.
    """
    if attempts < 1:
        raise ValueError(f"attempts={attempts!r}: at least one attempt")
    end = None if deadline_s is None else time.monotonic() + deadline_s
    if deadline_at is not None:
        end = deadline_at if end is None else min(end, deadline_at)
    attempt = 0
    while True:
        attempt += 1
        try:
            return fn()
        except Exception as exc:
            if not (isinstance(exc, on) and retry_if(exc)):
                raise
            now = time.monotonic()
            if attempt >= attempts or (end is not None and now >= end):
                if give_up is None:
                    raise
                raise give_up(exc, attempt) from exc
            delay = backoff.delay(attempt)
            if end is not None:
                delay = min(delay, end - now)
            if between is not None:
                between(attempt, exc, delay)
            if wait(delay) is True:
                raise


def retry_conflicts(fn: Callable[[], T], attempts: int = 5, backoff_s: float = 0.05) -> T:
    """Re-run ``fn`` on ConflictError, at most ``attempts`` times, waiting
    ``backoff_s`` doubled per attempt (capped at 1 s), jittered so racing
    writers spread out. A session brings itself to the log's head before its
    next statement. Only a conflict is re-run: nothing of it was committed.
    (An AmbiguousWriteError may have landed: never re-run it blindly.)
    ``slatelake.retry`` is this function."""
    backoff = Backoff(first_s=backoff_s, factor=2.0, cap_s=max(backoff_s, 1.0), jitter=0.5)
    return retry(fn, attempts=attempts, backoff=backoff, on=ConflictError)
