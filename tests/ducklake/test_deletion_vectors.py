"""DuckLake's WRITE_DELETION_VECTORS on a session: deletes written as puffin
deletion vectors land in the log like any delete file, and every reader (one
without the option, one at a past snapshot, another process) reads them."""

from __future__ import annotations

from pathlib import Path

import pytest

import slatelake
from slatelake.errors import MisconfigurationError


def _formats(session: slatelake.Session) -> list[str]:
    rows = session.sql(
        "SELECT DISTINCT format FROM __slatelake_meta.ducklake_delete_file "
        "WHERE end_snapshot IS NULL"
    ).fetchall()
    return sorted(f for (f,) in rows)


def test_write_deletion_vectors_deletes_as_puffin_that_every_reader_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLATELAKE_VERIFY_CAPTURE", "1")
    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(
        url, data_path=f"{tmp_path / 'data'}/", write_deletion_vectors=True
    ) as session:
        session.sql("CALL lake.set_option('data_inlining_row_limit', 0)")
        session.sql("CREATE TABLE t AS SELECT i FROM range(2000) r(i)")
        before = session.sql("SELECT max(snapshot_id) FROM ducklake_snapshots('lake')").fetchone()
        session.sql("DELETE FROM t WHERE i % 2 = 0")
        assert _formats(session) == ["puffin"]
    with slatelake.connect(url, read_only=True) as reader:  # another process, no option
        assert _formats(reader) == ["puffin"]
        assert reader.sql("SELECT count(*), sum(i) FROM t").fetchone() == (
            1000,
            sum(range(1, 2000, 2)),
        )
    with slatelake.connect(url, snapshot_version=before[0]) as past:
        assert past.sql("SELECT count(*) FROM t").fetchone() == (2000,)


def test_attach_takes_write_deletion_vectors_and_refuses_a_bad_flag(tmp_path: Path) -> None:
    host_url, lake_url = (tmp_path / "host").as_uri(), (tmp_path / "other").as_uri()
    with slatelake.connect(host_url, data_path=f"{tmp_path / 'h'}/") as host:
        host.sql(
            f"ATTACH 'slatelake:{lake_url}' AS other "
            f"(DATA_PATH '{tmp_path / 'o'}/', WRITE_DELETION_VECTORS true)"
        )
        host.sql("CALL other.set_option('data_inlining_row_limit', 0)")
        host.sql("CREATE TABLE other.t AS SELECT i FROM range(100) r(i)")
        host.sql("DELETE FROM other.t WHERE i < 10")
        assert host.sql("SELECT count(*) FROM other.t").fetchone() == (90,)
        with pytest.raises(MisconfigurationError, match="WRITE_DELETION_VECTORS"):
            host.sql(f"ATTACH 'slatelake:{lake_url}' AS again (WRITE_DELETION_VECTORS 'maybe')")
    with slatelake.connect(lake_url, read_only=True) as reader:
        assert _formats(reader) == ["puffin"]
        assert reader.sql("SELECT count(*) FROM t").fetchone() == (90,)
