"""The function answers before its deadline whatever the store does.

A store that never answers (an endpoint that accepts TCP and stays silent),
one that refuses (403) and a bucket that does not exist: each invocation
ends, inside the time Lambda gave it, with the typed error (a manual
invoke's answer; a scheduled tick raises it, so Lambda counts an error), and
a maintenance invocation counts a ``PassFailed`` (its EMF flushed first) so
the alarm sees it. The store timeout stays at its default (60 s): only the
invocation's remaining time can end these calls in time.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

import slatelake
from tests.functions.conftest import FakeContext, deploy, emf_lines
from tests.store.faulty_s3 import faulty_endpoint, s3_endpoint

LAKE = "s3://lake-bucket/lakes/sales"
REMAINING_S = 6.0  # the invocation's time left when it starts

EVENTS = {
    "scheduled": {"trigger": "scheduled", "options": {"MAINTENANCE_FLUSH_INLINED_DATA": "true"}},
    "manual": {"action": "maintenance", "wait_s": 600},
    "status": {"action": "status"},
    "census": {"action": "census"},
    "compact_store": {"action": "compact_store", "options": {"timeout": "600s"}},
}


@pytest.fixture
def silent_store(env_clean: pytest.MonkeyPatch) -> Iterator[None]:
    env_clean.delenv("SLATELAKE_STORE_TIMEOUT_S", raising=False)
    deploy(env_clean, LAKE)
    with faulty_endpoint("silent") as endpoint, s3_endpoint(endpoint.url):
        yield


def _pass_failed(out: str) -> list[tuple[str, Any]]:
    return [(d["Lake"], d["PassFailed"]) for d in emf_lines(out) if "PassFailed" in d]


def _invoke(app: ModuleType, event: dict[str, Any], context: FakeContext) -> dict[str, Any]:
    """The manual answer, or for a scheduled tick the error it raised, as the
    answer's error would carry it."""
    try:
        out = app.handler(event, context)
    except slatelake.SlatelakeError as exc:
        assert event.get("trigger") == "scheduled", f"a manual invoke raised {exc!r}"
        return {
            "ok": False,
            "raised": True,
            "error": {"type": type(exc).__name__, "message": str(exc)},
        }
    assert event.get("trigger") != "scheduled" or out["ok"], f"a failed tick answered: {out}"
    return out


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", list(EVENTS))
def test_a_store_that_never_answers_still_gets_an_answer_before_the_deadline(
    app: ModuleType, silent_store: None, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    capsys.readouterr()
    t0 = time.monotonic()
    out = _invoke(app, {"lake": LAKE, **EVENTS[kind]}, FakeContext(remaining_s=REMAINING_S))
    seconds = time.monotonic() - t0
    assert seconds < REMAINING_S, f"answered after {seconds:.1f}s, past the deadline"
    assert out["ok"] is False, out
    assert out.get("raised", False) == (kind == "scheduled"), out
    assert out["error"]["type"] == "StoreTimeoutError", out
    assert "deadline" in out["error"]["message"]
    failed = _pass_failed(capsys.readouterr().out)
    if kind in ("scheduled", "manual"):
        assert failed == [(LAKE, [1.0])]
    else:
        assert failed == []


@pytest.mark.timeout(60)
def test_refused_credentials_fail_the_tick_at_once_with_a_pass_failure(
    app: ModuleType, env_clean: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    deploy(env_clean, LAKE)
    with faulty_endpoint("status", 403) as endpoint, s3_endpoint(endpoint.url):
        capsys.readouterr()
        t0 = time.monotonic()
        out = _invoke(app, {"trigger": "scheduled", "lake": LAKE}, FakeContext())
        seconds = time.monotonic() - t0
    assert out["error"]["type"] == "PermissionDeniedError", out
    assert out["raised"] is True and seconds < 5
    assert _pass_failed(capsys.readouterr().out) == [(LAKE, [1.0])]


@pytest.mark.timeout(60)
def test_a_missing_bucket_fails_the_tick_naming_it_with_a_pass_failure(
    app: ModuleType,
    moto_endpoint: str,
    env_clean: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    lake = "s3://no-such-lake-bucket/lakes/sales"
    deploy(env_clean, lake)
    capsys.readouterr()
    out = _invoke(app, {"trigger": "scheduled"}, FakeContext(remaining_s=REMAINING_S))
    assert out["error"]["type"] == "NotFoundError", out
    assert out["raised"] is True and "no-such-lake-bucket" in out["error"]["message"]
    assert _pass_failed(capsys.readouterr().out) == [(lake, [1.0])]
