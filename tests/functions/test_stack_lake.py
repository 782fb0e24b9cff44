"""The function maintains its stack's lake and data path, and nothing else.

An event naming any other place (another bucket, a prefix that shares text,
a nested or parent prefix, another case, another scheme, a data path
elsewhere) is refused before any store request: the S3 endpoint here counts
the requests it sees, and answers each with a 403, so a request that slipped
through would both show in the count and end in a different error.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType
from typing import Any

import boto3
import pytest

from slatelake.catalog.lake import Lake
from tests.functions.conftest import FakeContext, deploy, emf_lines
from tests.store.faulty_s3 import FaultyEndpoint, faulty_endpoint, s3_endpoint

pytestmark = pytest.mark.fast

STACK_LAKE = "s3://lake-bucket/lake"
STACK_DATA = "s3://lake-bucket/data/"


@pytest.fixture
def counting_store(env_clean: pytest.MonkeyPatch) -> Iterator[FaultyEndpoint]:
    """The stack deployed for STACK_LAKE, its S3 an endpoint that counts requests."""
    deploy(env_clean, STACK_LAKE, STACK_DATA)
    with faulty_endpoint("status", 403) as endpoint, s3_endpoint(endpoint.url):
        yield endpoint


def _refusals(out: str) -> list[dict[str, Any]]:
    return [doc for doc in emf_lines(out) if "LakeRefused" in doc]


REFUSED = {
    "other-bucket": ({"lake": "s3://other-bucket/lake"}, "LakeNotAllowedError"),
    "shared-text-prefix": ({"lake": "s3://lake-bucket/lakehouse"}, "LakeNotAllowedError"),
    "nested-prefix": ({"lake": "s3://lake-bucket/lake/x"}, "LakeNotAllowedError"),
    "parent-prefix": ({"lake": "s3://lake-bucket"}, "LakeNotAllowedError"),
    "bucket-case": ({"lake": "s3://LAKE-BUCKET/lake"}, "InvocationError"),  # not a bucket name
    "prefix-case": ({"lake": "s3://lake-bucket/Lake"}, "LakeNotAllowedError"),
    "other-scheme": ({"lake": "file:///lake-bucket/lake"}, "LakeNotAllowedError"),
    "memory": ({"lake": "memory://lake"}, "LakeNotAllowedError"),
    "dotdot-escape": ({"lake": "s3://lake-bucket/lake/../other"}, "InvocationError"),
    "dotdot-back": ({"lake": "s3://lake-bucket/other/../lake"}, "InvocationError"),
    "data-elsewhere": (
        {"lake": STACK_LAKE, "data_path": "s3://lake-bucket/elsewhere/"},
        "LakeNotAllowedError",
    ),
    "data-other-bucket": (
        {"lake": STACK_LAKE, "data_path": "s3://other-bucket/data/"},
        "LakeNotAllowedError",
    ),
    "data-shared-text": (
        {"lake": STACK_LAKE, "data_path": "s3://lake-bucket/database/"},
        "LakeNotAllowedError",
    ),
    "data-nested": (
        {"lake": STACK_LAKE, "data_path": "s3://lake-bucket/data/x/"},
        "LakeNotAllowedError",
    ),
    "data-is-the-lake": ({"lake": STACK_LAKE, "data_path": STACK_LAKE}, "LakeNotAllowedError"),
    "data-dotdot": (
        {"lake": STACK_LAKE, "data_path": "s3://lake-bucket/data/../lake/"},
        "InvocationError",
    ),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("action", ["maintenance", "status"])
@pytest.mark.parametrize("case", list(REFUSED))
def test_an_event_for_any_other_place_is_refused_before_any_store_request(
    app: ModuleType,
    counting_store: FaultyEndpoint,
    capsys: pytest.CaptureFixture[str],
    case: str,
    action: str,
) -> None:
    fields, error_type = REFUSED[case]
    if action == "status" and "data_path" in fields:
        action = "maintenance"  # status takes no data path; the pass does
    capsys.readouterr()
    out = app.handler({"action": action, **fields}, FakeContext())
    assert out["ok"] is False, out
    assert out["error"]["type"] == error_type, out
    assert counting_store.requests == 0
    refusals = _refusals(capsys.readouterr().out)
    if error_type == "LakeNotAllowedError":
        assert "refused" in out["error"]["message"]
        assert [(d["Lake"], d["LakeRefused"]) for d in refusals] == [(STACK_LAKE, [1.0])]
    else:  # not a location at all: the parse names what is wrong with it
        assert "'..'" in out["error"]["message"] or "lowercase" in out["error"]["message"]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "spelling",
    # (an empty segment, s3://lake-bucket//lake//, is refused before any store
    # call: tests/functions/test_event_refusals.py)
    ["s3://lake-bucket/lake", "s3://lake-bucket/lake/"],
    ids=["canonical", "trailing-slash"],
)
def test_the_stack_lake_in_a_spelling_of_the_same_place_reaches_the_store(
    app: ModuleType, counting_store: FaultyEndpoint, spelling: str
) -> None:
    """Accepted, it goes on to the store (here a 403, typed and at once)."""
    out = app.handler({"action": "status", "lake": spelling}, FakeContext())
    assert out["ok"] is False
    assert out["error"]["type"] == "PermissionDeniedError", out
    assert counting_store.requests > 0


def test_a_local_stack_lake_spelled_through_dot_dot_is_the_same_lake(
    app: ModuleType, env_clean: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    lake = tmp_path / "lake"
    deploy(env_clean, lake.as_uri())
    same = f"{lake.as_uri()}/sub/.."
    out = app.handler({"action": "status", "lake": same}, FakeContext())
    assert out["error"]["type"] == "NotFoundError", out  # past the allow-list: no lake there
    other = f"{lake.as_uri()}/../other"
    out = app.handler({"action": "status", "lake": other}, FakeContext())
    assert out["error"]["type"] == "LakeNotAllowedError", out


@pytest.mark.timeout(60)
def test_allow_listed_lakes_and_data_paths_are_accepted_and_nothing_else(
    app: ModuleType, counting_store: FaultyEndpoint, env_clean: pytest.MonkeyPatch
) -> None:
    env_clean.setenv("SLATELAKE_ALLOWED_LAKES", " s3://lake-bucket/second/ , s3://b3/third")
    env_clean.setenv("SLATELAKE_ALLOWED_DATA_PATHS", "s3://lake-bucket/data2")
    for lake in ("s3://lake-bucket/second", "s3://b3/third/"):
        out = app.handler({"action": "status", "lake": lake}, FakeContext())
        assert out["error"]["type"] == "PermissionDeniedError", (lake, out)
    event = {"lake": "s3://b3/third", "data_path": "s3://lake-bucket/data2/"}
    assert app.handler(event, FakeContext())["error"]["type"] == "PermissionDeniedError"
    seen = counting_store.requests
    for refused in ("s3://lake-bucket/secondary", "s3://b3/third/x"):
        out = app.handler({"action": "status", "lake": refused}, FakeContext())
        assert out["error"]["type"] == "LakeNotAllowedError", (refused, out)
    assert counting_store.requests == seen


def test_an_allow_listed_lake_never_borrows_the_stack_data_path(
    app: ModuleType, env_clean: pytest.MonkeyPatch
) -> None:
    from registry import parse_event

    deploy(env_clean, STACK_LAKE, STACK_DATA)
    env_clean.setenv("SLATELAKE_ALLOWED_LAKES", "s3://lake-bucket/second")
    assert parse_event({"lake": STACK_LAKE + "/"}).data_path == STACK_DATA
    second = parse_event({"lake": "s3://lake-bucket/second"})
    assert (second.lake, second.data_path) == ("s3://lake-bucket/second", None)


def test_a_function_with_no_lake_configured_refuses_every_lake(
    app: ModuleType, counting_store: FaultyEndpoint, env_clean: pytest.MonkeyPatch
) -> None:
    env_clean.delenv("SLATELAKE_LAKE")
    out = app.handler({"action": "status", "lake": STACK_LAKE}, FakeContext())
    assert out["error"]["type"] == "LakeNotAllowedError"
    assert "no lake configured" in out["error"]["message"]
    assert counting_store.requests == 0


def test_an_invalid_allow_list_entry_names_the_variable(
    app: ModuleType, counting_store: FaultyEndpoint, env_clean: pytest.MonkeyPatch
) -> None:
    env_clean.setenv("SLATELAKE_ALLOWED_LAKES", "s3://lake-bucket/x/../y")
    out = app.handler({"action": "status", "lake": STACK_LAKE}, FakeContext())
    assert out["error"]["type"] == "InvocationError"
    assert "SLATELAKE_ALLOWED_LAKES" in out["error"]["message"]
    assert counting_store.requests == 0


def _objects(bucket: str) -> dict[str, str]:
    s3 = boto3.client("s3")
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket)
    return {o["Key"]: o["ETag"] for page in pages for o in page.get("Contents", [])}


@pytest.mark.parametrize("action", ["maintenance", "census", "status", "compact_store"])
def test_another_real_lake_is_refused_and_left_untouched(
    app: ModuleType, s3_bucket: str, env_clean: pytest.MonkeyPatch, action: str
) -> None:
    mine, theirs = f"s3://{s3_bucket}/lakes/mine", f"s3://{s3_bucket}/lakes/theirs"
    for lake in (mine, theirs):
        Lake.create(lake).close()
    deploy(env_clean, mine)
    before = _objects(s3_bucket)
    out = app.handler({"action": action, "lake": theirs}, FakeContext())
    assert out["ok"] is False, out
    assert out["error"]["type"] == "LakeNotAllowedError"
    assert theirs in out["error"]["message"] and mine in out["error"]["message"]
    assert _objects(s3_bucket) == before


def test_the_refusal_alarm_watches_the_metric_a_refusal_emits(
    app: ModuleType, counting_store: FaultyEndpoint, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.functions.conftest import render_sub, template

    capsys.readouterr()
    app.handler({"action": "status", "lake": "s3://other-bucket/lake"}, FakeContext())
    (doc,) = _refusals(capsys.readouterr().out)
    (directive,) = doc["_aws"]["CloudWatchMetrics"]
    emitted = {frozenset((d, doc[d]) for d in dims) for dims in directive["Dimensions"]}
    props = template()["Resources"]["LakeRefusedAlarm"]["Properties"]
    params = {"LakeBucket": "lake-bucket", "LakePrefix": "lake"}
    watched = frozenset((d["Name"], render_sub(d["Value"], params)) for d in props["Dimensions"])
    assert props["MetricName"] == "LakeRefused" == directive["Metrics"][0]["Name"]
    assert watched in emitted
    env = template()["Resources"]["MaintenanceFunction"]["Properties"]["Environment"]
    assert {"SLATELAKE_ALLOWED_LAKES", "SLATELAKE_ALLOWED_DATA_PATHS"} <= set(env["Variables"])


@pytest.mark.timeout(60)
def test_a_scheduled_event_for_another_lake_raises_after_counting_the_refusal(
    app: ModuleType, counting_store: FaultyEndpoint, capsys: pytest.CaptureFixture[str]
) -> None:
    """A schedule pointed at a lake the stack does not maintain fails every
    tick where Lambda counts errors, and touches no store."""
    from invocation import LakeNotAllowedError

    capsys.readouterr()
    with pytest.raises(LakeNotAllowedError, match="refused"):
        app.handler({"trigger": "scheduled", "lake": "s3://other-bucket/lake"}, FakeContext())
    refusals = _refusals(capsys.readouterr().out)
    assert [(d["Lake"], d["LakeRefused"]) for d in refusals] == [(STACK_LAKE, [1.0])]
    assert counting_store.requests == 0
