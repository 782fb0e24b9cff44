"""The soak, briefly, on local files: it runs every role and its oracle finds
nothing; and the oracle itself, on a lake that disagrees with its journal.

The short soak (12 s: 2 writers, a reader, the holder, a pass every 4 s) is
run the way ``scripts/soak`` runs it; its last stdout line is the JSON verdict.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import slatelake
from tests.conftest import subprocess_env
from tests.soak import check
from tests.soak.journal import ACK, AMBIGUOUS, REFUSED, Journal, Operation
from tests.soak.workers import COLUMNS

ROOT = Path(__file__).resolve().parents[2]


def test_a_short_soak_on_local_files_commits_and_loses_or_doubles_no_row(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.soak.driver",
            *("--minutes", "0.2", "--writers", "2", "--readers", "1"),
            *("--pass-interval", "4", "--dir", str(tmp_path / "soak")),
        ],
        cwd=ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    assert figures["commits"] > 0
    assert figures["lost"] == 0 and figures["doubled"] == 0
    assert figures["passes_run"] + figures["passes_failed"] > 0
    assert figures["snapshots_checked"] > 0


def test_the_oracle_counts_each_kind_of_wrong_row_against_the_journal(tmp_path: Path) -> None:
    """A lake that disagrees with its writer's journal in every way the
    oracle names: one lost, one doubled, one refused-but-present, one
    undeleted and one phantom row; ambiguous rows may be present."""
    lake, data = (tmp_path / "lake").as_uri(), str(tmp_path / "data") + "/"
    journal = Journal(tmp_path / "writer-0.jsonl")
    for op in (
        Operation(0, "parquet", {"events": [(100, 200)]}, {}, ACK),
        Operation(1, "inline", {"notes": [(300, 303)]}, {}, ACK),
        Operation(2, "parquet", {"events": [(400, 410)]}, {}, REFUSED),
        Operation(3, "delete", {}, {"events": [(100, 110)]}, ACK),
        Operation(4, "parquet", {"events": [(500, 510)]}, {}, AMBIGUOUS),
    ):
        journal.intent(op)
        journal.outcome(op)
    journal.close()
    with slatelake.connect(lake, data_path=data) as s:
        s.sql(f"CREATE TABLE events ({COLUMNS})")
        s.sql(f"CREATE TABLE notes ({COLUMNS})")
        since = s.state.head.snapshot_id
        s.sql("INSERT INTO events SELECT i, 0, 0, 'p' FROM range(100, 200) r(i)")
        s.sql("INSERT INTO notes SELECT i, 0, 1, 'p' FROM range(300, 302) r(i)")  # 302 lost
        s.sql("INSERT INTO events VALUES (150, 0, 0, 'p')")  # doubled
        s.sql("INSERT INTO events VALUES (400, 0, 2, 'p')")  # refused, present
        s.sql("DELETE FROM events WHERE id >= 100 AND id < 109")  # 109 undeleted
        s.sql("INSERT INTO events VALUES (999, 0, 9, 'p')")  # phantom
        s.sql("INSERT INTO events SELECT i, 0, 4, 'p' FROM range(500, 505) r(i)")  # ambiguous

    verdict = check.run(lake, tmp_path, since)

    found = {k: verdict[k] for k in ("lost", "doubled", "refused_present", "undeleted", "phantom")}
    assert found == {"lost": 1, "doubled": 1, "refused_present": 1, "undeleted": 1, "phantom": 1}
    assert verdict["ambiguous_present"] == 5
    assert verdict["snapshots_unreadable"] == 0
    # The last snapshots show the wrong rows too, through time travel.
    assert verdict["snapshot_doubled"] >= 1 and verdict["snapshot_refused"] >= 1
    assert verdict["snapshot_phantom"] >= 1
