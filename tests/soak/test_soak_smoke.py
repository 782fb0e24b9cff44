"""The soak, briefly, on local files: it runs every role and its oracle finds
nothing; and the oracle itself, on a lake that disagrees with its journal.

The short soak (12 s: 2 writers, each on its own table and the shared one, a
reader, the holder, a pass every 4 s) is run the way ``scripts/soak`` runs
it; its last stdout line is the JSON verdict. So is one with two pinned
readers (``--pinned-readers``) under passes with a 1-second retention. It runs with
``--allow-conflicts``: what it pins is the oracle's verdict on rows, and the
count of conflicts on non-conflicting work is measured by the 10-minute
soak (BENCHMARKS.md), not by 12 s on a CI machine; the tests below pin that
such a conflict is a violation without the flag, and which refusals of an
append are DuckLake's own rule.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest

import slatelake
from slatelake.ducklake import extensions
from slatelake.ducklake.sql import literal
from slatelake.errors import ConflictError, StoreUnavailableError
from tests.conftest import subprocess_env
from tests.soak import check, figures
from tests.soak.journal import (
    ACK,
    AMBIGUOUS,
    DUCKLAKE_RULE,
    REFUSED,
    SHARED,
    Journal,
    Operation,
    read_journal,
    soak_tables,
    tally_conflicts,
)
from tests.soak.workers import COLUMNS, record_failure

ROOT = Path(__file__).resolve().parents[2]


def test_a_short_soak_on_local_files_commits_and_loses_or_doubles_no_row(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.soak.driver",
            *("--minutes", "0.2", "--writers", "2", "--readers", "1"),
            *("--pass-interval", "4", "--allow-conflicts", "--dir", str(tmp_path / "soak")),
        ],
        cwd=ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    assert figures["commits"] > 0 and figures["violations"] == {}
    assert figures["lost"] == 0 and figures["doubled"] == 0
    assert sorted(figures["tables"]) == ["own_0", "own_1", "shared"]
    assert figures["passes_run"] + figures["passes_failed"] > 0
    assert figures["snapshots_checked"] > 0
    cpu = figures["cpu_seconds"]
    assert sorted(cpu) == ["holder", "maintainer", "oracle", "reader", "writer"]
    assert cpu["writer"] > 0 and cpu["maintainer"] > 0


def test_a_short_soak_with_pinned_readers_reads_them_alike_and_reclaims_ended_pins(
    tmp_path: Path,
) -> None:
    """Issue 46 in brief (about 20 s of run on local files): two pinned
    readers re-read their snapshot while passes with a 1-second retention
    run every 2 s; the first is killed (5 s lease), the second closes; every
    read of a pinned snapshot matched, and after both pins ended a pass
    expired their snapshots and deleted the files only they read."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.soak.driver",
            *("--minutes", "0.35", "--writers", "2", "--readers", "0"),
            *("--pinned-readers", "2", "--pass-interval", "2", "--retention", "1s"),
            *("--allow-conflicts", "--dir", str(tmp_path / "soak")),
        ],
        cwd=ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=240,
    )
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    assert figures["violations"] == {} and figures["lost"] == 0 and figures["doubled"] == 0
    assert figures["pinned_readers"] == 2 and figures["pinned_readers_started"] == 2
    assert figures["pinned_reads"] > 0 and figures["pinned_fresh_reads"] > 0
    assert figures["pinned_mismatches"] == 0 and figures["pinned_errors"] == 0
    assert figures["snapshots_kept_by_pins_max"] >= 1  # a pass left a pinned snapshot out
    modes = sorted(p["mode"] for p in figures["pin_reclaim"])
    assert modes == ["closed", "killed"], figures["pin_reclaim"]
    assert figures["pins_ended"] == 2 and figures["pins_reclaimed"] == 2, figures["pin_reclaim"]
    assert figures["pins_unreclaimed"] == 0 and figures["pins_missing"] == 0
    assert all(p["snapshot_gone"] for p in figures["pin_reclaim"])
    assert figures["pin_files_exclusive"] > 0
    assert (
        figures["pin_files_reclaimed"] + figures["pin_files_pending"]
        == (figures["pin_files_exclusive"])
    )


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


def _lake_with_shared_and_own(tmp_path: Path) -> tuple[str, int]:
    """A lake with the soak's tables for one writer; returns it and the
    snapshot they exist from."""
    lake, data = (tmp_path / "lake").as_uri(), str(tmp_path / "data") + "/"
    with slatelake.connect(lake, data_path=data) as s:
        with s.transaction():
            for table in soak_tables(1):
                s.sql(f"CREATE TABLE {table} ({COLUMNS})")
        since = s.state.head.snapshot_id
        s.sql("INSERT INTO shared SELECT i, 0, 0, 'p' FROM range(100, 110) r(i)")
    return lake, since


