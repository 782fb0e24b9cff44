"""The maintenance switch and a lake's cron on real lakes (local files).

``SLATELAKE_MAINTENANCE_ENABLED=false``: every manual surface of the library
refuses a pass before the lake is touched (a lake that would be created is
not), a dry run still plans, no session scheduler starts and a running one
skips its ticks. A policy ``cron`` is kept on the lake's row only, and
``scheduled_due`` reads the policy and the status window (then the run
history, when other triggers crowded the window) to say whether a
scheduled pass is due.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import slatelake
from slatelake import MaintenanceConfigError, MaintenanceDisabledError, PassRequest, maintenance
from slatelake.ducklake.session import Session
from slatelake.maintenance import options as option_rules
from slatelake.maintenance.cadence import ENABLED_ENV, lake_fires, parse_cron
from slatelake.maintenance.report import WINDOW
from slatelake.maintenance.scheduler import Scheduler

DAILY = "0 3 * * *"


def _lake(tmp_path: Path) -> str:
    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path}/data/") as s:
        s.sql("CREATE TABLE t (id INTEGER)")
        for i in range(3):
            s.sql(f"INSERT INTO t VALUES ({i})")
    return url


@pytest.fixture
def switched_off(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.setenv(ENABLED_ENV, "false")
    return monkeypatch


@pytest.fixture(autouse=True)
def switch_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENABLED_ENV, raising=False)


def _refused(exc: pytest.ExceptionInfo[MaintenanceDisabledError]) -> None:
    message = str(exc.value)
    assert f"{ENABLED_ENV}='false'" in message and f"set {ENABLED_ENV}=true" in message


# -- the switch ------------------------------------------------------------------
def test_a_manual_pass_is_refused_before_a_lake_is_created(
    tmp_path: Path, switched_off: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "new-lake"
    lake = slatelake.open(root.as_uri(), f"{tmp_path}/data/")
    with pytest.raises(MaintenanceDisabledError) as caught:
        lake.maintenance.run()
    _refused(caught)
    assert "a manual maintenance pass refused" in str(caught.value)
    assert not root.exists()  # without the switch the pass would have made the lake


def test_a_refused_pass_leaves_no_record_and_a_dry_run_still_plans(
    tmp_path: Path, switched_off: pytest.MonkeyPatch
) -> None:
    url = _lake(tmp_path)
    lake = slatelake.open(url)
    for request in (PassRequest(), PassRequest(trigger="scheduled"), PassRequest(wait_s=5)):
        with pytest.raises(MaintenanceDisabledError):
            lake.maintenance.run(request)
    with pytest.raises(MaintenanceDisabledError):
        maintenance.run(url, {"MAINTENANCE_FLUSH_INLINED_DATA": "true"})
    assert list(lake.maintenance.status()) == []
    plan = lake.maintenance.run(
        PassRequest(options={"MAINTENANCE_FLUSH_INLINED_DATA": "true"}, dry_run=True)
    )
    assert plan.plan is not None and plan.plan["flush_inlined_data"].details["rows"] == 3
    assert list(lake.maintenance.status()) == []  # a dry run writes nothing


def test_the_threshold_trigger_is_refused(tmp_path: Path, switched_off: pytest.MonkeyPatch) -> None:
    url = _lake(tmp_path)
    with pytest.raises(MaintenanceDisabledError, match="the threshold trigger refused") as caught:
        slatelake.open(url).maintenance.threshold()
    _refused(caught)


def test_a_backups_pass_is_refused_but_a_backup_without_one_runs(
    tmp_path: Path, switched_off: pytest.MonkeyPatch
) -> None:
    url = _lake(tmp_path)
    lake = slatelake.open(url)
    with pytest.raises(MaintenanceDisabledError):
        lake.maintenance.backup(options={"MAINTENANCE_FLUSH_INLINED_DATA": "true"})
    report = lake.maintenance.backup()  # fold, image, manifest: no pass
    assert not report.failed and report.pass_report is None


def test_no_session_scheduler_starts_and_maintenance_is_refused(
    tmp_path: Path, switched_off: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    url = _lake(tmp_path)
    with slatelake.connect(url, options={"MAINTENANCE_INTERVAL": "10s"}) as session:
        assert session.scheduler is None
        with pytest.raises(MaintenanceDisabledError, match=r"session.maintenance\(\) refused"):
            session.maintenance()
        assert session.sql("SELECT count(*) FROM t").fetchone() == (3,)  # the session works
    assert any("no pass is scheduled" in r.getMessage() for r in caplog.records)
    assert list(slatelake.open(url).maintenance.status()) == []


def test_a_misspelled_switch_refuses_a_scheduling_session_before_the_lake_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENABLED_ENV, "off")
    root = tmp_path / "new-lake"
    with pytest.raises(MaintenanceConfigError, match=f"^{ENABLED_ENV}='off': expected true"):
        slatelake.connect(
            root.as_uri(), data_path=f"{tmp_path}/data/", options={"MAINTENANCE_INTERVAL": "10s"}
        )
    assert not root.exists()
    with pytest.raises(MaintenanceConfigError, match=f"^{ENABLED_ENV}='off'"):
        slatelake.open(_lake(tmp_path)).maintenance.run()


def test_switched_on_spellings_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = _lake(tmp_path)
    for spelled in ("true", "YES", "1", ""):
        monkeypatch.setenv(ENABLED_ENV, spelled)
        assert slatelake.open(url).maintenance.run().status == "succeeded"


@pytest.fixture
def quick_ticks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ticks of a fraction of a second (the interval's floor guards deployments)."""
    monkeypatch.setattr(option_rules, "MIN_INTERVAL_S", 0.05)


