"""Oracle on a lake of many tables: random statements on random tables through
a slatelake session and through stock DuckLake, every table and time travel
compared after each statement; and the shape of a commit's cost (how many
DuckDB queries capture issues) does not grow with the tables the lake holds.

The session runs with SLATELAKE_VERIFY_CAPTURE=1, so after every commit it
also checks that its capture equals a full diff of the catalog.
"""

from __future__ import annotations

import itertools
import os
import random
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest

import slatelake
from slatelake.ducklake import extensions
from slatelake.ducklake.session import VERIFY_ENV, Session
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


# -- the shape of a commit's cost ----------------------------------------------
class _CountingCursor:
    """Forwards to a DuckDB cursor, keeping the SQL of each query it issues."""

    def __init__(self, cursor: duckdb.DuckDBPyConnection) -> None:
        self._cursor = cursor
        self.queries: list[str] = []

    def _count(self, name: str) -> Any:
        method = getattr(self._cursor, name)

        def counted(query: Any, *args: Any, **kwargs: Any) -> Any:
            self.queries.append(str(query))
            result = method(query, *args, **kwargs)
            return self if result is self._cursor else result

        return counted

    def __getattr__(self, name: str) -> Any:
        if name in ("execute", "executemany", "sql", "query"):
            return self._count(name)
        return getattr(self._cursor, name)


def _lake_of(tmp_path: Path, tables: int) -> str:
    """A lake of ``tables`` tables, each holding inlined rows of its own."""
    url = (tmp_path / f"lake{tables}").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path}/data{tables}/") as session:
        for first in range(0, tables, PER_BLOCK):
            with session.transaction():
                for i in range(first, min(first + PER_BLOCK, tables)):
                    session.sql(f"CREATE TABLE t{i:03d} (id INTEGER, v VARCHAR)")
                    session.sql(f"INSERT INTO t{i:03d} VALUES ({i}, 'seed')")
    return url


def _queries_to_commit_one_row(url: str) -> list[str]:
    return _queries_of(
        url, "INSERT INTO t000 VALUES (1, 'warm')", "INSERT INTO t000 VALUES (2, 'counted')"
    )


def _queries_to_flush_one_table(url: str) -> list[str]:
    """A pass's per-table flush: the first of the lake's tables warms the
    session, the second is counted (each holds inlined rows of its own)."""
    flush = "CALL ducklake_flush_inlined_data('lake', table_name => {})"
    return _queries_of(url, flush.format(literal("t000")), flush.format(literal("t001")))


def _queries_of(url: str, warm: str, counted: str) -> list[str]:
    """The helper cursor's queries while ``counted`` commits, after ``warm`` did."""
    with slatelake.connect(url) as session:
        session.sql(warm)
        counter = _CountingCursor(session._aux)
        held = _use_cursor(session, counter)
        assert "capture.con" in held, f"the helper cursor is held only by {held}"
        start = time.perf_counter()
        session.sql(counted)
        elapsed = time.perf_counter() - start
        print(f"{url}: {len(counter.queries)} queries, {elapsed * 1000:.0f} ms")
        return counter.queries


def _use_cursor(session: Session, cursor: _CountingCursor) -> list[str]:
    """Put ``cursor`` wherever the session holds its helper cursor (itself, its
    capture, write log and state); returns where it was found."""
    aux = cursor._cursor
    found = []
    for owner_name, owner in [("session", session), *vars(session).items()]:
        attrs = getattr(owner, "__dict__", {})
        for name, value in list(attrs.items()):
            if value is aux:
                setattr(owner, name, cursor)
                found.append(f"{owner_name}.{name}")
    return found


