"""Closing a lake handle whose reader lease cannot be deleted.

The lease only pins slots against truncation and lapses by itself at its
TTL, so a failed delete at close costs at most a delayed truncation; it must
not turn a finished commit or pass into a failure, and the store reader must
be closed anyway (a warm Lambda would otherwise keep one per invocation).
"""

from __future__ import annotations

import logging

import pytest

from slatelake.catalog.lake import Lake
from tests.faults.proxy import FaultProxy, FaultRule


def test_a_lease_that_cannot_be_deleted_at_close_is_left_to_lapse_with_a_warning(
    s3_bucket: str, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch, caplog
) -> None:
    url = f"s3://{s3_bucket}/lake"
    Lake.create(url).close()
    with FaultProxy(upstream=moto_endpoint) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
        lake = Lake.open(url)
        lake.materialize()  # holds a reader lease
        assert lake._reader is not None
        for method in ("POST", "DELETE"):  # obstore deletes by DELETE or POST ?delete
            proxy.add(FaultRule(method=method, prefix="readers/", kind="403", times=None))
        with caplog.at_level(logging.WARNING, logger="slatelake.lake"):
            lake.close()
        assert proxy.injected >= 1
    assert lake._reader is None
    assert any("reader lease" in r.getMessage() for r in caplog.records)
