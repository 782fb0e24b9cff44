"""Flushing inlined data under the change-set cap (SLATELAKE_MAX_CHANGESET_OPS).

DuckLake 1.5.5 flushes a table's inlined rows in one transaction that
deletes every one of them from the catalog, so a table holding more inlined
rows than the cap cannot flush in one commit, and DuckLake offers no way to
flush part of a table. The step must say so (table, rows, cap, the fix)
instead of a bare OperationLimitError, and the other tables must still flush.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import slatelake
from slatelake.maintenance.report import FAILED, RAN, SKIPPED

FLUSH = {"MAINTENANCE_FLUSH_INLINED_DATA": "true", "MAINTENANCE_MERGE_ADJACENT_FILES": "true"}


@pytest.fixture(params=["file", "s3"])
def inlined(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[str, str]:
    """Table big: 40 inlined rows (8 small inserts); table small: 3 inlined rows."""
    monkeypatch.setenv("SLATELAKE_VERIFY_CAPTURE", "1")
    if request.param == "s3":
        bucket = request.getfixturevalue("s3_bucket")
        url, data = f"s3://{bucket}/lake", f"s3://{bucket}/data/"
    else:
        url, data = (tmp_path / "lake").as_uri(), f"{tmp_path / 'data'}/"
    with slatelake.connect(url, data_path=data) as s:
        s.sql("CREATE TABLE big (id INTEGER)")
        s.sql("CREATE TABLE small (id INTEGER)")
        for i in range(8):
            s.sql(f"INSERT INTO big SELECT * FROM range({i * 5}, {i * 5 + 5})")
        s.sql("INSERT INTO small VALUES (1), (2), (3)")
    return url, data


def _inlined_rows(session, table: str) -> int:  # noqa: ANN001
    """Rows DuckLake still holds inline for ``table`` (its inlined data tables)."""
    table_id = session.sql(
        "SELECT table_id FROM __slatelake_meta.ducklake_table "
        "WHERE table_name = ? AND end_snapshot IS NULL",
        [table],
    ).fetchone()[0]
    names = session.sql(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = '__slatelake_meta' "
        "AND table_name LIKE ?",
        [f"ducklake_inlined_data_{table_id}_%"],
    ).fetchall()
    return sum(
        session.sql(f'SELECT count(*) FROM __slatelake_meta."{n}"').fetchone()[0] for (n,) in names
    )


def test_a_table_over_the_cap_fails_by_name_while_the_others_flush(
    inlined: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, _ = inlined
    monkeypatch.setenv("SLATELAKE_MAX_CHANGESET_OPS", "30")
    with slatelake.connect(url, options=FLUSH) as s:
        report = s.maintenance()
        assert _inlined_rows(s, "small") == 0, "the table under the cap was not flushed"
        assert _inlined_rows(s, "big") == 40
        assert sorted(r[0] for r in s.sql("SELECT id FROM big").fetchall()) == list(range(40))
        assert sorted(r[0] for r in s.sql("SELECT id FROM small").fetchall()) == [1, 2, 3]
    flush = report.step("flush_inlined_data")
    assert flush.status == FAILED
    assert "main.big holds 40 inlined rows" in flush.detail
    assert "cap of 30" in flush.detail and "SLATELAKE_MAX_CHANGESET_OPS" in flush.detail
    assert "flushed 3 rows from 1 other table" in flush.detail
    assert "OperationLimitError" not in flush.detail
    assert report.work_pending
    merge = report.step("merge_adjacent_files")
    assert merge.status == SKIPPED and "flush_inlined_data failed" in merge.detail

    # The fix the message names works: a cap above the table's rows flushes it.
    monkeypatch.setenv("SLATELAKE_MAX_CHANGESET_OPS", "1000")
    with slatelake.connect(url, options=FLUSH) as s:
        report = s.maintenance()
        assert _inlined_rows(s, "big") == 0
        assert sorted(r[0] for r in s.sql("SELECT id FROM big").fetchall()) == list(range(40))
    assert report.step("flush_inlined_data").status == RAN
    assert report.step("flush_inlined_data").counts == {"rows_flushed": 40}


def test_a_flush_refused_for_its_bookkeeping_says_how_many_operations_it_needed(
    inlined: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # 40 rows fit under a cap of 42, but the flush's snapshot, file and stats
    # rows do not: the log refuses the commit, and the step still names it.
    url, _ = inlined
    monkeypatch.setenv("SLATELAKE_MAX_CHANGESET_OPS", "42")
    with slatelake.connect(url, options=FLUSH) as s:
        report = s.maintenance()
        assert _inlined_rows(s, "small") == 0
        assert _inlined_rows(s, "big") == 40
        assert sorted(r[0] for r in s.sql("SELECT id FROM big").fetchall()) == list(range(40))
    flush = report.step("flush_inlined_data")
    assert flush.status == FAILED
    assert "main.big holds 40 inlined rows" in flush.detail
    assert "operations, over the cap of 42" in flush.detail
    assert "OperationLimitError" not in flush.detail
