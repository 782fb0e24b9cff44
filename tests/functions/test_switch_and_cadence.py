"""The Lambda under the maintenance switch and a lake's cron, end to end
through the real handler on moto's S3.

``SLATELAKE_MAINTENANCE_ENABLED=false``: a scheduled pass or threshold tick
answers ``skipped`` with the reason and touches nothing (the pass tick
counts ``PassSkipped``, its ``PassRuns`` of 0 keeping the silence alarm
quiet); a manual pass, threshold run or backup pass answers ``ok: false``
with a ``MaintenanceDisabledError`` naming the variable, no store touched and
no alarm; the fold still runs (it keeps the lake readable). A misspelled
switch makes a tick fail loudly. With a policy ``cron``, the first
scheduled tick runs and the next skips ``not due until ...``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from types import ModuleType
from typing import Any

import boto3
import pytest

import slatelake
from tests.functions.conftest import EVENTS, FakeContext, emf_lines, load_event

# one worker builds the shared lake once and runs every test on it (scripts/test: --dist loadgroup)
pytestmark = pytest.mark.xdist_group("pristine-s3-lake")

ENV = "SLATELAKE_MAINTENANCE_ENABLED"
FLUSH = {"MAINTENANCE_FLUSH_INLINED_DATA": "true", "MAINTENANCE_TABLE_BATCHES": "true"}


def _bucket_state(lake: str) -> dict[str, str]:
    """Every object of the lake's bucket (lake root and data path) by ETag."""
    bucket = lake.removeprefix("s3://").split("/", 1)[0]
    pages = boto3.client("s3").get_paginator("list_objects_v2").paginate(Bucket=bucket)
    return {o["Key"]: o["ETag"] for page in pages for o in page.get("Contents", [])}


def _emitted(out: str, metric: str) -> list[tuple[str, Any]]:
    return [(d.get("Lake"), d[metric]) for d in emf_lines(out) if metric in d]


def _scheduled_envelope() -> dict[str, Any]:
    import json

    return json.loads((EVENTS / "scheduled.json").read_text())


def test_switched_off_scheduled_ticks_skip_touching_nothing_and_the_fold_runs(
    app: ModuleType,
    s3_lake: tuple[str, str, list[str]],
    env_clean: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    lake, data, _ = s3_lake
    env_clean.setenv(ENV, "false")
    env_clean.setenv("MAINTENANCE_FLUSH_INLINED_DATA", "true")
    before = _bucket_state(lake)
    capsys.readouterr()
    out = app.handler(_scheduled_envelope(), FakeContext())
    assert out["ok"] is True and out["action"] == "maintenance" and out["result"] is None, out
    assert out["skipped"].startswith(f"maintenance is switched off ({ENV}='false')")
    assert f"set {ENV}=true" in out["skipped"]
    emitted = capsys.readouterr().out
    assert _emitted(emitted, "PassSkipped") == [(lake, [1.0])]
    assert _emitted(emitted, "PassRuns") == [(lake, [0.0])]
    assert _emitted(emitted, "PassFailed") == []
    threshold = app.handler(load_event("scheduled-threshold.json", lake, data), FakeContext())
    assert threshold["ok"] is True and threshold["result"] is None, threshold
    assert threshold["skipped"].startswith("maintenance is switched off")
    assert _bucket_state(lake) == before  # nothing read that leaves a trace, nothing written
    fold = app.handler(load_event("scheduled-fold.json", lake), FakeContext())
    assert fold["ok"] is True and "skipped" not in fold, fold
    assert fold["result"]["status"] != "skipped"


def test_switched_off_manual_invokes_are_refused_untouched_and_unalarmed(
    app: ModuleType,
    s3_lake: tuple[str, str, list[str]],
    env_clean: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    lake, data, _ = s3_lake
    env_clean.setenv(ENV, "no")
    before = _bucket_state(lake)
    capsys.readouterr()
    events = [
        load_event("manual-maintenance.json", lake, data),
        {"action": "threshold", "lake": lake},
        {"action": "backup", "lake": lake, "options": FLUSH},
    ]
    for event in events:
        out = app.handler(event, FakeContext())
        assert out["ok"] is False, (event, out)
        assert out["error"]["type"] == "MaintenanceDisabledError", out
        message = out["error"]["message"]
        assert "refused: maintenance is switched off" in message, message
        assert f"{ENV}='no'" in message and f"set {ENV}=true" in message
    emitted = capsys.readouterr().out
    assert _emitted(emitted, "PassFailed") == [] and _emitted(emitted, "BackupFailed") == []
    assert _bucket_state(lake) == before
    with pytest.raises(slatelake.MaintenanceDisabledError):  # raise_on_failure: a function error
        app.handler({"lake": lake, "options": FLUSH, "raise_on_failure": True}, FakeContext())
    status = app.handler({"action": "status", "lake": lake}, FakeContext())  # reads still answer
    assert status["ok"] is True and status["result"] == []


def test_a_misspelled_switch_fails_a_scheduled_tick_loudly(
    app: ModuleType,
    s3_lake: tuple[str, str, list[str]],
    env_clean: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    lake, _, _ = s3_lake
    env_clean.setenv(ENV, "disabled")
    capsys.readouterr()
    with pytest.raises(slatelake.MaintenanceConfigError, match=f"^{ENV}='disabled': expected"):
        app.handler(_scheduled_envelope(), FakeContext())
    assert _emitted(capsys.readouterr().out, "PassFailed") == [(lake, [1.0])]


def test_a_policy_cron_runs_the_first_tick_and_skips_until_the_next_fire_time(
    app: ModuleType,
    s3_lake: tuple[str, str, list[str]],
    env_clean: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    lake, _, _ = s3_lake
    env_clean.delenv(ENV, raising=False)
    far_off = (datetime.now(UTC).hour + 12) % 24  # no fire time while the test runs
    cron = f"0 {far_off} * * *"
    slatelake.open(lake).policy.set({"cron": cron})
    tick = {"trigger": "scheduled", "lake": lake, "options": FLUSH}
    first = app.handler(tick, FakeContext())
    assert first["ok"] is True and "skipped" not in first, first
    assert first["result"]["trigger"] == "scheduled"
    due = slatelake.open(lake).maintenance.due()
    capsys.readouterr()
    second = app.handler(tick, FakeContext())
    assert second["ok"] is True and second["result"] is None, second
    assert due.next_fire is not None
    assert second["skipped"].startswith(
        f"not due until {due.next_fire:%Y-%m-%d %H:%M:%S} UTC (policy cron '{cron}'"
    )
    emitted = capsys.readouterr().out
    assert _emitted(emitted, "PassSkipped") == [(lake, [1.0])]
    assert _emitted(emitted, "PassRuns") == [(lake, [0.0])]
    manual = app.handler({"lake": lake, "options": FLUSH}, FakeContext())  # never gated by it
    assert manual["ok"] is True and "skipped" not in manual, manual
    window = app.handler({"action": "status", "lake": lake}, FakeContext())["result"]
    assert [p["trigger"] for p in window] == ["manual", "scheduled"]
