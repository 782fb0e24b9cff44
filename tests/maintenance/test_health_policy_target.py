"""Which files are small: health counts them against the target file size the
lake's policy sets (table > schema > lake, then DuckLake's own option, then
its default), the one definition the threshold trigger counts by, so the two
agree on which tables are due. Real lakes on files, real DuckDB and DuckLake."""

from __future__ import annotations

import contextlib

import pytest

import slatelake
from slatelake.maintenance import threshold
from slatelake.maintenance.health import DUCKLAKE_DEFAULT_TARGET_FILE_SIZE, health
from slatelake.maintenance.health_report import HealthPolicy, LakeHealth

FILES = 6  # per table, each its own INSERT
MIN_COUNT = 4
# Between the two tables' file sizes (~1 KB for busy, ~70 KB for wide).
TARGET = "8KB"
TARGET_BYTES = 8000


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Two tables of FILES Parquet files each: ``busy``'s a few hundred
    integers (about 1 KB a file), ``wide``'s thousands of rows (tens of KB)."""
    root = tmp_path_factory.mktemp("target")
    url = (root / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{root / 'data'}/") as s:
        s.sql("CREATE TABLE busy (id INTEGER)")
        s.sql("CREATE TABLE wide (id INTEGER, v VARCHAR)")
        for n in range(FILES):
            s.sql(f"INSERT INTO busy SELECT range FROM range({n * 200}, {n * 200 + 200})")
            s.sql(
                "INSERT INTO wide SELECT range, md5(range::VARCHAR) "
                f"FROM range({n * 2000}, {n * 2000 + 2000})"
            )
    return url


def _sizes(url: str) -> dict[str, list[int]]:
    with slatelake.connect(url, read_only=True) as s:
        sql = "SELECT data_file_size_bytes FROM ducklake_list_files('lake', ?)"
        return {t: [r[0] for r in s.sql(sql, params=[t]).fetchall()] for t in ("busy", "wide")}


def _small(report: LakeHealth) -> dict[str, tuple[int, int]]:
    return {t.table: (t.target_file_size, t.small_files) for t in report.tables}


def _due_by_health(report: LakeHealth, min_count: int) -> list[str]:
    return [f"{t.schema}.{t.table}" for t in report.tables if t.small_files >= min_count]


def test_health_counts_small_files_against_the_policy_target_size(url: str) -> None:
    sizes = _sizes(url)
    assert max(sizes["busy"]) < TARGET_BYTES < min(sizes["wide"]), sizes  # the lake's premise
    lake = slatelake.open(url)
    before = _small(lake.maintenance.health())
    assert before == {  # no policy: DuckLake's default, where every file is small
        "busy": (DUCKLAKE_DEFAULT_TARGET_FILE_SIZE, FILES),
        "wide": (DUCKLAKE_DEFAULT_TARGET_FILE_SIZE, FILES),
    }
    try:
        lake.policy.set({"target_file_size": TARGET})  # not enabled: health previews it
        after = lake.maintenance.health()
        assert _small(after) == {"busy": (TARGET_BYTES, FILES), "wide": (TARGET_BYTES, 0)}
        wide = next(t for t in after.tables if t.table == "wide")
        assert wide.merge_candidate_files == 0 and not wide.merge_threshold_reached
        with slatelake.connect(url, read_only=True) as s:  # a session reads it alike
            assert _small(health(s)) == _small(after)
    finally:
        lake.policy.unset()


def test_health_and_the_threshold_trigger_agree_on_which_tables_are_due(url: str) -> None:
    lake = slatelake.open(url)
    fields = {"enabled": "true", "small_file_min_count": str(MIN_COUNT)}
    try:
        lake.policy.set({**fields, "target_file_size": TARGET})
        with slatelake.connect(url, read_only=True) as s:
            due = [d.name for d in threshold.due_tables(s)]
        assert due == ["main.busy"]
        assert _due_by_health(lake.maintenance.health(), MIN_COUNT) == due
        lake.policy.set({"target_file_size": "1MB"})  # now every file is under it
        with slatelake.connect(url, read_only=True) as s:
            due = [d.name for d in threshold.due_tables(s)]
        assert due == ["main.busy", "main.wide"]
        assert _due_by_health(lake.maintenance.health(), MIN_COUNT) == due
    finally:
        lake.policy.unset()


def test_health_and_the_threshold_trigger_agree_when_a_table_policy_sets_its_own_target(
    url: str,
) -> None:
    lake = slatelake.open(url)
    fields = {"enabled": "true", "small_file_min_count": str(MIN_COUNT)}
    try:
        lake.policy.set({**fields, "target_file_size": TARGET})
        lake.policy.set({"target_file_size": "1MB"}, table="wide")
        report = lake.maintenance.health()
        assert _due_by_health(report, MIN_COUNT) == ["main.busy", "main.wide"]
        with slatelake.connect(url, read_only=True) as s:
            assert [d.name for d in threshold.due_tables(s)] == _due_by_health(report, MIN_COUNT)
    finally:
        lake.policy.unset(table="wide")
        lake.policy.unset()


def test_a_table_policy_target_size_wins_over_the_lakes_and_auto_falls_back_to_ducklake(
    url: str,
) -> None:
    lake = slatelake.open(url)
    try:
        lake.policy.set({"target_file_size": TARGET})
        lake.policy.set({"target_file_size": "1MB"}, table="wide")
        lake.policy.set({"target_file_size": "auto"}, table="busy")
        assert _small(lake.maintenance.health()) == {
            "busy": (DUCKLAKE_DEFAULT_TARGET_FILE_SIZE, FILES),  # auto: DuckLake's own
            "wide": (1_000_000, FILES),
        }
        lake.policy.unset(table="busy")
        lake.policy.unset(table="wide")
        lake.policy.set({"target_file_size": "1MB"}, schema="main")
        assert _small(lake.maintenance.health()) == {
            "busy": (1_000_000, FILES),
            "wide": (1_000_000, FILES),
        }
    finally:
        for scope in ({"table": "busy"}, {"table": "wide"}, {"schema": "main"}, {}):
            with contextlib.suppress(slatelake.MisconfigurationError):  # no row there
                lake.policy.unset(**scope)


def test_a_callers_health_policy_target_size_still_wins_over_the_lake_policy(url: str) -> None:
    lake = slatelake.open(url)
    try:
        lake.policy.set({"target_file_size": TARGET})
        asked = lake.maintenance.health(HealthPolicy(target_file_size=1))
        assert _small(asked) == {"busy": (1, 0), "wide": (1, 0)}
    finally:
        lake.policy.unset()
