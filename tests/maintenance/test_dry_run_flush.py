"""A dry run's flush plan counts what the pass then flushes: DuckLake's
``rows_flushed`` counts every inlined row, ended ones too, and a table whose
only inlined change is deletions of file rows is flushed (a delete file) with
no rows counted. Checked against the pass that follows the plan on the same
lake, the tables it flushed read from the catalog before and after. Real
lakes on files, real DuckDB and DuckLake."""

from __future__ import annotations

from pathlib import Path

import slatelake
from slatelake import PassRequest
from slatelake.ducklake.session import META_DB
from slatelake.ducklake.sql import ident

FLUSH = {"MAINTENANCE_FLUSH_INLINED_DATA": "true"}
BIG = 12345678901234567890123  # past 2^53: a flush would round it


def _lake(tmp_path: Path) -> slatelake.LakeHandle:
    """``ended``: inlined rows, some deleted again, across a schema change
    (two inlined-data tables); ``deletes``: a Parquet file and inlined
    deletions of its rows only; ``parquet``: nothing inlined; ``wide``:
    inlined HUGEINT rows a flush would round, so the pass leaves them."""
    lake = slatelake.open((tmp_path / "lake").as_uri(), data_path=str(tmp_path / "data"))
    lake.create()
    with lake.connect() as s:
        s.sql("CREATE TABLE ended (id INTEGER, v VARCHAR)")
        for lo in range(0, 30, 5):
            s.sql(f"INSERT INTO ended SELECT range, 'x' FROM range({lo}, {lo + 5})")
        s.sql("INSERT INTO ended VALUES (100, 'y'), (101, 'z')")
        s.sql("DELETE FROM ended WHERE id = 100")
        s.sql("ALTER TABLE ended ADD COLUMN w INTEGER")
        s.sql("INSERT INTO ended VALUES (102, 'q', 1)")
        s.sql("DELETE FROM ended WHERE id IN (0, 101)")
        s.sql("CREATE TABLE deletes (id INTEGER)")
        s.sql("INSERT INTO deletes SELECT range FROM range(0, 1100)")  # a Parquet file
        s.sql("DELETE FROM deletes WHERE id < 3")  # inlined deletions of its rows
        s.sql("CREATE TABLE parquet (id INTEGER)")
        s.sql("INSERT INTO parquet SELECT range FROM range(0, 1100)")
        s.sql("CREATE TABLE wide (id INTEGER, h HUGEINT)")
        s.sql(f"INSERT INTO wide VALUES (1, {BIG}), (2, 2)")
    return lake


def _inlined(lake: slatelake.LakeHandle) -> dict[str, int]:
    """Rows in each live table's inlined-data and inlined-deletion tables
    (DuckLake's own tables, read straight from the session's copy)."""
    out: dict[str, int] = {}
    with lake.connect(read_only=True) as s:
        cur = s.con.cursor()
        ids = dict(
            cur.execute(
                f"SELECT table_id, table_name FROM {ident(META_DB)}.ducklake_table "
                "WHERE end_snapshot IS NULL"
            ).fetchall()
        )
        for name in s.state.inline_names():
            table_id = int(name.split("_")[3])  # ducklake_inlined_{data,delete}_<table id>...
            if table_id in ids:
                n = cur.execute(f"SELECT count(*) FROM {ident(META_DB)}.{ident(name)}").fetchone()
                out[ids[table_id]] = out.get(ids[table_id], 0) + int(n[0])
    return out


def test_a_dry_runs_flush_plan_counts_the_rows_and_tables_the_pass_then_flushes(
    tmp_path: Path,
) -> None:
    lake = _lake(tmp_path)
    before = _inlined(lake)
    # 33 rows written inline, three of them deleted again; parquet: nothing inlined
    assert before == {"ended": 33, "deletes": 3, "parquet": 0, "wide": 2}, before
    dry = lake.maintenance.run(PassRequest(options=FLUSH, dry_run=True))
    plan = dry.plan["flush_inlined_data"] if dry.plan is not None else None
    assert plan is not None
    assert _inlined(lake) == before  # the plan wrote nothing
    real = lake.maintenance.run(PassRequest(options=FLUSH))
    flush = real.step("flush_inlined_data")
    after = _inlined(lake)
    flushed = sorted(f"main.{t}" for t, n in before.items() if n and not after.get(t))
    assert flushed == ["main.deletes", "main.ended"]
    assert after.get("wide") == 2  # left inlined: a flush would round it
    assert plan.details["rows"] == flush.counts["rows_flushed"] == 33
    assert [i["table"] for i in plan.items] == flushed
    assert plan.total == len(flushed)
    assert {i["table"]: (i["rows"], i["deletions"]) for i in plan.items} == {
        "main.ended": (33, 0),
        "main.deletes": (0, 3),
    }
    assert plan.details["left_inlined"] == ["main.wide"]
    assert "would flush 33 inlined rows from 2 tables and 3 inlined deletions" in (
        dry.step("flush_inlined_data").detail
    )


def test_a_dry_run_scoped_to_one_table_plans_only_its_flush(tmp_path: Path) -> None:
    lake = _lake(tmp_path)
    request = PassRequest(options=FLUSH, dry_run=True, operations="flush", table="deletes")
    dry = lake.maintenance.run(request)
    assert dry.plan is not None
    plan = dry.plan["flush_inlined_data"]
    assert [(i["table"], i["rows"], i["deletions"]) for i in plan.items] == [("main.deletes", 0, 3)]
    real = lake.maintenance.run(PassRequest(options=FLUSH, operations="flush", table="deletes"))
    assert real.step("flush_inlined_data").counts["rows_flushed"] == plan.details["rows"] == 0
    assert _inlined(lake)["deletes"] == 0
