"""A manual invocation that ends in AmbiguousWriteError leaves the lake free.

The real handler, its lake on moto behind the fault proxy: the pass lease's
claim lands but its answer and its read back are lost. The invocation
answers with the AmbiguousWriteError, and the next manual invocation, told
to wait at most 2 s, runs its pass at once instead of waiting for the
claim to lapse (the attack saw three invocations wait on it).
"""

from __future__ import annotations

import time
import uuid
from types import ModuleType

import pytest

import slatelake
from tests.faults.proxy import FaultProxy, FaultRule
from tests.functions.conftest import FakeContext, deploy

OPTIONS = {"MAINTENANCE_MERGE_ADJACENT_FILES": "true"}


def test_a_manual_invocation_ended_by_an_ambiguous_claim_leaves_the_lease_free(
    app: ModuleType,
    env_clean: pytest.MonkeyPatch,
    s3_bucket: str,
    moto_endpoint: str,
) -> None:
    with FaultProxy(upstream=moto_endpoint) as proxy:
        env_clean.setenv("AWS_ENDPOINT_URL", proxy.url)
        env_clean.setenv("SLATELAKE_STORE_TIMEOUT_S", "4")
        lake = f"s3://{s3_bucket}/lakes/{uuid.uuid4().hex[:8]}"
        data = f"s3://{s3_bucket}/data/"
        with slatelake.connect(lake, data_path=data) as s:
            s.sql("CREATE TABLE t (id INTEGER)")
            s.sql("INSERT INTO t VALUES (1), (2)")
        deploy(env_clean, lake, data)
        event = {"action": "maintenance", "options": OPTIONS}
        proxy.add(FaultRule(method="PUT", prefix="maintenance/", kind="drop_after"))
        # the read back fails: one GET and the S3 client's three retries
        proxy.add(FaultRule(method="GET", prefix="maintenance/", kind="503", times=4))
        try:
            failed = app.handler(event, FakeContext())
        finally:
            proxy.clear()
        assert failed["ok"] is False, failed
        assert failed["error"]["type"] == "AmbiguousWriteError", failed
        t0 = time.monotonic()
        answered = app.handler({**event, "wait_s": 2}, FakeContext())
        took = time.monotonic() - t0
        app.warm.release()  # while the proxy still answers
    assert answered["ok"] is True, answered
    assert answered["result"]["status"] != "failed", answered
    print(f"the next manual invocation answered in {took:.2f}s")
