"""One pass over many invocations: the template's own pass state machine
(statemachines/pass.asl.json) in moto's Step Functions interpreter, every
phase run by slatelake's real handler in a child process
(tests/functions/state_machines.py). Faults are injected in that child by
tests/functions/hooks/sitecustomize.py, named in the function's environment."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import boto3
import pytest

import slatelake
from tests.functions.conftest import PristineLake, churn, contents, end_state
from tests.functions.state_machines import Execution, StepFunctions, step_functions

pytestmark = [pytest.mark.s3, pytest.mark.xdist_group("state-machines")]
__all__ = ["step_functions"]  # the harness's fixture, imported for pytest to find

ROOT = Path(__file__).resolve().parents[2]
PASS_ASL = ROOT / "statemachines" / "pass.asl.json"  # the template's DefinitionUri
HOOKS = str(Path(__file__).resolve().parent / "hooks")
TABLES = 6
OPTIONS = {
    "MAINTENANCE_FLUSH_INLINED_DATA": "true",
    "MAINTENANCE_MERGE_ADJACENT_FILES": "true",
    "MAINTENANCE_CLEANUP_OLD_FILES_CLEANUP_ALL": "true",
    "MAINTENANCE_TABLE_BATCHES": "true",
}


def _lake(bucket: str) -> tuple[str, str, list[str]]:
    name = uuid.uuid4().hex[:8]
    url, data = f"s3://{bucket}/lakes/{name}", f"s3://{bucket}/data/{name}/"
    return url, data, churn(url, data, tables=TABLES, rounds=2)


@pytest.fixture(scope="module")
def bucket(step_functions: StepFunctions) -> str:
    name = f"fanout-{uuid.uuid4().hex[:12]}"
    boto3.client("s3").create_bucket(Bucket=name)
    return name


def _machine(step_functions: StepFunctions, lake: str, data: str, **env: str) -> str:
    environment = {
        "SLATELAKE_ALLOWED_LAKES": lake,
        "SLATELAKE_ALLOWED_DATA_PATHS": data,
        # long enough to span a cold invocation between two phases on a busy machine
        "SLATELAKE_PASS_LEASE_TTL_S": "30",
        **env,
    }
    if any(k.startswith("SLATELAKE_TEST_") for k in env):
        environment["PYTHONPATH"] = HOOKS
    function = step_functions.function(environment, timeout_s=120)
    return step_functions.state_machine(PASS_ASL, {"MaintenanceFunctionArn": function})


def _input(lake: str, data: str, trigger: str = "manual", concurrency: int = 2) -> dict[str, Any]:
    return {
        "trigger": trigger,
        "lake": lake,
        "data_path": data,
        "options": OPTIONS,
        "batch_tables": 2,
        "concurrency": concurrency,
    }


def _batch_invocations(ran: Execution) -> list[Any]:
    return [p for p in ran.lambda_inputs() if p.get("action") == "pass_batch"]


def test_a_table_conflicting_in_one_item_is_deferred_and_the_others_finish(
    step_functions: StepFunctions, bucket: str
) -> None:
    lake, data, names = _lake(bucket)
    machine = _machine(step_functions, lake, data, SLATELAKE_TEST_CONFLICTING_TABLE="t3")
    ran = step_functions.run(machine, _input(lake, data), timeout_s=240)
    # a manual run's failed pass fails the execution (raise_on_failure), after recording it
    assert ran.status == "FAILED" and "PassFailedError" in (ran.error or ""), ran.cause
    (report,) = slatelake.open(lake).maintenance.status()
    flush = report.step("flush_inlined_data")
    assert flush.status == "failed" and "deferred after 3 conflicts: main.t3" in flush.detail
    assert flush.counts["rows_flushed"] == 2 * (TABLES - 1)
    merge = report.step("merge_adjacent_files")
    assert merge.status == "ran" and f"across {TABLES} tables" in merge.detail
    cleanup = report.step("cleanup_old_files")
    assert cleanup.status == "skipped" and "deferred tables: main.t3" in cleanup.detail
    assert report.work_pending


def test_a_failed_item_fails_only_its_tables_and_cleanup_is_skipped(
    step_functions: StepFunctions, bucket: str
) -> None:
    lake, data, names = _lake(bucket)
    machine = _machine(step_functions, lake, data, SLATELAKE_TEST_FAILING_TABLE="t5")
    ran = step_functions.run(machine, _input(lake, data), timeout_s=240)
    assert ran.status == "FAILED", (ran.error, ran.cause)
    (report,) = slatelake.open(lake).maintenance.status()
    assert report.status == "failed"
    assert "table batch 3 of 3 (main.t4, main.t5) failed: RuntimeError" in (
        report.failed_reason or ""
    ), report.failed_reason
    assert report.step("flush_inlined_data").counts["rows_flushed"] == 2 * (TABLES - 2)
    cleanup = report.step("cleanup_old_files")
    assert cleanup.detail == "not attempted because table batch 3 of 3 failed"
    assert slatelake.open(lake).maintenance.lease().state == "released"  # type: ignore[union-attr]


def test_an_execution_killed_mid_map_loses_nothing_and_the_next_completes(
    step_functions: StepFunctions, bucket: str
) -> None:
    lake, data, names = _lake(bucket)
    before = contents(lake, names)
    # a short TTL, so the killed execution's lease lapses soon
    machine = _machine(step_functions, lake, data, SLATELAKE_PASS_LEASE_TTL_S="4")
    sfn = step_functions.sfn
    arn = sfn.start_execution(
        stateMachineArn=machine, input=json.dumps(_input(lake, data, concurrency=1))
    )["executionArn"]
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:  # stop it once its first batch is done
        events = sfn.get_execution_history(executionArn=arn, maxResults=1000)["events"]
        if any(e["type"] == "MapIterationSucceeded" for e in events):
            break
        time.sleep(0.2)
    sfn.stop_execution(executionArn=arn, error="Killed", cause="the test stopped it mid-map")
    time.sleep(5)  # the lease's TTL (4 s): nobody beats it any more
    ran = step_functions.run(machine, _input(lake, data), timeout_s=240)
    assert ran.status == "SUCCEEDED", (ran.error, ran.cause)
    runs = slatelake.open(lake).maintenance.runs().items
    assert [r.status for r in runs] == ["succeeded", "failed"], [r.to_dict() for r in runs]
    assert "heartbeat stopped" in (runs[1].failed_reason or ""), runs[1].failed_reason
    assert ran.output["result"]["status"] == "succeeded"  # cleanup ran: nothing deferred
    assert contents(lake, names) == before


def test_an_execution_beside_a_running_pass_skips_or_waits_as_a_single_pass_does(
    step_functions: StepFunctions, bucket: str
) -> None:
    """While a run holds the lake's pass lease (here a fanned-out run planned
    by this process), a scheduled execution's tick skips and a manual one
    waits its SLATELAKE_MANUAL_WAIT_S, then fails; once the run finishes,
    an execution runs."""
    lake, data, _ = _lake(bucket)
    handle = slatelake.open(lake)
    handle.policy.set({"enabled": "true"})  # a schedule cleans up only then
    machine = _machine(step_functions, lake, data, SLATELAKE_MANUAL_WAIT_S="1s")
    running = handle.maintenance.plan(slatelake.PassRequest(options=OPTIONS), batch_tables=3)
    tick = step_functions.run(machine, _input(lake, data, trigger="scheduled"), timeout_s=120)
    assert tick.status == "SUCCEEDED" and "already running" in tick.output["skipped"], tick.output
    manual = step_functions.run(machine, _input(lake, data), timeout_s=120)
    assert manual.status == "FAILED" and manual.error == "AlreadyRunningError", manual.cause
    results = [handle.maintenance.batch(order) for order in running.batches]
    assert handle.maintenance.finish(running, results).status == "succeeded"
    assert [r.status for r in handle.maintenance.runs().items] == ["succeeded"]  # ours alone
    assert handle.maintenance.lease().state == "released"  # type: ignore[union-attr]


def test_the_state_machine_leaves_the_end_state_of_one_invocation(
    step_functions: StepFunctions,
) -> None:
    """The same churned lake, restored byte for byte between the two: one
    `maintenance` invocation of the function, then the state machine."""
    bucket = f"fanout-eq-{uuid.uuid4().hex[:8]}"
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=bucket)
    lake, data, names = _lake(bucket)
    time.sleep(1.1)  # every churn snapshot older than the expiry's second
    objects = {
        obj["Key"]: s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket)
        for obj in page.get("Contents", [])
    }
    pristine = PristineLake(bucket, lake, data, names, objects)
    options = {**OPTIONS, "MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN": "1 second"}
    function = step_functions.function(
        {"SLATELAKE_ALLOWED_LAKES": lake, "SLATELAKE_ALLOWED_DATA_PATHS": data}, timeout_s=120
    )
    event = {"action": "maintenance", "lake": lake, "options": options, "raise_on_failure": True}
    answer = step_functions.awslambda.invoke(FunctionName=function, Payload=json.dumps(event))
    one = json.loads(answer["Payload"].read())
    assert one["ok"] and one["result"]["status"] == "succeeded", one
    expected = end_state(lake, names)
    assert expected["runs"] == ["succeeded"] and expected["status_records"] == 1

    pristine.restore()
    machine = step_functions.state_machine(PASS_ASL, {"MaintenanceFunctionArn": function})
    ran = step_functions.run(machine, {**_input(lake, data), "options": options}, timeout_s=240)
    assert ran.status == "SUCCEEDED", (ran.error, ran.cause)
    report = ran.output["result"]
    assert report["status"] == "succeeded" and report["batches"] == 3, report
    assert len(_batch_invocations(ran)) == 3 and 1 <= ran.most_in_flight() <= 2
    flush = next(s for s in report["steps"] if s["step"] == "flush_inlined_data")
    assert flush["detail"].startswith(f"flushed {2 * TABLES} rows across {TABLES} tables")
    assert end_state(lake, names) == expected  # one status record, one run entry among it
    (recorded,) = slatelake.open(lake).maintenance.status()
    assert recorded.run_id == report["run_id"] and recorded.batches == 3
    assert slatelake.open(lake).maintenance.lease().state == "released"  # type: ignore[union-attr]


def test_a_tick_hands_a_lake_above_the_table_count_to_the_state_machine(
    step_functions: StepFunctions, bucket: str
) -> None:
    """PassShape auto: a scheduled tick on a lake of more tables than
    SLATELAKE_FANOUT_ABOVE_TABLES starts the pass state machine and answers
    skipped with its execution; below the count, it runs the pass itself."""
    lake, data, _ = _lake(bucket)
    slatelake.open(lake).policy.set({"enabled": "true"})
    env = {"SLATELAKE_ALLOWED_LAKES": lake, "SLATELAKE_ALLOWED_DATA_PATHS": data}
    function = step_functions.function(env, timeout_s=120)
    machine = step_functions.state_machine(PASS_ASL, {"MaintenanceFunctionArn": function})
    tick = {"trigger": "scheduled", "lake": lake, "data_path": data, "options": OPTIONS}

    def invoke_with(above: int) -> dict[str, Any]:
        step_functions.awslambda.update_function_configuration(
            FunctionName=function,
            Environment={
                "Variables": {
                    **step_functions.awslambda.get_function_configuration(FunctionName=function)[
                        "Environment"
                    ]["Variables"],
                    "SLATELAKE_PASS_STATE_MACHINE": machine,
                    "SLATELAKE_FANOUT_ABOVE_TABLES": str(above),
                    "SLATELAKE_FANOUT_BATCH_TABLES": "2",
                    "SLATELAKE_FANOUT_CONCURRENCY": "2",
                }
            },
        )
        answer = step_functions.awslambda.invoke(FunctionName=function, Payload=json.dumps(tick))
        return dict(json.loads(answer["Payload"].read()))

    handed = invoke_with(above=TABLES - 1)
    assert handed["ok"] and handed["result"] is None, handed
    assert f"{TABLES} tables, above {TABLES - 1}" in handed["skipped"]
    sfn = step_functions.sfn
    deadline = time.monotonic() + 240
    while (done := sfn.describe_execution(executionArn=handed["execution"]))["status"] == "RUNNING":
        assert time.monotonic() < deadline
        time.sleep(0.3)
    assert done["status"] == "SUCCEEDED", done
    report = json.loads(done["output"])["result"]
    assert report["trigger"] == "scheduled" and report["batches"] == 3, report
    ran_itself = invoke_with(above=TABLES)
    assert ran_itself["ok"] and ran_itself["result"]["batches"] is None, ran_itself
    assert [r.batches for r in slatelake.open(lake).maintenance.status()] == [None, 3]
