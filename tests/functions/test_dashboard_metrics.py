"""The dashboard charts what the functions emit, and nothing else.

Real handler invocations of every kind run once on moto's S3 (a scheduled
pass with every step on a lake whose policy is enabled, fold turns that run,
skip and fail, a backup, a threshold tick, a compact_store call, a refused
lake, the cold starts of the pass and the fold function); the metrics are
read back from the EMF lines they print, and compared both ways with
template.yaml's dashboard, with its alarms, and with CloudWatch (on moto)
answering every dashboard query.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import importlib
import io
import json
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import boto3
import pytest

import slatelake
from slatelake import maintenance
from tests.functions.conftest import (
    FUNCTION_DIR,
    FakeContext,
    PristineLake,
    deploy,
    emf_lines,
    powertools_env,
    render_sub,
    template,
)
from tests.maintenance.test_pass import CONFIGURED

# one worker builds the shared lake once and runs every test on it (scripts/test: --dist loadgroup)
pytestmark = pytest.mark.xdist_group("pristine-s3-lake")

# The dashboard's metrics no invocation here can produce, each with the reason.
NOT_PRODUCIBLE: dict[str, str] = {}
# Dimensions whose values differ by deployment: the stack's lake, the function's name.
WILDCARD = ("Lake", "function_name")
PASS_FUNCTION, FOLD_FUNCTION = "slatelake-pass", "slatelake-fold"
# Every step of the pass configured; the store merge waits one second (no
# holder is running then: its merges report pending, and the step ran).
EVERY_STEP = {
    **CONFIGURED,
    "MAINTENANCE_TABLE_BATCHES": "true",
    "MAINTENANCE_COMPACT_STORE": "true",
    "MAINTENANCE_COMPACT_STORE_TIMEOUT": "1s",
}

Key = tuple[str, tuple[tuple[str, str], ...]]


def key(name: str, dims: dict[str, str]) -> Key:
    """A metric by name and dimensions, deployment-specific values wildcarded."""
    return name, tuple(sorted((k, "*" if k in WILDCARD else v) for k, v in dims.items()))


def emitted_keys(docs: list[dict[str, Any]]) -> set[Key]:
    out = set()
    for doc in docs:
        for directive in doc["_aws"]["CloudWatchMetrics"]:
            for dims in directive["Dimensions"]:
                for metric in directive["Metrics"]:
                    out.add(key(metric["Name"], {d: doc[d] for d in dims}))
    return out


@dataclass
class Invocations:
    """What the invocations printed: the EMF documents of each, by label."""

    lake: str
    docs: dict[str, list[dict[str, Any]]]
    answers: dict[str, Any]

    def all_docs(self) -> list[dict[str, Any]]:
        return [doc for docs in self.docs.values() for doc in docs]

    def keys(self) -> set[Key]:
        return emitted_keys(self.all_docs())


def dashboard_rows(params: dict[str, str]) -> list[list[Any]]:
    body = template()["Resources"]["MaintenanceDashboard"]["Properties"]["DashboardBody"]
    doc = json.loads(render_sub(body, params))
    return [row for widget in doc["widgets"] for row in widget["properties"]["metrics"]]


def row_dims(row: list[Any]) -> dict[str, str]:
    pairs = [x for x in row[2:] if isinstance(x, str)]
    return dict(zip(pairs[::2], pairs[1::2], strict=True))


def stack_params(lake: str) -> dict[str, str]:
    bucket, prefix = lake.removeprefix("s3://").split("/", 1)
    return {
        "LakeBucket": bucket,
        "LakePrefix": prefix,
        "SchedulePeriodSeconds": "3600",
        "FoldPeriodSeconds": "300",
        "MaintenanceFunction": PASS_FUNCTION,
        "FoldFunction": FOLD_FUNCTION,
    }


def dashboard_keys() -> set[Key]:
    return {key(row[1], row_dims(row)) for row in dashboard_rows(stack_params("s3://b/lake"))}


def _sorted_runs(lake: str, data: str) -> None:
    """Sorted runs in the store, so the pass's store merge has one to submit:
    four rounds of a commit and a fold, each fold's L0 SSTs taken by the
    holder's size-tiered compactor (as tests/catalog/test_census.py does)."""
    from slatelake.catalog.folder import Folder
    from slatelake.store.location import LakeLocation
    from tests.catalog.test_census import _l0_below, settled, wait_for

    folder = Folder(LakeLocation.parse(lake), margin_s=0)
    try:
        for i in range(4):
            with slatelake.connect(lake, data_path=data) as s:
                s.sql(f"INSERT INTO t1 VALUES ({9000 + i}, 'round')")
            folder.fold_once()
            wait_for("the compactor to take full L0 tiers", lambda: _l0_below(lake, 4), 60)
        wait_for("a sorted run", settled(lake, "current", 1), timeout=60)
    finally:
        folder.close()


