"""Lake health from the catalog: every figure checked against a computation of
our own (SQL straight over DuckLake's metadata, the data directory walked and
stat'ed, rows counted), on a lake built with small Parquet inserts, deletes,
inlined rows, an expiry and a table drop; the query count flat in the number
of tables; the CLI's text and JSON; the same on moto S3."""

from __future__ import annotations

import importlib
import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import slatelake
from slatelake import maintenance
from slatelake.cli import main
from slatelake.ducklake.commit_flow import META_DB
from slatelake.ducklake.sql import ident
from slatelake.maintenance.health import health as lake_health

SCHEMA = 'we"ird sch€ma'
TABLE = 'ta ble\'s ✓ "q"'
HOSTILE = f"{ident(SCHEMA)}.{ident(TABLE)}"
# the module (``maintenance.health`` is the function)
health_module = importlib.import_module("slatelake.maintenance.health")
SMALL_INSERTS = 14  # over the seed's small_file_min_count of 12


@dataclass(frozen=True)
class Built:
    url: str
    data: Path


def _build(s: slatelake.Session) -> None:
    """The shape every case reads: scheduled files (an expired drop, a replaced
    delete file: DuckLake schedules it at once), small files, deletes in a
    delete file and inlined, inlined rows, history (a dropped table's data
    and delete file), a hostile name."""
    s.sql("CREATE TABLE gone (id INTEGER)")
    s.sql("INSERT INTO gone SELECT * FROM range(40)")
    s.sql("DROP TABLE gone")
    s.sql("CALL ducklake_expire_snapshots('lake', older_than => now())")
    s.sql("CREATE TABLE small (id INTEGER, v VARCHAR)")
    with s.transaction():  # one Parquet file per INSERT, one commit
        for i in range(SMALL_INSERTS):
            s.sql(f"INSERT INTO small SELECT i, 'v' || i FROM range({i * 20}, {i * 20 + 20}) r(i)")
    s.sql("CALL lake.set_option('target_file_size', '1KB', table_name => 'small')")
    s.sql("CREATE TABLE t (id INTEGER)")
    for i in range(3):
        s.sql(f"INSERT INTO t SELECT * FROM range({i * 100}, {i * 100 + 100})")
    s.sql("DELETE FROM t WHERE id < 3")  # three rows: inlined file deletions
    s.sql("DELETE FROM t WHERE id >= 150 AND id < 180")  # a delete file
    s.sql("DELETE FROM t WHERE id >= 180 AND id < 200")  # replaces it, scheduled at once
    s.sql("INSERT INTO t VALUES (1000), (1001), (1002)")  # inlined
    s.sql("DELETE FROM t WHERE id = 1002")  # an inlined row ended, not waiting
    s.sql(f"CREATE SCHEMA {ident(SCHEMA)}")
    s.sql(f"CREATE TABLE {HOSTILE} (x VARCHAR)")
    s.sql(f"INSERT INTO {HOSTILE} SELECT 'a' || i FROM range(50) r(i)")
    s.sql("CREATE TABLE u (i INTEGER)")
    s.sql("INSERT INTO u SELECT * FROM range(50)")
    s.sql("DELETE FROM u WHERE i < 20")  # a delete file
    s.sql("DROP TABLE u")  # both files history


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    work = tmp_path_factory.mktemp("health")
    url = (work / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{work}/data/") as s:
        _build(s)
    return Built(url, work / "data")


# -- the independent computation --------------------------------------------------
def _meta(s: slatelake.Session, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
    """Our own SQL over DuckLake's metadata (``M.`` is its database)."""
    return s.con.cursor().execute(sql.replace("M.", f"{ident(META_DB)}."), params).fetchall()


def _on_disk(data: Path) -> dict[str, int]:
    """Every file under the data path: name -> size."""
    out = {}
    for root, _dirs, files in os.walk(data):
        for name in files:
            out[name] = os.stat(os.path.join(root, name)).st_size
    return out


def _live_paths(s: slatelake.Session, table: str, kind: str) -> list[str]:
    """Basenames of the live data (or delete) files of a live table, by name."""
    source = "M.ducklake_data_file" if kind == "data" else "M.ducklake_delete_file"
    rows = _meta(
        s,
        f"SELECT f.path FROM {source} f JOIN M.ducklake_table t USING (table_id) "
        "WHERE t.table_name = ? AND t.end_snapshot IS NULL AND f.end_snapshot IS NULL",
        [table],
    )
    return [os.path.basename(p) for (p,) in rows]


def test_table_figures_match_the_data_directory_and_counted_rows(built: Built) -> None:
    report = lake_health(built.url)
    disk = _on_disk(built.data)
    with slatelake.connect(built.url, read_only=True) as s:
        by_name = {(t.schema, t.table): t for t in report.tables}
        assert sorted(by_name) == sorted(
            (a, b)
            for a, b in _meta(
                s,
                "SELECT s.schema_name, t.table_name FROM M.ducklake_table t JOIN "
                "M.ducklake_schema s USING (schema_id) WHERE t.end_snapshot IS NULL",
            )
        )
        assert ("main", "u") not in by_name and ("main", "gone") not in by_name
        for (schema, table), th in by_name.items():
            data = _live_paths(s, table, "data")
            deletes = _live_paths(s, table, "delete")
            assert th.data_files == len(data) and th.delete_files == len(deletes)
            assert th.data_bytes == sum(disk[p] for p in data), table
            assert th.delete_bytes == sum(disk[p] for p in deletes), table
            parquet_rows = (
                s.sql(
                    "SELECT count(*) FROM read_parquet(?)",
                    [[str(next(built.data.rglob(p))) for p in data]],
                ).fetchone()[0]
                if data
                else 0
            )
            visible = s.sql(f"SELECT count(*) FROM {ident(schema)}.{ident(table)}").fetchone()[0]
            assert th.rows == parquet_rows
            assert th.deleted_rows == parquet_rows + th.inlined_rows - visible, table
            if parquet_rows:
                assert th.deleted_fraction == pytest.approx(th.deleted_rows / parquet_rows)
            assert th.avg_file_bytes == pytest.approx(th.data_bytes / th.data_files)
    t = by_name[("main", "t")]
    assert (t.data_files, t.deleted_rows, t.inlined_rows) == (3, 53, 2)
    assert t.delete_files == 1  # the replaced one is history, not live
    assert t.deleted_fraction == pytest.approx(53 / 300)
    assert t.rewrite_files == 1  # 50 of 100 deleted; the 3-of-100 file stays under 0.2
    hostile = by_name[(SCHEMA, TABLE)]
    assert (hostile.data_files, hostile.rows, hostile.deleted_rows) == (1, 50, 0)


def test_target_size_is_duckdb_lakes_own_option_else_its_default(built: Built) -> None:
    report = lake_health(built.url)
    by_name = {t.table: t for t in report.tables}
    small, t = by_name["small"], by_name["t"]
    assert small.target_file_size == 1000  # '1KB' as DuckLake stores it, table scope
    assert t.target_file_size == 1 << 29 == health_module.DUCKLAKE_DEFAULT_TARGET_FILE_SIZE
    assert small.data_files == SMALL_INSERTS
    assert small.small_files == SMALL_INSERTS and small.merge_threshold_reached
    assert small.merge_candidate_files == SMALL_INSERTS  # no deletes, one schema version
    assert not t.merge_threshold_reached and t.merge_candidate_files == 0  # 2 of 3 have deletes
    # a policy's target size overrides DuckLake's option
    biggest = max(s for s in _on_disk(built.data).values())
    tiny = lake_health(built.url, maintenance.HealthPolicy(target_file_size=1))
    assert all(th.small_files == 0 and th.merge_candidate_files == 0 for th in tiny.tables)
    big = lake_health(
        built.url, maintenance.HealthPolicy(target_file_size=biggest + 1, small_file_min_count=3)
    )
    by_name = {th.table: th for th in big.tables}
    assert by_name["t"].small_files == 3 and by_name["t"].merge_threshold_reached


def test_history_scheduled_and_snapshots_match_the_catalog_and_the_disk(built: Built) -> None:
    now = datetime.now(UTC)
    report = lake_health(built.url, now=now)
    disk = _on_disk(built.data)
    with slatelake.connect(built.url, read_only=True) as s:
        history = [
            os.path.basename(p)
            for (p,) in _meta(
                s,
                "SELECT path FROM M.ducklake_data_file WHERE end_snapshot IS NOT NULL UNION ALL "
                "SELECT path FROM M.ducklake_delete_file WHERE end_snapshot IS NOT NULL",
            )
        ]
        scheduled = [
            os.path.basename(p)
            for (p,) in _meta(s, "SELECT path FROM M.ducklake_files_scheduled_for_deletion")
        ]
        (count, oldest, head) = _meta(
            s, "SELECT count(*), min(snapshot_time), max(snapshot_id) FROM M.ducklake_snapshot"
        )[0]
    assert len(history) == 2  # u's data file and delete file
    assert report.history_files == 2 and report.history_bytes == sum(disk[p] for p in history)
    assert len(scheduled) == 2 and all(p in disk for p in scheduled)  # not cleaned yet
    assert report.scheduled_files == 2 and report.scheduled_bytes is None
    assert any("unknown" in note for note in report.notes)
    assert (report.snapshots, report.head_snapshot) == (count, head)
    assert report.oldest_snapshot_age_s == pytest.approx((now - oldest).total_seconds(), abs=1e-3)
    totals = report.totals
    assert totals["catalog_bytes"] == totals["data_bytes"] + totals["delete_bytes"] + sum(
        disk[p] for p in history
    )
    est = report.estimate  # young lake: nothing past the retention or the grace
    assert (est.expire_snapshots, est.expire_frees_files, est.cleanup_files) == (0, 0, 0)
    assert est.flush_rows == 2 and est.rewrite_files == 1
    assert est.merge_threshold_tables == 1 and est.merge_candidate_files == SMALL_INSERTS


def test_a_month_later_expiry_frees_all_history_and_cleanup_takes_the_schedule(
    built: Built,
) -> None:
    now = datetime.now(UTC) + timedelta(days=30)
    report = lake_health(built.url, now=now)
    est = report.estimate
    assert est.expire_snapshots == report.snapshots - 1  # the head is always kept
    assert (est.expire_frees_files, est.expire_frees_bytes) == (
        report.history_files,
        report.history_bytes,
    )
    assert est.cleanup_files == report.scheduled_files == 2 and est.cleanup_bytes is None
    kept = lake_health(built.url, maintenance.HealthPolicy(retention="60d"), now=now)
    assert kept.estimate.expire_snapshots == 0 and kept.estimate.expire_frees_bytes == 0
    graced = lake_health(built.url, maintenance.HealthPolicy(cleanup_grace="31 days"), now=now)
    assert graced.estimate.cleanup_files == 0


def test_the_estimate_matches_what_expiry_then_schedules(tmp_path: Path) -> None:
    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path}/data/") as s:
        s.sql("CREATE TABLE t (id INTEGER)")
        s.sql("INSERT INTO t SELECT * FROM range(100)")
        s.sql("DELETE FROM t WHERE id >= 50")
        s.sql("DELETE FROM t WHERE id >= 20")  # replaces the delete file, scheduled at once
        s.sql("CREATE TABLE u (id INTEGER)")
        s.sql("INSERT INTO u SELECT * FROM range(100)")
        s.sql("DELETE FROM u WHERE id < 30")
        s.sql("DROP TABLE u")
        before = lake_health(s, maintenance.HealthPolicy(retention=0))
        assert (before.scheduled_files, before.history_files) == (1, 2)
        assert before.estimate.expire_frees_files == 2
        assert before.estimate.expire_frees_bytes == before.history_bytes
        s.sql("CALL ducklake_expire_snapshots('lake', older_than => now())")
        after = lake_health(s)
    assert after.scheduled_files == before.scheduled_files + before.estimate.expire_frees_files
    assert after.history_files == 0 and after.history_bytes == 0
    assert after.snapshots == before.snapshots - before.estimate.expire_snapshots


def test_the_estimate_is_what_a_zero_retention_pass_then_does_holds_included(
    tmp_path: Path,
) -> None:
    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path}/data/") as s:
        s.sql("CREATE TABLE u (id INTEGER)")
        s.sql("INSERT INTO u SELECT * FROM range(100)")
        (inserted,) = s.sql("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()
        s.sql("DELETE FROM u WHERE id < 30")  # a delete file, not seen by the held snapshot
        s.sql("DROP TABLE u")
        s.sql("CREATE TABLE t (id INTEGER)")
    maintenance.protect(url, inserted, "keep")
    before = lake_health(url, maintenance.HealthPolicy(retention=0))
    est = before.estimate
    assert est.expire_kept_by_holds == 1
    assert (est.expire_frees_files, before.history_files) == (1, 2)  # the data file is held
    report = maintenance.run(
        url,
        {
            "MAINTENANCE_EXPIRE_SNAPSHOTS": "true",
            "MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN": "0s",
        },
    )
    counts = report.step("expire_snapshots").counts
    assert counts["snapshots_expired"] == est.expire_snapshots
    assert counts["snapshots_kept_by_holds"] == est.expire_kept_by_holds
    after = lake_health(url)
    assert after.scheduled_files - before.scheduled_files == est.expire_frees_files
    assert after.history_bytes == before.history_bytes - est.expire_frees_bytes


# -- cost ----------------------------------------------------------------------------
class CountingConnection:
    """A DuckDB connection that counts the statements run on it."""

    def __init__(self, con: Any, counter: list[str]) -> None:
        self._con, self._counter = con, counter

    def execute(self, sql: str, params: Any = None) -> Any:
        self._counter.append(sql)
        return self._con.execute(sql, params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._con, name)


def _lake_with_tables(path: Path, n: int) -> str:
    url = (path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{path}/data/") as s, s.transaction():
        for i in range(n):
            s.sql(f"CREATE TABLE {ident(f't{i}')} (id INTEGER)")
            s.sql(f"INSERT INTO {ident(f't{i}')} SELECT * FROM range(20)")  # Parquet
            s.sql(f"INSERT INTO {ident(f't{i}')} VALUES (1), (2)")  # inlined
    with slatelake.connect(url) as s:  # inlined file deletions, one table per statement
        for i in range(min(n, 3)):
            s.sql(f"DELETE FROM {ident(f't{i}')} WHERE id = 5")
    return url


def test_the_query_count_does_not_grow_with_the_number_of_tables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counts = {}
    for n in (1, 30):
        url = _lake_with_tables(tmp_path / f"n{n}", n)
        statements: list[str] = []
        cursor = health_module._cursor
        monkeypatch.setattr(
            health_module,
            "_cursor",
            lambda s, c=cursor, seen=statements: CountingConnection(c(s), seen),
        )
        report = lake_health(url)
        monkeypatch.undo()
        assert len(report.tables) == n
        assert all(t.inlined_rows == 2 and t.data_files == 1 for t in report.tables)
        assert sum(t.deleted_rows for t in report.tables) == min(n, 3)
        counts[n] = len(statements)
    assert counts[1] == counts[30] <= 4


# -- inputs and errors ------------------------------------------------------------------
def test_policy_durations_take_the_duration_grammar() -> None:
    policy = maintenance.HealthPolicy(retention="14d", cleanup_grace="12h")
    assert (policy.retention, policy.cleanup_grace) == (14 * 86400.0, 12 * 3600.0)
    assert maintenance.HealthPolicy().retention == 7 * 86400.0
    with pytest.raises(slatelake.MisconfigurationError, match="retention='7 fortnights'"):
        maintenance.HealthPolicy(retention="7 fortnights")
    with pytest.raises(slatelake.MisconfigurationError, match="rewrite_delete_threshold=1.5"):
        maintenance.HealthPolicy(rewrite_delete_threshold=1.5)
    with pytest.raises(slatelake.MisconfigurationError, match="small_file_min_count=0"):
        maintenance.HealthPolicy(small_file_min_count=0)
    with pytest.raises(slatelake.MisconfigurationError, match="target_file_size=-1"):
        maintenance.HealthPolicy(target_file_size=-1)


def test_an_unknown_lake_is_a_not_found_error_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = (tmp_path / "no-such-lake").as_uri()
    with pytest.raises(slatelake.NotFoundError, match="no-such-lake"):
        lake_health(url)
    assert main(["health", url]) == 1
    err = capsys.readouterr().err
    assert "NotFoundError" in err and url in err
    assert not (tmp_path / "no-such-lake").exists()


def test_a_naive_now_is_refused(built: Built) -> None:
    with pytest.raises(slatelake.MisconfigurationError, match="timezone-aware"):
        lake_health(built.url, now=datetime(2030, 1, 1))


# -- the CLI -------------------------------------------------------------------------------
def test_cli_text_shows_every_table_and_the_lake_summary(
    built: Built, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["health", built.url]) == 0
    out = capsys.readouterr().out
    assert f"lake {built.url}" in out
    assert "scheduled        2 files, unknown bytes" in out
    (hostile,) = [line for line in out.splitlines() if line.startswith(SCHEMA)]
    assert TABLE in hostile  # shown as it is, quotes, spaces and all
    (t_row,) = [line for line in out.splitlines() if line.split()[:2] == ["main", "t"]]
    assert t_row.split()[2:5] == ["3", "1.8", "KiB"] and "53 (17.7%)" in t_row
    assert "note: bytes of files scheduled for deletion are unknown" in out


def test_cli_json_is_the_reports_dict(built: Built, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["health", built.url, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    expected = lake_health(built.url).to_dict()
    for volatile in ("generated_at", "oldest_snapshot_age_s"):
        doc.pop(volatile), expected.pop(volatile)
    assert doc == expected
    names = [(t["schema"], t["table"]) for t in doc["tables"]]
    assert (SCHEMA, TABLE) in names
    assert doc["scheduled_bytes"] is None and doc["totals"]["tables"] == 3


# -- moto S3 -----------------------------------------------------------------------------
@pytest.fixture
def s3_lake(s3_bucket: str) -> Iterator[tuple[str, str]]:
    url = f"s3://{s3_bucket}/lake-{uuid.uuid4().hex[:6]}"
    with slatelake.connect(url, data_path=f"s3://{s3_bucket}/data/") as s:
        s.sql("CREATE TABLE t (id INTEGER)")
        s.sql("INSERT INTO t SELECT * FROM range(100)")
        s.sql("INSERT INTO t SELECT * FROM range(100, 200)")
        s.sql("DELETE FROM t WHERE id >= 150")
        s.sql("INSERT INTO t VALUES (7)")
    yield url, s3_bucket


def test_health_on_s3_matches_the_buckets_objects(
    s3_lake: tuple[str, str], moto_endpoint: str
) -> None:
    import boto3

    url, bucket = s3_lake
    report = lake_health(url)
    listing = boto3.client("s3", endpoint_url=moto_endpoint).list_objects_v2(
        Bucket=bucket, Prefix="data/"
    )
    sizes = {os.path.basename(o["Key"]): o["Size"] for o in listing.get("Contents", [])}
    with slatelake.connect(url, read_only=True) as s:
        data, deletes = _live_paths(s, "t", "data"), _live_paths(s, "t", "delete")
        visible = s.sql("SELECT count(*) FROM t").fetchone()[0]
    (t,) = report.tables
    assert (t.data_files, t.delete_files, t.inlined_rows) == (2, 1, 1)
    assert t.data_bytes == sum(sizes[p] for p in data)
    assert t.delete_bytes == sum(sizes[p] for p in deletes)
    assert t.deleted_rows == t.rows + t.inlined_rows - visible == 50
    assert report.lake == url