def test_a_conflict_raised_on_appends_is_a_violation_naming_its_message(tmp_path: Path) -> None:
    """Appends never conflict by DuckLake's rules: a journaled ConflictError
    on an INSERT (or a transaction of INSERTs) is a violation, reported with
    its message; one on a delete (which may meet a pass's merge) is only
    counted. ``allow_conflicts`` reports the count without the violation."""
    lake, since = _lake_with_shared_and_own(tmp_path)
    journal = Journal(tmp_path / "writer-0.jsonl")
    message = "ConflictError: Transaction conflict - commit log slot 7 was taken by txn 9"
    for op in (
        Operation(0, "parquet", {SHARED: [(100, 110)]}, {}, ACK),
        Operation(1, "txn", {"own_0": [(200, 300)], SHARED: [(300, 302)]}, {}, REFUSED, message),
        Operation(2, "delete", {}, {"own_0": [(200, 210)]}, REFUSED, message),
    ):
        op.conflict = op.fate == REFUSED
        journal.intent(op)
        journal.outcome(op)
    journal.close()

    verdict = check.run(lake, tmp_path, since)
    allowed = check.run(lake, tmp_path, since, allow_conflicts=True)

    assert verdict["conflicts_nonconflicting"] == 1
    assert verdict["conflicts_may_conflict"] == 1
    assert verdict["violations"] == {"conflicts_nonconflicting": 1}
    assert verdict["conflict_samples"] == [f"writer 0 op 1 (txn): {message}"]
    assert allowed["conflicts_nonconflicting"] == 1 and allowed["violations"] == {}
    assert verdict["lost"] == 0 and verdict["refused_present"] == 0


def test_a_writer_journals_a_conflict_error_as_a_conflict_with_its_message(tmp_path: Path) -> None:
    """What a writer records for each error its commit raised, read back from
    its journal: a ConflictError (or DuckLake's own conflict, untranslated)
    is a refused conflict with its message; another DuckDB error a refusal
    only; anything else ambiguous, and the session is reopened."""
    errors = [
        ConflictError("commit log slot 7 was taken by txn 9"),
        duckdb.TransactionException("Transaction conflict - another transaction has compacted it"),
        duckdb.ConversionException("Could not convert string 'x' to INT64"),
        StoreUnavailableError("the store answered 503"),
    ]
    journal = Journal(tmp_path / "writer-3.jsonl")
    reopen = []
    for n, exc in enumerate(errors):
        op = Operation(n, "parquet", {SHARED: [(n * 10, n * 10 + 5)]}, {})
        journal.intent(op)
        reopen.append(record_failure(op, exc))
        journal.outcome(op)
    journal.close()

    ops, _ = read_journal(tmp_path / "writer-3.jsonl")

    assert [(op.fate, op.conflict) for op in ops] == [
        (REFUSED, True),
        (REFUSED, True),
        (REFUSED, False),
        (AMBIGUOUS, False),
    ]
    message = f"ConflictError: {errors[0]}"  # the error's own wording, whole
    assert ops[0].error == message and "slot 7 was taken by txn 9" in message
    assert reopen == [False, False, False, True]
    tally = tally_conflicts(ops)
    assert tally["conflicts_nonconflicting"] == 2
    assert tally["conflict_samples"][0] == f"writer 3 op 0 (parquet): {message}"


def _insert_over_a_flush_of_inlined_deletes(insert: Any, flush: Any, commit: Any) -> None:
    insert("INSERT INTO lake.t VALUES (1000)")
    flush("CALL ducklake_flush_inlined_data('lake')")
    commit()


