"""A pass lease write whose fate is unknown must not hold the lease for its TTL.

Through the fault proxy in front of moto: a claim that landed but whose
answer and read back were both lost, and a release that meets store errors
for longer than one attempt. In each the pass (or its caller) sees the
error, and the next pass, waiting 2 s, still starts: the lease was given
back, not left to lapse a minute later.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator

import pytest

import slatelake
from slatelake.maintenance.flight import PassLease
from slatelake.store.location import LakeLocation
from tests.faults.proxy import FaultProxy, FaultRule

STORE_TIMEOUT_ENV = "SLATELAKE_STORE_TIMEOUT_S"
OPTIONS = {"MAINTENANCE_MERGE_ADJACENT_FILES": "true"}


@pytest.fixture
def proxied_lake(
    s3_bucket: str, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, FaultProxy]]:
    """A small lake on moto, every store client going through the proxy."""
    with FaultProxy(upstream=moto_endpoint) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
        monkeypatch.setenv(STORE_TIMEOUT_ENV, "4")
        url = f"s3://{s3_bucket}/lakes/{uuid.uuid4().hex[:8]}"
        with slatelake.connect(url, data_path=f"s3://{s3_bucket}/data/") as s:
            s.sql("CREATE TABLE t (id INTEGER)")
            for i in range(3):
                s.sql(f"INSERT INTO t VALUES ({i})")
        yield url, proxy


def _newest(url: str) -> object:
    return PassLease(LakeLocation.parse(url)).current()


def _next_pass_runs(url: str) -> None:
    t0 = time.monotonic()
    report = slatelake.maintenance.run(url, OPTIONS, wait_s=2.0)
    assert not report.failed, report
    print(f"the next pass ran {time.monotonic() - t0:.2f}s after the faults")


def test_a_claim_that_landed_unanswered_and_unread_is_released_not_held(
    proxied_lake: tuple[str, FaultProxy],
) -> None:
    """The claim PUT lands but its answer is lost, and reading it back fails
    too: the pass raises AmbiguousWriteError, and the record that landed is
    released before it does."""
    url, proxy = proxied_lake
    proxy.add(FaultRule(method="PUT", prefix="maintenance/", kind="drop_after"))
    # the read back fails: one GET and the S3 client's three retries
    proxy.add(FaultRule(method="GET", prefix="maintenance/", kind="503", times=4))
    try:
        with (
            slatelake.connect(url) as s,
            pytest.raises(slatelake.AmbiguousWriteError, match="reading it back failed"),
        ):
            slatelake.maintenance.run(s, OPTIONS)
    finally:
        proxy.clear()
    record = _newest(url)
    assert record is not None and record.state == "released", record
    _next_pass_runs(url)


def test_a_release_that_meets_store_errors_is_tried_again(
    proxied_lake: tuple[str, FaultProxy],
) -> None:
    """Every lease PUT fails (503) from the end of the pass for a while
    longer than one release attempt takes: the release tries again, and the
    lease is released once the store answers, not held for its TTL."""
    url, proxy = proxied_lake
    rule = FaultRule(method="PUT", prefix="maintenance/", kind="503", times=None)
    # one release attempt is three PUTs of four tries each (the S3 client
    # retries a 503 three times): about 2 s; the store answers again after 2.5 s
    heal = threading.Timer(2.5, proxy.clear)

    def progress(message: str, fields: dict[str, object]) -> None:
        if message.startswith("pass end"):
            proxy.add(rule)
            heal.start()

    try:
        report = slatelake.maintenance.run(url, OPTIONS, on_progress=progress)
    finally:
        heal.cancel()
        heal.join()
    assert not report.failed, report
    assert rule.fired >= 3, f"the release met only {rule.fired} faults"
    proxy.clear()
    record = _newest(url)
    assert record is not None and record.state == "released", record
    _next_pass_runs(url)
