"""Step Functions executions in moto's own interpreter, their Lambda tasks
answered by slatelake's real handler in a child process.

The ``step_functions`` fixture starts moto's server (tests/moto_server.py) on
loopback with ``SLATELAKE_MOTO_HANDLERS=1``: an invoke of a Lambda function
named ``slatelake-local-*`` runs ``functions/maintenance/app.py``'s
``handler`` in a child process with the function's environment and timeout
(moto_server.lambda_child). It then turns moto's Step Functions interpreter
on with moto's own switch, ``POST /moto-api/config {"stepfunctions":
{"execute_state_machine": true}}``: without it moto records executions and
runs nothing. The test makes the function's record (``function``), creates a
state machine from an ASL file with ``${...}`` substituted as SAM's
``DefinitionSubstitutions`` would (``state_machine``), runs it and waits
(``run``), with a timeout that stops the execution rather than hang. Nothing
here interprets ASL: moto does, from the file as written.

The server is the module's own (not the session's ``moto_endpoint``): the
lake lives on its S3, and the test process's S3 variables point at it while
the fixture lives.
"""

from __future__ import annotations

import io
import json
import re
import time
import uuid
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import S3_ENV, start_moto_server
from tests.functions.conftest import powertools_env

ASL_DIR = Path(__file__).with_name("asl")
FUNCTION_PREFIX = "slatelake-local-"  # tests/moto_server.py HANDLER_PREFIX
ROLE_NAME = "slatelake-state-machine"
ROLE_ARN = f"arn:aws:iam::123456789012:role/{ROLE_NAME}"
TRUST = {  # moto's Lambda refuses a role it does not know
    "Version": "2012-10-17",
    "Statement": [
        {
            "Effect": "Allow",
            "Principal": {"Service": ["lambda.amazonaws.com", "states.amazonaws.com"]},
            "Action": "sts:AssumeRole",
        }
    ],
}
POLL_S = 0.1


class ExecutionTimedOutError(AssertionError):
    """``run`` waited its timeout: the execution was stopped; ``execution``
    is what it had done by then."""

    def __init__(self, message: str, execution: Execution) -> None:
        super().__init__(message)
        self.execution = execution


@dataclass(frozen=True)
class Execution:
    """One execution as it ended: status, output (parsed), error and cause
    when it failed, and its history events as moto returned them."""

    arn: str
    status: str
    output: Any
    error: str | None
    cause: str | None
    history: list[dict[str, Any]] = field(repr=False)

    def most_in_flight(self) -> int:
        """The most Map iterations running at once, from the history."""
        running = most = 0
        for event in self.history:
            if event["type"] == "MapIterationStarted":
                running += 1
                most = max(most, running)
            elif event["type"] in ("MapIterationSucceeded", "MapIterationFailed"):
                running -= 1
        return most

    def events(self, *types: str) -> list[dict[str, Any]]:
        """The history's events of these types, in order."""
        return [e for e in self.history if e["type"] in types]

    def lambda_inputs(self) -> list[Any]:
        """The payload of every Lambda invocation scheduled, in order (either
        integration: a bare function ARN, or ``lambda:invoke``)."""
        out = []
        for event in self.history:
            if event["type"] == "LambdaFunctionScheduled":
                out.append(json.loads(event["lambdaFunctionScheduledEventDetails"]["input"]))
            elif event["type"] == "TaskScheduled":
                details = event["taskScheduledEventDetails"]
                if details["resourceType"] == "lambda":
                    out.append(json.loads(details["parameters"])["Payload"])
        return out


def substitute(text: str, substitutions: Mapping[str, str]) -> str:
    """``${Name}`` replaced as CloudFormation's DefinitionSubstitutions does;
    a name without a value is an error, never left in."""

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in substitutions:
            raise KeyError(f"no substitution for ${{{name}}}")
        return substitutions[name]

    return re.sub(r"\$\{([A-Za-z0-9_]+)\}", one, text)


