"""Retention holds: a held snapshot survives every expiry and stays readable,
a commit that would expire one is refused whoever makes it, and the pass
deletes no file while the fail-safe finds a held snapshot at risk."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import boto3
import pytest

import slatelake
from slatelake import HeldSnapshotError, MisconfigurationError, NotFoundError, maintenance
from slatelake.catalog import registry
from slatelake.catalog.holds import HOLDS_KEY, HOLDS_LABEL, Hold, encode_holds
from slatelake.catalog.rows import encode_row, row_key
from slatelake.cli import main
from slatelake.ducklake.commit_flow import META_DB
from slatelake.log.changeset import ChangeSet
from slatelake.maintenance import holds as hold_ops
from slatelake.maintenance.report import PARTIAL, SKIPPED, SUCCEEDED

# Zero retention: every snapshot but the newest is a candidate, then every
# file scheduled for deletion is deleted at once.
EXPIRE_ALL = {
    "MAINTENANCE_EXPIRE_SNAPSHOTS": "true",
    "MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN": "0s",
    "MAINTENANCE_CLEANUP_OLD_FILES": "true",
    "MAINTENANCE_CLEANUP_OLD_FILES_OLDER_THAN": "0s",
    "MAINTENANCE_DELETE_ORPHANED_FILES": "true",
    "MAINTENANCE_DELETE_ORPHANED_FILES_OLDER_THAN": "0s",
    "MAINTENANCE_ORPHAN_AGE_FLOOR_OVERRIDE": "true",
}


def _build(lake: str, data: str) -> dict[int, list[tuple[Any, ...]]]:
    """A lake whose history holds Parquet files later snapshots drop: the
    rows of ``t`` at every snapshot, by snapshot id."""
    seen: dict[int, list[tuple[Any, ...]]] = {}
    with slatelake.connect(lake, data_path=data) as s:
        s.sql("CREATE TABLE t (id INTEGER, v VARCHAR)")
        for lo in (0, 2000):
            s.sql(f"INSERT INTO t SELECT i, 'v' || i FROM range({lo}, {lo + 2000}) r(i)")
            seen[_newest(s)] = sorted(s.sql("SELECT * FROM t").fetchall())
        s.sql("DELETE FROM t WHERE id % 2 = 0")
        s.sql("UPDATE t SET v = 'changed' WHERE id < 100")
        seen[_newest(s)] = sorted(s.sql("SELECT * FROM t").fetchall())
    return seen


def _newest(session: Any) -> int:
    return session.sql("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]


def _snapshots(lake: str) -> list[int]:
    with slatelake.connect(lake, read_only=True) as s:
        return [
            r[0] for r in s.sql("SELECT snapshot_id FROM lake.snapshots() ORDER BY 1").fetchall()
        ]


def _at(lake: str, snapshot: int) -> list[tuple[Any, ...]]:
    with slatelake.connect(lake, read_only=True) as s:
        return sorted(s.sql(f"SELECT * FROM t AT (VERSION => {int(snapshot)})").fetchall())


def _data_files(data: str) -> set[str]:
    if data.startswith("s3://"):
        bucket, _, prefix = data.removeprefix("s3://").partition("/")
        s3 = boto3.client("s3")
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return {o["Key"] for page in pages for o in page.get("Contents", [])}
    return {str(p) for p in Path(data).rglob("*") if p.is_file()}


@pytest.fixture(params=["file", "s3"])
def lake(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    if request.param == "file":
        return (tmp_path / "lake").as_uri(), f"{tmp_path / 'data'}/"
    bucket = request.getfixturevalue("s3_bucket")
    root = uuid.uuid4().hex[:8]
    return f"s3://{bucket}/{root}/lake", f"s3://{bucket}/{root}/data/"


def test_a_held_snapshot_survives_zero_retention_and_its_files_stay_readable(
    lake: tuple[str, str],
) -> None:
    url, data = lake
    rows = _build(url, data)
    first, *_, newest = sorted(rows)
    maintenance.protect(url, first, "before-cleanup", note="month-end")
    report = maintenance.run(url, EXPIRE_ALL)
    expire = report.step("expire_snapshots")
    assert report.status == SUCCEEDED, report.to_dict()
    assert expire.counts["snapshots_kept_by_holds"] == 1
    assert expire.counts["snapshots_expired"] >= 2
    assert report.step("cleanup_old_files").counts["files_deleted"] >= 1
    assert _snapshots(url) == [first, newest]
    assert _at(url, first) == rows[first]
    assert _at(url, newest) == rows[newest]


def test_removing_the_hold_lets_the_next_pass_expire_the_snapshot(tmp_path: Path) -> None:
    url, data = (tmp_path / "lake").as_uri(), f"{tmp_path / 'data'}/"
    first, *_, newest = sorted(_build(url, data))
    maintenance.protect(url, first, "temp")
    maintenance.run(url, EXPIRE_ALL)
    assert maintenance.unprotect(url, "temp").hold.snapshot_id == first
    report = maintenance.run(url, EXPIRE_ALL)
    assert report.step("expire_snapshots").counts == {
        "snapshots_expired": 1,
        "snapshots_kept_by_thinning": 0,
        "snapshots_kept_by_holds": 0,
        "snapshots_kept_by_pins": 0,
    }
    assert _snapshots(url) == [newest]


def test_a_direct_expiry_of_a_held_snapshot_is_refused_and_commits_nothing(
    tmp_path: Path,
) -> None:
    url, data = (tmp_path / "lake").as_uri(), f"{tmp_path / 'data'}/"
    first = min(_build(url, data))
    before = _snapshots(url)
    maintenance.protect(url, first, "keep")
    with slatelake.connect(url) as s:
        with pytest.raises(HeldSnapshotError, match=rf"snapshot {first} by 'keep'"):
            s.sql(f"CALL ducklake_expire_snapshots('lake', versions => [{first}])")
        # the session goes on, and its copy is the committed catalog again
        assert [
            r[0] for r in s.sql("SELECT snapshot_id FROM lake.snapshots() ORDER BY 1").fetchall()
        ] == (before)
    assert _snapshots(url) == before


def test_explicit_versions_leave_the_held_ones_out(tmp_path: Path) -> None:
    url, data = (tmp_path / "lake").as_uri(), f"{tmp_path / 'data'}/"
    first, second, *_ = sorted(_build(url, data))
    maintenance.protect(url, first, "keep")
    options = {"MAINTENANCE_EXPIRE_SNAPSHOTS_VERSIONS": f"[{first},{second}]"}
    report = maintenance.run(url, options)
    assert report.step("expire_snapshots").counts == {
        "snapshots_expired": 1,
        "snapshots_kept_by_thinning": 0,
        "snapshots_kept_by_holds": 1,
        "snapshots_kept_by_pins": 0,
    }
    assert first in _snapshots(url) and second not in _snapshots(url)


def test_a_dry_run_says_what_the_holds_keep(tmp_path: Path) -> None:
    url, data = (tmp_path / "lake").as_uri(), f"{tmp_path / 'data'}/"
    first = min(_build(url, data))
    maintenance.protect(url, first, "keep")
    before = _snapshots(url)
    options = {**EXPIRE_ALL, "MAINTENANCE_EXPIRE_SNAPSHOTS_DRY_RUN": "true"}
    step = maintenance.run(url, options).step("expire_snapshots")
    assert step.dry_run and step.counts == {}
    assert (
        step.detail
        == f"would expire {len(before) - 2} snapshots; 1 kept by retention holds (dry run)"
    )
    assert _snapshots(url) == before


def test_a_hold_placed_while_a_pass_selects_is_honoured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pass reads the holds, then another session holds a snapshot the
    pass selected before the pass's expiry commits: the commit is refused,
    the pass reads the holds again and expires the rest."""
    url, data = (tmp_path / "lake").as_uri(), f"{tmp_path / 'data'}/"
    first, *_, newest = sorted(_build(url, data))
    real = hold_ops.held
    raced: list[int] = []

    def held_then_raced(session: Any) -> dict[int, list[str]]:
        seen = real(session)
        if not raced:  # a hold lands just after the pass read them
            raced.append(first)
            with slatelake.connect(url) as other:
                maintenance.protect(other, first, "raced")
        return seen

    monkeypatch.setattr(hold_ops, "held", held_then_raced)
    report = maintenance.run(url, EXPIRE_ALL)
    assert raced == [first]
    assert report.step("expire_snapshots").counts["snapshots_kept_by_holds"] == 1
    assert _snapshots(url) == [first, newest]


