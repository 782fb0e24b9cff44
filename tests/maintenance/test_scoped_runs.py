"""Manual runs limited to some operations and to one table, from Python and
the CLI: what runs, what is skipped and why, what is refused before the lake
is touched, and what the status window records."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import slatelake
from slatelake import maintenance
from slatelake.cli import main
from slatelake.maintenance import RAN, SKIPPED, MaintenanceConfigError
from slatelake.maintenance.health import health as lake_health
from slatelake.maintenance.options import DUCKLAKE_STEPS, STEPS

EVERYTHING = {
    "MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN": "0s",
    "MAINTENANCE_FLUSH_INLINED_DATA": "true",
    "MAINTENANCE_MERGE_ADJACENT_FILES": "true",
    "MAINTENANCE_REWRITE_DATA_FILES_DELETE_THRESHOLD": "0.01",
    "MAINTENANCE_CLEANUP_OLD_FILES_CLEANUP_ALL": "true",
    "MAINTENANCE_DELETE_ORPHANED_FILES_CLEANUP_ALL": "true",
    "MAINTENANCE_ORPHAN_AGE_FLOOR_OVERRIDE": "true",
}
SWEEPS_AND_STORE = STEPS[len(DUCKLAKE_STEPS) :]


@pytest.fixture(scope="module")
def _built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two tables of small files and inlined rows, built once per module."""
    root = tmp_path_factory.mktemp("scoped")
    with slatelake.connect((root / "lake").as_uri(), data_path=f"{root / 'data'}/") as s:
        s.sql("CREATE SCHEMA s1")
        s.sql("CREATE TABLE a (x INTEGER)")
        s.sql("CREATE TABLE s1.b (x INTEGER)")
        for _ in range(3):
            s.sql("INSERT INTO a SELECT range FROM range(2000)")
            s.sql("INSERT INTO s1.b SELECT range FROM range(2000)")
        s.sql("INSERT INTO a VALUES (-1)")
        s.sql("INSERT INTO s1.b VALUES (-1)")
    return root


