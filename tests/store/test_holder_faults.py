"""`slatelake hold` under store faults: a signal stops it promptly even while
a store call hangs, and a persistent store error ends it non-zero with the
error named, instead of retrying forever.

The holder runs as a real process against moto's S3 through a relay
(``faulty_s3``) the test turns silent or refusing mid-run.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator

import pytest

from slatelake.catalog.lake import Lake
from slatelake.cli.hold import STOP_GRACE_S
from slatelake.store.db import STORE_TIMEOUT_ENV
from tests.conftest import subprocess_env
from tests.store.faulty_s3 import FaultyEndpoint, faulty_endpoint


class Holder:
    """A `slatelake hold` process whose output lines are collected as they come."""

    def __init__(self, lake: str, endpoint: str, store_timeout_s: float) -> None:
        env = subprocess_env()
        env.update(AWS_ENDPOINT_URL=endpoint, **{STORE_TIMEOUT_ENV: str(store_timeout_s)})
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "slatelake.cli", "hold", lake, "--poll", "0.1"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.out: list[str] = []
        self.err: list[str] = []
        self.drains = [
            threading.Thread(target=self._drain, args=(stream, sink), daemon=True)
            for stream, sink in ((self.proc.stdout, self.out), (self.proc.stderr, self.err))
        ]
        for drain in self.drains:
            drain.start()

    @staticmethod
    def _drain(stream: object, sink: list[str]) -> None:
        for line in stream:  # type: ignore[attr-defined]
            sink.append(line)

    def wait_for(self, what: str, check: Callable[[], bool], timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            assert self.proc.poll() is None or check(), f"holder exited: {''.join(self.err)}"
            assert time.monotonic() < deadline, f"never saw {what}: {''.join(self.err)}"
            time.sleep(0.05)

    def exit_within(self, seconds: float) -> tuple[int, float]:
        t0 = time.monotonic()
        try:
            code = self.proc.wait(seconds)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the holder was still running {seconds:g}s later: {''.join(self.err)}")
        for drain in self.drains:  # the pipes close at exit: the last lines are in
            drain.join(10)
        return code, time.monotonic() - t0

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
def relayed_lake(moto_endpoint: str, s3_bucket: str) -> Iterator[tuple[str, FaultyEndpoint]]:
    lake = f"s3://{s3_bucket}/lakes/{uuid.uuid4().hex[:8]}"
    Lake.create(lake).close()
    with faulty_endpoint("forward", upstream=moto_endpoint) as relay:
        yield lake, relay


def _holding(relay: FaultyEndpoint, lake: str, store_timeout_s: float) -> Holder:
    holder = Holder(lake, relay.url, store_timeout_s)
    holder.wait_for("the holder holding", lambda: any("holding" in x for x in holder.out))
    seen = relay.requests
    holder.wait_for("a fold after holding", lambda: relay.requests > seen + 2)
    return holder


@pytest.mark.timeout(120)
def test_sigterm_stops_a_holder_promptly_while_a_store_call_hangs(
    relayed_lake: tuple[str, FaultyEndpoint],
) -> None:
    lake, relay = relayed_lake
    holder = _holding(relay, lake, store_timeout_s=120)
    try:
        relay.mode = "silent"
        seen = relay.requests
        holder.wait_for("a store call hanging", lambda: relay.requests > seen)
        time.sleep(0.5)  # well inside the call now: only the signal can end it
        holder.proc.send_signal(signal.SIGTERM)
        code, seconds = holder.exit_within(STOP_GRACE_S + 10)
    finally:
        holder.kill()
    assert code == 0, "".join(holder.err)
    assert seconds < STOP_GRACE_S + 5
    assert holder.out[-1].strip() == "stopped (SIGTERM)"


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("fault", "error", "retried"),
    [
        ("status-403", ("PermissionDeniedError",), False),
        # the retries time out; the last attempt may instead find its pooled
        # connection dropped (the relay closing it under load): unavailable
        ("silent", ("StoreTimeoutError", "StoreUnavailableError"), True),
    ],
    ids=["refused", "silent"],
)
def test_a_persistent_store_error_ends_the_holder_non_zero_with_the_error(
    relayed_lake: tuple[str, FaultyEndpoint], fault: str, error: tuple[str, ...], retried: bool
) -> None:
    lake, relay = relayed_lake
    holder = _holding(relay, lake, store_timeout_s=1)
    try:
        mode, _, status = fault.partition("-")
        relay.status = int(status or 0)
        relay.mode = mode
        code, _ = holder.exit_within(30)
    finally:
        holder.kill()
    err = "".join(holder.err)
    assert code == 1, err
    assert "Traceback" not in err
    assert err.splitlines()[-1].startswith(tuple(f"slatelake hold: {e}: " for e in error)), err
    assert error[0] in err, err
    assert ("retry 3 of 3" in err) is retried
