"""Sessions: conflicts across processes, crashes, inlining, read-only, guards."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slatelake.ducklake import extensions
from slatelake.ducklake.guard import check_overlap
from slatelake.ducklake.session import connect
from slatelake.errors import MisconfigurationError, NotFoundError, ReadOnlyError
from tests.conftest import subprocess_env

pytestmark = pytest.mark.fast


@pytest.fixture
def lake(tmp_path: Path) -> tuple[str, Path]:
    url = (tmp_path / "lake").as_uri()
    data = tmp_path / "data"
    with connect(url, data_path=f"{data}/") as session:
        session.sql("CREATE TABLE t (id INTEGER, who VARCHAR)")
    return url, data


def _child(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.ducklake.racer", *args],
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _race(url: str, tmp_path: Path, mode: str) -> dict[str, dict[str, str]]:
    flags = tmp_path / f"flags-{mode}"
    flags.mkdir()
    procs = [_child("race", url, role, str(flags), mode) for role in ("early", "late")]
    outs = {}
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        doc = json.loads(out)
        outs[doc["role"]] = doc
    return outs


@pytest.mark.slow  # child processes: not in the --fast tier
def test_two_processes_appending_from_one_head_both_commit_as_ducklake_does(
    lake: tuple[str, Path], tmp_path: Path
) -> None:
    url, _ = lake
    outs = _race(url, tmp_path, "append")
    assert outs["early"]["first_try"] == "committed"
    assert outs["late"]["first_try"] == "committed"  # rebased onto early's snapshot
    with connect(url, read_only=True) as session:
        rows = session.sql("SELECT id, who FROM t ORDER BY id").fetchall()
        changes = session.sql(
            "SELECT snapshot_id, changes FROM lake.snapshots() ORDER BY snapshot_id DESC LIMIT 2"
        ).fetchall()
    assert rows == [(1, "early"), (2, "late")]
    assert changes[0][0] == changes[1][0] + 1  # two snapshots, one on top of the other


@pytest.mark.slow  # child processes: not in the --fast tier
def test_insert_racing_a_drop_of_its_table_is_refused_in_ducklakes_words(
    lake: tuple[str, Path], tmp_path: Path
) -> None:
    url, _ = lake
    outs = _race(url, tmp_path, "drop")
    assert outs["early"]["first_try"] == "committed"
    assert outs["late"]["first_try"] == "conflict"
    assert "another transaction has dropped it" in outs["late"]["message"]
    with connect(url, read_only=True) as session:
        tables = session.sql("SHOW TABLES").fetchall()
    assert tables == []


@pytest.mark.slow  # child processes: not in the --fast tier
def test_killed_between_parquet_write_and_slot_leaves_an_orphan_and_no_reference(
    lake: tuple[str, Path],
) -> None:
    url, data = lake
    proc = _child("crash", url)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 9, err
    written = sorted(p.name for p in data.rglob("*.parquet"))
    assert written, "the crashed INSERT wrote its Parquet file before dying"
    with connect(url, read_only=True) as session:
        assert session.sql("SELECT count(*) FROM t").fetchone() == (0,)
        paths = [
            r[0]
            for r in session.sql("SELECT path FROM __slatelake_meta.ducklake_data_file").fetchall()
        ]
    assert not any(name in p for p in paths for name in written)


def test_inlined_rows_read_back_after_reopening_and_flush_moves_them_to_parquet(
    lake: tuple[str, Path],
) -> None:
    url, data = lake
    with connect(url) as session:
        session.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b')")
    assert not list(data.rglob("*.parquet"))
    with connect(url) as session:
        assert session.sql("SELECT * FROM t ORDER BY id").fetchall() == [(1, "a"), (2, "b")]
        inline_keys = [k for k in session.lake.materialize().entries if k[0] == 0x05]
        assert inline_keys, "inlined rows live in the inline subspace"
        session.sql("CALL ducklake_flush_inlined_data('lake')")
    assert list(data.rglob("*.parquet"))
    with connect(url, read_only=True) as session:
        assert session.sql("SELECT * FROM t ORDER BY id").fetchall() == [(1, "a"), (2, "b")]


def test_read_only_session_refuses_writes_and_writes_no_slot(lake: tuple[str, Path]) -> None:
    url, _ = lake
    with connect(url, read_only=True) as session:
        before = [s.seq for s in session.lake.log.list_after(0)]
        with pytest.raises(ReadOnlyError, match="refuses INSERT"):
            session.sql("INSERT INTO t VALUES (9, 'no')")
        assert session.sql("SELECT count(*) FROM t").fetchone() == (0,)
        assert [s.seq for s in session.lake.log.list_after(0)] == before


def test_refresh_is_cheap_and_sees_other_sessions(lake: tuple[str, Path]) -> None:
    url, _ = lake
    with connect(url) as reader, connect(url) as writer:
        t0 = time.perf_counter()
        reader.sql("SELECT 1")
        assert time.perf_counter() - t0 < 1.0
        writer.sql("INSERT INTO t VALUES (5, 'w')")
        assert reader.sql("SELECT id FROM t").fetchall() == [(5,)]


def test_connecting_to_a_missing_lake_without_a_data_path_is_a_clear_error(
    tmp_path: Path,
) -> None:
    with pytest.raises(NotFoundError, match="no slatelake lake at .*data path"):
        connect((tmp_path / "nothing").as_uri())


def test_extension_version_mismatch_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(extensions.duckdb, "__version__", "9.9.9")
    with pytest.raises(MisconfigurationError, match=r"duckdb is v9\.9\.9"):
        extensions.extension_path("ducklake")


@pytest.mark.parametrize(
    ("lake", "data", "refused"),
    [
        ("s3://b/lake", "s3://b/lake/data/", True),  # nested
        ("s3://b/lake/inner", "s3://b/lake/", True),  # the data path holds the lake
        ("s3://b/lake", "s3://b/lake/", True),  # equal
        ("s3://b/lake", "s3://b/lakehouse/", False),  # sibling sharing text
        ("s3://b/lake", "s3://other/lake/", False),  # different bucket
        ("file:///x/lake", "s3://b/x/lake/", False),  # different store kind
        ("file:///x/lake", "/x/lake/data/", True),  # local path, nested
    ],
)
def test_overlap_guard(lake: str, data: str, refused: bool) -> None:
    if refused:
        with pytest.raises(MisconfigurationError, match="overlaps the lake root"):
            check_overlap(lake, data)
    else:
        check_overlap(lake, data)


def test_overlap_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    root = tmp_path / "lake"
    with pytest.raises(MisconfigurationError, match="overlaps"):
        connect(root.as_uri(), data_path=f"{root}/data/")
    assert not root.exists()


def test_sibling_data_path_sharing_text_attaches_normally(tmp_path: Path) -> None:
    with connect((tmp_path / "lake").as_uri(), data_path=f"{tmp_path}/lakehouse/") as session:
        session.sql("CREATE TABLE x (a INTEGER)")
        session.sql("INSERT INTO x SELECT * FROM range(3)")
        assert session.sql("SELECT count(*) FROM x").fetchone() == (3,)


def test_a_value_equal_to_the_csv_null_marker_round_trips(tmp_path: Path) -> None:
    from slatelake.ducklake.tables import NULL_MARK

    url = (tmp_path / "lake").as_uri()
    with connect(url, data_path=f"{tmp_path}/data/") as session:
        session.sql(f'CREATE TABLE odd ("{NULL_MARK}" INTEGER, " " INTEGER)')
        session.sql("INSERT INTO odd VALUES (1, 2)")
    with connect(url, read_only=True) as session:
        cursor = session.sql("SELECT * FROM odd")
        assert [d[0] for d in cursor.description] == [NULL_MARK, " "]
        assert cursor.fetchall() == [(1, 2)]


def test_a_reload_that_failed_half_way_leaves_the_session_usable(
    lake: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A catalog load that dies after attaching the metadata database must
    not wedge every later statement on 'database already exists'."""
    import slatelake.ducklake.session as session_module

    url, _ = lake
    with connect(url) as s:
        s.sql("INSERT INTO t VALUES (1, 'a')")
        real = session_module.copy_database

        def broken(*args: object, **kwargs: object) -> None:
            raise RuntimeError("the load died half way")

        monkeypatch.setattr(session_module, "copy_database", broken)
        with pytest.raises(RuntimeError, match="half way"):
            s._load()
        monkeypatch.setattr(session_module, "copy_database", real)
        s._load()
        assert s.sql("SELECT id, who FROM t").fetchall() == [(1, "a")]
