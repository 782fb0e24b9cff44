"""The layer build and the SAM template.

The builds (``long``: they download the pinned wheels from the package
registry, or install SAM) check that the layer for this machine's
architecture and Python imports and runs the handler with nothing but the
layer on sys.path, that the deploy target (python3.12, arm64) stays under
Lambda's 250 MB unzipped limit, and that ``sam build`` alone builds layer and
function. The rest read the real template: a piece missing fails them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import slatelake
from tests.functions.conftest import FUNCTION_DIR, ROOT, powertools_env, template

LIMIT = 250 * 1024 * 1024


def _build(out: Path, *args: str) -> dict:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "layers" / "build_layer.py"), "--out", str(out), "--json"]
        + list(args),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


@pytest.mark.long
def test_the_deploy_target_layer_is_under_the_unzipped_limit(tmp_path: Path) -> None:
    report = _build(tmp_path / "layer", "--arch", "arm64", "--python", "3.12")
    assert report["arch"] == "arm64" and report["python"] == "3.12"
    assert 50 * 1024 * 1024 < report["total_bytes"] < LIMIT
    site = tmp_path / "layer" / "python"
    assert any(p.name.startswith("_duckdb.cpython-312-aarch64") for p in site.iterdir())
    assert (site / "slatelake" / "__init__.py").is_file()


@pytest.mark.long
def test_the_host_layer_imports_and_runs_the_handler_alone(tmp_path: Path) -> None:
    import platform

    arch = "arm64" if platform.machine() in ("aarch64", "arm64") else "x86_64"
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    report = _build(tmp_path / "layer", "--arch", arch, "--python", python)
    assert report["total_bytes"] < LIMIT
    # compiled by this interpreter, as bytecode Lambda's read-only /opt never rechecks
    assert report["compiled_with"] == sys.executable
    tag = sys.implementation.cache_tag
    pyc = tmp_path / "layer" / "python" / "slatelake" / "__pycache__" / f"__init__.{tag}.pyc"
    assert int.from_bytes(pyc.read_bytes()[4:8], "little") == 1  # hash-based, unchecked
    lake = (tmp_path / "lake").as_uri()
    with slatelake.connect(lake, data_path=f"{tmp_path / 'data'}/") as s:
        s.sql("CREATE TABLE t (id INTEGER)")
        s.sql("INSERT INTO t VALUES (1), (2)")
    script = f"""
import json, sys
sys.path[:0] = [{str(tmp_path / "layer" / "python")!r}, {str(FUNCTION_DIR)!r}]
import slatelake, duckdb
assert slatelake.__file__.startswith({str(tmp_path)!r}), slatelake.__file__
assert duckdb.__file__.startswith({str(tmp_path)!r}), duckdb.__file__
from slatelake.ducklake.extensions import connect
con = connect()
spill = con.execute("SELECT current_setting('temp_directory')").fetchone()[0]
assert spill == {str(tmp_path / "spill")!r}, spill
loaded = sorted(r[0] for r in con.execute(
    "SELECT extension_name FROM duckdb_extensions() WHERE loaded"
).fetchall())
import app
class Ctx:
    aws_request_id = "layer-check"
    function_name = "slatelake-maintenance"
    memory_limit_in_mb = 1769
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:slatelake"
    def get_remaining_time_in_millis(self):
        return 600000
