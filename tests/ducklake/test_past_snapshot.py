"""A read-only session at a past snapshot, like DuckLake's ATTACH options."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from slatelake.ducklake.session import connect
from slatelake.errors import MisconfigurationError, ReadOnlyError


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = (tmp_path / "lake").as_uri()
    with connect(url, data_path=f"{tmp_path / 'data'}/") as session:
        session.sql("CREATE TABLE t (id INTEGER)")
        for i in range(3):
            session.sql(f"INSERT INTO t VALUES ({i})")
    return url


def _snapshot_of_first_insert(url: str) -> tuple[int, dt.datetime]:
    with connect(url, read_only=True) as session:
        return session.sql(
            "SELECT snapshot_id, snapshot_time FROM lake.snapshots() "
            "WHERE changes['tables_inserted_into'] IS NOT NULL "
            "OR changes['inlined_insert'] IS NOT NULL ORDER BY snapshot_id LIMIT 1"
        ).fetchone()


def test_session_at_a_snapshot_version_reads_it_and_refuses_writes(url: str) -> None:
    version, _ = _snapshot_of_first_insert(url)
    with connect(url, snapshot_version=version) as past:
        assert past.read_only
        assert past.sql("SELECT id FROM t").fetchall() == [(0,)]
        with pytest.raises(ReadOnlyError):
            past.sql("INSERT INTO t VALUES (9)")
    with connect(url, read_only=True) as now:
        assert now.sql("SELECT count(*) FROM t").fetchone() == (3,)


def test_session_at_a_snapshot_time_reads_the_snapshot_then(url: str) -> None:
    _, when = _snapshot_of_first_insert(url)
    with connect(url, snapshot_time=when) as past:
        assert past.sql("SELECT id FROM t").fetchall() == [(0,)]
    with connect(url, snapshot_time=when.isoformat()) as past:
        assert past.sql("SELECT id FROM t").fetchall() == [(0,)]


@pytest.mark.parametrize(
    ("version", "when"),
    [
        (True, None),
        (-1, None),
        ("3", None),
        (None, "yesterday'); DROP TABLE t; --"),
        (None, "2026-01-01\x00"),
        (None, ""),
        (1, "2026-01-01"),
    ],
)
def test_snapshot_options_refuse_what_is_not_a_snapshot(
    url: str, version: object, when: object
) -> None:
    with pytest.raises(MisconfigurationError, match="snapshot_"):
        connect(url, snapshot_version=version, snapshot_time=when)  # type: ignore[arg-type]
    with connect(url, read_only=True) as now:
        assert now.sql("SELECT count(*) FROM t").fetchone() == (3,)
