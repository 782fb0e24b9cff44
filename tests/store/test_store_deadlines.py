"""Every store call answers within its deadline, with a typed error.

SlateDB retries a failing object store without bound unless told, so a
missing bucket, a 403 or an endpoint that never answers used to hang a caller
forever. These tests point the real clients (SlateDB and obstore) at an
endpoint that misbehaves on purpose (``faulty_s3``) and at damaged local and
moto lakes, and time the answers.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from slatelake.errors import (
    CorruptionError,
    MisconfigurationError,
    NotFoundError,
    PermissionDeniedError,
    SlatelakeError,
    StoreTimeoutError,
)
from slatelake.store import _bindings
from slatelake.store.db import deadline, open_reader, open_writer, store_exists
from slatelake.store.location import LakeLocation
from slatelake.store.objects import ObjectClient
from tests.store.faulty_s3 import closed_port, faulty_endpoint, s3_endpoint

TIMEOUT_S = 1.5  # long enough for a refusal to come back through SlateDB's retries
SLACK_S = 3.0  # a cancelled call, its error's translation, a loop check


@pytest.fixture
def short_timeout(monkeypatch: pytest.MonkeyPatch) -> float:
    monkeypatch.setenv(_bindings.STORE_TIMEOUT_ENV, str(TIMEOUT_S))
    return TIMEOUT_S


@pytest.fixture
def shorter_timeout(monkeypatch: pytest.MonkeyPatch) -> float:
    monkeypatch.setenv(_bindings.STORE_TIMEOUT_ENV, "1")
    return 1.0


# -- the runner ---------------------------------------------------------------------


def test_a_call_past_its_deadline_is_cancelled_and_raises_a_typed_timeout() -> None:
    cancelled = threading.Event()

    async def never() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    t0 = time.monotonic()
    with pytest.raises(StoreTimeoutError, match="no answer within 0.3s") as info:
        _bindings.run(never(), timeout=0.3)
    assert time.monotonic() - t0 < 0.3 + SLACK_S
    assert info.value.retryable is True
    assert cancelled.wait(5), "the timed-out call kept running on the loop"


def test_a_loop_wedged_inside_a_call_is_replaced_and_later_calls_answer() -> None:
    """A poll stuck in native code blocks the loop thread itself: the caller
    gets its timeout, and the next call runs on a fresh loop."""
    release = threading.Event()

    async def wedge() -> None:
        release.wait(60)  # blocks the loop thread, as a stuck Rust poll would

    async def answer() -> str:
        return "answered"

    abandoned = _bindings._runner.abandoned
    try:
        with pytest.raises(StoreTimeoutError):
            _bindings.run(wedge(), timeout=0.3)
        assert _bindings._runner.abandoned == abandoned + 1
        t0 = time.monotonic()
        assert _bindings.run(answer(), timeout=5) == "answered"
        assert time.monotonic() - t0 < 1
    finally:
        release.set()


def test_an_open_deadline_caps_every_call_and_a_spent_one_makes_no_call() -> None:
    started = threading.Event()

    async def slow() -> None:
        started.set()
        await asyncio.sleep(3600)

    t0 = time.monotonic()
    with deadline(time.monotonic() + 0.3), pytest.raises(StoreTimeoutError, match="deadline"):
        _bindings.run(slow(), timeout=60)
    assert time.monotonic() - t0 < 0.3 + SLACK_S
    started.clear()
    with deadline(time.monotonic() - 1), pytest.raises(StoreTimeoutError, match="not made"):
        _bindings.run(slow(), timeout=60)
    assert not started.is_set()


@pytest.mark.parametrize("raw", ["0", "-5", "soon", "nan", "inf"])
def test_a_store_timeout_that_is_not_positive_seconds_is_refused(
    monkeypatch: pytest.MonkeyPatch, raw: str
) -> None:
    monkeypatch.setenv(_bindings.STORE_TIMEOUT_ENV, raw)
    with pytest.raises(MisconfigurationError, match=_bindings.STORE_TIMEOUT_ENV):
        _bindings.store_timeout_s()


# -- a misbehaving endpoint ----------------------------------------------------------

LAKE = "s3://faulty-bucket/lakes/l1"
OPS: dict[str, Callable[[LakeLocation], Any]] = {
    "store_exists": store_exists,
    "open_reader": open_reader,
    "open_writer": open_writer,
    "get": lambda loc: ObjectClient(loc).get(loc.path("commits", "00000000000000000001")),
    "put_if_absent": lambda loc: ObjectClient(loc).put_if_absent(loc.path("commits", "x"), b"x"),
    "list": lambda loc: list(ObjectClient(loc).list(loc.path("commits") + "/")),
}


@pytest.fixture(params=["silent", "status-500", "closed-port"])
def unanswering(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "closed-port":
        yield closed_port()
        return
    mode, _, status = request.param.partition("-")
    with faulty_endpoint(mode, int(status or 0)) as endpoint:
        yield endpoint.url


def _timed(op: Callable[[], Any]) -> tuple[BaseException | None, float]:
    t0 = time.monotonic()
    try:
        op()
    except BaseException as exc:  # noqa: BLE001 - the test inspects it
        return exc, time.monotonic() - t0
    return None, time.monotonic() - t0


@pytest.mark.timeout(60)
@pytest.mark.parametrize("op", list(OPS))
def test_a_store_that_never_answers_usably_gives_a_retryable_error_within_the_deadline(
    shorter_timeout: float, unanswering: str, op: str
) -> None:
    with s3_endpoint(unanswering):
        error, seconds = _timed(lambda: OPS[op](LakeLocation.parse(LAKE)))
    assert isinstance(error, SlatelakeError), error
    assert error.retryable, f"{type(error).__name__}: {error}"
    assert seconds < shorter_timeout + SLACK_S, f"{op} answered after {seconds:.1f}s"
    assert LAKE in str(error) or "lakes/l1" in str(error)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("op", list(OPS))
def test_refused_credentials_are_a_terminal_permission_error_at_once(
    short_timeout: float, op: str
) -> None:
    with faulty_endpoint("status", 403) as endpoint, s3_endpoint(endpoint.url):
        error, seconds = _timed(lambda: OPS[op](LakeLocation.parse(LAKE)))
    assert isinstance(error, PermissionDeniedError), error
    assert error.retryable is False
    assert "credentials" in str(error) and LAKE in str(error)
    assert seconds < short_timeout, f"{op} took {seconds:.1f}s to report a 403"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("op", list(OPS))
def test_a_missing_bucket_is_a_terminal_not_found_naming_the_bucket(
    short_timeout: float, moto_endpoint: str, op: str
) -> None:
    loc = LakeLocation.parse("s3://no-such-bucket-here/lakes/l1")
    error, seconds = _timed(lambda: OPS[op](loc))
    assert isinstance(error, NotFoundError), error
    assert "no-such-bucket-here" in str(error) and "does not exist" in str(error)
    assert seconds < short_timeout + SLACK_S


@pytest.mark.timeout(60)
@pytest.mark.parametrize("op", list(OPS))
def test_a_path_segment_too_long_for_the_file_system_is_refused_at_once(
    tmp_path: Path, short_timeout: float, op: str
) -> None:
    loc = LakeLocation.parse((tmp_path / ("x" * 300) / "lake").as_uri())
    error, seconds = _timed(lambda: OPS[op](loc))
    assert isinstance(error, MisconfigurationError), error
    assert "shorter lake path" in str(error)
    assert seconds < short_timeout


# -- damaged stores --------------------------------------------------------------------


def _store_with_ssts(url: str) -> LakeLocation:
    """A store with a few thousand keys flushed into L0 SSTs."""
    loc = LakeLocation.parse(url)
    writer = open_writer(loc)
    try:
        for batch in range(4):
            writer.write((bytes([3]) + f"{batch}-{i:06}".encode(), b"v" * 64) for i in range(2000))
        writer.flush()
    finally:
        writer.close()
    return loc


def _truncate_every_sst(loc: LakeLocation) -> int:
    client = ObjectClient(loc)
    cut = 0
    for info in list(client.list(loc.path("store", "compacted") + "/")):
        if info.path.endswith(".sst"):
            data = client.get(info.path)
            assert data is not None
            client.put(info.path, data[: len(data) // 2])
            cut += 1
    return cut


@pytest.mark.timeout(60)
def test_a_truncated_sst_is_reported_as_corruption_not_retried_forever(
    monkeypatch: pytest.MonkeyPatch, shared_lake_url: str
) -> None:
    """SlateDB retries the short read a few times (about 1.5 s), then fails;
    unbounded, it retried forever."""
    monkeypatch.setenv(_bindings.STORE_TIMEOUT_ENV, "15")
    loc = _store_with_ssts(shared_lake_url)
    assert _truncate_every_sst(loc) > 0
    reader = open_reader(loc)
    try:
        error, seconds = _timed(lambda: sum(1 for _ in reader.scan_prefix(bytes([3]))))
    finally:
        reader.close()
    assert isinstance(error, CorruptionError), error
    assert "truncated" in str(error) and loc.url in str(error)
    assert seconds < 15