event = {{"lake": {lake!r}, "options": {{"MAINTENANCE_FLUSH_INLINED_DATA": "true"}}}}
out = app.handler(event, Ctx())
print("RESULT " + json.dumps({{"loaded": loaded, "out": out}}))
"""
    # -S: no site-packages, so only the layer and the standard library are importable.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    proc = subprocess.run(
        [sys.executable, "-S", "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        env={
            **env,
            "HOME": str(tmp_path),
            "SLATELAKE_DUCKDB_TEMP_DIRECTORY": str(tmp_path / "spill"),
            "SLATELAKE_LAKE": lake,  # the stack's lake: the only one it maintains
            **powertools_env(),  # as the template's Globals set them
        },
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
    result = json.loads(line.removeprefix("RESULT "))
    assert {"ducklake", "httpfs"} <= set(result["loaded"])
    assert result["out"]["ok"] is True, result["out"]
    flush = next(s for s in result["out"]["result"]["steps"] if s["step"] == "flush_inlined_data")
    assert flush["status"] == "ran" and flush["counts"]["rows_flushed"] == 2


@pytest.mark.long
@pytest.mark.timeout(600)
def test_the_template_passes_sam_validate_lint() -> None:
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts" / "sam"), "validate", "--lint", "-t", "template.yaml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert "is a valid SAM Template" in proc.stdout + proc.stderr


@pytest.mark.long
@pytest.mark.timeout(900)
def test_sam_build_alone_builds_the_layer_and_the_function(tmp_path: Path) -> None:
    """`sam build` runs layers/Makefile for the layer (python3.12 wheels for
    arm64, no Docker) and copies the function: the whole build before deploy."""
    out = tmp_path / "sam"
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts" / "sam"), "build", "-t", "template.yaml"]
        + ["--build-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    site = out / "SlatelakeLayer" / "python"
    assert (site / "slatelake" / "maintenance" / "api.py").is_file()
    assert any(p.name.startswith("_duckdb.cpython-312-aarch64") for p in site.iterdir())
    assert (site / "aws_lambda_powertools").is_dir()
    function = out / "MaintenanceFunction"
    assert {p.name for p in FUNCTION_DIR.glob("*.py")} <= {p.name for p in function.iterdir()}


# -- the template, read as data ---------------------------------------------------


def _resources() -> dict[str, Any]:
    return template()["Resources"]


def _function() -> dict[str, Any]:
    return _resources()["MaintenanceFunction"]["Properties"]


def test_the_schedule_is_an_eventbridge_scheduler_schedule_with_retries_and_a_dlq() -> None:
    schedule = _function()["Events"]["MaintenanceSchedule"]
    assert schedule["Type"] == "ScheduleV2"
    props = schedule["Properties"]
    assert props["ScheduleExpression"] == {"Ref": "Schedule"}
    assert props["RetryPolicy"]["MaximumRetryAttempts"] >= 1
    assert 60 <= props["RetryPolicy"]["MaximumEventAgeInSeconds"] <= 86400
    assert props["DeadLetterConfig"] == {"Arn": {"GetAtt": "FailedInvocationsQueue.Arn"}}
    assert '"trigger": "scheduled"' in props["Input"]["Sub"]


def test_a_failed_scheduled_invocation_lands_in_the_failure_queue() -> None:
    """The schedule invokes asynchronously: a tick that raises is retried by
    Lambda, then sent with its error to the same queue as undeliverable ones."""
    config = _function()["EventInvokeConfig"]
    assert config["MaximumRetryAttempts"] in (0, 1, 2)
    on_failure = config["DestinationConfig"]["OnFailure"]
    assert on_failure == {"Type": "SQS", "Destination": {"GetAtt": "FailedInvocationsQueue.Arn"}}
    assert _resources()["FailedInvocationsQueue"]["Type"] == "AWS::SQS::Queue"


def test_logs_are_json_at_the_configured_level() -> None:
    logging = _function()["LoggingConfig"]
    assert logging["LogFormat"] == "JSON"
    assert logging["ApplicationLogLevel"] == {"Ref": "LogLevel"}
    assert template()["Parameters"]["LogLevel"]["Default"] == "INFO"


def test_powertools_service_and_namespace_are_set_once_for_every_function() -> None:
    """In Globals, from the one mapping the alarms and the dashboard read too;
    the function's own environment does not set them again."""
    names = template()["Mappings"]["Metrics"]["Names"]
    variables = template()["Globals"]["Function"]["Environment"]["Variables"]
    assert variables["POWERTOOLS_SERVICE_NAME"] == {"FindInMap": ["Metrics", "Names", "Service"]}
    assert variables["POWERTOOLS_METRICS_NAMESPACE"] == {
        "FindInMap": ["Metrics", "Names", "Namespace"]
    }
    own = _function()["Environment"]["Variables"]
    assert not [k for k in own if k.startswith("POWERTOOLS_")]
    text = (ROOT / "template.yaml").read_text()
    for value in names.values():
        spelled = re.findall(rf"(?<![\w-]){re.escape(value)}(?![\w-])", text)
        assert len(spelled) == 1, f"{value!r} is spelled {len(spelled)} times in template.yaml"