def test_an_insert_over_a_flush_of_inlined_deletes_is_refused_in_ducklakes_words_by_both(
    tmp_path: Path,
) -> None:
    """The one DuckLake rule an append can meet: a transaction's INSERT is
    refused when a commit since it began deleted from the table, and the
    pass's flush of inlined deletes writes such a delete file. Stock DuckLake
    (two connections, one catalog) and slatelake (two sessions, one lake)
    refuse it alike, and slatelake's error is what the soak counts as
    DuckLake's rule rather than a finding."""
    setup = [
        "CREATE TABLE lake.t (i INTEGER)",
        "INSERT INTO lake.t SELECT range FROM range(100)",  # one Parquet file
        "DELETE FROM lake.t WHERE i = 2",  # inlined in the catalog
    ]
    stock = extensions.connect()
    stock.execute(
        f"ATTACH {literal(f'ducklake:{tmp_path}/stock.duckdb')} AS lake "
        f"(DATA_PATH {literal(str(tmp_path / 'stock-data') + '/')})"
    )
    for statement in setup:
        stock.execute(statement)
    writer, maintainer = stock.cursor(), stock.cursor()
    writer.execute("BEGIN")
    with pytest.raises(duckdb.TransactionException) as stock_refusal:
        _insert_over_a_flush_of_inlined_deletes(
            writer.execute, maintainer.execute, lambda: writer.execute("COMMIT")
        )
    stock.close()

    lake, data = (tmp_path / "lake").as_uri(), str(tmp_path / "data") + "/"
    with slatelake.connect(lake, data_path=data) as a, slatelake.connect(lake) as b:
        for statement in setup:
            a.sql(statement)
        with pytest.raises(ConflictError) as ours, a.transaction():
            _insert_over_a_flush_of_inlined_deletes(a.sql, b.sql, lambda: None)
        assert a.sql("SELECT count(*) FROM lake.t").fetchone() == (99,)

    words = "but another transaction has deleted from it"
    assert words in str(stock_refusal.value) and words in str(ours.value)
    assert DUCKLAKE_RULE.match(f"ConflictError: {ours.value}")
    refused = Operation(
        0, "txn", {"t": [(1000, 1001)]}, {}, REFUSED, f"ConflictError: {ours.value}"
    )
    refused.conflict = True
    assert tally_conflicts([refused])["conflicts_ducklake_rule"] == 1


def test_only_ducklakes_own_insert_over_delete_refusal_is_excused_on_appends() -> None:
    """A refusal of an append is DuckLake's rule only in DuckLake's exact
    words; slatelake's own refusals, however close, stay findings."""
    rule = (
        'ConflictError: Transaction conflict - attempting to insert into table with index "4" '
        "- but another transaction has deleted from it; nothing was committed"
    )
    near_misses = [
        "ConflictError: Transaction conflict - commit log slot 7 was taken by txn 9",
        rule.replace(
            "; nothing was committed",
            " since this one began (DuckLake 1.5.5 would commit both and lose rows)",
        ),
        rule.replace("deleted from it", "compacted it"),
        rule.replace("ConflictError", "StoreUnavailableError"),
    ]
    ops = []
    for n, message in enumerate([rule, *near_misses]):
        op = Operation(n, "parquet", {SHARED: [(n * 10, n * 10 + 5)]}, {}, REFUSED, message)
        op.conflict = True
        ops.append(op)

    tally = tally_conflicts(ops)

    assert tally["conflicts_ducklake_rule"] == 1
    assert tally["conflicts_nonconflicting"] == len(near_misses)
    assert all(rule not in sample for sample in tally["conflict_samples"])


def test_a_corruption_error_in_any_roles_log_is_a_finding_naming_the_log(tmp_path: Path) -> None:
    """The injected faults never damage bytes: a CorruptionError anywhere
    (a forked log the holder restarts on) is counted, even where the
    journals still agree."""
    (tmp_path / "holder.log").write_text(
        "folded 3 slots\nslatelake hold: CorruptionError: commit log slot 394 forked\n"
    )
    (tmp_path / "writer-0.log").write_text("the commit lock was not released (store busy)\n")
    found = figures.corruption(tmp_path)
    assert found["corruption_reports"] == 1
    assert found["corruption_samples"] == [
        "holder.log: slatelake hold: CorruptionError: commit log slot 394 forked"
    ]


def test_requests_are_tallied_by_method_and_folder_with_numbered_levels_folded() -> None:
    """Slot numbers, ULIDs and table suffixes fold into ``*``, so two runs'
    request mixes compare folder by folder."""
    trace = [
        ("GET", "lake/commits/00000000000000000393"),
        ("GET", "lake/commits/00000000000000000394"),
        ("LIST", "lake/commits/"),
        ("PUT", "lake/store/compacted/01JF3Q0Z8K.sst"),
        ("GET", "data/main/own_0/ducklake-1.parquet"),
        ("GET", "data/main/own_1/ducklake-2.parquet"),
        ("HEAD", "top-level-object"),
    ]
    assert figures.request_areas(trace) == {
        "GET lake/commits": 2,
        "GET data/main/*": 2,
        "LIST lake/commits": 1,
        "PUT lake/store/compacted": 1,
        "HEAD .": 1,
    }
