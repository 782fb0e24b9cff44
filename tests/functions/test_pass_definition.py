"""The pass state machine's definition against the library's error model:
what it retries is what the library calls retryable, less what a phase must
not run again, each left out for a stated reason."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import pytest

import slatelake.errors as errors

pytestmark = pytest.mark.fast

PASS_ASL = Path(__file__).resolve().parents[2] / "statemachines" / "pass.asl.json"
# Retryable in the library, never retried by a state: why.
NOT_RETRIED = {
    # a manual plan already waited SLATELAKE_MANUAL_WAIT_S for the lease, and a
    # tick answers skipped; a batch takes no lease (LeaseLostError, its
    # subclass, is not retryable: the run is over)
    "AlreadyRunningError",
    # raised only by a store merge that waits for the holder's compactor
    "MergeIncompleteError",
}


def _retryable() -> set[str]:
    return {
        name
        for name, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, errors.SlatelakeError) and cls.retryable
    }


def _retried(state: dict[str, Any]) -> set[str]:
    return {e for rule in state.get("Retry", []) for e in rule["ErrorEquals"]}


def test_the_plan_and_each_batch_retry_what_the_library_calls_retryable() -> None:
    doc = json.loads(PASS_ASL.read_text())
    plan = doc["States"]["Plan"]
    batch = doc["States"]["Batches"]["ItemProcessor"]["States"]["Batch"]
    wanted = _retryable() - NOT_RETRIED
    assert _retryable() >= NOT_RETRIED  # an exclusion no longer retryable is removed
    for state in (plan, batch):
        library = {e for e in _retried(state) if not e.startswith("Lambda.")}
        assert library == wanted
    assert "LeaseLostError" not in _retried(batch)


def test_the_finish_is_never_rerun_on_a_library_error() -> None:
    """A finish that raised may have recorded the run and released the lease:
    a rerun would only find the lease gone. Lambda's own faults are retried."""
    finish = json.loads(PASS_ASL.read_text())["States"]["Finish"]
    assert all(e.startswith("Lambda.") for e in _retried(finish))


def test_a_failed_batch_is_caught_so_it_fails_only_its_tables() -> None:
    batch = json.loads(PASS_ASL.read_text())["States"]["Batches"]["ItemProcessor"]["States"]
    (catch,) = batch["Batch"]["Catch"]
    assert catch["ErrorEquals"] == ["States.ALL"] and catch["Next"] == "Batch failed"
    assert batch["Batch failed"]["Parameters"] == {"index.$": "$.index", "error.$": "$.failure"}
