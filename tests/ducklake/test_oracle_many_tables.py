"""Oracle on a lake of many tables: random statements on random tables through
a slatelake session and through stock DuckLake, every table and time travel
compared after each statement (the shape of a commit's cost is in
``test_commit_cost_shape.py``).

The session runs with SLATELAKE_VERIFY_CAPTURE=1, so after every commit it
also checks that its capture equals a full diff of the catalog.
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest

import slatelake
from slatelake.ducklake import extensions
from slatelake.ducklake.session import VERIFY_ENV
from slatelake.ducklake.sql import literal
from tests.conftest import subprocess_env
from tests.ducklake.many_tables import (
    SNAPSHOT_DETAIL_SQL,
    Model,
    Pair,
    Statement,
    Table,
    deck,
    expire_statement,
    random_statement,
)

PER_BLOCK = 25
SEED_ROWS = 20  # past DuckLake's inlining limit: a Parquet file per table
SEED = 20_240_614
TRAVELS = 2  # earlier snapshots compared per statement
FRESH_SNAPSHOTS = 3  # earlier snapshots compared whole from the fresh session
FLUSH = "CALL ducklake_flush_inlined_data('lake')"
MERGE = "CALL ducklake_merge_adjacent_files('lake')"


@dataclass(frozen=True)
class Workload:
    tables: int
    statements: int
    fixed: dict[int, str]  # step -> a maintenance statement run there instead of a random one


# A statement and its checks take ~1.5 s on 100 tables, 0.6-1 s of it slatelake
# hashing every table (DuckLake binds each with ~8 metadata queries): the long
# tier's 28 statements take about 50 s. The default tier runs every kind of
# statement and each maintenance call on 20 tables.
HUNDRED = Workload(100, 28, {7: FLUSH, 12: MERGE, 16: "expire", 21: FLUSH, 24: MERGE, 27: "expire"})
TWENTY = Workload(20, 14, {4: FLUSH, 7: MERGE, 9: "expire", 12: FLUSH})


@pytest.fixture
def stock(tmp_path: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    con = extensions.connect()
    meta, data = literal(f"ducklake:{tmp_path}/stock.duckdb"), literal(f"{tmp_path}/stock-data/")
    con.execute(f"ATTACH {meta} AS lake (DATA_PATH {data})")
    con.execute("USE lake")
    yield con
    con.close()


def _build(pair: Pair, model: Model, tables: int) -> None:
    """``tables`` tables of a Parquet file each, ``PER_BLOCK`` to a transaction
    (one snapshot per block on both sides)."""
    for first in range(0, tables, PER_BLOCK):
        block = []
        for i in range(first, min(first + PER_BLOCK, tables)):
            table = Table(f"t{i:03d}")
            model.live[table.name] = table
            block += [table.create_sql(), table.bulk_sql(SEED_ROWS)]
        with pair.session.transaction():
            for sql in block:
                pair.session.sql(sql)
        pair.stock.execute("BEGIN TRANSACTION")
        for sql in block:
            pair.stock.execute(sql)
        pair.stock.execute("COMMIT")
        model.record(pair.snapshots()[-1])


def _statement(
    step: int, rng: random.Random, model: Model, kinds: list[str], workload: Workload
) -> Statement:
    fixed = workload.fixed.get(step)
    if fixed == "expire":
        return expire_statement(rng, model, count=4)
    if fixed is not None:
        return Statement(fixed.split("(")[0].split()[-1], fixed, None)
    return random_statement(rng, model, kinds.pop())


def _check(pair: Pair, model: Model, rng: random.Random, statement: Statement) -> None:
    """After a statement: the snapshots line up, every live table is equal, and
    the touched table (a few random ones after maintenance) now and at earlier
    snapshots where it existed, expired ones included (both sides refuse)."""
    model.record(pair.snapshots()[-1])
    if statement.touched is not None:
        pair.compare_tables(model.live, changed={statement.touched})
        names = [statement.touched]
    else:
        pair.compare_tables(model.live)
        names = rng.sample(sorted(model.live), 3)  # maintenance: any table
    for name in names:
        if name in model.live:
            pair.compare_rows(name)
        earlier = model.existed(name)[:-1]
        for version in rng.sample(earlier, min(TRAVELS, len(earlier))):
            pair.compare_rows(name, version)


def _check_fresh(pair: Pair, model: Model, rng: random.Random) -> None:
    """A fresh read-only session (rebuilt from the log): the snapshots with
    their changes, every table, a sample in full, and a sample of earlier
    snapshots whole (expired ones: both sides refuse alike)."""
    ours, stock = (_changes(side) for side in pair.both(SNAPSHOT_DETAIL_SQL))
    assert ours == stock, f"snapshots: slatelake {ours} stock {stock}"
    pair.compare_tables(model.live, changed=set())
    for name in rng.sample(sorted(model.live), 8):
        pair.compare_rows(name)
    kept = sorted(s for s in model.history if s not in model.expired and model.history[s])
    for version in rng.sample(kept, min(FRESH_SNAPSHOTS, len(kept))):
        pair.compare_tables(model.history[version], version)
    for version in sorted(model.expired)[:3]:
        for name in sorted(model.history[version])[:2]:
            pair.compare_rows(name, version)


def _changes(result: tuple[str, Any]) -> tuple[str, Any]:
    """Snapshot rows with each change's list sorted (DuckLake lists in no set order)."""
    if result[0] != "rows":
        return result
    return "rows", [(s, v, {k: sorted(x) for k, x in (c or {}).items()}) for s, v, c in result[1]]