def scheduled(lake: str, data: str, schedule: str) -> dict[str, Any]:
    """What the template's schedule sends (the pass's with every step as its
    MaintenanceOptions), for the stack deployed on this lake and data path."""
    functions = {
        n: r["Properties"]
        for n, r in template()["Resources"].items()
        if r["Type"] == "AWS::Serverless::Function"
    }
    (props,) = [p["Events"][schedule] for p in functions.values() if schedule in p["Events"]]
    params = stack_params(lake)
    bucket = data.removeprefix("s3://").split("/", 1)[0]
    params |= {"DataBucket": bucket, "DataPrefix": data.removeprefix(f"s3://{bucket}/")[:-1]}
    params["MaintenanceOptions"] = json.dumps(EVERY_STEP)
    return json.loads(render_sub(props["Properties"]["Input"], params))


@pytest.fixture(scope="module")
def invocations(pristine_lake: PristineLake) -> Iterator[Invocations]:
    """Every kind of invocation, once per worker, on the churned lake deployed
    as the stack's; each one's stdout read for its EMF documents."""
    from aws_lambda_powertools.metrics.provider import cold_start

    from slatelake.maintenance.holder import HolderLease
    from slatelake.store.db import COMPACTOR_POLL_ENV
    from slatelake.store.location import LakeLocation

    pristine_lake.restore()
    lake, data = pristine_lake.lake, pristine_lake.data
    gone = f"s3://{pristine_lake.bucket}/lakes/gone"  # allowed, never created
    with pytest.MonkeyPatch.context() as mp:
        for name in list(os.environ):
            if name.startswith(("SLATELAKE_", "MAINTENANCE_")):
                mp.delenv(name)
        for name, value in powertools_env().items():
            mp.setenv(name, value)
        deploy(mp, lake, data)
        mp.setenv("SLATELAKE_ALLOWED_LAKES", gone)
        mp.setenv(COMPACTOR_POLL_ENV, "100ms")
        mp.syspath_prepend(str(FUNCTION_DIR))
        app: ModuleType = importlib.import_module("app")
        docs: dict[str, list[dict[str, Any]]] = {}
        answers: dict[str, Any] = {}

        def invoke(label: str, event: dict[str, Any], function: str, cold: bool = False) -> Any:
            mp.setattr(cold_start, "is_cold_start", cold)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):  # a scheduled tick that fails raises
                answers[label] = app.handler(event, FakeContext(function_name=function))
            docs[label] = emf_lines(out.getvalue(), cold_start=True)
            return answers[label]

        try:
            with slatelake.connect(lake, data_path=data) as s:
                # an inlined HUGEINT row: a flush would round it, so it stays (TablesLeftInlined)
                s.sql("CREATE TABLE wide (id HUGEINT)")
                s.sql("INSERT INTO wide VALUES (170141183460469231731687303715884105727)")
            _sorted_runs(lake, data)
            maintenance.set_policy(lake, {"enabled": "true", "small_file_min_count": "2"})
            tick = scheduled(lake, data, "ThresholdSchedule")
            found = invoke("threshold", tick, PASS_FUNCTION, cold=True)
            assert found["ok"] and found["result"]["runs"], found
            ran = invoke("pass", scheduled(lake, data, "MaintenanceSchedule"), PASS_FUNCTION)
            assert ran["ok"] is True and ran["result"]["trigger"] == "scheduled", ran
            statuses = {s["step"]: s["status"] for s in ran["result"]["steps"]}
            assert set(statuses.values()) == {"ran"}, statuses
            tick = scheduled(lake, data, "FoldSchedule")
            folded = invoke("fold", tick, FOLD_FUNCTION, cold=True)  # the fold's own container
            assert folded["ok"] is True and folded["result"]["status"] == "folded", folded
            resident = HolderLease(LakeLocation.parse(lake))
            assert resident.try_acquire()
            try:
                skipped = invoke("fold-skipped", {"action": "fold", "lake": lake}, FOLD_FUNCTION)
            finally:
                resident.release()
            assert skipped["ok"] is True and skipped["result"]["status"] == "skipped", skipped
            failed = invoke("fold-failed", {"action": "fold", "lake": gone}, FOLD_FUNCTION)
            assert failed["ok"] is False and failed["error"]["type"] == "NotFoundError", failed
            backup = invoke("backup", {"action": "backup", "lake": lake}, PASS_FUNCTION)
            assert backup["ok"] is True and backup["result"]["status"] == "succeeded", backup
            checked = invoke("fsck", {"action": "fsck", "lake": lake}, PASS_FUNCTION)
            assert checked["ok"] is True, checked
            merge = {"action": "compact_store", "lake": lake, "options": {"timeout": "1s"}}
            assert invoke("compact_store", merge, PASS_FUNCTION)["ok"] is True
            other = {"action": "status", "lake": "s3://another-bucket/lake"}
            refused = invoke("refused", other, PASS_FUNCTION)
            assert refused["error"]["type"] == "LakeNotAllowedError", refused
            yield Invocations(lake, docs, answers)
        finally:
            app.warm.release()