@pytest.fixture
def lake(_built: Path, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The built lake at its own path (the catalog records it), put back as
    it was after the test."""
    pristine = tmp_path / "pristine"
    shutil.copytree(_built, pristine)
    yield (_built / "lake").as_uri(), _built / "data"
    shutil.rmtree(_built)
    shutil.copytree(pristine, _built)


def _snapshots(url: str) -> set[int]:
    with slatelake.connect(url, read_only=True) as s:
        return {r[0] for r in s.sql("SELECT snapshot_id FROM lake.snapshots()").fetchall()}


def _files(url: str) -> dict[str, int]:
    with slatelake.connect(url, read_only=True) as s:
        sql = "SELECT count(*) FROM ducklake_list_files('lake', ?, schema => ?)"
        return {
            f"{sch}.{t}": s.sql(sql, params=[t, sch]).fetchone()[0]
            for sch, t in (("main", "a"), ("s1", "b"))
        }


def inlined_counts(url: str, table: str) -> int:
    """Rows of ``table`` still inlined, waiting for a flush."""
    schema, _, name = table.rpartition(".")
    (found,) = [
        t for t in lake_health(url).tables if (t.schema, t.table) == (schema or "main", name)
    ]
    return found.inlined_rows


def test_operations_run_only_the_named_steps_and_skip_the_rest_saying_why(lake) -> None:  # noqa: ANN001
    url, _ = lake
    snapshots = _snapshots(url)
    report = maintenance.run(url, EVERYTHING, operations="merge, flush")
    assert report.operations == ["flush", "merge"] and report.table is None
    by_step = {s.step: s for s in report.steps}
    assert by_step["flush_inlined_data"].status == RAN
    assert by_step["merge_adjacent_files"].status == RAN
    # three inserts and the flushed file, in each of two tables
    assert by_step["merge_adjacent_files"].counts["files_processed"] == 8
    for step in ("expire_snapshots", "rewrite_data_files", "cleanup_old_files",
                 "delete_orphaned_files", *SWEEPS_AND_STORE):  # fmt: skip
        assert (by_step[step].status, by_step[step].detail) == (
            SKIPPED,
            "left out: this run's operations are flush, merge",
        ), step
    assert snapshots <= _snapshots(url)  # nothing expired
    (recorded, *_) = maintenance.status(url)
    assert (recorded.operations, recorded.table) == (["flush", "merge"], None)


def test_a_table_scope_works_on_that_table_only(lake) -> None:  # noqa: ANN001
    url, _ = lake
    snapshots, files = _snapshots(url), _files(url)
    report = maintenance.run(url, EVERYTHING, table="s1.b")
    assert (report.operations, report.table) == (None, "s1.b")
    assert _files(url)["main.a"] == files["main.a"] and inlined_counts(url, "a") == 1
    assert _files(url)["s1.b"] == 1 and inlined_counts(url, "s1.b") == 0
    assert report.step("merge_adjacent_files").detail.endswith("across 1 tables")
    for step in ("expire_snapshots", "cleanup_old_files", "delete_orphaned_files"):
        assert report.step(step).detail == "lake-wide; this run is scoped to table s1.b"
    for step in SWEEPS_AND_STORE:
        assert report.step(step).status == SKIPPED
    assert snapshots <= _snapshots(url)
    assert maintenance.status(url)[0].table == "s1.b"


def test_a_scope_limits_what_an_enabled_lake_policy_runs(lake) -> None:  # noqa: ANN001
    url, _ = lake
    maintenance.set_policy(url, {"enabled": "true", "retention": "0s", "cleanup_grace": "0s"})
    snapshots, files = _snapshots(url), _files(url)
    report = maintenance.run(url, {}, operations=["merge"], table="a")
    assert report.policy is not None
    assert report.step("merge_adjacent_files").status == RAN
    assert report.step("flush_inlined_data").detail.startswith("left out")
    assert _files(url) == {"main.a": 1, "s1.b": files["s1.b"]}
    assert snapshots <= _snapshots(url)


def test_a_named_operation_nothing_enables_says_so(lake) -> None:  # noqa: ANN001
    url, _ = lake
    report = maintenance.run(url, {"MAINTENANCE_FLUSH_INLINED_DATA": "true"}, operations="merge")
    assert report.step("merge_adjacent_files").detail == (
        "not configured; named in the operations, but no option or policy enables it"
    )


@pytest.mark.parametrize(
    ("operations", "table", "message"),
    [
        ("flush,vacuum", None, "unknown operation 'vacuum'; the operations are expire, flush, "
         "merge, rewrite, cleanup, orphans"),
        (["flush", "flush"], None, "operation flush is given twice"),
        ("", None, "unknown operation ''"),
        ([], None, "no operations given"),
        (["flush", 7], None, "operation 7: expected a name"),
        (5, None, "operations 5: expected names"),
        ("ﬂush", None, "unknown operation"),
        ("expire,merge", "s1.b", "operations expire act on the whole lake and cannot be scoped "
         "to table s1.b"),
        (None, "s1.", "table 's1.': expected a table name"),
        (None, "a\x00b", "table 'a\\x00b'"),
        (None, 3, "table 3: expected a table name"),
    ],
)  # fmt: skip
def test_a_bad_scope_is_refused_before_the_lake_is_touched(
    tmp_path: Path, operations: Any, table: Any, message: str
) -> None:
    url = (tmp_path / "never").as_uri()
    with pytest.raises(MaintenanceConfigError) as refused:
        maintenance.run(url, EVERYTHING, data_path=f"{tmp_path}/d/", operations=operations,
                        table=table)  # fmt: skip
    assert message in str(refused.value)
    assert not (tmp_path / "never").exists()


def test_a_table_the_lake_lacks_is_refused_naming_it(lake) -> None:  # noqa: ANN001
    url, _ = lake
    window = maintenance.status(url)
    with pytest.raises(slatelake.NotFoundError, match="no table main.nope in the lake at"):
        maintenance.run(url, EVERYTHING, table="nope")
    with pytest.raises(slatelake.NotFoundError, match="no table s2.b"):
        maintenance.run(url, EVERYTHING, table="s2.b", dry_run=True)
    assert len(maintenance.status(url)) == len(window)  # no pass recorded


def test_the_cli_runs_a_scoped_pass_and_refuses_a_bad_one_with_exit_2(
    lake,
    capsys: pytest.CaptureFixture[str],  # noqa: ANN001
) -> None:
    url, _ = lake
    options = [a for k, v in EVERYTHING.items() for a in ("--option", f"{k}={v}")]
    code = main(["maintain", url, *options, "--operations", "flush,merge", "--table", "s1.b",
                 "--json"])  # fmt: skip
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["operations"], doc["table"]) == (["flush", "merge"], "s1.b")
    assert _files(url)["s1.b"] == 1
    assert main(["maintain", url, *options, "--operations", "flush,vacuum"]) == 2
    err = capsys.readouterr().err
    assert "unknown operation 'vacuum'; the operations are expire, flush, merge" in err
    assert main(["maintain", url, *options, "--operations", "cleanup", "--table", "a"]) == 2
    assert "cannot be scoped to table main.a" in capsys.readouterr().err
    assert main(["maintain", url, *options, "--table", "nope"]) == 1
    assert "no table main.nope" in capsys.readouterr().err


def test_a_table_whose_name_holds_a_dot_is_scoped_with_its_schema(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path / 'data'}/") as s:
        s.sql('CREATE TABLE "events.2026" (x INTEGER)')
        s.sql('INSERT INTO "events.2026" VALUES (1), (2)')
    flush = {"MAINTENANCE_FLUSH_INLINED_DATA": "true"}
    report = maintenance.run(url, flush, table="events.2026", schema="main")
    assert report.table == "main.events.2026"
    assert report.step("flush_inlined_data").counts == {"rows_flushed": 2}
    with pytest.raises(slatelake.NotFoundError, match="no table events.2026"):
        maintenance.run(url, flush, table="events.2026")  # read as schema "events"
    with pytest.raises(MaintenanceConfigError, match="without a table"):
        maintenance.run(url, flush, schema="main")
    argv = ["maintain", url, "--option", "MAINTENANCE_FLUSH_INLINED_DATA=true", "--json"]
    assert main([*argv, "--schema", "main", "--table", "events.2026"]) == 0
    assert json.loads(capsys.readouterr().out)["table"] == "main.events.2026"