@pytest.mark.parametrize(
    "tables", [40, pytest.param(200, marks=pytest.mark.long)], ids=lambda n: f"{n}-tables"
)
def test_committing_a_one_row_insert_issues_the_same_queries_on_many_tables_as_on_one(
    tables: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The queries themselves are compared, not just counted: the capture that
    read every table issued as many queries on 200 tables (27) as on one, its
    signature query was a UNION ALL over every table (3.7 KB against 30 KB)."""
    monkeypatch.delenv(VERIFY_ENV, raising=False)  # the full-diff check reads every table
    one = _queries_to_commit_one_row(_lake_of(tmp_path, 1))
    many = _queries_to_commit_one_row(_lake_of(tmp_path, tables))
    assert one, "the counting cursor saw no query: the session no longer uses it"
    # the same queries, up to the ids and snapshot numbers in them: a single
    # query over every table (a UNION ALL, an IN list) shows as well as a count
    shape_one, shape_many = _shape(one), _shape(many)
    if len(one) != len(many) or shape_one != shape_many:
        pad = [""] * max(len(one), len(many))
        listing = "\n".join(
            f"  1 ({len(a)} chars): {a[:200]}\n{tables} ({len(b)} chars): {b[:200]}"
            for a, b in zip(shape_one + pad, shape_many + pad, strict=False)
            if a != b
        )
        raise AssertionError(
            f"1 table: {len(one)} queries, {tables} tables: {len(many)} queries; "
            f"those that differ (digits as N):\n{listing}"
        )


@pytest.mark.parametrize(
    "tables", [40, pytest.param(200, marks=pytest.mark.long)], ids=lambda n: f"{n}-tables"
)
def test_flushing_one_table_issues_the_same_queries_on_many_tables_as_on_one(
    tables: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pass flushes table by table (RFC 0021): each call's capture and apply
    must cost its table, whatever else the lake holds."""
    monkeypatch.delenv(VERIFY_ENV, raising=False)
    one = _shape(_queries_to_flush_one_table(_lake_of(tmp_path, 2)))
    many = _shape(_queries_to_flush_one_table(_lake_of(tmp_path, tables)))
    assert one, "the counting cursor saw no query: the session no longer uses it"
    assert many == one, "\n".join(
        f"  2: {a[:200]}\n{tables}: {b[:200]}"
        for a, b in itertools.zip_longest(one, many, fillvalue="")
        if a != b
    )


@pytest.mark.parametrize("kind", ["insert", "flush"])
def test_the_commit_locks_slot_leaves_what_was_read_of_the_base_standing(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit lock's slot changes no catalog row, so the base's row counts
    and head ids known after the last commit still hold: the next capture
    reads neither again (each lock slot used to send it back to counting the
    base's tables and reading its head snapshot)."""
    monkeypatch.delenv(VERIFY_ENV, raising=False)
    url = _lake_of(tmp_path, 3)
    queries = (
        _queries_to_commit_one_row(url) if kind == "insert" else _queries_to_flush_one_table(url)
    )
    flat = [" ".join(q.split()) for q in queries]
    base = '"__slatelake_base"'
    registry_counts = [
        q for q in flat if "count(*)" in q and re.search(base + r'\."ducklake_(?!inlined)\w+"', q)
    ]
    head_reads = [q for q in flat if re.search(r"SELECT next_file_id.* FROM " + base, q)]
    assert not registry_counts, f"the base's tables counted again: {registry_counts}"
    assert not head_reads, f"the base's head snapshot read again: {head_reads}"


PARQUET_INSERT = "INSERT INTO t000 SELECT i, 'p' FROM range({}, {} + 50) r(i)"


@pytest.mark.parametrize("kind", ["inlined", "parquet"])
def test_a_run_of_inserts_leaves_the_base_database_untouched(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a session's first write, an INSERT (one inlined row, or a new
    Parquet file with its column statistics) is captured from DuckLake's
    copy alone (the base's counts and statistics are known from the last
    capture; a new file's statistics have no group in the base) and its
    change set waits to be applied to the base until something reads it:
    no query names the base database."""
    monkeypatch.delenv(VERIFY_ENV, raising=False)
    url = _lake_of(tmp_path, 3)
    if kind == "inlined":
        queries = _queries_to_commit_one_row(url)
    else:
        warm, counted = PARQUET_INSERT.format(1000, 1000), PARQUET_INSERT.format(2000, 2000)
        queries = _queries_of(url, warm, counted)
    assert queries, "the counting cursor saw no query: the session no longer uses it"
    touching = [q for q in queries if "__slatelake_base" in q]
    assert not touching, f"the base database was read or written: {touching}"


def test_flushing_table_after_table_writes_nothing_to_the_base_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pass's flushes each touch another inlined table: the one a flush
    empties is read from the base as it stands (the earlier flushes, still
    waiting to be applied, did not touch it), so no flush applies them."""
    monkeypatch.delenv(VERIFY_ENV, raising=False)
    queries = _queries_to_flush_one_table(_lake_of(tmp_path, 3))
    assert queries, "the counting cursor saw no query: the session no longer uses it"
    writes = [
        q
        for q in queries
        if "__slatelake_base" in q and not q.lstrip().upper().startswith("SELECT")
    ]
    assert not writes, f"the base database was written: {writes}"


def test_another_writers_commit_makes_the_next_capture_count_the_base_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a session counted of its base holds only while nothing but its
    own commits changed the base: another session's commit, applied at the
    next refresh, must send the capture back to counting (a stale count can
    make an unexplained change look explained)."""
    monkeypatch.setenv(VERIFY_ENV, "1")  # every capture checked against a full diff
    url = _lake_of(tmp_path, 3)
    with slatelake.connect(url) as mine, slatelake.connect(url) as other:
        mine.sql("INSERT INTO t000 VALUES (10, 'mine')")
        other.sql("INSERT INTO t000 VALUES (11, 'other')")
        other.sql("DELETE FROM t000 WHERE id = 0")
        counter = _CountingCursor(mine._aux)
        _use_cursor(mine, counter)
        mine.sql("INSERT INTO t000 VALUES (12, 'mine again')")
        rows = sorted(mine.sql("SELECT id FROM t000").fetchall())
    # the capture's counts-only query (the full check's signatures hash columns)
    snapshot_counted = [
        q
        for q in counter.queries
        if "count(*), 0::HUGEINT" in q and '"__slatelake_base"."ducklake_snapshot"' in q
    ]
    assert snapshot_counted, "the base's snapshots were not counted again after another commit"
    assert rows == [(10,), (11,), (12,)]
    with slatelake.connect(url, read_only=True) as fresh:
        assert sorted(fresh.sql("SELECT id FROM t000").fetchall()) == [(10,), (11,), (12,)]


def _shape(queries: list[str]) -> list[str]:
    """Queries up to their numbers and the UUIDs of new files' names."""
    named = (re.sub(r"ducklake-[0-9a-f-]{36}", "ducklake-UUID", q) for q in queries)
    return [re.sub(r"\d+", "N", " ".join(q.split())) for q in named]


def test_a_commit_opens_no_empty_transaction_on_the_catalog_copies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The commit lock's slots carry no catalog rows: applying one to the
    base is nothing to do, not a BEGIN and a COMMIT (two statements per lock
    slot, four per write)."""
    monkeypatch.delenv(VERIFY_ENV, raising=False)
    queries = [
        " ".join(q.split()).upper() for q in _queries_to_commit_one_row(_lake_of(tmp_path, 3))
    ]
    empty = [
        n
        for n, (a, b) in enumerate(itertools.pairwise(queries))
        if a.startswith("BEGIN") and b == "COMMIT"
    ]
    assert queries and not empty, f"empty transactions at queries {empty} of {len(queries)}"
