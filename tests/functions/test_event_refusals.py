"""Events the Lambda refuses: refused as refusals (no PassFailed), named in
the answer, before the lake is touched."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import boto3
import pytest

from tests.functions.conftest import FakeContext, deploy, emf_lines


def _emitted(out: str, metric: str) -> list[tuple[str, Any]]:
    return [(d.get("Lake"), d[metric]) for d in emf_lines(out) if metric in d]


def test_a_manual_pass_naming_a_table_the_lake_lacks_is_a_refusal_not_a_failure(
    app: ModuleType, small_lake: str, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    out = app.handler({"action": "maintenance", "table": "nope"}, FakeContext())
    assert out["ok"] is False and out["error"]["type"] == "NotFoundError", out
    assert "no table main.nope" in out["error"]["message"]
    emitted = capsys.readouterr().out
    assert _emitted(emitted, "PassFailed") == []
    assert _emitted(emitted, "PassRuns") == []


def test_a_manual_pass_on_a_missing_lake_still_counts_a_failure(
    app: ModuleType,
    env_clean: pytest.MonkeyPatch,
    tmp_path: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The refusal above is the table's alone: a lake that is not there is the alarm's."""
    lake = (tmp_path / "nowhere").as_uri()
    deploy(env_clean, lake)
    capsys.readouterr()
    out = app.handler({"action": "maintenance", "table": "t"}, FakeContext())
    assert out["ok"] is False and out["error"]["type"] == "NotFoundError", out
    assert _emitted(capsys.readouterr().out, "PassFailed") == [(lake, [1.0])]


@pytest.mark.parametrize("before", [10**30, str(10**30), 2**63])
def test_a_page_before_past_any_id_is_refused(
    app: ModuleType, small_lake: str, before: object
) -> None:
    """Refused by the page's own request type (the CLI's words), before the lake."""
    out = app.handler({"action": "runs", "options": {"before": before}}, FakeContext())
    assert out["ok"] is False and out["error"]["type"] == "MisconfigurationError", out
    assert "at most 9223372036854775807" in out["error"]["message"]


def test_the_largest_page_id_is_still_a_page(app: ModuleType, small_lake: str) -> None:
    out = app.handler({"action": "runs", "options": {"before": 2**63 - 1}}, FakeContext())
    assert out["ok"] is True, out


@pytest.mark.parametrize("spelling", ["s3://{b}//lakes/x", "s3://{b}/lakes//x", "s3://{b}/x//"])
def test_a_stack_lake_with_an_empty_segment_is_refused_untouched(
    app: ModuleType, s3_bucket: str, env_clean: pytest.MonkeyPatch, spelling: str
) -> None:
    deploy(env_clean, spelling.format(b=s3_bucket))
    out = app.handler({"action": "maintenance"}, FakeContext())
    assert out["ok"] is False, out
    assert "empty, '.' or '..' segment" in out["error"]["message"], out
    listed = boto3.client("s3").list_objects_v2(Bucket=s3_bucket)
    assert listed.get("KeyCount", 0) == 0


def test_an_event_lake_with_an_empty_segment_is_refused_untouched(
    app: ModuleType, s3_bucket: str, env_clean: pytest.MonkeyPatch
) -> None:
    deploy(env_clean, f"s3://{s3_bucket}/lakes/x")
    event = {"action": "maintenance", "lake": f"s3://{s3_bucket}//lakes/x"}
    out = app.handler(event, FakeContext())
    assert out["ok"] is False, out
    assert "empty, '.' or '..' segment" in out["error"]["message"], out
    listed = boto3.client("s3").list_objects_v2(Bucket=s3_bucket)
    assert listed.get("KeyCount", 0) == 0
