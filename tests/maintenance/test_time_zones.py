"""The time-dependent pass tests, run again on hosts east and west of UTC.

DuckDB fixes its TimeZone from the host once per process, so each zone runs
in a child pytest started with TZ set; the child first checks that DuckDB
really took the zone, so a zone that silently fell back to UTC fails here.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import subprocess_env

ROOT = Path(__file__).resolve().parents[2]
ZONES = ("Asia/Tokyo", "America/Los_Angeles")
# Each reads an interval or a timestamp against DuckDB's clock in the host's zone.
TIME_DEPENDENT = (
    "test_configured_pass_reports_in_order_and_leaves_contents_unchanged",
    "test_interval_older_than_counts_back_from_now_in_any_zone",
    "test_a_timestamp_older_than_names_a_utc_instant_in_any_zone",
)
# The same interval arithmetic, but a window that has to pass in real time (6 s).
ROLLING = "test_interval_older_than_is_a_rolling_window_per_pass"
CHILD = """
import os, sys
import duckdb, pytest
zone = duckdb.connect().execute("SELECT current_setting('TimeZone')").fetchone()[0]
if zone != os.environ["TZ"]:
    sys.exit(f"DuckDB runs in {zone}, not {os.environ['TZ']}")
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", *sys.argv[1:]]))
"""


def _run_in_zones(names: tuple[str, ...]) -> None:
    nodes = [f"tests/maintenance/test_pass.py::{name}" for name in names]
    children = {
        zone: subprocess.Popen(
            [sys.executable, "-c", CHILD, *nodes],
            cwd=ROOT,
            env={**subprocess_env(), "TZ": zone},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for zone in ZONES  # both at once: the tests mostly wait on the clock
    }
    failed = {}
    for zone, child in children.items():
        out, _ = child.communicate(timeout=600)
        if child.returncode != 0:
            failed[zone] = out[-4000:]
    assert not failed, "\n".join(f"--- TZ={z}\n{out}" for z, out in failed.items())


def test_time_dependent_pass_tests_hold_east_and_west_of_utc() -> None:
    _run_in_zones(TIME_DEPENDENT)


@pytest.mark.long
def test_the_rolling_window_holds_east_and_west_of_utc() -> None:
    _run_in_zones((ROLLING,))
