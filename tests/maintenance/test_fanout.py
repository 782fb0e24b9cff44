"""A pass fanned out over table batches (maintenance/fanout.py): the same
end state as one pass, deferral and failure confined to their tables,
cleanup waiting for a complete pass, one lease for the run, and outside
input parsed before the lake is touched."""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import slatelake
from slatelake import BatchOrder, BatchResult, LeaseLostError, MaintenanceConfigError, PassRequest
from slatelake.cli import main
from slatelake.ducklake.session import Session
from slatelake.errors import AlreadyRunningError, ConflictError
from slatelake.maintenance.fanout import failed_batch
from slatelake.maintenance.flight import PassLease
from slatelake.maintenance.report import FAILED, RAN, SKIPPED
from slatelake.maintenance.shared_lease import SharedLease
from slatelake.store.location import LakeLocation
from tests.functions.conftest import churn, end_state

TABLES = 40  # the equivalence's lake
SMALL = 10  # every other test's
ROUNDS = 2  # each table: a Parquet and an inlined insert a round
OPTIONS = {
    "MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN": "1 second",
    "MAINTENANCE_FLUSH_INLINED_DATA": "true",
    "MAINTENANCE_MERGE_ADJACENT_FILES": "true",
    "MAINTENANCE_REWRITE_DATA_FILES_DELETE_THRESHOLD": "0.01",
    "MAINTENANCE_CLEANUP_OLD_FILES_CLEANUP_ALL": "true",
    "MAINTENANCE_DELETE_ORPHANED_FILES_CLEANUP_ALL": "true",
    "MAINTENANCE_ORPHAN_AGE_FLOOR_OVERRIDE": "true",
    "MAINTENANCE_TABLE_BATCHES": "true",
}


Built = tuple[Path, Path, list[str]]


def _build(tmp_path_factory: pytest.TempPathFactory, tables: int) -> Built:
    """A churned lake, built once per module; each test gets it back at the
    same absolute path (the catalog records its data path)."""
    work = tmp_path_factory.mktemp(f"fanout{tables}")
    names = churn((work / "lake").as_uri(), f"{work / 'data'}/", tables=tables, rounds=ROUNDS)
    time.sleep(1.1)  # every churn snapshot older than the 1-second expiry
    pristine = work.with_name(work.name + "-pristine")
    shutil.copytree(work, pristine, symlinks=True)
    return work, pristine, names


def _restorer(built: Built) -> Callable[[], str]:
    work, pristine, _ = built

    def again() -> str:
        shutil.rmtree(work)
        shutil.copytree(pristine, work, symlinks=True)
        return (work / "lake").as_uri()

    return again


