"""The maintenance API every surface calls: what each verb checks first, what
it reads, and what it returns."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import slatelake
from slatelake import maintenance
from slatelake.catalog.folder import Folder
from slatelake.catalog.lake import Lake
from slatelake.store.db import store_exists
from slatelake.store.location import LakeLocation
from tests.catalog.test_census import fast_compactor
from tests.test_cli_store import runs_lake

__all__ = ["fast_compactor", "runs_lake"]  # fixtures, used by name


@pytest.fixture(scope="module")
def _built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """One small lake per module; each test gets a fresh copy at the same path
    (the catalog records its absolute data path)."""
    work = tmp_path_factory.mktemp("api")
    with slatelake.connect((work / "lake").as_uri(), data_path=f"{work}/data/") as s:
        s.sql("CREATE TABLE t (id INTEGER)")
        s.sql("INSERT INTO t SELECT * FROM range(10)")
        s.sql("DELETE FROM t WHERE id < 3")
    pristine = work.with_name(work.name + "-pristine")
    shutil.copytree(work, pristine)
    return work, pristine


@pytest.fixture
def lake(_built: tuple[Path, Path]) -> str:
    work, pristine = _built
    shutil.rmtree(work)
    shutil.copytree(pristine, work)
    return (work / "lake").as_uri()


def test_a_refused_option_leaves_no_lake_behind(tmp_path: Path) -> None:
    url = (tmp_path / "new").as_uri()
    with pytest.raises(maintenance.MaintenanceConfigError, match="MAINTENANCE_VACUUM"):
        maintenance.run(url, {"MAINTENANCE_VACUUM": "true"}, data_path=f"{tmp_path}/data/")
    assert not store_exists(LakeLocation.parse(url))
    assert not (tmp_path / "new").exists() and not (tmp_path / "data").exists()


def test_an_unknown_trigger_is_refused_before_the_lake_is_opened(tmp_path: Path) -> None:
    with pytest.raises(slatelake.MisconfigurationError, match="trigger 'cron'"):
        maintenance.run((tmp_path / "absent").as_uri(), trigger="cron")


def test_a_pass_on_a_url_reports_every_step_and_each_sweep_switch(lake: str) -> None:
    report = maintenance.run(
        lake,
        {"MAINTENANCE_FLUSH_INLINED_DATA": "true", "MAINTENANCE_SWEEP_FILE_STATS": "false"},
    )
    assert report.trigger == "manual" and not report.failed
    assert report.step("flush_inlined_data").status == maintenance.RAN
    assert report.step("merge_adjacent_files").status == maintenance.SKIPPED
    assert report.step("sweep_indexes").status == maintenance.RAN
    skipped = report.step("sweep_file_stats")
    assert (skipped.status, skipped.detail) == (
        maintenance.SKIPPED,
        "MAINTENANCE_SWEEP_FILE_STATS is false",
    )
    assert report.step("sweep_inlined_tables").status == maintenance.RAN


def test_a_pass_on_a_session_uses_the_options_it_connected_with(lake: str) -> None:
    options = {"MAINTENANCE_MERGE_ADJACENT_FILES": "true"}
    with slatelake.connect(lake, options=options) as session:
        report = maintenance.run(session)
        assert session.sql("SELECT count(*) FROM t").fetchone() == (7,)
    assert report.step("merge_adjacent_files").status == maintenance.RAN
    assert report.step("expire_snapshots").status == maintenance.SKIPPED


def test_status_reads_the_newest_pass_without_loading_the_catalog(
    lake: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = maintenance.run(lake)
    second = maintenance.run(lake, trigger="scheduled")
    loads: list[str] = []
    materialize = Lake.materialize

    def counted(self: Lake) -> object:
        loads.append(self.location.url)
        return materialize(self)

    monkeypatch.setattr(Lake, "materialize", counted)
    window = maintenance.status(lake)  # both records still in the log's tail
    assert [p.started_at for p in window] == [second.started_at, first.started_at]
    assert [p.trigger for p in window] == ["scheduled", "manual"]
    assert loads == []
    Folder(LakeLocation.parse(lake), margin_s=0).fold_once()
    assert [p.started_at for p in maintenance.status(lake)] == [
        second.started_at,
        first.started_at,
    ]  # and from the store once folded
    assert loads == []


def test_status_of_a_lake_that_is_not_there_names_it(tmp_path: Path) -> None:
    url = (tmp_path / "absent").as_uri()
    with pytest.raises(slatelake.NotFoundError, match="absent"):
        maintenance.status(url)


def test_census_has_a_row_for_every_subspace(lake: str) -> None:
    census = maintenance.census(lake)
    assert [row.subspace for row in census.subspaces] == [*maintenance.SUBSPACES, "unknown"]
    assert census.objects is not None and census.objects["total"]["objects"] > 0
    assert all(row.live is None for row in census.subspaces)
    live = maintenance.census(lake, live=True, objects=False)
    assert live.objects is None and live.row("sys").live is not None


def test_compact_store_checks_its_inputs_before_it_opens_the_store(tmp_path: Path) -> None:
    absent = (tmp_path / "absent").as_uri()
    with pytest.raises(slatelake.MisconfigurationError, match="require_completed needs a wait"):
        maintenance.compact_store(absent, require_completed=True)
    with pytest.raises(slatelake.MisconfigurationError, match="unknown subspace 'currant'"):
        maintenance.compact_store(absent, subspace="currant")
    with pytest.raises(slatelake.MisconfigurationError, match="unknown subspace"):
        maintenance.compact_store(absent, subspace="\u0131ndex")  # dotless i upper-cases to I
    with pytest.raises(slatelake.NotFoundError):
        maintenance.compact_store(absent, subspace="index")


def test_a_merge_that_must_complete_raises_with_its_report_when_no_holder_runs(
    runs_lake: str,
) -> None:
    url = runs_lake  # sorted runs in current, and no holder to execute a merge
    with pytest.raises(maintenance.MergeIncompleteError, match="not completed: current pending"):
        maintenance.compact_store(url, subspace="current", wait_s=0.3, require_completed=True)
    try:
        maintenance.compact_store(url, subspace="current", wait_s=0.3, require_completed=True)
    except maintenance.MergeIncompleteError as exc:
        assert isinstance(exc.report, maintenance.CompactStoreReport)
        assert [(m.subspace, m.outcome, m.adopted) for m in exc.report.merges] == [
            ("current", "pending", True)  # the first submission, adopted, not doubled
        ]
    else:
        pytest.fail("a pending merge was reported complete")


def test_the_pass_lease_is_released_after_a_pass(lake: str) -> None:
    assert maintenance.pass_lease(lake) is None
    maintenance.run(lake)
    record = maintenance.pass_lease(lake)
    assert record is not None and not record.held()
    assert maintenance.break_lease(lake).broken is None  # nothing held, nothing broken