@pytest.mark.parametrize(
    ("workload", "verified"),
    [
        pytest.param(TWENTY, True, id="20-tables"),
        # unchecked, the session's base database lags through runs of its own
        # commits (the check reads it after each): the fresh session at the
        # end reads what those captures committed. In the long tier: its one
        # clean-clone CI failure was this workload's open native abort (below),
        # and a second run of it in the default tier doubles that risk.
        pytest.param(TWENTY, False, id="20-tables-unverified", marks=pytest.mark.long),
        pytest.param(HUNDRED, True, id="100-tables", marks=pytest.mark.long),
    ],
)
def test_random_statements_on_a_many_table_lake_match_stock_in_every_table_and_in_time(
    workload: Workload,
    verified: bool,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A failure names the step and lists the statements that led to it.

    Run in a fresh process of its own (this test, by its node id, with
    ``IN_CHILD_ENV`` set): in an xdist worker that had run much of the
    suite, about one full run in six ended in a native crash inside this
    workload (an abort from a native thread in ``table_exists``; a C++
    ``basic_string::_M_create`` in stock DuckLake's own flush), never
    reproduced with the module alone (dozens of runs). The cause is open;
    the child's failure, a crash included, fails this test with its output."""
    if os.environ.get(IN_CHILD_ENV) != "1":
        _run_in_child(request.node.nodeid, tmp_path)
        return
    stock = request.getfixturevalue("stock")  # in the child only
    if verified:
        monkeypatch.setenv(VERIFY_ENV, "1")
    else:
        monkeypatch.delenv(VERIFY_ENV, raising=False)
    url = (tmp_path / "lake").as_uri()
    rng = random.Random(SEED)
    model = Model()
    session = slatelake.connect(url, data_path=f"{tmp_path}/data/")
    pair = Pair(session, stock)
    try:
        model.record(pair.snapshots()[-1])
        _build(pair, model, workload.tables)
        done = [
            f"-- {workload.tables} tables t000.., each CREATE + a {SEED_ROWS}-row INSERT, "
            f"{PER_BLOCK} to a transaction (seed {SEED})"
        ]
        model.hot = sorted(model.live)[:6]
        kinds = deck(rng, workload.statements - len(workload.fixed))
        for step in range(workload.statements):
            statement = _statement(step, rng, model, kinds, workload)
            done.append(statement.sql)
            try:
                pair.run(statement.sql)
                _check(pair, model, rng, statement)
            except Exception as exc:
                sequence = "\n".join(done)
                raise AssertionError(
                    f"step {step}, {statement.kind}: {exc}\nstatements:\n{sequence}"
                ) from exc
    finally:
        session.close()
    with slatelake.connect(url, read_only=True) as fresh:
        pair.session = fresh  # stock's hashes at the head carry over
        _check_fresh(pair, model, rng)


IN_CHILD_ENV = "SLATELAKE_TEST_IN_CHILD"
ROOT = Path(__file__).resolve().parents[2]


def _run_in_child(nodeid: str, tmp_path: Path) -> None:
    child = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            "-m",
            "long or not long",
            "--basetemp",
            str(tmp_path / "child"),
            nodeid,
        ],
        cwd=ROOT,
        env={**subprocess_env(), IN_CHILD_ENV: "1"},
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    # a native crash's dump starts with the thread that crashed: keep its head
    err = child.stderr
    err = err if len(err) <= 8000 else f"{err[:6000]}\n[...]\n{err[-2000:]}"
    assert child.returncode == 0, (
        f"the child exited {child.returncode}:\n{child.stdout[-6000:]}\n{err}"
    )
    assert re.search(r"^1 passed\b", child.stdout, re.MULTILINE), child.stdout[-2000:]


# Found by the workload above: DuckLake's flush also drops the inlined-data
# table of an older schema version of a table it flushed nothing of (so the
# snapshot's changes do not name that table).
SUPERSEDED_INLINED_TABLE = [
    "CREATE TABLE t (id INTEGER)",
    "CREATE TABLE u (id INTEGER)",
    "ALTER TABLE t ADD COLUMN c INTEGER",  # t's inlined rows now go to a new table
    "INSERT INTO u VALUES (1)",
    FLUSH,  # drops t's old inlined-data table, flushes u
    "INSERT INTO t VALUES (5, 6)",
]


def test_a_flush_that_drops_another_tables_superseded_inlined_table_commits_the_drop(
    tmp_path: Path, stock: duckdb.DuckDBPyConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the check: what reaches the log must read back as stock reads."""
    monkeypatch.delenv(VERIFY_ENV, raising=False)
    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path}/data/") as session:
        pair = Pair(session, stock)
        for sql in SUPERSEDED_INLINED_TABLE:
            pair.run(sql)
    with slatelake.connect(url, read_only=True) as fresh:
        pair = Pair(fresh, stock)
        for version in (None, 2, 3, 4):
            pair.compare_rows("t", version)