def _alarms() -> dict[str, dict[str, Any]]:
    return {
        name: resource["Properties"]
        for name, resource in _resources().items()
        if resource["Type"] == "AWS::CloudWatch::Alarm"
    }


def test_every_alarm_notifies_the_topic_parameter_when_one_is_given() -> None:
    assert template()["Parameters"]["AlarmTopicArn"]["Default"] == ""
    assert template()["Conditions"]["HasAlarmTopic"] == {
        "Not": [{"Equals": [{"Ref": "AlarmTopicArn"}, ""]}]
    }
    alarms = _alarms()
    assert {"PassFailedAlarm", "NoPassAlarm", "FunctionErrorsAlarm"} <= set(alarms)
    for name, props in alarms.items():
        assert props["AlarmActions"] == {
            "If": ["HasAlarmTopic", [{"Ref": "AlarmTopicArn"}], {"Ref": "AWS::NoValue"}]
        }, name


def test_silence_from_the_schedule_breaches_and_failures_alarm() -> None:
    """No PassRuns datum for the periods given means no tick reached the
    function: missing data breaches. Failures are counted where they happen
    (PassFailed) and where Lambda sees them (Errors, timeouts included)."""
    alarms = _alarms()
    silent = alarms["NoPassAlarm"]
    assert (silent["MetricName"], silent["Statistic"]) == ("PassRuns", "SampleCount")
    assert silent["ComparisonOperator"] == "LessThanThreshold" and silent["Threshold"] == 1
    assert silent["TreatMissingData"] == "breaching"
    assert silent["EvaluationPeriods"] == silent["DatapointsToAlarm"] == {"Ref": "SilentTicks"}
    errors = alarms["FunctionErrorsAlarm"]
    assert (errors["Namespace"], errors["MetricName"]) == ("AWS/Lambda", "Errors")
    assert errors["Dimensions"] == [
        {"Name": "FunctionName", "Value": {"Ref": "MaintenanceFunction"}}
    ]
    for name in ("PassFailedAlarm", "FunctionErrorsAlarm", "LakeRefusedAlarm"):
        assert alarms[name]["TreatMissingData"] == "notBreaching", name  # silence is no failure


def test_sam_build_builds_the_layer_through_the_makefile() -> None:
    """BuildMethod makefile on the layer; the Makefile's target for it calls
    build_layer.py for the deploy target, from wherever sam runs make."""
    layer = _resources()["SlatelakeLayer"]
    assert layer["Metadata"]["BuildMethod"] == "makefile"
    assert layer["Metadata"]["BuildArchitecture"] == "arm64"
    assert layer["Properties"]["ContentUri"].rstrip("/") == "layers"
    artifacts = "/tmp/artifacts-dir"
    proc = subprocess.run(
        ["make", "-n", "-f", str(ROOT / "layers" / "Makefile"), "build-SlatelakeLayer"],
        cwd="/",
        env={**os.environ, "ARTIFACTS_DIR": artifacts},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    command = proc.stdout.replace('"', "").split()
    assert str(ROOT / "layers" / "build_layer.py") in command
    assert " ".join(command).endswith(f"--arch arm64 --python 3.12 --out {artifacts}")


def test_the_scheduled_input_sample_is_what_the_schedule_sends() -> None:
    from tests.functions.conftest import EVENTS, render_sub

    props = _function()["Events"]["MaintenanceSchedule"]["Properties"]
    sample = json.loads((EVENTS / "scheduled-input.json").read_text())
    params = {"LakeBucket": "my-lake-bucket", "LakePrefix": "lakes/sales"}
    params |= {"DataBucket": "my-lake-bucket", "DataPrefix": "data/sales"}
    default = json.loads(template()["Parameters"]["MaintenanceOptions"]["Default"])
    assert default == {"MAINTENANCE_TABLE_BATCHES": "true"}  # the lake's policy decides the rest
    assert json.loads(render_sub(props["Input"], params))["options"] == default
    # The sample is a stack deployed with MaintenanceOptions of its own.
    params["MaintenanceOptions"] = json.dumps(sample["options"])
    assert json.loads(render_sub(props["Input"], params)) == sample
