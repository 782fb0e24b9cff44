"""A warm Lambda container keeps its opened catalog between invocations."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

import slatelake
from slatelake.ducklake.extensions import MEMORY_LIMIT_ENV
from slatelake.maintenance.report import RAN
from tests.functions.conftest import EVENTS, FakeContext

# the handler tests' group: the pristine S3 lake is built once, on their worker
pytestmark = pytest.mark.xdist_group("pristine-s3-lake")


def _scheduled(app: ModuleType) -> dict:
    out = app.handler(json.loads((EVENTS / "scheduled.json").read_text()), FakeContext())
    assert out["ok"] is True, out
    return out["result"]


def test_a_warm_container_reuses_its_catalog_and_replays_only_new_slots(
    app: ModuleType, s3_lake: tuple[str, str, list[str]], env_clean: pytest.MonkeyPatch
) -> None:
    lake, _, names = s3_lake
    env_clean.setenv("MAINTENANCE_FLUSH_INLINED_DATA", "true")
    _scheduled(app)
    warm = app.warm.session
    seen = warm.state.last_seq
    with slatelake.connect(lake) as other:  # another writer commits between invocations
        other.sql(f"INSERT INTO {names[0]} VALUES (9999, 'late')")
        committed = other.state.last_seq
    opened: list[str] = []
    real = warm.session._open_state  # the Session slatelake.connect's session owns
    warm.session._open_state = lambda: opened.append("reopen") or real()  # type: ignore[method-assign]
    report = _scheduled(app)
    assert app.warm.session is warm, "the warm container kept its session"
    assert not opened, "nothing was reopened: the new slots were replayed"
    assert warm.state.last_seq >= committed > seen
    steps = {s["step"]: s for s in report["steps"]}
    assert steps["flush_inlined_data"]["status"] == RAN
    assert steps["flush_inlined_data"]["counts"]["rows_flushed"] == 1  # only the new row


def test_releasing_the_warm_session_closes_it(
    app: ModuleType, s3_lake: tuple[str, str, list[str]], env_clean: pytest.MonkeyPatch
) -> None:
    _scheduled(app)
    warm = app.warm.session
    app.warm.release()
    assert app.warm.session is None
    with pytest.raises(Exception):  # noqa: B017 - a closed DuckDB connection refuses anything
        warm.con.execute("SELECT 1")


def test_a_lake_restored_behind_the_warm_view_gets_a_fresh_session(
    app: ModuleType,
    pristine_lake: object,
    s3_lake: tuple[str, str, list[str]],
    env_clean: pytest.MonkeyPatch,
) -> None:
    """A backup restored under a warm container must never meet a view from
    its future: committing from it would leave a hole in the log."""
    lake, _, names = s3_lake
    env_clean.setenv("MAINTENANCE_FLUSH_INLINED_DATA", "true")
    _scheduled(app)
    with slatelake.connect(lake) as other:
        other.sql(f"INSERT INTO {names[0]} VALUES (4242, 'gone after the restore')")
    _scheduled(app)  # the warm view now holds slots the backup does not
    warm = app.warm.session
    pristine_lake.restore()  # type: ignore[attr-defined]
    _scheduled(app)
    assert app.warm.session is not warm, "the view from the future was dropped"
    with slatelake.connect(lake, read_only=True) as s:  # the lake reads whole: no hole
        assert s.sql(f"SELECT count(*) FROM {names[0]} WHERE id = 4242").fetchall() == [(0,)]


def test_other_options_reuse_the_session_another_lake_does_not(
    app: ModuleType, small_lake: str, env_clean: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The session carries no options (each pass is given its own), so a
    change of options keeps it; another lake closes it and opens its own."""
    import slatelake

    flush = {"MAINTENANCE_FLUSH_INLINED_DATA": "true"}
    assert app.handler({"options": flush}, FakeContext())["ok"] is True
    warm = app.warm.session
    expire = {"MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN": "7 days"}
    assert app.handler({"options": expire}, FakeContext())["ok"] is True
    assert app.warm.session is warm
    other = (tmp_path / "other").as_uri()
    slatelake.connect(other, data_path=f"{tmp_path / 'other_data'}/").close()
    env_clean.setenv("SLATELAKE_ALLOWED_LAKES", other)
    assert app.handler({"lake": other}, FakeContext())["ok"] is True
    assert app.warm.session is not warm
    with pytest.raises(Exception):  # noqa: B017 - the kept one was closed
        warm.con.execute("SELECT 1")


@pytest.mark.parametrize(("configured", "expected"), [(None, "512.0 MiB"), ("700MiB", "700.0 MiB")])
def test_the_pass_sessions_duckdb_is_bounded_by_the_functions_memory(
    app: ModuleType,
    s3_lake: tuple[str, str, list[str]],
    env_clean: pytest.MonkeyPatch,
    configured: str | None,
    expected: str,
) -> None:
    """Half the function's memory unless SLATELAKE_DUCKDB_MEMORY_LIMIT says
    otherwise: DuckDB's own default (80% of memory) lets DuckLake's cache grow
    a warm container's session until the function runs out of memory."""
    env_clean.setenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "1024")
    env_clean.delenv(MEMORY_LIMIT_ENV, raising=False)
    if configured is not None:
        env_clean.setenv(MEMORY_LIMIT_ENV, configured)
    env_clean.setenv("MAINTENANCE_FLUSH_INLINED_DATA", "true")
    _scheduled(app)
    con = app.warm.session.con
    assert con.execute("SELECT current_setting('memory_limit')").fetchone()[0] == expected
