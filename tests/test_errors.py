"""One error model: every class says whether retrying helps, one helper reads it.

The classes live in ``slatelake.errors`` and are exported from the package
top. ``retry`` is the only reader of ``retryable``: these tests pin what it
does with a terminal error, a retryable one, a foreign one, its backoff, its
deadline, its hooks and its stop. And only a conflict's message carries the
words DuckLake's own retry logic looks for.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import threading
import time

import pytest

import slatelake
from slatelake import errors
from slatelake.errors import (
    NO_WAIT,
    AmbiguousWriteError,
    Backoff,
    ConflictError,
    CorruptionError,
    SlatelakeError,
    StaleViewError,
    StoreUnavailableError,
    is_retryable,
    retry,
)

pytestmark = pytest.mark.fast

RETRY_WORDS = ("transaction conflict", "conflict")
SAMPLE = "GET s3://bucket/lake/commits/00000000000000000007 failed"


def _import_whole_package() -> None:
    """Every module, so subclasses defined anywhere in slatelake are seen."""
    for info in pkgutil.walk_packages(slatelake.__path__, "slatelake."):
        if ".cli.__main__" in info.name or info.name.endswith("__main__"):
            continue
        importlib.import_module(info.name)


def _all_subclasses(cls: type) -> list[type]:
    out = []
    for sub in cls.__subclasses__():
        out += [sub, *_all_subclasses(sub)]
    return out


_import_whole_package()
EVERY_ERROR = sorted(set(_all_subclasses(SlatelakeError)) | {SlatelakeError}, key=str)
IN_ERRORS = [c for c in EVERY_ERROR if c.__module__ == "slatelake.errors"]


def _sample(cls: type[SlatelakeError]) -> SlatelakeError:
    """An instance built from the constructor's own signature: ints get a
    count, everything else the sample message naming an object."""
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    if all(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
        return cls(SAMPLE)
    args = [
        7 if "int" in str(p.annotation) else SAMPLE
        for p in params
        if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    return cls(*args)


# -- the classes --------------------------------------------------------------------


def test_the_model_holds_the_errors_that_lived_in_other_modules() -> None:
    """StaleViewError (log/replay), AmbiguousWriteError (store/objects), the
    lease errors (maintenance/flight) are defined once, in errors.py; their old
    homes hand out the same classes."""
    from slatelake.log import replay
    from slatelake.maintenance import flight
    from slatelake.store import objects

    assert replay.StaleViewError is errors.StaleViewError
    assert objects.AmbiguousWriteError is errors.AmbiguousWriteError
    assert flight.AlreadyRunningError is errors.AlreadyRunningError
    assert flight.LeaseLiveError is errors.LeaseLiveError
    for cls in (StaleViewError, AmbiguousWriteError, errors.AlreadyRunningError):
        assert cls.__module__ == "slatelake.errors"


@pytest.mark.parametrize("cls", IN_ERRORS, ids=lambda c: c.__name__)
def test_every_error_class_declares_terminal_or_retryable(cls: type[SlatelakeError]) -> None:
    assert "retryable" in vars(cls), f"{cls.__name__} must say retryable = True or False"
    assert type(vars(cls)["retryable"]) is bool


@pytest.mark.parametrize(
    ("cls", "retryable"),
    [
        (errors.ConflictError, True),
        (errors.StaleViewError, True),
        (errors.StoreUnavailableError, True),
        (errors.StoreTimeoutError, True),
        (errors.AmbiguousWriteError, True),
        (errors.AlreadyRunningError, True),
        (errors.LeaseLiveError, False),
        (errors.PermissionDeniedError, False),
        (errors.NotFoundError, False),
        (errors.CorruptionError, False),
        (errors.FormatError, False),
        (errors.FencedError, False),
        (errors.MisconfigurationError, False),
        (errors.ReadOnlyError, False),
        (errors.OperationLimitError, False),
        (errors.StoreError, False),
    ],
    ids=lambda v: getattr(v, "__name__", str(v)),
)
def test_each_failure_domain_is_retryable_or_terminal_as_documented(
    cls: type[SlatelakeError], retryable: bool
) -> None:
    assert is_retryable(_sample(cls)) is retryable


@pytest.mark.parametrize("cls", IN_ERRORS, ids=lambda c: c.__name__)
def test_every_error_is_exported_from_the_package_top(cls: type[SlatelakeError]) -> None:
    assert cls.__name__ in slatelake.__all__
    assert getattr(slatelake, cls.__name__) is cls


@pytest.mark.parametrize("cls", EVERY_ERROR, ids=lambda c: c.__name__)
def test_only_a_conflict_carries_ducklakes_retry_words(cls: type[SlatelakeError]) -> None:
    message = str(_sample(cls)).lower()
    carries = any(word in message for word in RETRY_WORDS)
    assert carries is issubclass(cls, ConflictError), f"{cls.__name__}: {message!r}"
    if issubclass(cls, ConflictError):
        assert str(_sample(cls)).startswith("Transaction conflict")


# -- the helper -----------------------------------------------------------------------


class Flaky:
    """Raises the given errors in turn, then returns ``"done"``."""

    def __init__(self, *failures: BaseException) -> None:
        self.failures = list(failures)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return "done"


def test_a_retryable_error_is_retried_until_the_call_succeeds() -> None:
    fn = Flaky(ConflictError("slot 3 taken"), StoreUnavailableError("503"))
    assert retry(fn, attempts=3) == "done"
    assert fn.calls == 3


def test_a_terminal_error_is_raised_at_once_unchanged() -> None:
    damage = CorruptionError("slot 4 checksum mismatch")
    fn = Flaky(damage)
    with pytest.raises(CorruptionError) as info:
        retry(fn, attempts=5)
    assert info.value is damage and fn.calls == 1


def test_a_foreign_error_carries_no_flag_and_is_terminal() -> None:
    fn = Flaky(ValueError("a bug"))
    with pytest.raises(ValueError):
        retry(fn, attempts=5)
    assert fn.calls == 1


def test_a_retryable_error_outside_the_loops_own_kinds_is_raised_at_once() -> None:
    """A loop names what it can recover from: a stale-view loop does not
    re-run on a store outage (each retry would cost a full deadline)."""
    fn = Flaky(StoreUnavailableError("503"))
    with pytest.raises(StoreUnavailableError):
        retry(fn, attempts=3, on=StaleViewError)
    assert fn.calls == 1


def test_attempts_are_bounded_and_the_last_error_is_raised() -> None:
    last = ConflictError("third")
    fn = Flaky(ConflictError("first"), ConflictError("second"), last, ConflictError("never"))
    with pytest.raises(ConflictError) as info:
        retry(fn, attempts=3)
    assert info.value is last and fn.calls == 3


def test_give_up_says_what_running_out_means_and_keeps_the_last_error() -> None:
    last = StaleViewError("truncated up to slot 9")
    fn = Flaky(StaleViewError("truncated up to 8"), last)

    def corrupt(exc: BaseException, tries: int) -> CorruptionError:
        return CorruptionError(f"still stale after {tries} reads: {exc}")

    with pytest.raises(CorruptionError, match="after 2 reads: truncated up to slot 9") as info:
        retry(fn, attempts=2, give_up=corrupt)
    assert info.value.__cause__ is last


def test_the_hook_runs_between_attempts_never_after_the_last() -> None:
    seen: list[tuple[int, str, float]] = []
    fn = Flaky(ConflictError("a"), ConflictError("b"), ConflictError("c"))
    with pytest.raises(ConflictError):
        retry(
            fn,
            attempts=3,
            backoff=Backoff(first_s=0.01, factor=2.0, cap_s=1.0, jitter=0.0),
            between=lambda n, exc, wait_s: seen.append((n, str(exc), wait_s)),
            wait=lambda _s: None,
        )
    assert seen == [
        (1, "Transaction conflict - a", 0.01),
        (2, "Transaction conflict - b", 0.02),
    ]


def test_waits_grow_by_the_factor_up_to_the_cap_and_jitter_only_shortens_them() -> None:
    waits: list[float] = []
    fn = Flaky(*[ConflictError(str(i)) for i in range(7)])
    backoff = Backoff(first_s=0.1, factor=2.0, cap_s=0.5, jitter=0.5)
    assert retry(fn, attempts=8, backoff=backoff, wait=waits.append) == "done"
    ceilings = [0.1, 0.2, 0.4, 0.5, 0.5, 0.5, 0.5]
    assert len(waits) == len(ceilings)
    for wait_s, ceiling in zip(waits, ceilings, strict=True):
        assert ceiling * 0.5 <= wait_s <= ceiling
    assert len(set(waits[3:])) > 1, "capped waits are still jittered apart"


def test_no_backoff_means_no_wait() -> None:
    waits: list[float] = []
    retry(Flaky(ConflictError("x")), attempts=2, backoff=NO_WAIT, wait=waits.append)
    assert waits == [0.0]


@pytest.mark.parametrize("how", ["seconds", "monotonic"])
def test_a_deadline_ends_the_retry_however_many_attempts_remain(how: str) -> None:
    fn = Flaky(*[StoreUnavailableError(f"503 #{i}") for i in range(10_000)])
    kwargs = {"deadline_s": 0.3} if how == "seconds" else {"deadline_at": time.monotonic() + 0.3}
    t0 = time.monotonic()
    with pytest.raises(StoreUnavailableError):
        retry(fn, attempts=10_000, backoff=Backoff(0.05, 1.0, 0.05, 0.0), **kwargs)
    elapsed = time.monotonic() - t0
    assert 0.3 <= elapsed < 0.3 + 0.25, elapsed
    assert 4 <= fn.calls <= 8, fn.calls


def test_a_deadline_cuts_the_last_wait_short_so_the_last_attempt_starts_at_it() -> None:
    waits: list[float] = []
    fn = Flaky(ConflictError("a"))
    end = time.monotonic() + 0.2
    result = retry(
        fn,
        attempts=5,
        backoff=Backoff(first_s=10.0, factor=1.0, cap_s=10.0, jitter=0.0),
        deadline_at=end,
        wait=lambda s: (waits.append(s), time.sleep(s)),
    )
    assert result == "done" and fn.calls == 2
    assert len(waits) == 1 and 0.1 < waits[0] <= 0.2


def test_a_stop_during_the_wait_abandons_the_retry_with_the_last_error() -> None:
    stop = threading.Event()
    stop.set()
    fn = Flaky(ConflictError("a"), ConflictError("b"))
    t0 = time.monotonic()
    with pytest.raises(ConflictError, match="- a"):
        retry(fn, attempts=3, backoff=Backoff(5.0, 1.0, 5.0, 0.0), wait=stop.wait)
    assert fn.calls == 1 and time.monotonic() - t0 < 1


def test_an_interrupt_is_never_retried() -> None:
    fn = Flaky(KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        retry(fn, attempts=3, on=BaseException, retry_if=lambda _e: True)
    assert fn.calls == 1


def test_a_loop_over_foreign_calls_may_say_what_is_retryable() -> None:
    """DuckLake's own conflicts are DuckDB errors without the flag: the
    maintenance steps say which ones are conflicts."""
    fn = Flaky(RuntimeError("Transaction conflict on table t"), RuntimeError("no"))
    with pytest.raises(RuntimeError, match="no"):
        retry(fn, attempts=5, on=Exception, retry_if=lambda e: "conflict" in str(e))
    assert fn.calls == 2


@pytest.mark.parametrize(
    "bad",
    [
        {"first_s": -1.0},
        {"factor": 0.5},
        {"jitter": 1.5},
    ],
)
def test_a_backoff_that_cannot_mean_a_wait_is_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        Backoff(**bad)


def test_at_least_one_attempt() -> None:
    with pytest.raises(ValueError, match="at least one"):
        retry(Flaky(), attempts=0)
