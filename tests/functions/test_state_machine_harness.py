"""The state machine harness (tests/functions/state_machines.py), proven on its
own small ASL file (tests/functions/asl/harness.asl.json: a Task, a Map over
items, a Task; Retry and Catch): moto's interpreter runs the file as
written, and every Lambda task runs slatelake's real handler in a child
process on a real lake on moto's S3."""

from __future__ import annotations

import base64
import json
import time
import uuid
from pathlib import Path
from typing import Any

import boto3
import pytest

import slatelake
from tests.functions.state_machines import (
    Execution,
    ExecutionTimedOutError,
    StepFunctions,
    step_functions,
)

# One worker starts this module's server and builds its lake.
pytestmark = [pytest.mark.s3, pytest.mark.xdist_group("state-machines")]
__all__ = ["step_functions"]  # the harness's fixture, imported for pytest to find


@pytest.fixture(scope="module")
def lake(step_functions: StepFunctions) -> tuple[str, str]:
    """A lake with one table on the harness's S3: (lake URL, data path)."""
    bucket = f"lake-{uuid.uuid4().hex[:12]}"
    boto3.client("s3").create_bucket(Bucket=bucket)
    url, data = f"s3://{bucket}/lakes/harness", f"s3://{bucket}/data/harness/"
    slatelake.open(url, data).create()
    with slatelake.connect(url, data_path=data) as s:
        s.sql("CREATE TABLE sales (id INTEGER, v VARCHAR)")
    return url, data


@pytest.fixture(scope="module")
def machine(step_functions: StepFunctions, lake: tuple[str, str]) -> str:
    """harness.asl.json, its function the handler deployed for ``lake``."""
    url, data = lake
    function = step_functions.function({"SLATELAKE_LAKE": url, "SLATELAKE_DATA_PATH": data})
    return step_functions.state_machine("harness.asl.json", {"MaintenanceFunctionArn": function})


ITEMS = [{"action": "health"}, {"action": "policy"}, {"action": "runs"}]


@pytest.fixture(scope="module")
def succeeded(step_functions: StepFunctions, machine: str) -> Execution:
    """One execution down the happy path, shared by the tests that read it."""
    return step_functions.run(machine, {"items": ITEMS}, timeout_s=60)


def log_lines(encoded: str) -> list[dict[str, Any]]:
    """The JSON lines of a Lambda log tail (LogType Tail: base64, last 4 KB)."""
    text = base64.b64decode(encoded).decode(errors="replace")  # a tail may cut a character
    return [json.loads(line) for line in text.splitlines() if line.startswith('{"level"')]


def test_a_lambda_task_runs_the_real_handler_in_a_fresh_process_on_the_lake(
    succeeded: Execution, lake: tuple[str, str]
) -> None:
    assert succeeded.status == "SUCCEEDED", (succeeded.error, succeeded.cause)
    status = succeeded.output["status"]
    assert status["answer"] == {"ok": True, "action": "status", "result": []}
    accepted = [x for x in log_lines(status["log"]) if x["message"] == "invocation accepted"]
    assert len(accepted) == 1
    assert accepted[0]["lake"] == lake[0]
    assert accepted[0]["function_name"].startswith("slatelake-local-")
    assert accepted[0]["cold_start"] is True  # a new process: nothing warm
    census = succeeded.output["census"]["answer"]
    assert census["ok"] is True and census["action"] == "census"
    assert census["result"]["subspaces"], census  # the lake's store, read by the child


def test_the_map_runs_every_item_through_the_handler_and_keeps_their_order(
    succeeded: Execution,
) -> None:
    inputs = succeeded.lambda_inputs()
    assert inputs[0] == {"action": "status"} and inputs[-1] == {"action": "census"}
    assert sorted(map(json.dumps, inputs[1:-1])) == sorted(map(json.dumps, ITEMS))
    done = succeeded.output["items"]
    assert [d["action"] for d in done] == [i["action"] for i in ITEMS]
    health = done[0]["result"]
    assert "sales" in json.dumps(health), health  # the child read the lake's catalog
    assert len(succeeded.events("MapIterationSucceeded")) == len(ITEMS)
    assert succeeded.most_in_flight() == 2  # MaxConcurrency


def test_an_item_whose_handler_raises_is_retried_on_its_name_then_caught_as_task_failed(
    step_functions: StepFunctions, machine: str
) -> None:
    refused = {"action": "status", "trigger": "scheduled"}  # a tick may not ask status: raises
    out = step_functions.run(machine, {"items": [{"action": "policy"}, refused]})
    assert out.status == "SUCCEEDED", (out.error, out.cause)
    assert out.lambda_inputs().count(refused) == 2  # Retry on "InvocationError", once
    failed = out.events("LambdaFunctionFailed")
    assert [e["lambdaFunctionFailedEventDetails"]["error"] for e in failed] == [
        "InvocationError"
    ] * 2
    ok, raised = out.output["items"]
    assert ok["action"] == "policy"
    assert raised["raised"] == "InvocationError"
    cause = json.loads(raised["cause"])
    assert "a scheduled event runs" in cause["errorMessage"]
    assert cause["stackTrace"], cause  # Lambda's error document, from the child
    assert out.output["census"]["answer"]["ok"] is True  # the execution went on


def test_an_item_answered_ok_false_fails_the_map_into_its_catch(
    step_functions: StepFunctions, machine: str
) -> None:
    elsewhere = {"action": "status", "lake": "s3://another-bucket/lakes/x"}
    out = step_functions.run(machine, {"items": [elsewhere]})
    assert out.status == "FAILED"
    assert out.error == "Slatelake.NotOk"
    assert out.cause == "the handler answered ok: false"
    assert out.lambda_inputs() == [{"action": "status"}, elsewhere]  # no census after
    entered = [e["stateEnteredEventDetails"]["name"] for e in out.events("FailStateEntered")]
    assert entered == ["Item refused", "Failed"]


def test_the_harness_stops_an_execution_that_outlasts_its_timeout(
    step_functions: StepFunctions,
) -> None:
    machine = step_functions.state_machine("wait.asl.json", {})
    started = time.monotonic()
    with pytest.raises(ExecutionTimedOutError) as caught:
        step_functions.run(machine, {}, timeout_s=1)
    assert time.monotonic() - started < 10
    assert caught.value.execution.status == "ABORTED"
    assert caught.value.execution.events("ExecutionAborted")


def test_a_handler_past_its_function_timeout_is_killed_and_fails_its_task(
    step_functions: StepFunctions,
) -> None:
    function = step_functions.function(
        {"PYTHONPATH": str(Path(__file__).parent)}, timeout_s=1, handler="stalling_handler.handler"
    )
    machine = step_functions.state_machine("harness.asl.json", {"MaintenanceFunctionArn": function})
    started = time.monotonic()
    out = step_functions.run(machine, {"items": []}, timeout_s=30)
    assert time.monotonic() - started < 15
    assert out.status == "FAILED"  # Status's Catch, then Failed with the caught error
    assert out.error == "Sandbox.Timedout"
    assert "Task timed out after" in json.loads(out.cause)["errorMessage"]