def _put_holds(url: str, found: list[Hold]) -> None:
    """Write the holds record as a process that checks nothing would."""
    with slatelake.connect(url) as s:
        s.refresh()
        s.commit_change_set(
            ChangeSet(
                base=s.state.head, puts=((HOLDS_KEY, encode_holds(found)),), tables=(HOLDS_LABEL,)
            )
        )


def test_the_fail_safe_deletes_nothing_when_a_held_snapshot_is_gone(
    lake: tuple[str, str],
) -> None:
    url, data = lake
    first = min(_build(url, data))
    expire_only = {k: v for k, v in EXPIRE_ALL.items() if "EXPIRE" in k}
    maintenance.run(url, expire_only)  # the first snapshot is gone, its files scheduled
    assert first not in _snapshots(url)
    _put_holds(url, [Hold("late", first, None, time.time_ns() // 1000, "test")])
    files = _data_files(data)
    report = maintenance.run(url, EXPIRE_ALL)
    assert report.status == PARTIAL
    assert f"{first} (held by 'late')" in (report.partial_reason or "")
    for step in ("cleanup_old_files", "delete_orphaned_files"):
        assert report.step(step).status == SKIPPED
        assert report.step(step).detail.startswith("retention fail-safe: held snapshots are gone")
    assert _data_files(data) == files
    assert maintenance.status(url)[0].status == PARTIAL


def test_the_fail_safe_deletes_nothing_when_a_held_snapshots_file_is_scheduled(
    tmp_path: Path,
) -> None:
    url, data = (tmp_path / "lake").as_uri(), f"{tmp_path / 'data'}/"
    newest = max(_build(url, data))
    maintenance.protect(url, newest, "live")
    spec = registry.BY_NAME["ducklake_files_scheduled_for_deletion"]
    with slatelake.connect(url) as s:
        file_id, path = s.sql(
            f"SELECT data_file_id, path FROM {META_DB}.ducklake_data_file "
            "WHERE end_snapshot IS NULL LIMIT 1"
        ).fetchone()
    row = (file_id, path, True, 0)
    with slatelake.connect(url) as s:  # the damage: a live file scheduled for deletion
        s.refresh()
        s.commit_change_set(
            ChangeSet(base=s.state.head, puts=((row_key(spec, row), encode_row(spec, row)),))
        )
    files = _data_files(data)
    report = maintenance.run(url, EXPIRE_ALL)
    assert report.status == PARTIAL
    assert "1 files that held snapshots reference are scheduled for deletion" in (
        report.partial_reason or ""
    )
    assert report.step("cleanup_old_files").status == SKIPPED
    assert _data_files(data) == files
    assert _at(url, newest)  # still readable


def test_protect_refuses_what_it_cannot_hold(tmp_path: Path) -> None:
    url, data = (tmp_path / "lake").as_uri(), f"{tmp_path / 'data'}/"
    first, second, *_ = sorted(_build(url, data))
    with pytest.raises(NotFoundError, match="snapshot 999 is not in the catalog"):
        maintenance.protect(url, 999, "nope")
    maintenance.protect(url, first, "keep")
    assert maintenance.protect(url, first, "keep").changed is False
    with pytest.raises(MisconfigurationError, match=f"already protects snapshot {first}"):
        maintenance.protect(url, second, "keep")
    with pytest.raises(NotFoundError, match="no retention hold named 'other'.*holds: 'keep'"):
        maintenance.unprotect(url, "other")
    for name in ("", "   ", "a\x1b[31mred", "zero\u200bwidth", "x" * 129):
        with pytest.raises(MisconfigurationError):
            maintenance.protect(url, first, name)
    for snapshot in ("1e3", "-1", "\uff11", " 5", "5;DROP TABLE t", "", True, -1, 2**63, 1.0):
        with pytest.raises(MisconfigurationError, match="snapshot id"):
            maintenance.protect(url, snapshot, "bad")
    assert [h.name for h in maintenance.retention_holds(url)] == ["keep"]
    with pytest.raises(NotFoundError, match="no slatelake lake"):
        maintenance.retention_holds((tmp_path / "nothing").as_uri())


def test_the_cli_protects_lists_and_unprotects(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, data = (tmp_path / "lake").as_uri(), f"{tmp_path / 'data'}/"
    first = min(_build(url, data))
    name = "month end 'quoted' ✓"
    assert main(["protect", url, str(first), "--name", name, "--note", "audit", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["changed"] is True
    assert doc["hold"]["snapshot_id"] == first and doc["hold"]["name"] == name
    assert main(["protect", url, str(first), "--name", name]) == 0
    assert "already held" in capsys.readouterr().out
    assert main(["protected", url, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["holds"]
    assert [(h["name"], h["snapshot_id"], h["note"]) for h in listed] == [(name, first, "audit")]
    assert main(["protected", url]) == 0
    assert name in capsys.readouterr().out
    assert main(["unprotect", url, name]) == 0
    assert f"removed hold {name!r}" in capsys.readouterr().out
    assert main(["protected", url]) == 0
    assert capsys.readouterr().out.strip() == "no retention holds"


@pytest.mark.parametrize("snapshot", ["1e3", "-1", "\uff11", "5;DROP TABLE t", ""])
def test_the_cli_refuses_a_bad_snapshot_id_before_the_lake_is_opened(
    tmp_path: Path, snapshot: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = (tmp_path / "lake").as_uri()
    with pytest.raises(SystemExit) as exc:
        main(["protect", url, snapshot, "--name", "n"])
    assert exc.value.code == 2
    assert "snapshot id" in capsys.readouterr().err
    assert not (tmp_path / "lake").exists()
