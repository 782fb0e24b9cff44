"""Many lakes per stack: the template's own fleet state machine
(statemachines/fleet.asl.json) in moto's Step Functions interpreter, every
lake's pass run by slatelake's real handler in a child process
(tests/functions/state_machines.py)."""

from __future__ import annotations

import uuid
from pathlib import Path

import boto3
import pytest

import slatelake
from tests.functions.state_machines import Execution, StepFunctions, step_functions

pytestmark = [pytest.mark.s3, pytest.mark.xdist_group("state-machines")]
__all__ = ["step_functions"]  # the harness's fixture, imported for pytest to find

# the template's own definition (its DefinitionUri), not a copy
FLEET_ASL = Path(__file__).resolve().parents[2] / "statemachines" / "fleet.asl.json"


def _lake(bucket: str, name: str) -> str:
    url, data = f"s3://{bucket}/lakes/{name}", f"s3://{bucket}/data/{name}/"
    slatelake.open(url, data).create()
    with slatelake.connect(url, data_path=data) as s:
        s.sql("CREATE TABLE t (id INTEGER)")
        s.sql("INSERT INTO t VALUES (1), (2)")
    return url


@pytest.fixture(scope="module")
def fleet(step_functions: StepFunctions) -> tuple[list[str], str]:
    """Three lakes the stack maintains, and the fleet machine for them."""
    bucket = f"fleet-{uuid.uuid4().hex[:12]}"
    boto3.client("s3").create_bucket(Bucket=bucket)
    lakes = [_lake(bucket, name) for name in ("sales", "ops", "finance")]
    # the template sets the stack's own lake on every function (SLATELAKE_LAKE)
    env = {"SLATELAKE_LAKE": lakes[0], "SLATELAKE_ALLOWED_LAKES": ",".join(lakes)}
    functions = {
        "MaintenanceFunctionArn": step_functions.function(env),
        "FoldFunctionArn": step_functions.function(env),
    }
    machine = step_functions.state_machine(FLEET_ASL, functions)
    return lakes, machine


@pytest.fixture(scope="module")
def ran(step_functions: StepFunctions, fleet: tuple[list[str], str]) -> Execution:
    lakes, machine = fleet
    stray = lakes[0].replace("/lakes/sales", "/lakes/not-listed")
    doc = {"lakes": [*lakes, stray], "concurrency": 2, "stagger_s": 1}
    return step_functions.run(machine, doc, timeout_s=180)


def test_each_listed_lake_gets_its_own_fold_and_scheduled_pass(
    ran: Execution, fleet: tuple[list[str], str]
) -> None:
    lakes, _ = fleet
    assert ran.status == "SUCCEEDED", (ran.error, ran.cause)
    by_lake = {r["lake"]: r for r in ran.output["results"]}
    for url in lakes:
        assert by_lake[url]["ok"] is True, by_lake[url]
        answer = by_lake[url]["answer"]
        assert answer["ok"] and answer["result"]["trigger"] == "scheduled"
        fold = by_lake[url]["fold"]["answer"]
        assert fold["ok"] and fold["action"] == "fold", fold
        (latest,) = slatelake.open(url).maintenance.status()  # its own status window
        assert latest.trigger == "scheduled" and latest.run_id == answer["result"]["run_id"]


def test_a_lake_the_stack_does_not_maintain_fails_alone(ran: Execution) -> None:
    """The allow-list holds for every lake of the list: the stray is refused
    (a scheduled tick raises), caught, and the others still ran."""
    failed = [r for r in ran.output["results"] if not r["ok"]]
    assert [r["lake"].rsplit("/", 1)[-1] for r in failed] == ["not-listed"]
    assert "LakeNotAllowedError" in failed[0]["error"] + failed[0]["cause"]


def test_at_most_the_fleet_concurrency_of_passes_run_at_once(ran: Execution) -> None:
    assert 1 <= ran.most_in_flight() <= 2
    waits = ran.events("WaitStateEntered")
    assert len(waits) == 3  # every lake after the first is staggered


def test_the_fleet_registry_adds_lakes_without_a_redeploy(
    step_functions: StepFunctions, fleet: tuple[list[str], str]
) -> None:
    """A lake `slatelake fleet add` put in the registry is mapped over and
    allowed, though neither FleetLakes nor the allow-list names it."""
    lakes, _ = fleet
    bucket = lakes[0].split("/")[2]
    archive = _lake(bucket, "archive")
    registry = f"s3://{bucket}/fleet"
    slatelake.FleetRegistry(registry).add(archive, by="test")
    env = {
        "SLATELAKE_LAKE": lakes[0],
        "SLATELAKE_ALLOWED_LAKES": lakes[0],
        "SLATELAKE_FLEET_REGISTRY": registry,
    }
    functions = {
        "MaintenanceFunctionArn": step_functions.function(env),
        "FoldFunctionArn": step_functions.function(env),
    }
    machine = step_functions.state_machine(FLEET_ASL, functions)
    ran = step_functions.run(machine, {"lakes": [], "concurrency": 2, "stagger_s": 0}, 180)
    assert ran.status == "SUCCEEDED", (ran.error, ran.cause)
    (only,) = ran.output["results"]
    assert only["lake"] == archive and only["ok"] is True, only
    assert slatelake.open(archive).maintenance.status()[0].trigger == "scheduled"
