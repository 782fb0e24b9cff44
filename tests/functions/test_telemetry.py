"""What the dashboard's PassFailed counts."""

from __future__ import annotations

from types import ModuleType

from slatelake.maintenance.report import RAN, PassReport


def test_a_pass_that_lost_its_lease_counts_as_failed(app: ModuleType) -> None:
    import telemetry  # the handler's own module, on sys.path through the app fixture

    report = PassReport(trigger="scheduled")
    report.add("expire_snapshots", RAN, "expired 3 snapshots")
    assert not telemetry.pass_failed(report)
    report.lease_lost = "another process took the maintenance lease (generation 7)"
    assert telemetry.pass_failed(report)