def _code_zip() -> bytes:
    """A function package for moto's record; the child runs the repository's code."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        z.writestr("app.py", "# the server runs functions/maintenance/app.py\n")
    return buffer.getvalue()


class StepFunctions:
    """moto's Step Functions and Lambda on one loopback server."""

    def __init__(self, endpoint: str) -> None:
        import boto3

        self.endpoint = endpoint
        self.sfn = boto3.client("stepfunctions", endpoint_url=endpoint)
        self.awslambda = boto3.client("lambda", endpoint_url=endpoint)
        iam = boto3.client("iam", endpoint_url=endpoint)
        iam.create_role(RoleName=ROLE_NAME, AssumeRolePolicyDocument=json.dumps(TRUST))

    def function(
        self,
        environment: Mapping[str, str],
        timeout_s: int = 60,
        memory_mb: int = 1769,
        handler: str = "app.handler",
    ) -> str:
        """A Lambda function record the real handler answers (its name marked
        for tests/moto_server.py): the template's Powertools settings, the
        given environment (the lake, its data path), S3 on this server. Its
        ARN. ``handler`` is ``module.function``, found on the function's
        ``PYTHONPATH`` after functions/maintenance and the layer."""
        variables = {**powertools_env(), **S3_ENV, "AWS_ENDPOINT_URL": self.endpoint}
        variables.update(environment)
        out = self.awslambda.create_function(
            FunctionName=f"{FUNCTION_PREFIX}{uuid.uuid4().hex[:8]}",
            Runtime="python3.12",
            Role=ROLE_ARN,
            Handler=handler,
            Code={"ZipFile": _code_zip()},
            Timeout=timeout_s,
            MemorySize=memory_mb,
            Environment={"Variables": dict(variables)},
        )
        return out["FunctionArn"]

    def state_machine(self, asl: str | Path, substitutions: Mapping[str, str]) -> str:
        """A state machine from an ASL file (a name under tests/functions/asl/,
        or a path), ``${...}`` substituted. Its ARN."""
        path = ASL_DIR / asl if isinstance(asl, str) else asl
        definition = substitute(path.read_text(), substitutions)
        json.loads(definition)  # a broken file fails here, not as moto's parse error
        out = self.sfn.create_state_machine(
            name=f"{path.name.split('.')[0]}-{uuid.uuid4().hex[:8]}",
            definition=definition,
            roleArn=ROLE_ARN,
        )
        return out["stateMachineArn"]

    def run(self, machine_arn: str, execution_input: Any, timeout_s: float = 60) -> Execution:
        """Start an execution and wait for it to end. Past ``timeout_s`` the
        execution is stopped and ``ExecutionTimedOutError`` raised, carrying
        what it had done."""
        arn = self.sfn.start_execution(
            stateMachineArn=machine_arn,
            name=uuid.uuid4().hex,
            input=json.dumps(execution_input),
        )["executionArn"]
        deadline = time.monotonic() + timeout_s
        while True:
            status = self.sfn.describe_execution(executionArn=arn)["status"]
            if status != "RUNNING":
                return self.execution(arn)
            if time.monotonic() > deadline:
                self.sfn.stop_execution(executionArn=arn)
                raise ExecutionTimedOutError(
                    f"execution still running after {timeout_s} s; stopped",
                    self._after_stop(arn),
                )
            time.sleep(POLL_S)

    def _after_stop(self, arn: str) -> Execution:
        """The stopped execution, once moto has ended it (a few polls)."""
        until = time.monotonic() + 5
        while self.sfn.describe_execution(executionArn=arn)["status"] == "RUNNING":
            if time.monotonic() > until:
                break
            time.sleep(POLL_S)
        return self.execution(arn)

    def execution(self, arn: str) -> Execution:
        """The execution as it stands, with its whole history."""
        described = self.sfn.describe_execution(executionArn=arn)
        history: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"executionArn": arn, "maxResults": 1000}
        while True:
            page = self.sfn.get_execution_history(**kwargs)
            history.extend(page["events"])
            if not page.get("nextToken"):
                break
            kwargs["nextToken"] = page["nextToken"]
        output = described.get("output")
        return Execution(
            arn=arn,
            status=described["status"],
            output=None if output is None else json.loads(output),
            error=described.get("error"),
            cause=described.get("cause"),
            history=history,
        )


def _enable_execution(endpoint: str) -> None:
    """moto's switch: from now on its server interprets what it is asked to run."""
    import requests

    body = {"stepfunctions": {"execute_state_machine": True}}
    response = requests.post(f"{endpoint}/moto-api/config", json=body, timeout=10)
    response.raise_for_status()


@pytest.fixture(scope="module")
def step_functions() -> Iterator[StepFunctions]:
    """moto with Step Functions executing and the real handler behind
    ``slatelake-local-*`` functions; this process's S3 pointed at it."""
    proc, endpoint = start_moto_server({"SLATELAKE_MOTO_HANDLERS": "1", **S3_ENV})
    try:
        _enable_execution(endpoint)
        with pytest.MonkeyPatch.context() as mp:
            for key, value in {**S3_ENV, "AWS_ENDPOINT_URL": endpoint}.items():
                mp.setenv(key, value)
            yield StepFunctions(endpoint)
    finally:
        proc.terminate()
        proc.wait(10)