def test_every_emitted_metric_is_on_the_dashboard_and_every_charted_one_is_emitted(
    invocations: Invocations,
) -> None:
    emitted, charted = invocations.keys(), dashboard_keys()
    assert all(docs for docs in invocations.docs.values()), "an invocation emitted no metric"
    uncharted = sorted(emitted - charted)
    assert not uncharted, f"emitted, but not on the dashboard: {uncharted}"
    never = sorted(k for k in charted - emitted if k[0] not in NOT_PRODUCIBLE)
    assert not never, f"on the dashboard, but no invocation emitted it: {never}"
    assert not {k for k in charted & emitted if k[0] in NOT_PRODUCIBLE}, "NOT_PRODUCIBLE is stale"


def test_the_dashboard_charts_the_cold_starts_of_both_functions(
    invocations: Invocations,
) -> None:
    """Powertools' ColdStart carries the function's name: one row per function
    of the stack, each its Ref, and the fold's container emitted its own."""
    rows = [r for r in dashboard_rows(stack_params(invocations.lake)) if r[1] == "ColdStart"]
    assert sorted(row_dims(r)["function_name"] for r in rows) == sorted(
        [PASS_FUNCTION, FOLD_FUNCTION]
    )
    body = template()["Resources"]["MaintenanceDashboard"]["Properties"]["DashboardBody"]
    assert '"${MaintenanceFunction}"' in body["Sub"][0] and '"${FoldFunction}"' in body["Sub"][0]
    cold = {d["function_name"] for d in invocations.all_docs() if "ColdStart" in d}
    assert cold == {PASS_FUNCTION, FOLD_FUNCTION}