@pytest.fixture(scope="module")
def _churned_once(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return _build(tmp_path_factory, TABLES)


@pytest.fixture(scope="module")
def _small_once(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return _build(tmp_path_factory, SMALL)


@pytest.fixture
def restore(_small_once: Built) -> Callable[[], str]:
    return _restorer(_small_once)


def _end_state(url: str, data: Path, names: list[str]) -> dict[str, Any]:
    """The pass's end state (tests/functions/conftest.py), and the files on disk."""
    on_disk = sum(1 for p in data.rglob("*") if p.is_file())
    return {**end_state(url, names), "files_on_disk": on_disk}


def _file_count(session: Any, table: str) -> int:
    files = f"SELECT count(*) FROM ducklake_list_files('lake', '{table}')"
    return int(session.sql(files).fetchone()[0])


def _phases(url: str, batch_tables: int) -> slatelake.PassReport:
    """The state machine's shape in one process: plan, each batch, finish."""
    lake = slatelake.open(url)
    plan = lake.maintenance.plan(PassRequest(options=OPTIONS), batch_tables=batch_tables)
    results = [lake.maintenance.batch(order) for order in plan.batches]
    return lake.maintenance.finish(plan, results)


@pytest.mark.parametrize(
    "built",
    [
        pytest.param("_churned_once", marks=pytest.mark.long, id="40-tables"),
        pytest.param("_small_once", id="10-tables"),
    ],
)
def test_a_fanned_out_pass_leaves_the_end_state_of_one_pass(
    built: str, request: pytest.FixtureRequest
) -> None:
    """On a churned lake (40 tables in the long tier, 10 in the default):
    one pass in one process, then the same lake restored and fanned out
    (plan, batches in 2 worker processes, finish)."""
    lake: Built = request.getfixturevalue(built)
    work, _, names = lake
    data = work / "data"
    restore = _restorer(lake)
    url = restore()
    one = slatelake.open(url).maintenance.run(PassRequest(options=OPTIONS))
    assert one.status == "succeeded", one.to_dict()
    expected = _end_state(url, data, names)
    assert expected["runs"] == ["succeeded"] and expected["status_records"] == 1

    url = restore()
    parallel = slatelake.open(url).maintenance.run(PassRequest(options=OPTIONS), parallel=2)
    assert parallel.status == "succeeded" and parallel.batches, parallel.to_dict()
    assert _end_state(url, data, names) == expected
    for step in ("flush_inlined_data", "merge_adjacent_files", "rewrite_data_files"):
        assert parallel.step(step).counts == one.step(step).counts, step
    assert parallel.step("cleanup_old_files").counts == one.step("cleanup_old_files").counts


def test_a_deferred_table_holds_cleanup_back_and_leaves_the_other_batches_done(
    restore: Callable[[], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = restore()
    original = Session.run_maintenance_unless

    def conflicting(self: Session, query: str, check: Callable[[], str | None]) -> Any:
        if "'t3'" in query:  # fault injection: every flush of t3 loses a race
            raise ConflictError("injected: another commit landed on main.t3 first")
        return original(self, query, check)

    monkeypatch.setattr(Session, "run_maintenance_unless", conflicting)
    report = _phases(url, batch_tables=3)
    assert report.batches == 4
    flush = report.step("flush_inlined_data")
    assert flush.status == FAILED
    assert re.search(
        r"; table batch \d of 4: .*; deferred after 3 conflicts: main\.t3$", flush.detail
    )
    assert flush.counts["rows_flushed"] == ROUNDS * (SMALL - 1)  # every other table's inlined rows
    merge = report.step("merge_adjacent_files")
    assert merge.status == RAN and f"across {SMALL} tables" in merge.detail
    for step in ("cleanup_old_files", "delete_orphaned_files"):
        assert report.step(step).status == SKIPPED
        assert "waits for a complete pass; deferred tables: main.t3" in report.step(step).detail
    assert report.work_pending and report.status == "failed"
    assert slatelake.open(url).maintenance.runs().items[0].status == "failed"


def test_a_failed_batch_fails_only_its_tables_and_cleanup_waits(
    restore: Callable[[], str],
) -> None:
    url = restore()
    lake = slatelake.open(url)
    plan = lake.maintenance.plan(PassRequest(options=OPTIONS), batch_tables=4)
    assert [len(b.tables) for b in plan.batches] == [4, 4, 2]
    results = [lake.maintenance.batch(plan.batches[0]), lake.maintenance.batch(plan.batches[2])]
    results.append(failed_batch(plan.batches[1], "Sandbox.Timedout: the item ran out of time"))
    report = lake.maintenance.finish(plan, results)
    assert report.status == "failed"
    reason = report.failed_reason or ""
    assert reason.startswith("table batch 2 of 3 (main.t") and "Sandbox.Timedout" in reason
    schema, name = plan.batches[1].tables[-1]
    assert f"{schema}.{name})" in reason  # the failed batch's tables are named
    assert report.step("flush_inlined_data").detail.startswith(
        f"flushed {ROUNDS * 6} rows across 6 tables in 2 of 3 table batches"
    )
    for step in ("cleanup_old_files", "delete_orphaned_files"):
        detail = report.step(step).detail
        assert detail == "not attempted because table batch 2 of 3 failed", detail
    done = plan.batches[0].tables[1][1]  # an odd table: no deletes, its files merge
    with slatelake.connect(url, read_only=True) as s:  # the failed batch's files stay unmerged
        assert _file_count(s, name) == ROUNDS and _file_count(s, done) == 1
    # the lease is given back: the next pass runs at once and completes the work
    again = lake.maintenance.run(PassRequest(options=OPTIONS))
    assert again.status == "succeeded" and again.step("flush_inlined_data").counts == {
        "rows_flushed": ROUNDS * 4
    }


def test_a_run_whose_lease_lapsed_acts_no_more_and_is_recorded_failed(
    restore: Callable[[], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The execution died after its plan (killed mid-map): its lease lapses,
    the next pass records the run failed and completes the work; a late batch
    or finish of the dead run does nothing."""
    url = restore()
    monkeypatch.setenv("SLATELAKE_PASS_LEASE_TTL_S", "1")
    lake = slatelake.open(url)
    plan = lake.maintenance.plan(PassRequest(options=OPTIONS), batch_tables=5)
    lake.maintenance.batch(plan.batches[0])
    time.sleep(1.2)  # nobody beats: the lease lapses
    again = lake.maintenance.run(PassRequest(options=OPTIONS))
    assert again.status == "succeeded", again.to_dict()
    with pytest.raises(LeaseLostError, match="no longer held"):
        lake.maintenance.batch(plan.batches[1])
    late = lake.maintenance.finish(plan, [])
    assert late.lease_lost is not None and "no longer held" in late.lease_lost
    runs = lake.maintenance.runs().items
    assert [r.status for r in runs] == ["succeeded", "failed"]
    assert "heartbeat stopped" in (runs[1].failed_reason or ""), runs[1].failed_reason
    assert len(lake.maintenance.status()) == 2  # the dead run's record, then the new pass
    late_table = plan.batches[1].tables[0][1]
    with slatelake.connect(url, read_only=True) as s:  # the next pass merged the rest
        files = f"SELECT count(*) FROM ducklake_list_files('lake', '{late_table}')"
        assert s.sql(files).fetchone() == (1,)


def test_a_second_pass_waits_for_or_skips_a_fanned_out_run(restore: Callable[[], str]) -> None:
    url = restore()
    lake = slatelake.open(url)
    plan = lake.maintenance.plan(PassRequest(options=OPTIONS), batch_tables=SMALL)
    with pytest.raises(AlreadyRunningError, match="already running"):
        lake.maintenance.run(PassRequest(options=OPTIONS))
    with pytest.raises(AlreadyRunningError, match="already running"):
        lake.maintenance.plan(PassRequest(options=OPTIONS))
    results = [lake.maintenance.batch(order) for order in plan.batches]
    report = lake.maintenance.finish(plan, results)
    assert report.status == "succeeded"
    assert PassLease(LakeLocation.parse(url)).current().state == "released"  # type: ignore[union-attr]
    assert lake.maintenance.run(PassRequest(options=OPTIONS)).status == "succeeded"


def test_co_holders_renewing_at_once_keep_one_lease(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLATELAKE_PASS_LEASE_TTL_S", "1.2")  # a beat every 0.1 s
    where = LakeLocation.parse(tmp_path.as_uri())
    lead = SharedLease(where)
    lead.acquire()
    lead.run_id = 7
    holders = [SharedLease.join(where, lead.owner, 7) for _ in range(3)]
    for h in [lead, *holders]:
        h.start_heartbeat()
    time.sleep(2.5)  # two TTLs of racing renewals
    assert [h.lost for h in [lead, *holders]] == [None] * 4
    rival = PassLease(where)
    assert not rival.try_acquire()
    for h in holders:
        h.detach()
    lead.release()
    assert rival.try_acquire()
    rival.release()


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("lease_owner", "'; DROP TABLE t0; --", "32 hex digits"),
        ("lease_owner", None, "32 hex digits"),
        ("index", 9, "not below count"),
        ("index", True, "expected an integer"),
        ("tables", [["main"]], "expected [schema, table]"),
        ("tables", "t0", "a list of at most"),
        ("tables", [["main", "x\x00"]], "a non-empty name"),
        ("request", {"trigger": "cron"}, "trigger"),
        ("request", {"nope": 1}, "unknown key"),
    ],
)
def test_a_batch_order_from_outside_is_refused_before_the_lake_is_touched(
    field: str, value: object, message: str
) -> None:
    good = {
        "lake": "file:///nowhere/lake",
        "run_id": 1,
        "lease_owner": "0" * 32,
        "request": {},
        "index": 0,
        "count": 2,
        "tables": [["main", "t0"]],
    }
    with pytest.raises(MaintenanceConfigError, match=message.replace("[", r"\[")):
        order = BatchOrder.from_dict({**good, field: value})
        PassRequest.from_mapping(order.request)


def test_a_batch_naming_tables_the_lake_lacks_works_on_none(restore: Callable[[], str]) -> None:
    """Names are data, never SQL: a batch names tables, and only the lake's
    live tables among them are worked on."""
    url = restore()
    lake = slatelake.open(url)
    plan = lake.maintenance.plan(PassRequest(options=OPTIONS), batch_tables=SMALL)
    doc = plan.batches[0].to_dict()
    doc["tables"] = [["main", "t0'); DROP TABLE t1; --"], ["main", "absent"]]
    result = lake.maintenance.batch(BatchOrder.from_dict(doc))
    assert isinstance(result, BatchResult) and not result.deferred
    assert result.steps[0].counts == {"rows_flushed": 0}
    report = lake.maintenance.finish(plan, [result])
    assert report.status == "succeeded"
    with slatelake.connect(url, read_only=True) as s:
        assert s.sql("SELECT count(*) FROM t1").fetchone()[0] > 0  # type: ignore[index]


def test_maintain_parallel_from_the_shell(
    restore: Callable[[], str], capsys: pytest.CaptureFixture[str]
) -> None:
    url = restore()
    options = [a for k, v in OPTIONS.items() for a in ("--option", f"{k}={v}")]
    assert main(["maintain", url, "--parallel", "2", "--json", *options]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["status"] == "succeeded" and doc["batches"] == 5  # ceil(10 / (2 workers * 4))
    flushed = f"flushed {ROUNDS * SMALL} rows across {SMALL} tables"
    assert doc["steps"][1]["detail"].startswith(flushed)
    for bad in ("0", "65", "two"):
        with pytest.raises(SystemExit) as exit_:
            main(["maintain", url, "--parallel", bad])
        assert exit_.value.code == 2
        assert "expected 1 to 64 worker processes" in capsys.readouterr().err
    assert main(["maintain", url, "--parallel", "2", "--threshold"]) == 2
    assert "--parallel fans out one pass" in capsys.readouterr().err


def test_a_fanned_out_pass_refuses_options_its_batches_could_not_read(
    restore: Callable[[], str],
) -> None:
    """Bound options have no spelling to hand a batch: refused before the
    lease is taken, rather than batches running with other options."""
    url = restore()
    bound = PassRequest(options=OPTIONS).bound()
    with pytest.raises(MaintenanceConfigError, match="hands its options to its batches"):
        slatelake.open(url).maintenance.plan(PassRequest(options=bound))
    assert PassLease(LakeLocation.parse(url)).current() is None  # no lease was taken
