"""What the dashboard's PassFailed counts."""

from __future__ import annotations

from types import ModuleType

import pytest

from slatelake.maintenance.report import RAN, SKIPPED, PassReport
from tests.functions.conftest import emf_lines

LAKE = "s3://bucket/lake"


def _pass_failed(
    app: ModuleType, report: PassReport, capsys: pytest.CaptureFixture[str], metric: str = ""
) -> list:
    import telemetry  # the handler's own module, on sys.path through the app fixture

    metric = metric or "PassFailed"
    capsys.readouterr()
    telemetry.emit_pass(app.metrics, LAKE, report)
    app.metrics.flush_metrics()
    return [d[metric] for d in emf_lines(capsys.readouterr().out) if metric in d]


def test_a_pass_that_lost_its_lease_counts_as_failed(
    app: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    report = PassReport(trigger="scheduled")
    report.add("expire_snapshots", RAN, "expired 3 snapshots")
    assert _pass_failed(app, report, capsys) == [[0.0]]
    report.lease_lost = "another process took the maintenance lease (generation 7)"
    assert _pass_failed(app, report, capsys) == [[1.0]]


def test_a_pass_the_retention_fail_safe_stopped_counts_as_partial(
    app: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    report = PassReport(trigger="scheduled")
    report.add("expire_snapshots", RAN, "expired 3 snapshots")
    assert _pass_failed(app, report, capsys, "PassPartial") == [[0.0]]
    report.add("cleanup_old_files", SKIPPED, "retention fail-safe: ...")
    report.partial_reason = "cleanup_old_files skipped by the retention fail-safe: ..."
    assert _pass_failed(app, report, capsys, "PassPartial") == [[1.0]]
    assert _pass_failed(app, report, capsys) == [[0.0]]  # partial is not failed