def test_every_alarm_watches_a_metric_an_invocation_emits(invocations: Invocations) -> None:
    params = stack_params(invocations.lake)
    resources = template()["Resources"]
    emitted = invocations.keys()
    alarms = {n: r["Properties"] for n, r in resources.items() if r["Type"].endswith("::Alarm")}
    assert {"FoldFailedAlarm", "BacklogGrowingAlarm", "MergePendingTooLongAlarm"} <= set(alarms)
    names = {metric for metric, _ in emitted}
    for name, props in alarms.items():
        if "Metrics" in props:  # a Metrics Insights query over every lake of the fleet
            (query,) = [m["Expression"] for m in props["Metrics"]]
            text = query["Sub"][0] if isinstance(query, dict) else query
            metric = text.split("(", 1)[1].split(")", 1)[0]  # SUM(x) or MAX(x)
            assert "GROUP BY" not in text and "SCHEMA(" in text, name
            assert metric in names, f"{name} watches {metric}, never emitted"
            continue
        if props["Namespace"] == "AWS/Lambda":  # Lambda's own, per function of the stack
            assert props["MetricName"] == "Errors", name
            (dim,) = props["Dimensions"]
            assert dim["Name"] == "FunctionName", name
            assert resources[dim["Value"]["Ref"]]["Type"] == "AWS::Serverless::Function", name
            continue
        dims = {d["Name"]: render_sub(d["Value"], params) for d in props["Dimensions"]}
        assert dims["Lake"] == invocations.lake, name
        assert key(props["MetricName"], dims) in emitted, f"{name} watches a metric never emitted"
    functions = {n for n, r in resources.items() if r["Type"] == "AWS::Serverless::Function"}
    watched = {
        p["Dimensions"][0]["Value"]["Ref"]
        for p in alarms.values()
        if p.get("Namespace") == "AWS/Lambda"
    }
    assert watched == functions, "every function's Errors is alarmed"


def _values(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _to_cloudwatch(cloudwatch: Any, docs: list[dict[str, Any]]) -> None:
    """What CloudWatch Logs does with EMF lines: one datum per metric and dimension set."""
    for doc in docs:
        for directive in doc["_aws"]["CloudWatchMetrics"]:
            for dims in directive["Dimensions"]:
                data = [
                    {
                        "MetricName": metric["Name"],
                        "Dimensions": [{"Name": d, "Value": str(doc[d])} for d in dims],
                        "Value": float(value),
                        "Unit": metric.get("Unit", "None"),
                    }
                    for metric in directive["Metrics"]
                    for value in _values(doc[metric["Name"]])
                ]
                cloudwatch.put_metric_data(Namespace=directive["Namespace"], MetricData=data)


def test_cloudwatch_answers_every_dashboard_query_with_the_invocations_metrics(
    invocations: Invocations, moto_endpoint: str
) -> None:
    """The dashboard as deployed (the stack's lake, the functions' names) put
    to CloudWatch on moto, which holds the invocations' EMF: every row has
    data. (A region of its own: no other test's metrics answer for these.)"""
    cloudwatch = boto3.client("cloudwatch", endpoint_url=moto_endpoint, region_name="ap-south-2")
    _to_cloudwatch(cloudwatch, invocations.all_docs())
    params = stack_params(invocations.lake)
    body = template()["Resources"]["MaintenanceDashboard"]["Properties"]["DashboardBody"]
    cloudwatch.put_dashboard(DashboardName="slatelake", DashboardBody=render_sub(body, params))
    now = dt.datetime.now(dt.UTC)
    empty = []
    for row in dashboard_rows(params):
        if row[1] in NOT_PRODUCIBLE:
            continue
        stats = cloudwatch.get_metric_statistics(
            Namespace=row[0],
            MetricName=row[1],
            Dimensions=[{"Name": k, "Value": v} for k, v in row_dims(row).items()],
            StartTime=now - dt.timedelta(minutes=30),
            EndTime=now + dt.timedelta(minutes=10),
            Period=3600,
            Statistics=["SampleCount"],
        )
        if not stats["Datapoints"]:
            empty.append((row[1], row_dims(row)))
    assert not empty, f"dashboard queries with no data: {empty}"


def test_an_invocation_that_emits_no_metric_prints_no_warning(
    app: ModuleType, small_lake: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A read publishes no metric; Powertools' "No application metrics to
    publish" warning is silenced, and nothing reaches stderr."""
    capsys.readouterr()
    for invocation in ("cold", "warm"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = app.handler({"action": "status", "lake": small_lake}, FakeContext())
        assert out["ok"] is True, out
        said = [str(w.message) for w in caught]
        assert not [m for m in said if "No application metrics" in m], (invocation, said)
        printed = capsys.readouterr()
        assert printed.err == "", (invocation, printed.err)
        if invocation == "warm":  # the cold one carries Powertools' ColdStart only
            assert emf_lines(printed.out, cold_start=True) == []
