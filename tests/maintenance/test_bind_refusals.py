"""Option values DuckLake would reject mid-pass are refused at bind instead:
before the lake is attached, with exit status 2 naming the option, and
nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

import slatelake
from slatelake.catalog.lake import Lake
from slatelake.cli import main
from slatelake.cli.common import parse_kv
from slatelake.maintenance.options import MaintenanceConfigError

pytestmark = pytest.mark.fast


@pytest.fixture
def lake(tmp_path: Path) -> str:
    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path / 'data'}/") as s:
        s.sql("CREATE TABLE t (id INTEGER)")
        for i in range(3):
            s.sql(f"INSERT INTO t SELECT * FROM range({i * 10}, {i * 10 + 10})")
    return url


def _last_slot(url: str) -> int:
    with Lake.open(url, read_only=True) as lake:
        return lake.summary().last_slot


def _maintain(capsys: pytest.CaptureFixture[str], url: str, *options: str) -> tuple[int, str]:
    """``slatelake maintain URL --option ...`` in this process: (exit status, stderr)."""
    argv = ["maintain", url]
    for option in options:
        argv += ["--option", option]
    capsys.readouterr()
    code = main(argv)
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("option", "named"),
    [
        (
            "MAINTENANCE_MERGE_ADJACENT_FILES_MAX_COMPACTED_FILES=-1",
            "MAINTENANCE_MERGE_ADJACENT_FILES_MAX_COMPACTED_FILES='-1'",
        ),
        (
            "MAINTENANCE_REWRITE_DATA_FILES_DELETE_THRESHOLD=nan",
            "MAINTENANCE_REWRITE_DATA_FILES_DELETE_THRESHOLD='nan'",
        ),
        (
            "MAINTENANCE_CLEANUP_OLD_FILES_OLDER_THAN=yesterday-ish",
            "MAINTENANCE_CLEANUP_OLD_FILES_OLDER_THAN='yesterday-ish'",
        ),
    ],
)
def test_the_cli_refuses_a_value_a_step_would_fail_on_with_exit_2_naming_it(
    lake: str, option: str, named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    slot = _last_slot(lake)
    code, err = _maintain(capsys, lake, "MAINTENANCE_MERGE_ADJACENT_FILES=true", option)
    assert code == 2, err
    assert named in err
    assert _last_slot(lake) == slot, "a refused pass wrote to the lake"


def test_the_cli_refuses_an_option_given_twice_naming_both_values(
    lake: str, capsys: pytest.CaptureFixture[str]
) -> None:
    slot = _last_slot(lake)
    code, err = _maintain(
        capsys,
        lake,
        "MAINTENANCE_CLEANUP_OLD_FILES_DRY_RUN=true",
        "MAINTENANCE_CLEANUP_OLD_FILES_DRY_RUN=false",
    )
    assert code == 2, err
    assert "MAINTENANCE_CLEANUP_OLD_FILES_DRY_RUN" in err
    assert "'true'" in err and "'false'" in err
    assert _last_slot(lake) == slot, "the last spelling won and a pass ran"


def test_parse_kv_refuses_a_repeated_key_even_with_the_same_value() -> None:
    assert parse_kv(["A=1", "B=x=y"]) == {"A": "1", "B": "x=y"}
    with pytest.raises(MaintenanceConfigError, match="--option 'K' is given twice"):
        parse_kv(["K=1", "K=1"])


@pytest.mark.parametrize(
    "options",
    [
        {"MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN": "1 day\x00' ; SELECT 1; --"},
        {"MAINTENANCE_MERGE_ADJACENT_FILES_MAX_COMPACTED_FILES": str(2**64)},
        {"MAINTENANCE_INTERVAL": "99999999999 days"},
        {"MAINTENANCE_CLEANUP_OLD_FILES": "true", "META_MAINTENANCE_CLEANUP_OLD_FILES": "false"},
    ],
)
def test_a_session_with_a_bad_option_never_exists(lake: str, options: dict[str, str]) -> None:
    slot = _last_slot(lake)
    with pytest.raises(MaintenanceConfigError):
        slatelake.connect(lake, options=options)
    assert _last_slot(lake) == slot
