"""A pass request is parsed once, the same way for every surface: the CLI's
flags and a Lambda event go through ``PassRequest.from_mapping``, Python
callers through the constructor, and a bad value is refused by name before
any lake is touched."""

from __future__ import annotations

import math

import pytest

from slatelake import MaintenanceConfigError, MisconfigurationError
from slatelake.maintenance.report import (
    DryRunPlan,
    PassReport,
    PassStatus,
    PlannedStep,
    StepStatus,
)
from slatelake.maintenance.request import (
    CensusRequest,
    MergeRequest,
    PageRequest,
    PassRequest,
    Trigger,
)

pytestmark = pytest.mark.fast


def test_text_is_read_as_the_cli_spells_it() -> None:
    request = PassRequest.from_mapping(
        {"wait_s": "90s", "deadline_s": "2m", "dry_run": "TRUE", "operations": "merge, flush"}
    )
    assert request.wait_s == 90.0 and request.deadline_s == 120.0 and request.dry_run is True
    assert request.operations == ("flush", "merge")  # the pass's order, not the caller's
    assert request.trigger is Trigger.MANUAL and request.scope.table is None


def test_a_table_scope_is_split_into_schema_and_name() -> None:
    request = PassRequest.from_mapping({"table": "sales.orders", "operations": ["merge"]})
    assert request.scope.table == ("sales", "orders")
    assert PassRequest(table="orders").scope.table == ("main", "orders")


@pytest.mark.parametrize(
    ("doc", "named"),
    [
        ({"wait": 5}, "'wait'"),
        ({"trigger": "cron"}, "trigger 'cron'"),
        ({"trigger": 1}, "trigger 1"),
        ({"wait_s": -1}, "wait_s"),
        ({"wait_s": math.nan}, "wait_s"),
        ({"wait_s": True}, "wait_s=True"),
        ({"deadline_s": math.inf}, "deadline_s"),
        ({"dry_run": "maybe"}, "dry_run"),
        ({"operations": 5}, "operations"),
        ({"operations": "vacuum"}, "'vacuum'"),
        ({"table": "t", "operations": "expire"}, "expire"),
        ({"schema": "s"}, "schema 's'"),
        ({"by": ""}, "by=''"),
        ({"by": "x" * 300}, "by="),
        ({"options": ["MAINTENANCE_EXPIRE_SNAPSHOTS"]}, "options"),
    ],
)
def test_each_bad_field_is_refused_by_name(doc: dict[str, object], named: str) -> None:
    with pytest.raises(MaintenanceConfigError) as caught:
        PassRequest.from_mapping(doc)
    assert named in str(caught.value)


def test_the_constructor_checks_what_from_mapping_checks() -> None:
    with pytest.raises(MaintenanceConfigError, match="wait_s"):
        PassRequest(wait_s=-0.5)
    with pytest.raises(MaintenanceConfigError, match="dry_run"):
        PassRequest(dry_run="yes")  # type: ignore[arg-type]


def test_a_request_round_trips_through_its_dict() -> None:
    request = PassRequest.from_mapping(
        {"options": {"MAINTENANCE_EXPIRE_SNAPSHOTS": "true"}, "table": "t", "by": "ci"}
    )
    again = PassRequest.from_mapping(request.to_dict())
    assert again == request and again.scope == request.scope


def test_page_merge_and_census_requests_refuse_by_name() -> None:
    assert PageRequest.from_mapping({"limit": "5", "before": 9}) == PageRequest(5, 9)
    for doc, named in (
        ({"limit": 0}, "limit"),
        ({"limit": True}, "limit"),
        ({"before": 2**63}, "before"),
        ({"after": 1}, "'after'"),
    ):
        with pytest.raises(MisconfigurationError) as caught:
            PageRequest.from_mapping(doc)
        assert named in str(caught.value)
    merge = MergeRequest.from_mapping({"subspace": "CURRENT", "timeout": "90s"})
    assert merge.subspace == "current" and merge.wait_s == 90.0
    with pytest.raises(MaintenanceConfigError, match="subspace 'indexes'"):
        MergeRequest.from_mapping({"subspace": "indexes"})
    with pytest.raises(MaintenanceConfigError, match="require_completed needs a wait"):
        MergeRequest.from_mapping({"require_completed": True})
    assert CensusRequest.from_mapping({"live": "true"}) == CensusRequest(live=True)
    with pytest.raises(MaintenanceConfigError, match="'deep'"):
        CensusRequest.from_mapping({"deep": True})


def test_statuses_and_the_plan_survive_the_status_window_codec() -> None:
    report = PassReport(trigger="manual", plan=DryRunPlan())
    report.add("expire_snapshots", "ran", "expired 3")
    report.plan["cleanup_old_files"] = PlannedStep(2, ["a", "b"], False, {"spared": 1})
    doc = report.to_dict()
    assert doc["status"] == "succeeded" and doc["steps"][0]["status"] == "ran"
    assert doc["plan"]["cleanup_old_files"] == {
        "total": 2,
        "items": ["a", "b"],
        "truncated": False,
        "spared": 1,
    }
    again = PassReport.from_dict(doc)
    assert again.status is PassStatus.SUCCEEDED and again.steps[0].status is StepStatus.RAN
    assert again.plan == report.plan
    with pytest.raises(ValueError):
        report.add("merge_adjacent_files", "done", "not a status")
