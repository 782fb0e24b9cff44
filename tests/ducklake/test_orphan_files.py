"""DuckLake's orphan step deletes true orphans only, whatever the data path's spelling.

Every orphan step here runs inside ``orphan_step_guard``: every file the
catalog references must still be there afterwards and every table must read
back the same rows. A stray file planted under the data path must go, so the
guard is never satisfied by a step that did nothing.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import boto3
import pytest

import slatelake
from slatelake.catalog.changes import RowChanges, build_change_set
from slatelake.catalog.registry import BY_NAME
from slatelake.ducklake.session import Session, connect
from slatelake.errors import MisconfigurationError
from slatelake.maintenance.delete_boundary import SKEW_ENV
from slatelake.maintenance.report import RAN
from tests.ducklake.orphan_guard import lake_files, orphan_step_guard

ORPHANS = "CALL ducklake_delete_orphaned_files('lake', cleanup_all => true)"


@pytest.fixture(autouse=True)
def _one_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stray is planted a moment before the pass, on this host's clock:
    no skew allowance, so the pass's orphan window reaches it."""
    monkeypatch.setenv(SKEW_ENV, "0")


STRAY = "main/t/ducklake-stray-0000.parquet"


def _fill(session: Session) -> None:
    """Parquet data files, a delete file and an inlined row."""
    session.sql("CREATE TABLE t (id INTEGER, v VARCHAR)")
    for lo in (0, 1000, 2000):
        session.sql(f"INSERT INTO t SELECT r, 'v' || r FROM range({lo}, {lo + 1000}) x(r)")
    session.sql("DELETE FROM t WHERE id % 7 = 0")
    session.sql("INSERT INTO t VALUES (-1, 'inline')")


def _plant_stray(data_path: str) -> str:
    """An unreferenced file under the data path: the step must delete it."""
    if data_path.startswith("s3://"):
        bucket, _, prefix = data_path[len("s3://") :].partition("/")
        key = prefix.rstrip("/") + "/" + STRAY
        boto3.client("s3").put_object(Bucket=bucket, Key=key, Body=b"PAR1 not referenced")
        planted = f"s3://{bucket}/{key}"
    else:
        path = Path(data_path.removeprefix("file://")) / STRAY
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"PAR1 not referenced")
        planted = str(path)
    time.sleep(1.1)  # file times reach the orphan filter in whole seconds
    return planted


@pytest.fixture(params=["file_url", "bare_path", "s3"])
def spelled(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """(lake URL, data path) with the data path spelled three ways."""
    if request.param == "s3":
        bucket = request.getfixturevalue("s3_bucket")
        run = uuid.uuid4().hex[:8]
        return f"s3://{bucket}/lakes/{run}", f"s3://{bucket}/data/{run}/"
    lake = (tmp_path / "lake").as_uri()
    data = tmp_path / "data"
    if request.param == "file_url":
        return lake, data.as_uri() + "/"
    return lake, f"{data}/"


def test_orphan_step_keeps_every_live_file_for_every_data_path_spelling(
    spelled: tuple[str, str],
) -> None:
    url, data_path = spelled
    with connect(url, data_path=data_path) as session:
        _fill(session)
    options = {
        "MAINTENANCE_DELETE_ORPHANED_FILES_CLEANUP_ALL": "true",
        "MAINTENANCE_ORPHAN_AGE_FLOOR_OVERRIDE": "true",
    }
    # no data path: what the scheduler and the Lambda open
    with slatelake.connect(url, options=options) as session:
        stray = _plant_stray(lake_files(session).data_path)
        with orphan_step_guard(session):
            deleted = [r[0] for r in session.sql(ORPHANS).fetchall()]
        assert deleted == [stray.removeprefix("file://")]
        stray = _plant_stray(lake_files(session).data_path)
        with orphan_step_guard(session) as before:
            assert stray in before.present
            report = session.maintenance()
        assert report.step("delete_orphaned_files").status == RAN
        assert stray not in lake_files(session).present
    # reconnecting with the same spelling
    with connect(url, data_path=data_path) as session, orphan_step_guard(session):
        assert session.sql(ORPHANS).fetchall() == []


def _store_data_path(session: Session, spelled_as: str) -> None:
    """Rewrite the stored data path, as a catalog created before slatelake
    normalized it holds it (DuckLake stores whatever DATA_PATH it was given)."""
    spec = BY_NAME["ducklake_metadata"]
    old = [r for r in session.state.rows(spec.name) if r[0] == "data_path" and r[2] is None]
    assert len(old) == 1
    new = (old[0][0], spelled_as, *old[0][2:])
    changes = RowChanges().delete(spec.name, old[0]).insert(spec.name, new)
    session.commit_change_set(build_change_set(session.state, changes, False, ""))
    session.catalog_changed()


@pytest.mark.parametrize("reconnect_with", ["nothing", "file_url", "bare_path"])
def test_lake_storing_a_file_url_data_path_keeps_its_live_files(
    tmp_path: Path, reconnect_with: str
) -> None:
    url, data = (tmp_path / "lake").as_uri(), tmp_path / "data"
    with connect(url, data_path=f"{data}/") as session:
        _store_data_path(session, data.as_uri() + "/")
        _fill(session)
    given = {"nothing": None, "file_url": data.as_uri(), "bare_path": str(data)}[reconnect_with]
    with connect(url, data_path=given) as session:
        assert lake_files(session).data_path == data.as_uri() + "/"  # the catalog is untouched
        stray = _plant_stray(str(data))
        with orphan_step_guard(session):
            deleted = [r[0] for r in session.sql(ORPHANS).fetchall()]
        assert deleted == [stray]
    with connect(url, read_only=True) as session:
        assert session.sql("SELECT count(*) FROM t WHERE v LIKE 'v%'").fetchone() == (2571,)


def test_reconnecting_with_another_data_path_is_refused_naming_both(tmp_path: Path) -> None:
    url, data = (tmp_path / "lake").as_uri(), tmp_path / "data"
    with connect(url, data_path=f"{data}/") as session:
        session.sql("CREATE TABLE t (id INTEGER)")
    other = tmp_path / "elsewhere"
    with pytest.raises(MisconfigurationError) as err:
        connect(url, data_path=str(other))
    assert str(other) in str(err.value) and str(data) in str(err.value)
