"""The maintenance Lambda end to end on moto's S3: every event shape, the pass
and its metrics, the other actions, and how failures show."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
import pytest

import slatelake
from slatelake import maintenance
from slatelake.maintenance.options import STEPS
from slatelake.maintenance.report import FAILED, RAN, SKIPPED
from tests.conftest import subprocess_env
from tests.functions.conftest import (
    EVENTS,
    FUNCTION_DIR,
    FakeContext,
    MetricKey,
    contents,
    deploy,
    emf_lines,
    load_event,
    metric_key,
)
from tests.maintenance.test_pass import CONFIGURED

# one worker builds the shared lake once and runs every test on it (scripts/test: --dist loadgroup)
pytestmark = pytest.mark.xdist_group("pristine-s3-lake")

ALL_STEPS = {**CONFIGURED, "MAINTENANCE_TABLE_BATCHES": "true"}
# One step, for what is about the lease rather than the steps.
FLUSH = {"MAINTENANCE_FLUSH_INLINED_DATA": "true", "MAINTENANCE_TABLE_BATCHES": "true"}


def _objects(bucket: str, prefix: str) -> list[str]:
    s3 = boto3.client("s3")
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return [o["Key"] for page in pages for o in page.get("Contents", [])]


def test_the_scheduled_envelope_runs_the_pass_the_environment_configures(
    app: ModuleType, s3_lake: tuple[str, str, list[str]], env_clean: pytest.MonkeyPatch
) -> None:
    lake, data, names = s3_lake
    before = contents(lake, names)
    env_clean.setenv("SLATELAKE_LAKE", lake)
    env_clean.setenv("SLATELAKE_DATA_PATH", data)
    env_clean.setenv("MAINTENANCE_FLUSH_INLINED_DATA", "true")
    event = json.loads((EVENTS / "scheduled.json").read_text())
    out = app.handler(event, FakeContext())
    assert out["ok"] is True, out
    report = out["result"]
    assert report["trigger"] == "scheduled"
    steps = {s["step"]: s for s in report["steps"]}
    assert steps["flush_inlined_data"]["status"] == RAN
    assert steps["flush_inlined_data"]["counts"]["rows_flushed"] == 3 * len(names)
    assert steps["merge_adjacent_files"]["status"] == SKIPPED
    assert contents(lake, names) == before


@pytest.mark.parametrize(
    "sample", ["scheduled-input.json", "manual-maintenance.json"], ids=["schedule", "manual"]
)
def test_sample_pass_events_answer_with_the_cli_report(
    app: ModuleType, s3_lake: tuple[str, str, list[str]], env_clean: pytest.MonkeyPatch, sample: str
) -> None:
    lake, data, names = s3_lake
    before = contents(lake, names)
    event = load_event(sample, lake, data)
    out = app.handler(event, FakeContext())
    assert out["ok"] is True, out
    assert out["action"] == "maintenance"
    report = out["result"]
    assert report["trigger"] == event.get("trigger", "manual")
    assert tuple(s["step"] for s in report["steps"]) == STEPS
    assert not [s for s in report["steps"] if s["status"] == FAILED]
    assert contents(lake, names) == before
    status = app.handler(load_event("manual-status.json", lake), FakeContext())
    assert status["ok"] is True
    assert status["result"][0] == report  # the status window's newest pass is this one


def test_table_batches_log_progress_with_rss_and_every_metric_the_pass_emits_is_charted(
    app: ModuleType,
    s3_lake: tuple[str, str, list[str]],
    env_clean: pytest.MonkeyPatch,
    log_lines: Any,
    capsys: pytest.CaptureFixture[str],
    dashboard_metrics: set[MetricKey],
) -> None:
    lake, data, names = s3_lake
    maintenance.set_policy(lake, {"enabled": "true"})  # a schedule deletes only then
    event = {"trigger": "scheduled", "lake": lake, "options": ALL_STEPS}
    capsys.readouterr()
    out = app.handler(event, FakeContext())
    assert out["ok"] is True, out
    lines = log_lines()
    for name in names:
        for step in ("flush_inlined_data", "merge_adjacent_files", "rewrite_data_files"):
            hits = [x for x in lines if x["message"] == f"{step}: main.{name}"]
            assert len(hits) == 1, (step, name)
            assert hits[0]["rss_mb"] > 0 and hits[0]["hwm_mb"] >= hits[0]["rss_mb"] * 0.5
            assert hits[0]["correlation_id"] == lines[0]["correlation_id"]
    emitted = set()
    for doc in emf_lines(capsys.readouterr().out):
        assert doc["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "Slatelake"
        assert doc["Lake"] == lake
        for directive in doc["_aws"]["CloudWatchMetrics"]:
            for dims in directive["Dimensions"]:
                for metric in directive["Metrics"]:
                    assert isinstance(doc[metric["Name"]], int | float | list)
                    emitted.add(metric_key(metric["Name"], {d: doc[d] for d in dims}))
    # Both ways, for every kind of invocation: tests/functions/test_dashboard_metrics.py.
    uncharted = emitted - dashboard_metrics
    assert emitted and not uncharted, f"the pass emits metrics not on the dashboard: {uncharted}"


def test_a_pass_beside_a_running_holder_never_fences_it(
    app: ModuleType, s3_lake: tuple[str, str, list[str]], env_clean: pytest.MonkeyPatch
) -> None:
    lake, data, names = s3_lake
    before = contents(lake, names)
    holder = subprocess.Popen(
        [sys.executable, "-m", "slatelake.cli", "hold", lake, "--poll", "0.2", "--json"],
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out = app.handler({"lake": lake, "options": ALL_STEPS}, FakeContext())
        assert out["ok"] is True, out
        with slatelake.connect(lake, read_only=True) as s:
            last = s.lake.summary().last_slot
        _wait_folded(lake, last)
        assert holder.poll() is None, holder.stderr.read() if holder.stderr else ""
    finally:
        holder.terminate()
        stdout, stderr = holder.communicate(timeout=60)
    assert holder.returncode == 0, stderr
    assert "fenced" not in (stdout + stderr).lower()
    assert contents(lake, names) == before


def _wait_folded(lake: str, slot: int, timeout: float = 60.0) -> None:
    import time

    from slatelake.catalog.lake import Lake

    deadline = time.monotonic() + timeout
    while True:
        with Lake.open(lake, read_only=True) as handle:
            cursor = handle.summary().fold_cursor
        if cursor >= slot:
            return
        assert time.monotonic() < deadline, f"fold cursor {cursor} never reached slot {slot}"
        time.sleep(0.3)


class CountingContext(FakeContext):
    """Plenty of time for the first ``checks`` looks at the clock, then none."""

    def __init__(self, checks: int) -> None:
        super().__init__()
        self.checks = checks

    def get_remaining_time_in_millis(self) -> int:
        self.checks -= 1
        return 900_000 if self.checks >= 0 else 0


def test_a_short_deadline_stops_between_tables_and_the_next_tick_finishes(
    app: ModuleType, s3_lake: tuple[str, str, list[str]], env_clean: pytest.MonkeyPatch
) -> None:
    lake, data, names = s3_lake
    before = contents(lake, names)
    options = {"MAINTENANCE_FLUSH_INLINED_DATA": "true", "MAINTENANCE_TABLE_BATCHES": "true"}
    event = {"trigger": "scheduled", "lake": lake, "options": options}
    # Clock looks: when the invocation starts (its store deadline), before the
    # step, then before each table; two tables get done.
    first = app.handler(event, CountingContext(checks=4))
    assert first["ok"] is True, first
    flush = next(s for s in first["result"]["steps"] if s["step"] == "flush_inlined_data")
    assert first["result"]["work_pending"] is True
    assert "deadline" in flush["detail"] and "2 of 4 tables" in flush["detail"], flush
    assert flush["counts"]["rows_flushed"] == 2 * 3
    second = app.handler(event, FakeContext())
    flush2 = next(s for s in second["result"]["steps"] if s["step"] == "flush_inlined_data")
    assert second["result"]["work_pending"] is False
    assert flush2["counts"]["rows_flushed"] == 2 * 3  # exactly the rest
    assert contents(lake, names) == before


def test_overlapping_invocations_never_run_two_passes(
    app: ModuleType, s3_lake: tuple[str, str, list[str]], env_clean: pytest.MonkeyPatch
) -> None:
    """While a manual pass runs (at its first step), a scheduled invoke in another
    process (another Lambda container) finds the lease and reports the skip."""
    lake, data, names = s3_lake
    scheduled: list[dict[str, Any]] = []
    script = (
        "import json, sys\n"
        f"sys.path.insert(0, {str(FUNCTION_DIR)!r})\n"
        "import app\n"
        "from tests.functions.conftest import FakeContext\n"
        "out = app.handler(json.loads(sys.argv[1]), FakeContext())\n"
        "print('RESULT ' + json.dumps(out))\n"
    )

    class Overlap(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.getMessage() == "step flush_inlined_data start" and not scheduled:
                event = json.dumps({"trigger": "scheduled", "lake": lake, "options": FLUSH})
                proc = subprocess.run(
                    [sys.executable, "-c", script, event],
                    env=subprocess_env(),
                    capture_output=True,
                    text=True,
                    timeout=120,
                )
                line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
                scheduled.append(json.loads(line.removeprefix("RESULT ")))

    hook = Overlap()
    app.logger.addHandler(hook)
    try:
        manual = app.handler({"lake": lake, "options": FLUSH}, FakeContext())
    finally:
        app.logger.removeHandler(hook)
    assert manual["ok"] is True, manual
    assert len(scheduled) == 1
    assert scheduled[0]["ok"] is True and scheduled[0]["result"] is None
    assert "already running" in scheduled[0]["skipped"]
    window = app.handler({"action": "status", "lake": lake}, FakeContext())["result"]
    assert [p["trigger"] for p in window] == ["manual"]  # one pass ran, not two


@pytest.mark.parametrize(
    ("event", "error_type", "words"),
    [
        ({"action": "maintenance"}, "InvocationError", "no lake"),
        ({"action": "vacuum", "lake": "LAKE"}, "InvocationError", "unknown action 'vacuum'"),
        (
            {"lake": "LAKE", "options": {"MAINTENANCE_FROBNICATE": "true"}},
            "MaintenanceConfigError",
            "MAINTENANCE_FROBNICATE",
        ),
        (
            {"lake": "LAKE", "options": {"MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THEN": "1 day"}},
            "MaintenanceConfigError",
            "older_then",
        ),
        ({"lake": "LAKE", "colour": "blue"}, "InvocationError", "'colour'"),
        (
            {"action": "census", "lake": "LAKE", "options": {"deep": 1}},
            "MaintenanceConfigError",  # CensusRequest's refusal, as the CLI's
            "deep",
        ),
        (
            {"detail-type": "Object Created", "source": "aws.s3"},
            "InvocationError",
            "Object Created",
        ),
        (["not", "an", "object"], "InvocationError", "not a JSON object"),
    ],
    ids=[
        "missing-lake",
        "unknown-action",
        "unknown-option",
        "misspelled-parameter",
        "unknown-key",
        "unknown-action-option",
        "foreign-event",
        "not-an-object",
    ],
)
def test_bad_manual_events_are_answered_without_touching_the_lake(
    app: ModuleType,
    s3_bucket: str,
    env_clean: pytest.MonkeyPatch,
    event: Any,
    error_type: str,
    words: str,
) -> None:
    lake = f"s3://{s3_bucket}/lakes/untouched"
    if isinstance(event, dict) and event.get("lake") == "LAKE":
        event = {**event, "lake": lake}
        deploy(env_clean, lake)
    out = app.handler(event, FakeContext())
    assert out["ok"] is False
    assert out["error"]["type"] == error_type
    assert words in out["error"]["message"]
    assert _objects(s3_bucket, "") == []


def test_a_lake_that_does_not_exist_is_named_and_never_created(
    app: ModuleType, s3_bucket: str, env_clean: pytest.MonkeyPatch
) -> None:
    lake = f"s3://{s3_bucket}/lakes/nowhere"
    deploy(env_clean, lake)
    out = app.handler({"lake": lake}, FakeContext())
    assert out == {
        "ok": False,
        "error": {"type": "NotFoundError", "message": out["error"]["message"]},
    }
    assert lake in out["error"]["message"] and "slatelake init" in out["error"]["message"]
    assert _objects(s3_bucket, "") == []


def _emf_to_cloudwatch(cloudwatch: Any, docs: list[dict[str, Any]]) -> int:
    """What CloudWatch Logs does with EMF lines: one datum per metric and dimension set."""
    sent = 0
    for doc in docs:
        for directive in doc["_aws"]["CloudWatchMetrics"]:
            units = {m["Name"]: m.get("Unit", "None") for m in directive["Metrics"]}
            for dims in directive["Dimensions"]:
                data = [
                    {
                        "MetricName": name,
                        "Dimensions": [{"Name": d, "Value": str(doc[d])} for d in dims],
                        "Value": float(value),
                        "Unit": unit,
                    }
                    for name, unit in units.items()
                    for value in (doc[name] if isinstance(doc[name], list) else [doc[name]])
                ]
                cloudwatch.put_metric_data(Namespace=directive["Namespace"], MetricData=data)
                sent += len(data)
    return sent


def test_cloudwatch_answers_the_dashboard_queries_of_a_pass_and_holds_the_alarms(
    app: ModuleType,
    s3_lake: tuple[str, str, list[str]],
    env_clean: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    moto_endpoint: str,
) -> None:
    """The template's schedule (EventBridge Scheduler on moto, with its retry
    policy and dead-letter queue) drives a pass; its EMF, delivered to
    CloudWatch on moto, answers every query on the template's dashboard for a
    metric a pass emits (every other invocation's: test_dashboard_metrics.py);
    the dashboard and the alarms on the function's own metrics are accepted,
    each watching a metric the pass emitted."""
    import datetime as dt

    from tests.functions.conftest import render_sub, template

    lake, data, names = s3_lake
    maintenance.set_policy(lake, {"enabled": "true"})  # a schedule deletes only then
    bucket, prefix = lake.removeprefix("s3://").split("/", 1)
    params = {"LakeBucket": bucket, "LakePrefix": prefix, "DataBucket": bucket}
    params |= {"DataPrefix": data.removeprefix(f"s3://{bucket}/").rstrip("/")}
    params |= {"SchedulePeriodSeconds": "3600", "PendingTicks": "3", "SilentTicks": "2"}
    params |= {"Schedule": "rate(1 hour)", "FoldPeriodSeconds": "300"}
    params |= {"MaintenanceFunction": "slatelake-pass", "FoldFunction": "slatelake-fold"}
    params |= {"MaintenanceOptions": json.dumps(ALL_STEPS)}  # every step the dashboard charts
    resources = template()["Resources"]
    schedule = resources["MaintenanceFunction"]["Properties"]["Events"]["MaintenanceSchedule"]
    assert schedule["Type"] == "ScheduleV2"
    props = schedule["Properties"]
    sqs = boto3.client("sqs", endpoint_url=moto_endpoint)
    queue = sqs.create_queue(QueueName=f"failed-{bucket}")["QueueUrl"]
    dlq = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]
    scheduler = boto3.client("scheduler", endpoint_url=moto_endpoint)
    scheduler.create_schedule(
        Name=f"slatelake-{bucket}",
        ScheduleExpression=render_sub(props["ScheduleExpression"], params),
        FlexibleTimeWindow={"Mode": "OFF"},
        Target={
            "Arn": FakeContext().invoked_function_arn,
            "RoleArn": "arn:aws:iam::123456789012:role/slatelake-scheduler",
            "Input": render_sub(props["Input"], params),
            "RetryPolicy": props["RetryPolicy"],
            "DeadLetterConfig": {"Arn": dlq["QueueArn"]},
        },
    )
    target = scheduler.get_schedule(Name=f"slatelake-{bucket}")["Target"]
    capsys.readouterr()
    out = app.handler(json.loads(target["Input"]), FakeContext())
    assert out["ok"] is True and out["result"]["trigger"] == "scheduled", out
    cloudwatch = boto3.client("cloudwatch", endpoint_url=moto_endpoint)
    docs = emf_lines(capsys.readouterr().out)
    assert _emf_to_cloudwatch(cloudwatch, docs) > 20
    sent = {
        metric_key(metric["Name"], {d: doc[d] for d in dims})
        for doc in docs
        for directive in doc["_aws"]["CloudWatchMetrics"]
        for dims in directive["Dimensions"]
        for metric in directive["Metrics"]
    }
    body = render_sub(resources["MaintenanceDashboard"]["Properties"]["DashboardBody"], params)
    cloudwatch.put_dashboard(DashboardName="slatelake", DashboardBody=body)
    now = dt.datetime.now(dt.UTC)
    queried = 0
    for widget in json.loads(body)["widgets"]:
        for row in widget["properties"]["metrics"]:
            pairs = [x for x in row[2:] if isinstance(x, str)]
            if metric_key(row[1], dict(zip(pairs[::2], pairs[1::2], strict=True))) not in sent:
                continue  # another invocation's metric
            queried += 1
            stats = cloudwatch.get_metric_statistics(
                Namespace=row[0],
                MetricName=row[1],
                Dimensions=[
                    {"Name": k, "Value": v} for k, v in zip(pairs[::2], pairs[1::2], strict=True)
                ],
                StartTime=now - dt.timedelta(minutes=10),
                EndTime=now + dt.timedelta(minutes=10),
                Period=3600,
                Statistics=["SampleCount"],
            )
            assert stats["Datapoints"], f"dashboard metric {row[1]} {pairs} has no data"
    assert queried > 50
    topic = boto3.client("sns", endpoint_url=moto_endpoint).create_topic(Name="alarms")
    params["AlarmTopicArn"] = topic["TopicArn"]
    for name in ("PassFailedAlarm", "WorkPendingAlarm", "NoPassAlarm"):
        props = resources[name]["Properties"]
        optional = {
            key: int(render_sub(props[key], params))
            for key in ("DatapointsToAlarm",)
            if key in props
        }
        cloudwatch.put_metric_alarm(
            AlarmName=name,
            Namespace=render_sub(props["Namespace"], params),
            MetricName=props["MetricName"],
            Dimensions=[
                {"Name": d["Name"], "Value": render_sub(d["Value"], params)}
                for d in props["Dimensions"]
            ],
            Statistic=props["Statistic"],
            Period=3600,
            EvaluationPeriods=int(render_sub(props["EvaluationPeriods"], params)),
            Threshold=float(props["Threshold"]),
            ComparisonOperator=props["ComparisonOperator"],
            TreatMissingData=props["TreatMissingData"],
            AlarmActions=[topic["TopicArn"]],
            **optional,
        )
        alarm = cloudwatch.describe_alarms(AlarmNames=[name])["MetricAlarms"][0]
        assert {"Name": "Lake", "Value": lake} in alarm["Dimensions"]
        metric = cloudwatch.list_metrics(
            Namespace=alarm["Namespace"],
            MetricName=props["MetricName"],
            Dimensions=alarm["Dimensions"],
        )
        assert metric["Metrics"], f"{name} watches a metric the handler never emits"


def test_a_merge_the_lambda_submits_is_executed_by_the_holder(
    app: ModuleType, s3_bucket: str, env_clean: pytest.MonkeyPatch
) -> None:
    """No holder: the submitted merge reports pending within its timeout. A
    holder (`slatelake hold`) starts: the next invoke adopts the merge, the
    holder's compactor executes it, and it reports completed."""
    from slatelake.catalog.folder import Folder
    from slatelake.catalog.lake import Lake
    from slatelake.store.census import CensusRequest, store_census
    from slatelake.store.db import COMPACTOR_POLL_ENV
    from slatelake.store.location import LakeLocation
    from tests.catalog.test_census import churn, settled, wait_for

    env_clean.setenv(COMPACTOR_POLL_ENV, "100ms")
    lake = f"s3://{s3_bucket}/lakes/merge"
    deploy(env_clean, lake)
    Lake.create(lake).close()
    folder = Folder(LakeLocation.parse(lake), margin_s=0)
    try:
        churn(lake, folder, folds=8)
        wait_for("two sorted runs in current", settled(lake, "current", 2), timeout=60)
    finally:
        folder.close()
    runs_before = store_census(lake, CensusRequest(list_objects=False)).row("current")
    event = {"action": "compact_store", "lake": lake}
    event["options"] = {"subspace": "current", "timeout": "2s"}
    pending = app.handler(event, FakeContext())
    assert pending["ok"] is True, pending
    merge = pending["result"]["merges"][0]
    assert (pending["result"]["outcome"], merge["outcome"]) == ("pending", "pending"), merge
    assert pending["result"]["waited_s"] < 10
    refused = app.handler(
        {**event, "options": {**event["options"], "require_completed": True}}, FakeContext()
    )
    assert refused["ok"] is False and refused["error"]["type"] == "MergeIncompleteError"
    assert "pending" in refused["error"]["message"]
    holder = subprocess.Popen(
        [sys.executable, "-m", "slatelake.cli", "hold", lake, "--poll", "0.2"],
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        done = app.handler(
            {**event, "options": {"subspace": "current", "timeout": "60s"}}, FakeContext()
        )
    finally:
        holder.terminate()
        _, stderr = holder.communicate(timeout=60)
    assert holder.returncode == 0, stderr
    assert done["ok"] is True, done
    merge = done["result"]["merges"][0]
    assert merge["outcome"] == "completed", merge
    assert merge["sorted_runs_before"] == runs_before.sorted_runs >= 2
    assert merge["sorted_runs_after"] == 1
    after = store_census(lake, CensusRequest(list_objects=False)).row("current")
    assert after.sorted_runs == 1 and after.bytes <= runs_before.bytes


def test_census_and_compact_store_samples_answer_with_the_cli_json(
    app: ModuleType, s3_lake: tuple[str, str, list[str]], env_clean: pytest.MonkeyPatch
) -> None:
    """The census sample answers with every subspace's row and the object
    totals; the store-merge sample on a lake no holder has compacted finds no
    sorted runs anywhere: every tree skipped with its reason, at once."""
    lake, data, names = s3_lake
    before = contents(lake, names)
    census = app.handler(load_event("manual-census.json", lake), FakeContext())
    assert census["ok"] is True, census
    assert set(census) == {"ok", "action", "result"}  # the CLI's --json object, nothing beside
    rows = {r["subspace"]: r for r in census["result"]["subspaces"]}
    assert list(rows) == ["sys", "snapshot", "current", "history", "inline", "index", "unknown"]
    assert all(r["live_keys"] is None for r in rows.values())  # "live": false
    found = census["result"]
    assert found["objects"]["total"]["objects"] > 0 and found["objects_error"] is None
    merged = app.handler(load_event("manual-compact-store.json", lake), FakeContext())
    assert merged["ok"] is True, merged
    assert merged["result"]["outcome"] == "skipped"
    assert {m["subspace"] for m in merged["result"]["merges"]} >= set(rows) - {"unknown"}
    assert all("no sorted runs" in m["reason"] for m in merged["result"]["merges"])
    assert contents(lake, names) == before


def _emitted(out: str, metric: str) -> list[tuple[str, Any]]:
    """(Lake, value) of every EMF document carrying ``metric``."""
    return [(d.get("Lake"), d[metric]) for d in emf_lines(out) if metric in d]


# With a change-set cap no snapshot fits under, expiry fails inside its step.
FAILING_STEP = {"MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN": "1 millisecond"}


def test_a_scheduled_pass_with_a_failed_step_raises_after_its_metrics(
    app: ModuleType,
    small_lake: str,
    env_clean: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Lambda's Errors, its retry and the failure queue see the tick; the
    alarm's PassFailed is out before the raise, and the pass is recorded."""
    lake = maintenance.canonical_lake(small_lake)
    maintenance.set_policy(lake, {"enabled": "true"})  # a schedule deletes only then
    env_clean.setenv("SLATELAKE_MAX_CHANGESET_OPS", "1")
    capsys.readouterr()
    with pytest.raises(app.PassFailedError, match="expire_snapshots: .*operation limit"):
        app.handler({"trigger": "scheduled", "options": FAILING_STEP}, FakeContext())
    out = capsys.readouterr().out
    assert _emitted(out, "PassFailed") == [(lake, [1.0])]
    assert _emitted(out, "PassRuns") == [(lake, [1.0])]
    assert ("expire_snapshots", [1.0]) in [
        (d["Step"], d["StepFailed"]) for d in emf_lines(out) if "StepFailed" in d
    ]
    window = app.handler({"action": "status"}, FakeContext())["result"]
    assert window[0]["trigger"] == "scheduled"
    assert window[0]["steps"][0]["status"] == FAILED


def test_a_manual_pass_with_a_failed_step_answers_with_its_report(
    app: ModuleType,
    small_lake: str,
    env_clean: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    lake = maintenance.canonical_lake(small_lake)
    env_clean.setenv("SLATELAKE_MAX_CHANGESET_OPS", "1")
    capsys.readouterr()
    out = app.handler({"options": FAILING_STEP}, FakeContext())
    assert out["ok"] is True, out
    expire = out["result"]["steps"][0]
    assert (expire["step"], expire["status"]) == ("expire_snapshots", FAILED)
    assert _emitted(capsys.readouterr().out, "PassFailed") == [(lake, [1.0])]


@pytest.mark.parametrize(
    ("fields", "error_type"),
    [
        ({"options": {"MAINTENANCE_FROBNICATE": "true"}}, "MaintenanceConfigError"),
        ({"options": {"MAINTENANCE_INTERVAL": "1h"}}, "MaintenanceConfigError"),
        ({"options": {"MAINTENANCE_MERGE_ADJACENT_FILES": [1]}}, "MaintenanceConfigError"),
        ({"colour": "blue"}, "InvocationError"),
        ({"action": "census"}, "InvocationError"),
    ],
    ids=["unknown-option", "interval", "not-a-value", "unknown-key", "not-the-pass"],
)
def test_a_scheduled_tick_with_refused_options_raises_after_counting_a_failure(
    app: ModuleType,
    s3_bucket: str,
    env_clean: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    fields: dict[str, Any],
    error_type: str,
) -> None:
    """A schedule whose every tick is refused must not look like a quiet one:
    it raises (Lambda's Errors) and counts PassFailed against the stack's lake,
    having touched nothing."""
    lake = f"s3://{s3_bucket}/lakes/untouched"
    deploy(env_clean, lake)
    capsys.readouterr()
    with pytest.raises(slatelake.SlatelakeError) as raised:
        app.handler({"trigger": "scheduled", **fields}, FakeContext())
    assert type(raised.value).__name__ == error_type
    assert _emitted(capsys.readouterr().out, "PassFailed") == [(lake, [1.0])]
    assert _objects(s3_bucket, "") == []


def test_a_refused_manual_event_answers_and_counts_no_failure(
    app: ModuleType,
    s3_bucket: str,
    env_clean: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The caller's mistake is the caller's answer, not the alarm's."""
    lake = f"s3://{s3_bucket}/lakes/untouched"
    deploy(env_clean, lake)
    capsys.readouterr()
    out = app.handler({"options": {"MAINTENANCE_FROBNICATE": "true"}}, FakeContext())
    assert out["ok"] is False and out["error"]["type"] == "MaintenanceConfigError", out
    assert _emitted(capsys.readouterr().out, "PassFailed") == []


def test_a_manual_pass_that_dies_answers_ok_false_and_counts_a_failure(
    app: ModuleType,
    s3_bucket: str,
    env_clean: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    lake = f"s3://{s3_bucket}/lakes/nowhere"
    deploy(env_clean, lake)
    capsys.readouterr()
    out = app.handler({"action": "maintenance"}, FakeContext())
    assert out["ok"] is False and out["error"]["type"] == "NotFoundError", out
    assert _emitted(capsys.readouterr().out, "PassFailed") == [(lake, [1.0])]


def test_a_scheduled_tick_that_finds_the_lease_held_is_a_skip_not_an_error(
    app: ModuleType,
    env_clean: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    """Answered, never raised: a skip is no failure. It still puts a PassRuns
    datum (0), so the silence alarm knows the schedule is alive. (The same
    race on moto's S3, between two processes: the overlapping-invocations test.)"""
    from slatelake.catalog.lake import Lake
    from slatelake.maintenance.flight import PassLease
    from slatelake.store.location import LakeLocation

    lake = maintenance.canonical_lake((tmp_path / "lake").as_uri())
    Lake.create(lake).close()
    deploy(env_clean, lake)
    lease = PassLease(LakeLocation.parse(lake))
    lease.acquire()
    try:
        capsys.readouterr()
        out = app.handler({"trigger": "scheduled"}, FakeContext())
    finally:
        lease.release()
    assert out["ok"] is True and out["result"] is None, out
    assert "already running" in out["skipped"]
    emitted = capsys.readouterr().out
    assert _emitted(emitted, "PassSkipped") == [(lake, [1.0])]
    assert _emitted(emitted, "PassRuns") == [(lake, [0.0])]
    assert _emitted(emitted, "PassFailed") == []


def test_the_first_invocation_of_a_container_counts_a_cold_start(
    app: ModuleType,
    env_clean: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    from slatelake.catalog.lake import Lake
    from tests.functions.conftest import powertools_env

    settings = powertools_env()
    lake = (tmp_path / "lake").as_uri()
    Lake.create(lake).close()
    deploy(env_clean, lake)
    capsys.readouterr()
    context = FakeContext()
    for _ in range(2):
        assert app.handler({"action": "status"}, context)["ok"] is True
    docs = [d for d in emf_lines(capsys.readouterr().out, cold_start=True) if "ColdStart" in d]
    assert len(docs) == 1, docs  # the first invocation only
    (directive,) = docs[0]["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == settings["POWERTOOLS_METRICS_NAMESPACE"]
    assert docs[0]["function_name"] == context.function_name
    assert docs[0]["service"] == settings["POWERTOOLS_SERVICE_NAME"]


def test_the_scoped_sample_event_runs_only_its_operations_on_its_table(
    app: ModuleType, s3_lake: tuple[str, str, list[str]], env_clean: pytest.MonkeyPatch
) -> None:
    lake, data, names = s3_lake
    before = contents(lake, names)
    event = {**load_event("manual-scoped.json", lake, data), "table": names[0]}
    out = app.handler(event, FakeContext())
    assert out["ok"] is True, out
    report = out["result"]
    assert (report["operations"], report["table"]) == (["flush", "merge"], f"main.{names[0]}")
    steps = {s["step"]: s for s in report["steps"]}
    assert steps["flush_inlined_data"]["counts"]["rows_flushed"] == 3  # that table's alone
    assert steps["merge_adjacent_files"]["detail"].endswith("across 1 tables")
    assert steps["expire_snapshots"]["detail"] == "left out: this run's operations are flush, merge"
    assert steps["sweep_indexes"]["status"] == SKIPPED
    assert contents(lake, names) == before


@pytest.mark.parametrize(
    ("scope", "error_type", "words"),
    [
        ({"operations": "flush,vacuum"}, "MaintenanceConfigError", "unknown operation 'vacuum'"),
        ({"operations": {"flush": True}}, "MaintenanceConfigError", "a list of names"),
        ({"operations": ["flush", ["merge"]]}, "MaintenanceConfigError", "expected a name"),
        ({"operations": ["expire"], "table": "t0"}, "MaintenanceConfigError", "cannot be scoped"),
        ({"table": ["t0"]}, "MaintenanceConfigError", "expected a table name"),
        ({"action": "status", "table": "t0"}, "InvocationError", "does not take it"),
    ],
    ids=["unknown", "object", "nested", "lake-wide-on-table", "table-list", "other-action"],
)
def test_a_malformed_scope_in_an_event_is_refused_without_touching_the_lake(
    app: ModuleType,
    s3_bucket: str,
    env_clean: pytest.MonkeyPatch,
    scope: dict[str, Any],
    error_type: str,
    words: str,
) -> None:
    lake = f"s3://{s3_bucket}/lakes/untouched"
    deploy(env_clean, lake)
    out = app.handler({"lake": lake, **scope}, FakeContext())
    assert out["ok"] is False
    assert (out["error"]["type"], words in out["error"]["message"]) == (error_type, True), out
    assert _objects(s3_bucket, "") == []


def test_a_scheduled_tick_without_options_follows_the_lakes_policy(
    app: ModuleType, s3_lake: tuple[str, str, list[str]]
) -> None:
    lake, data, names = s3_lake
    before = contents(lake, names)
    event = load_event("scheduled-policy.json", lake, data)
    quiet = app.handler(event, FakeContext())["result"]  # no enabled policy: nothing moves
    assert quiet["policy"] is None
    assert {s["step"]: s["status"] for s in quiet["steps"]}["expire_snapshots"] == SKIPPED
    maintenance.set_policy(lake, {"enabled": "true", "retention": "0s", "compaction": "false"})
    ran = app.handler(event, FakeContext())["result"]
    assert ran["policy"]["enabled"] == "true" and ran["policy"]["retention"] == "0ms"
    steps = {s["step"]: s for s in ran["steps"]}
    assert steps["expire_snapshots"]["counts"]["snapshots_expired"] > 0
    assert steps["flush_inlined_data"]["counts"]["rows_flushed"] == 3 * len(names)
    assert steps["merge_adjacent_files"]["status"] == SKIPPED
    assert contents(lake, names) == before


def test_the_threshold_schedule_gives_each_due_table_a_run_of_its_own(
    app: ModuleType, s3_lake: tuple[str, str, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    lake, data, names = s3_lake
    before = contents(lake, names)
    maintenance.set_policy(lake, {"enabled": "true", "small_file_min_count": "2"})
    capsys.readouterr()
    out = app.handler(load_event("scheduled-threshold.json", lake, data), FakeContext())
    assert out["ok"] is True and out["action"] == "threshold", out
    due = [f"{d['schema']}.{d['table']}" for d in out["result"]["due"]]
    runs = out["result"]["runs"]
    assert due and [r["table"] for r in runs] == due
    assert {r["trigger"] for r in runs} == {"threshold"}
    assert all(r["by"].startswith("lambda:") for r in runs)
    for run in runs:
        skipped = {s["step"] for s in run["steps"] if s["status"] == SKIPPED}
        assert {"expire_snapshots", "cleanup_old_files", "delete_orphaned_files"} <= skipped
    emitted = emf_lines(capsys.readouterr().out)
    assert [d["ThresholdRuns"] for d in emitted if "ThresholdRuns" in d] == [[float(len(runs))]]
    assert contents(lake, names) == before


def test_a_scheduled_pass_keeps_a_held_snapshot_and_counts_it(
    app: ModuleType, s3_lake: tuple[str, str, list[str]]
) -> None:
    lake, data, names = s3_lake
    with slatelake.connect(lake, read_only=True) as s:
        held = s.sql("SELECT max(snapshot_id) - 3 FROM lake.snapshots()").fetchone()[0]
        at_held = sorted(s.sql(f"SELECT * FROM {names[0]} AT (VERSION => {held})").fetchall())
    maintenance.protect(lake, held, "audit-2026", by="ops")
    maintenance.set_policy(lake, {"enabled": "true", "retention": "0s", "cleanup_grace": "0s"})
    out = app.handler(load_event("scheduled-policy.json", lake, data), FakeContext())
    steps = {s["step"]: s for s in out["result"]["steps"]}
    assert steps["expire_snapshots"]["counts"]["snapshots_kept_by_holds"] == 1
    assert out["result"]["status"] == "succeeded"
    with slatelake.connect(lake, read_only=True) as s:
        assert held in {r[0] for r in s.sql("SELECT snapshot_id FROM lake.snapshots()").fetchall()}
        assert sorted(s.sql(f"SELECT * FROM {names[0]} AT (VERSION => {held})").fetchall()) == (
            at_held
        )


def test_history_audit_health_and_policy_answer_from_the_lake(
    app: ModuleType, s3_lake: tuple[str, str, list[str]]
) -> None:
    lake, data, names = s3_lake
    maintenance.set_policy(lake, {"retention": "14d"}, by="ops")
    passed = app.handler(load_event("manual-maintenance.json", lake, data), FakeContext())
    run_id = passed["result"]["run_id"]
    runs = app.handler(load_event("manual-runs.json", lake), FakeContext())
    assert runs["ok"] is True and runs["result"]["runs"][0]["run_id"] == run_id, runs
    assert runs["result"]["runs"][0]["by"].startswith("lambda:")
    assert runs["result"]["next_before"] is None  # one page holds them all
    assert set(runs) == {"ok", "action", "result"}  # the CLI's --json object, nothing beside
    audit = app.handler({"action": "audit", "lake": lake}, FakeContext())
    assert [e["kind"] for e in audit["result"]["entries"]] == ["run.manual", "policy.set"]
    health = app.handler(load_event("manual-health.json", lake), FakeContext())
    assert {t["table"] for t in health["result"]["tables"]} == set(names)
    policy = app.handler({"action": "policy", "lake": lake}, FakeContext())
    assert policy["result"]["lake"]["retention"]["shown"] == "14d"
    for bad in ({"limit": 0}, {"limit": "1e3"}, {"limit": True}, {"before": -1}, {"page": 1}):
        refused = app.handler({"action": "runs", "lake": lake, "options": bad}, FakeContext())
        assert refused["ok"] is False, bad


def test_the_fsck_action_counts_its_findings_and_raises_when_asked(
    app: ModuleType,
    s3_lake: tuple[str, str, list[str]],
    env_clean: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import boto3

    lake, _data, _ = s3_lake
    capsys.readouterr()
    clean = app.handler({"action": "fsck", "lake": lake}, FakeContext())
    assert clean["ok"] is True and clean["result"]["ok"] is True, clean
    assert _emitted(capsys.readouterr().out, "FsckFindings") == [(lake, [0.0])]
    bucket, prefix = lake.removeprefix("s3://").split("/", 1)[0], "data/sales/"
    s3 = boto3.client("s3")
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=prefix)["Contents"]]
    s3.delete_object(Bucket=bucket, Key=next(k for k in keys if k.endswith(".parquet")))
    found = app.handler({"action": "fsck", "lake": lake}, FakeContext())
    assert found["ok"] is True and found["result"]["counts"] == {"missing_file": 1}, found
    assert found["result"]["orphans_blocked"] is True
    with pytest.raises(slatelake.SlatelakeError, match="fsck found 1 missing_file"):
        app.handler({"action": "fsck", "lake": lake, "raise_on_failure": True}, FakeContext())
    assert _emitted(capsys.readouterr().out, "FsckFindings") == [(lake, [1.0])] * 2
