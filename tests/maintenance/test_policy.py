"""Maintenance policies kept on the lake: resolution (table over schema over
lake, field by field), invocation options over the policy, double opt-in,
and the CLI."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

import slatelake
from slatelake import MaintenanceConfigError, NotFoundError, maintenance
from slatelake.cli import main
from slatelake.maintenance.option_values import Interval
from slatelake.maintenance.options import bind
from slatelake.maintenance.policy import FIELDS, PolicyRow, Scope, parse_fields, resolve
from slatelake.maintenance.policy_plan import plan
from slatelake.maintenance.report import SKIPPED

# Three spellings per field, one per scope (lake, schema, table), each parsing
# to a value unlike the default and unlike the others.
SPELLED: dict[str, tuple[str, str, str]] = {
    "enabled": ("true", "false", "true"),
    "retention": ("14d", "12h", "30m"),
    "compaction": ("false", "true", "false"),
    "target_file_size": ("128MB", "1GiB", "64000000"),
    "small_file_min_count": ("20", "5", "99"),
    "rewrite_delete_threshold": ("0.5", "0.1", "0.9"),
    "cleanup_grace": ("2 days", "6h", "90m"),
    "orphan_min_age": ("3d", "1h30m", "45m"),
    "flush_inlined": ("false", "true", "false"),
    "orphan_age_floor_override": ("true", "false", "true"),
    # set on the lake's row only (set_fields refuses it below); resolve is generic
    "cron": ("0 3 * * *", "*/15 * * * *", "0 0 1 * *"),
    "keep": ("daily:30", "hourly:24,daily:7", "monthly:12"),
}


def _row(kind: str, fields: dict[str, str], schema: str | None = None, table: str | None = None):
    return PolicyRow(Scope(kind, schema, table), parse_fields(fields), 0, None)


def test_every_field_is_covered() -> None:
    assert set(SPELLED) == set(FIELDS)


@pytest.mark.parametrize("name", sorted(FIELDS))
def test_a_field_resolves_table_over_schema_over_lake_over_the_default(name: str) -> None:
    lake_v, schema_v, table_v = (parse_fields({name: s})[name] for s in SPELLED[name])
    assert len({repr(lake_v), repr(schema_v), repr(table_v), repr(FIELDS[name].default)}) == 4 or (
        name in ("enabled", "compaction", "flush_inlined", "orphan_age_floor_override")
    )
    on = {"enabled": "true"} if name != "enabled" else {}
    rows = [
        _row("lake", {**on, name: SPELLED[name][0]}),
        _row("schema", {name: SPELLED[name][1]}, "s"),
        _row("table", {name: SPELLED[name][2]}, "s", "t"),
    ]
    assert resolve(rows, "s", "t")[name] == table_v
    assert resolve(rows, "s", "t").sources[name] == "table s.t"
    assert resolve(rows, "s", "other")[name] == schema_v
    assert resolve(rows, "s", "other").sources[name] == "schema s"
    assert resolve(rows, "main", "t")[name] == lake_v
    assert resolve(rows, "main", "t").sources[name] == "lake"
    bare = [_row("lake", on)] if on else []
    assert resolve(bare, "s", "t")[name] == FIELDS[name].default
    assert resolve(bare, "s", "t").sources[name] == (
        "lake" if name == "enabled" and on else "default"
    )


def test_fields_fall_through_one_by_one() -> None:
    rows = [
        _row("lake", {"enabled": "true", "retention": "14d", "cleanup_grace": "2d"}),
        _row("table", {"retention": "1h"}, "main", "t"),
    ]
    resolved = resolve(rows, "main", "t")
    assert (resolved["retention"], resolved["cleanup_grace"]) == (3600.0, 2 * 86400.0)
    assert resolved["orphan_min_age"] == 86400.0  # the default


def test_the_lake_switch_gates_every_scope() -> None:
    rows = [_row("table", {"enabled": "true"}, "main", "t")]
    assert resolve(rows, "main", "t")["enabled"] is False
    rows.append(_row("lake", {"enabled": "false"}))
    assert resolve(rows, "main", "t")["enabled"] is False


def _steps(rows: list[PolicyRow], given: dict[str, str] | None = None, tables=()) -> Any:  # noqa: ANN001
    return plan(rows, bind(given or {}), list(tables))


LAKE_ON = {"enabled": "true"}


@pytest.mark.parametrize(
    ("field", "value", "option", "step", "param", "expected"),
    [
        ("retention", "14d", "MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN", "expire_snapshots",
         "older_than", Interval("1 hour", 3600.0)),
        ("cleanup_grace", "2d", "MAINTENANCE_CLEANUP_OLD_FILES_OLDER_THAN", "cleanup_old_files",
         "older_than", Interval("1 hour", 3600.0)),
        ("orphan_min_age", "2d", "MAINTENANCE_DELETE_ORPHANED_FILES_OLDER_THAN",
         "delete_orphaned_files", "older_than", Interval("1 hour", 3600.0)),
        ("target_file_size", "128MB", "MAINTENANCE_MERGE_ADJACENT_FILES_MAX_FILE_SIZE",
         "merge_adjacent_files", "max_file_size", 1000),
        ("rewrite_delete_threshold", "0.5", "MAINTENANCE_REWRITE_DATA_FILES_DELETE_THRESHOLD",
         "rewrite_data_files", "delete_threshold", 0.9),
    ],
)  # fmt: skip
def test_an_option_given_to_a_run_overrides_its_policy_field(
    field: str, value: str, option: str, step: str, param: str, expected: object
) -> None:
    rows = [_row("lake", {**LAKE_ON, field: value})]
    from_policy = _steps(rows).options.steps[step]
    assert from_policy.enabled and param in from_policy.params
    assert from_policy.params[param] != expected
    given = {option: "1 hour" if isinstance(expected, Interval) else str(expected)}
    overridden = _steps(rows, given).options.steps[step]
    got = overridden.params[param]
    assert overridden.enabled and (got.seconds if isinstance(got, Interval) else got) == (
        expected.seconds if isinstance(expected, Interval) else expected
    )


@pytest.mark.parametrize(
    ("field", "option", "step"),
    [
        ("compaction", "MAINTENANCE_MERGE_ADJACENT_FILES", "merge_adjacent_files"),
        ("compaction", "MAINTENANCE_REWRITE_DATA_FILES", "rewrite_data_files"),
        ("flush_inlined", "MAINTENANCE_FLUSH_INLINED_DATA", "flush_inlined_data"),
    ],
)
def test_a_step_switch_given_to_a_run_overrides_its_policy_switch(
    field: str, option: str, step: str
) -> None:
    on = [_row("lake", {**LAKE_ON, field: "true"})]
    off = [_row("lake", {**LAKE_ON, field: "false"})]
    assert _steps(on).options.steps[step].enabled
    assert not _steps(off).options.steps[step].enabled
    assert not _steps(on, {option: "false"}).options.steps[step].enabled
    assert _steps(off, {option: "true"}).options.steps[step].enabled


def test_cleanup_all_given_to_a_run_replaces_the_policys_grace() -> None:
    rows = [_row("lake", LAKE_ON)]
    given = {"MAINTENANCE_CLEANUP_OLD_FILES_CLEANUP_ALL": "true"}
    assert _steps(rows, given).options.steps["cleanup_old_files"].params == {"cleanup_all": True}


def test_without_an_enabled_lake_policy_a_run_has_only_its_options() -> None:
    rows = [_row("lake", {"retention": "0s"}), _row("table", {"enabled": "true"}, "main", "t")]
    planned = _steps(rows, {}, [("main", "t")])
    assert planned.policy is None
    assert not any(cfg.enabled for cfg in planned.options.steps.values())
    # the small-file count feeds the threshold trigger, not the chain's options
    assert resolve([_row("lake", {"small_file_min_count": "3"})])["small_file_min_count"] == 3


def test_lake_wide_steps_keep_the_longest_history_any_table_asks_for() -> None:
    rows = [
        _row("lake", {**LAKE_ON, "retention": "1d"}),
        _row("table", {"retention": "30d", "cleanup_grace": "3d"}, "main", "audit"),
    ]
    planned = _steps(rows, {}, [("main", "audit"), ("main", "t")])
    steps = planned.options.steps
    assert steps["expire_snapshots"].params["older_than"].seconds == 30 * 86400.0
    assert steps["cleanup_old_files"].params["older_than"].seconds == 3 * 86400.0


@pytest.mark.parametrize(
    ("field", "bad"),
    [
        ("retention", "forever"),
        ("retention", "-1d"),
        ("retention", "\uff11d"),
        ("enabled", "maybe"),
        ("small_file_min_count", "0"),
        ("small_file_min_count", "1e3"),
        ("rewrite_delete_threshold", "1.5"),
        ("rewrite_delete_threshold", "nan"),
        ("target_file_size", "12 parsecs"),
        ("target_file_size", "0"),
        ("no_such_field", "1"),
    ],
)
def test_a_bad_field_is_refused_naming_it(field: str, bad: str) -> None:
    with pytest.raises(MaintenanceConfigError, match=field):
        parse_fields({field: bad})


# -- on a lake ------------------------------------------------------------------
def _churn(tmp_path: Path) -> str:
    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path / 'data'}/") as s:
        s.sql("CREATE SCHEMA s1")
        s.sql("CREATE TABLE a (x INTEGER)")
        s.sql("CREATE TABLE s1.b (x INTEGER)")
        for _ in range(3):
            s.sql("INSERT INTO a SELECT range FROM range(2000)")
            s.sql("INSERT INTO s1.b SELECT range FROM range(2000)")
            s.sql("INSERT INTO a VALUES (-1)")
    return url


def _state(url: str, data: Path) -> tuple[list[int], set[str]]:
    with slatelake.connect(url, read_only=True) as s:
        snaps = [r[0] for r in s.sql("SELECT snapshot_id FROM lake.snapshots()").fetchall()]
    return sorted(snaps), {str(p) for p in data.rglob("*") if p.is_file()}


def _files(url: str, schema: str, table: str) -> int:
    with slatelake.connect(url, read_only=True) as s:
        sql = "SELECT count(*) FROM ducklake_list_files('lake', ?, schema => ?)"
        return s.sql(sql, params=[table, schema]).fetchone()[0]


NOW = {
    "retention": "0s",
    "cleanup_grace": "0s",
    "orphan_min_age": "0s",
    "orphan_age_floor_override": "true",  # nothing writes while these tests run a pass
}


def test_a_scheduled_tick_without_an_enabled_policy_changes_nothing(tmp_path: Path) -> None:
    url = _churn(tmp_path)
    maintenance.set_policy(url, NOW)  # every field set, but not enabled
    before = _state(url, tmp_path / "data")
    report = maintenance.run(url, {}, trigger="scheduled")
    assert report.policy is None
    ducklake_steps = [s for s in report.steps if not s.step.startswith(("sweep", "compact"))]
    assert all(s.status == SKIPPED and s.detail == "not configured" for s in ducklake_steps)
    assert _state(url, tmp_path / "data") == before


def test_an_enabled_policy_runs_the_chain_with_no_options(tmp_path: Path) -> None:
    url = _churn(tmp_path)
    snapshots, _ = _state(url, tmp_path / "data")
    maintenance.set_policy(url, {"enabled": "true", **NOW})
    report = maintenance.run(url, {}, trigger="scheduled")
    assert report.policy is not None and report.policy["retention"] == "0ms"
    counts = {s.step: s.counts for s in report.steps}
    assert counts["expire_snapshots"]["snapshots_expired"] == len(snapshots) - 1
    assert counts["flush_inlined_data"]["rows_flushed"] == 3
    assert counts["merge_adjacent_files"]["files_processed"] > 0
    assert counts["cleanup_old_files"]["files_deleted"] > 0
    # all the churn expired; the flush and the merge made the snapshots after it
    assert min(_state(url, tmp_path / "data")[0]) == max(snapshots)


def test_a_table_policy_turns_compaction_off_for_that_table_only(tmp_path: Path) -> None:
    url = _churn(tmp_path)
    maintenance.set_policy(url, {"enabled": "true"})
    maintenance.set_policy(url, {"compaction": "false"}, table="s1.b")
    before_b = _files(url, "s1", "b")
    report = maintenance.run(url, {})
    assert report.step("merge_adjacent_files").detail.endswith("across 1 tables")
    assert _files(url, "s1", "b") == before_b
    assert _files(url, "main", "a") < before_b


def test_options_given_to_a_run_override_an_enabled_policy(tmp_path: Path) -> None:
    url = _churn(tmp_path)
    maintenance.set_policy(url, {"enabled": "true", **NOW})
    before = _state(url, tmp_path / "data")
    off = {f"MAINTENANCE_{s.upper()}": "false" for s in (
        "expire_snapshots", "flush_inlined_data", "merge_adjacent_files", "rewrite_data_files",
        "cleanup_old_files", "delete_orphaned_files")}  # fmt: skip
    report = maintenance.run(url, off)
    assert report.policy is not None
    assert _state(url, tmp_path / "data") == before


def test_two_writers_setting_fields_at_once_keep_both(tmp_path: Path) -> None:
    url = _churn(tmp_path)
    errors: list[BaseException] = []

    def set_one(field: str, value: str) -> None:
        try:
            with slatelake.connect(url) as s:
                maintenance.set_policy(s, {field: value})
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [
        threading.Thread(target=set_one, args=("retention", "14d")),
        threading.Thread(target=set_one, args=("cleanup_grace", "2d")),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    (row,) = maintenance.policies(url).rows
    assert row.fields == {"retention": 14 * 86400.0, "cleanup_grace": 2 * 86400.0}


def test_a_policy_names_a_schema_or_table_the_lake_has(tmp_path: Path) -> None:
    url = _churn(tmp_path)
    with pytest.raises(NotFoundError, match="no table main.nope"):
        maintenance.set_policy(url, {"retention": "1d"}, table="nope")
    with pytest.raises(NotFoundError, match="no schema s2"):
        maintenance.set_policy(url, {"retention": "1d"}, schema="s2")
    with slatelake.connect(url) as s:
        s.sql('CREATE TABLE "it\'s a.table" (x INTEGER)')
    maintenance.set_policy(url, {"retention": "1d"}, schema="main", table="it's a.table")
    view = maintenance.policies(url)
    assert view.tables[("main", "it's a.table")]["retention"] == 86400.0
    assert view.tables[("main", "a")].sources["retention"] == "default"


def test_the_cli_sets_shows_and_unsets_a_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _churn(tmp_path)
    assert main(["policy", "set", url, "--enabled", "--retention", "14d", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)  # the stored row's to_dict()
    assert row["fields"] == {"enabled": True, "retention": 14 * 86400.0}
    assert main(["policy", "set", url, "--table", "s1.b", "--no-compaction"]) == 0
    assert "table s1.b: compaction=false" in capsys.readouterr().out
    assert main(["policy", "show", url, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["enabled"] is True
    by_table = {(t["schema"], t["table"]): t["policy"] for t in doc["tables"]}
    assert by_table[("s1", "b")]["compaction"] == {
        "value": False,
        "shown": "false",
        "from": "table s1.b",
    }
    assert by_table[("main", "a")]["retention"]["shown"] == "14d"
    assert main(["policy", "show", url]) == 0
    assert "lake policy enabled" in capsys.readouterr().out
    assert main(["policy", "unset", url, "--table", "s1.b", "--all"]) == 0
    assert main(["policy", "unset", url, "retention"]) == 0
    capsys.readouterr()
    assert main(["policy", "show", url, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [r["fields"] for r in rows] == [{"enabled": True}]


@pytest.mark.parametrize(
    "argv",
    [
        ["--retention", "forever"],
        ["--retention", "1e9"],
        ["--small-file-min-count", "-3"],
        ["--target-file-size", "\uff11MB"],
    ],
)
def test_the_cli_refuses_a_bad_policy_value_with_exit_2_and_writes_nothing(
    tmp_path: Path, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    url = _churn(tmp_path)
    assert main(["policy", "set", url, *argv]) == 2
    assert "policy" in capsys.readouterr().err
    assert maintenance.policies(url).rows == []