def _wait_for(predicate, timeout: float = 30.0) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.mark.usefixtures("quick_ticks")
def test_a_running_scheduler_skips_its_ticks_while_switched_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = _lake(tmp_path)
    options = option_rules.bind({"MAINTENANCE_INTERVAL": "0.1"})
    monkeypatch.setenv(ENABLED_ENV, "false")
    scheduler = Scheduler(lambda: Session(url), options, lake_url=url).start()
    try:
        _wait_for(lambda: scheduler.skipped_ticks >= 3)
        assert scheduler.passes == 0
        monkeypatch.setenv(ENABLED_ENV, "true")
        _wait_for(lambda: scheduler.passes >= 1)
    finally:
        scheduler.stop(30)
    assert [p.trigger for p in slatelake.open(url).maintenance.status()][-1] == "scheduled"


@pytest.mark.usefixtures("quick_ticks")
def test_a_running_scheduler_obeys_the_lakes_cron(tmp_path: Path) -> None:
    url = _lake(tmp_path)
    far_off = (datetime.now(UTC).hour + 12) % 24  # no fire time while the test runs
    slatelake.open(url).policy.set({"cron": f"0 {far_off} * * *"})
    options = option_rules.bind({"MAINTENANCE_INTERVAL": "0.1"})
    scheduler = Scheduler(lambda: Session(url), options, lake_url=url).start()
    try:
        _wait_for(lambda: scheduler.passes >= 1)  # no scheduled pass yet: due at once
        _wait_for(lambda: scheduler.skipped_ticks >= 3)  # then not until tomorrow's time
        assert scheduler.passes == 1
    finally:
        scheduler.stop(30)


# -- the cron on the lake -------------------------------------------------------------
def test_the_cron_is_kept_on_the_lakes_row_only(tmp_path: Path) -> None:
    url = _lake(tmp_path)
    lake = slatelake.open(url)
    row = lake.policy.set({"cron": "  0  3 * * * "})
    assert row.fields == {"cron": DAILY}
    view = lake.policy.show()
    assert view.lake["cron"] == DAILY and view.to_dict()["lake"]["cron"]["from"] == "lake"
    for scope in ({"table": "t"}, {"schema": "main"}):
        with pytest.raises(MaintenanceConfigError, match="cron is the lake's own"):
            lake.policy.set({"cron": DAILY}, **scope)  # type: ignore[arg-type]
    with pytest.raises(MaintenanceConfigError, match=r"^policy cron='0 3 \* \* 8': field 5"):
        lake.policy.set({"cron": "0 3 * * 8"})
    lake.policy.unset(["cron"])
    assert lake.policy.show().lake["cron"] == ""
    assert slatelake.open(url).maintenance.due().due  # no cron: every tick


def _started(report: slatelake.PassReport) -> datetime:
    return datetime.fromtimestamp(report.started_at / 1_000_000, UTC)


def test_scheduled_due_reads_the_last_scheduled_pass_from_the_status_window(
    tmp_path: Path,
) -> None:
    url = _lake(tmp_path)
    lake = slatelake.open(url)
    lake.policy.set({"cron": DAILY})
    assert slatelake.open(url).maintenance.due().due  # never ran: due
    report = lake.maintenance.run(PassRequest(trigger="scheduled"))
    start = _started(report)
    _, next_fire = lake_fires(parse_cron(DAILY), url, start)
    before = slatelake.open(url).maintenance.due(now=(next_fire - timedelta(seconds=1)).timestamp())
    assert not before.due and before.last_scheduled_start == start
    assert before.reason.startswith(f"not due until {next_fire:%Y-%m-%d %H:%M:%S} UTC")
    assert "policy cron '0 3 * * *'" in before.reason
    at_fire = slatelake.open(url).maintenance.due(now=next_fire.timestamp())
    assert at_fire.due and at_fire.last_fire == next_fire
    # manual passes are not the schedule's: they do not move it
    lake.maintenance.run()
    assert (
        not slatelake.open(url)
        .maintenance.due(now=(next_fire - timedelta(seconds=1)).timestamp())
        .due
    )


def test_scheduled_due_reads_the_run_history_when_the_window_is_crowded(
    tmp_path: Path,
) -> None:
    url = _lake(tmp_path)
    lake = slatelake.open(url)
    lake.policy.set({"cron": DAILY})
    with slatelake.connect(url) as session:
        start = _started(maintenance.run(session, trigger="scheduled"))
        for _ in range(WINDOW):
            maintenance.run(session)  # manual passes push it out of the window
    assert all(p.trigger == "manual" for p in lake.maintenance.status())
    _, next_fire = lake_fires(parse_cron(DAILY), url, start)
    check = slatelake.open(url).maintenance.due(now=(next_fire - timedelta(seconds=1)).timestamp())
    assert not check.due and check.last_scheduled_start == start
