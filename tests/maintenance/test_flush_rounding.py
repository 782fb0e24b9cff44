"""A pass never flushes inlined rows a flush would round (maintenance/
flush_rounding.py): DuckLake 1.5.5 writes a HUGEINT or UHUGEINT, at any
depth, to Parquet as DOUBLE."""

from __future__ import annotations

from pathlib import Path

import slatelake
from slatelake import maintenance
from slatelake.ducklake import extensions
from slatelake.ducklake.session import META_DB
from slatelake.ducklake.sql import ident, literal

BIG = 12345678901234567890123  # past 2^53: a DOUBLE holds it rounded
LOW = -(2**127)  # HUGEINT's minimum: as a DOUBLE it reads back as nothing


def test_stock_ducklake_rounds_hugeint_values_it_flushes(tmp_path: Path) -> None:
    """The upstream defect the pass works around: if this stops failing on an
    upgrade of DuckLake, the pass may flush such tables again."""
    con = extensions.connect()
    con.execute(f"ATTACH 'ducklake:{tmp_path}/c.ducklake' AS lake (DATA_PATH '{tmp_path}/d/')")
    con.execute("CREATE TABLE lake.t (h HUGEINT, s STRUCT(u UHUGEINT))")
    con.execute(f"INSERT INTO lake.t VALUES ({BIG}, {{'u': {BIG}}})")
    con.execute("CALL ducklake_flush_inlined_data('lake')")
    (h, s) = con.execute("SELECT h, s FROM lake.t").fetchone()
    assert h != BIG and s["u"] != BIG
    assert abs(h - BIG) < BIG // 10**15


def _lake(tmp_path: Path) -> str:
    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path / 'data'}/") as s:
        s.sql("CREATE TABLE wide (id INTEGER, h HUGEINT)")
        s.sql(f"INSERT INTO wide VALUES (1, {BIG}), (2, '{LOW}'::HUGEINT)")
        s.sql("CREATE TABLE nested (id INTEGER, s STRUCT(u UHUGEINT))")
        s.sql(f"INSERT INTO nested VALUES (1, {{'u': {BIG}}})")
        s.sql("CREATE TABLE plain (id INTEGER, v VARCHAR)")
        s.sql("INSERT INTO plain VALUES (1, 'a'), (2, 'b')")
        s.sql("CREATE TABLE dropped (id INTEGER, h HUGEINT)")
        s.sql("ALTER TABLE dropped DROP COLUMN h")
        s.sql("INSERT INTO dropped VALUES (1)")
    return url


def _inlined(s: slatelake.Session, table: str) -> int:
    """Rows of ``table`` in the session's copy of DuckLake's inlined-data tables."""
    cur = s.con.cursor()
    meta = ident(META_DB)
    (table_id,) = cur.execute(
        f"SELECT table_id FROM {meta}.ducklake_table "
        f"WHERE table_name = {literal(table)} AND end_snapshot IS NULL"
    ).fetchone()
    names = [
        n for n in s.state.inline_names() if n.startswith(f"ducklake_inlined_data_{table_id}_")
    ]
    return sum(cur.execute(f"SELECT count(*) FROM {meta}.{ident(n)}").fetchone()[0] for n in names)


def test_a_pass_leaves_inlined_hugeint_rows_in_place_and_says_why(tmp_path: Path) -> None:
    url = _lake(tmp_path)
    report = maintenance.run(url, {"MAINTENANCE_FLUSH_INLINED_DATA": "true"})
    flush = report.step("flush_inlined_data")
    assert flush.status == "ran", flush.detail
    assert "left main.nested, main.wide inlined: a flush would round their HUGEINT" in flush.detail
    assert flush.counts["tables_left_inlined"] == 2
    assert flush.counts["rows_flushed"] == 3  # plain's two and dropped's one
    assert not report.work_pending
    with slatelake.connect(url) as s:
        assert s.sql("SELECT id, h FROM wide ORDER BY id").fetchall() == [(1, BIG), (2, LOW)]
        assert s.sql("SELECT s FROM nested").fetchall() == [({"u": BIG},)]
        assert (_inlined(s, "wide"), _inlined(s, "nested")) == (2, 1)
        assert (_inlined(s, "plain"), _inlined(s, "dropped")) == (0, 0)


def test_a_rewrite_leaves_out_a_hugeint_table_it_would_have_to_flush(tmp_path: Path) -> None:
    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path / 'data'}/") as s:
        s.sql("CREATE TABLE wide (id BIGINT, h HUGEINT)")
        s.sql("INSERT INTO wide SELECT range, range FROM range(0, 1100)")  # a Parquet file
        s.sql("DELETE FROM wide WHERE id < 3")  # inlined deletions of that file
        s.sql(f"INSERT INTO wide VALUES (-1, {BIG})")  # an inlined row a flush would round
    options = {
        "MAINTENANCE_FLUSH_INLINED_DATA": "true",
        "MAINTENANCE_REWRITE_DATA_FILES_DELETE_THRESHOLD": "0",
    }
    report = maintenance.run(url, options)
    rewrite = report.step("rewrite_data_files")
    assert (
        "left out main.wide: their inlined deletions wait for a flush, and a flush would round"
        in (rewrite.detail)
    )
    assert rewrite.counts["files_processed"] == 0
    with slatelake.connect(url) as s:
        assert s.sql("SELECT h FROM wide WHERE id = -1").fetchall() == [(BIG,)]
        assert s.sql("SELECT count(*) FROM wide").fetchone()[0] == 1098


def test_a_dry_run_says_which_tables_a_flush_would_leave_inlined(tmp_path: Path) -> None:
    url = _lake(tmp_path)
    report = maintenance.run(url, {"MAINTENANCE_FLUSH_INLINED_DATA": "true"}, dry_run=True)
    flush = report.step("flush_inlined_data")
    assert "would flush 3 inlined rows from 2 tables" in flush.detail, flush.detail
    assert "would leave main.nested, main.wide inlined: a flush would round" in flush.detail
    with slatelake.connect(url) as s:
        assert (_inlined(s, "wide"), _inlined(s, "plain")) == (2, 2)  # nothing ran
