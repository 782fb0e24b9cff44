"""Fuzz: the maintenance Lambda answers every event, and a refusal touches nothing.

Driven in-process against a small lake on moto's S3 (built once per session),
deployed as the stack's lake. The answer is always a JSON object: ``ok`` true,
or an error whose type is a slatelake error class (never ``KeyError``,
``ValueError``, ...). After a refused event the bucket holds exactly the
objects it held before, each unchanged. The lake's pass lock is held for the
test, so an event that gets past every check finds a pass already running
instead of running one: what is fuzzed is the parsing, not the pass.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest
from hypothesis import example, given

from slatelake.maintenance.flight import process_lock
from slatelake.store.location import LakeLocation
from tests.functions.conftest import FUNCTION_DIR, FakeContext
from tests.fuzz.hostile import PristineBucket, error_names, fuzz
from tests.fuzz.inputs import STACK_DATA, STACK_LAKE, events

pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")
STACK_BUCKET = "lake-bucket"


@pytest.fixture
def stack(fuzz_s3_lake: PristineBucket) -> PristineBucket:
    fuzz_s3_lake.restore()
    return fuzz_s3_lake


@pytest.fixture
def lambda_app(stack: PristineBucket, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The handler deployed for ``stack``, its pass lock held by the test."""
    for key in [k for k in os.environ if k.startswith(("MAINTENANCE_", "SLATELAKE_"))]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("SLATELAKE_LAKE", stack.url)
    monkeypatch.setenv("SLATELAKE_DATA_PATH", stack.data)
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "Slatelake")
    monkeypatch.syspath_prepend(str(FUNCTION_DIR))
    lock = process_lock(LakeLocation.parse(stack.url).url)
    assert lock.acquire(timeout=60)
    module = importlib.import_module("app")
    try:
        yield module
    finally:
        module.release_warm()
        lock.release()


def _retarget(value: Any, stack: PristineBucket) -> Any:
    """The event as sent to this stack: the sample lake and data path named as
    the module's bucket, so an event for "the stack" reaches the real lake."""
    if isinstance(value, str):
        return (
            value.replace(STACK_LAKE, stack.url)
            .replace(STACK_DATA, stack.data)
            .replace(STACK_BUCKET, stack.bucket)
        )
    if isinstance(value, list):
        return [_retarget(v, stack) for v in value]
    if isinstance(value, dict):
        return {_retarget(k, stack): _retarget(v, stack) for k, v in value.items()}
    return value


@fuzz(20)
@given(event=events)
@example(event={"lake": "s3://[x"})  # was an answer typed ValueError
@example(event={"lake": STACK_LAKE, "options": {"MAINTENANCE_PROGRESS": "\ud800"}})
@example(
    event={"lake": STACK_LAKE, "options": {"MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN": "\ud800"}}
)
@example(event={"action": "census", "lake": STACK_LAKE, "options": {"live": [1]}})
@example(event={"lake": STACK_LAKE, "wait_s": float("nan")})
def test_the_lambda_answers_every_event_and_a_refused_one_touches_nothing(
    lambda_app: ModuleType, stack: PristineBucket, event: Any
) -> None:
    event = _retarget(event, stack)
    before = stack.snapshot()
    try:
        out = lambda_app.handler(event, FakeContext(remaining_s=31.0))
    except Exception as exc:  # a scheduled tick fails loudly; a manual invoke answers
        assert lambda_app.is_scheduled(event), f"a manual invoke raised {exc!r}"
        out = {"ok": False, "error": {"type": type(exc).__name__, "message": str(exc)}}
    # The container ends here: its kept session (and that session's reader
    # lease) is the container's, not the event's doing.
    lambda_app.release_warm()
    json.dumps(out)  # what the runtime sends back must serialize
    assert out["ok"] in (True, False), out
    if out["ok"] or out["error"]["type"] == "MergeIncompleteError":
        if stack.snapshot() != before:  # a merge was submitted: the event was acted on
            stack.restore()
        return
    assert out["error"]["type"] in error_names(), out
    assert stack.snapshot() == before, out
