"""A catalog in DuckDB advanced by change sets equals a full materialization.

The base a session opens from (an image, or any earlier state) plus the log's
tail applied in SQL must hold exactly the rows the store-and-replay path
gives, row for row, for every cut of a random history: inserts (inlined and
Parquet), deletes, updates, DDL, a flush, an expiry, drops.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slatelake.catalog import registry
from slatelake.catalog.lake import Lake
from slatelake.catalog.state import EMPTY_HEAD, CatalogState
from slatelake.ducklake import catalog_apply, catalog_db
from slatelake.ducklake.duck_state import DuckState
from slatelake.ducklake.session import connect
from slatelake.ducklake.sql import ident
from slatelake.ducklake.tables import select_list, table_columns
from slatelake.log.replay import read_tail

# Statements a history draws from; {n} is the step number (fresh values).
POOL = [
    "INSERT INTO t VALUES ({n}, 'inl{n}')",  # inlined
    "INSERT INTO t SELECT i, 'p' || i FROM range({n} * 100, {n} * 100 + 40) r(i)",  # Parquet
    "DELETE FROM t WHERE id % 5 = {m}",
    "UPDATE t SET v = v || '+' WHERE id % 3 = {m}",
    "CREATE TABLE IF NOT EXISTS u{m} (k BIGINT, w VARCHAR)",
    "INSERT INTO u1 VALUES ({n}, 'u')",
    "DROP TABLE IF EXISTS u{m}",
    "ALTER TABLE t ADD COLUMN IF NOT EXISTS c{m} INTEGER",
    "CALL ducklake_flush_inlined_data('lake')",
    "CALL ducklake_expire_snapshots('lake', versions => [{n}])",
    "CALL ducklake_merge_adjacent_files('lake')",
]


def dump(con: duckdb.DuckDBPyConnection, db: str) -> dict[str, list[tuple]]:
    """Every metadata table of ``db`` as a sorted list of rows (empty tables omitted)."""
    out = {}
    for table in catalog_db.catalog_tables(con, db):
        columns = table_columns(con, db, table)
        select = select_list(columns, inline=registry.inline_table(table) is not None)
        sql = f"SELECT {select} FROM {ident(db)}.{ident(table)}"
        rows = sorted((tuple(r) for r in con.execute(sql).fetchall()), key=repr)
        if rows or table.startswith("ducklake_inlined"):
            out[table] = rows
    return out


def _state_upto(lake: Lake, seq: int) -> CatalogState:
    """The catalog after slots 1..seq, from the log alone (no slot is folded)."""
    state = CatalogState(head=EMPTY_HEAD, last_seq=0)
    tail = read_tail(lake.log, EMPTY_HEAD, 0, upto=seq)
    for slot, cs in tail.applied:
        state.apply(cs, slot)
    return state


def _run_history(url: str, data: str, picks: list[tuple[int, int]]) -> None:
    with connect(url, data_path=data) as s:
        s.sql("CREATE TABLE t (id BIGINT, v VARCHAR)")
        for n, (which, m) in enumerate(picks, start=1):
            sql = POOL[which].format(n=n, m=m)
            # a statement DuckLake refuses (a dropped table, an expired id) is history too
            with contextlib.suppress(duckdb.Error):
                s.sql(sql)


@settings(
    max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    picks=st.lists(
        st.tuples(st.integers(0, len(POOL) - 1), st.integers(0, 2)), min_size=6, max_size=12
    ),
    chunk=st.integers(1, 3),
)
def test_base_plus_tail_equals_full_materialization_at_every_cut(
    tmp_path_factory: pytest.TempPathFactory, picks: list[tuple[int, int]], chunk: int
) -> None:
    """The tail arrives in runs of ``chunk`` slots (a session's refreshes and
    commits), which the base database takes as lagging net effects, one per
    table; reads in between apply some tables' and leave the others'."""
    root = tmp_path_factory.mktemp("hist")
    url = (root / "lake").as_uri()
    _run_history(url, f"{root}/data/", picks)
    con = duckdb.connect()
    with Lake.open(url, read_only=True) as lake:
        full = DuckState.from_state(con, "full", lake.materialize())
        expected = dump(con, "full")
        last = full.last_seq
        for cut in range(0, last + 1):
            base = DuckState.from_state(con, "cut", _state_upto(lake, cut))
            tail = read_tail(lake.log, base.head, base.last_seq)
            names = sorted(expected)
            for n, i in enumerate(range(0, len(tail.applied), chunk)):
                base.apply_tail(tail.applied[i : i + chunk])
                # a read between runs brings one table along and leaves the
                # rest lagging; later runs then add to that table afresh
                base.settle([names[(cut + n) % len(names)]])
            # read while lagging: a table the lag does not touch is read as
            # it stands, one it touches first brings its own lag along
            for table in sorted(expected):
                got, want = base.rows(table), full.rows(table)
                assert sorted(got, key=repr) == sorted(want, key=repr), (cut, table)
            base.settle()  # the database lags the state until something reads it
            assert (base.head, base.last_seq) == (full.head, full.last_seq)
            assert dump(con, "cut") == expected, f"base at slot {cut} plus the tail"
    con.close()


@pytest.mark.parametrize("settle_fails", [False, True])
def test_a_net_effect_that_spans_tables_brings_the_lagging_tables_along(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settle_fails: bool
) -> None:
    """A net effect whose keys cannot be told apart by table (a range over
    several tables) joins the tables' lags: they are applied first, or, when
    that fails, kept as one lag with them; either way the base ends equal
    to the full materialization."""
    from slatelake.ducklake import duck_state

    url = (tmp_path / "lake").as_uri()
    _run_history(url, f"{tmp_path}/data/", [(0, 0), (1, 0), (2, 1), (4, 1), (5, 0), (8, 0), (3, 2)])
    real_split = duck_state._by_table
    calls = iter(range(1_000))
    monkeypatch.setattr(  # every third net effect "spans" tables
        duck_state, "_by_table", lambda net: None if next(calls) % 3 == 2 else real_split(net)
    )
    con = duckdb.connect()
    with Lake.open(url, read_only=True) as lake:
        DuckState.from_state(con, "full", lake.materialize())
        expected = dump(con, "full")
        base = DuckState.from_state(con, "cut", _state_upto(lake, 1))
        real_settle = DuckState.settle
        if settle_fails:

            def refused(self: DuckState, tables: object = None) -> None:
                if tables is None and "" not in self._lags:
                    raise duckdb.IOException("the base refuses to apply now")
                real_settle(self, tables)

            monkeypatch.setattr(DuckState, "settle", refused)
        tail = read_tail(lake.log, base.head, base.last_seq)
        names = sorted(expected)
        for n, one in enumerate(tail.applied):
            base.apply_tail([one])
            base.settle([names[n % len(names)]])
        monkeypatch.setattr(DuckState, "settle", real_settle)
        base.settle()
        assert dump(con, "cut") == expected
    con.close()


def test_applying_a_change_set_twice_changes_nothing(tmp_path: Path) -> None:
    """A session re-applies its own change set after a rebase; keys make that a no-op."""
    url = (tmp_path / "lake").as_uri()
    _run_history(url, f"{tmp_path}/data/", [(0, 0), (1, 0), (2, 1), (3, 2), (8, 0)])
    con = duckdb.connect()
    with Lake.open(url, read_only=True) as lake:
        state = lake.materialize()
        once = DuckState.from_state(con, "once", _state_upto(lake, 0))
        tail = read_tail(lake.log, once.head, 0)
        once.apply_tail(tail.applied)
        once.settle()
        expected = dump(con, "once")
        for _, cs in tail.applied:
            catalog_apply.apply_change_sets(con, "once", [cs], own=True)
        assert dump(con, "once") == expected
        assert once.head == state.head
    con.close()


def test_a_landed_commit_is_not_reported_failed_when_the_base_cannot_apply_it_yet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The base database applies waiting change sets when too many wait, right
    after a commit's slot landed: an apply that fails there is a warning, not
    an error for a write that is in the log."""
    from slatelake.ducklake import duck_state
    from slatelake.ducklake.session import BASE_DB, VERIFY_ENV

    monkeypatch.delenv(VERIFY_ENV, raising=False)  # the check would apply them first
    monkeypatch.setattr(duck_state, "LAG_MAX", 2)
    url = (tmp_path / "lake").as_uri()
    with connect(url, data_path=f"{tmp_path}/data/") as s:
        s.sql("CREATE TABLE t (id BIGINT)")
        s.sql("INSERT INTO t VALUES (1)")
        s.state.settle()
        # the base loses a table its next apply writes to
        s.con.execute(f"DROP TABLE {ident(BASE_DB)}.ducklake_snapshot_changes")
        s.sql("INSERT INTO t VALUES (2)")
        with caplog.at_level("WARNING", logger="slatelake.session"):
            s.sql("INSERT INTO t VALUES (3)")  # the second waiting: the apply fails
        assert "could not apply 2 change sets yet" in caplog.text
    with connect(url, read_only=True) as fresh:
        assert fresh.sql("SELECT id FROM t ORDER BY id").fetchall() == [(1,), (2,), (3,)]


def test_a_row_past_the_heads_ids_that_a_commit_deletes_leaves_the_base(tmp_path: Path) -> None:
    """A damaged catalog can hold rows whose file id is past the head's next
    one; the sweep deletes exactly those. The base database must lose them
    too: it once kept them (such an id "cannot be there yet"), so a session
    that lived on found them stranded again at every pass."""
    from slatelake.catalog.changes import RowChanges
    from slatelake.catalog.sweep import SweepRequest, sweep

    stranded = (90_001, 9_999, 1, 10, 5, 0, "1", "5", False, None)
    url = (tmp_path / "lake").as_uri()
    with connect(url, data_path=f"{tmp_path}/data/") as s:
        s.sql("CREATE TABLE t (id BIGINT)")
        s.sql("INSERT INTO t SELECT range FROM range(10)")
        damage = RowChanges().insert("ducklake_file_column_stats", stranded)
        s.lake.commit(s.state, damage, mints_snapshot=False, changes_made="damage")
        assert stranded in s.state.rows("ducklake_file_column_stats")  # the base holds it
        request = SweepRequest(index_entries=False, inlined_tables=False)
        swept = sweep(s.lake, request, s.state)
        assert swept.file_column_stats_reclaimed == 1
        assert stranded not in s.state.rows("ducklake_file_column_stats")
        assert sweep(s.lake, request, s.state).file_column_stats_reclaimed == 0


def test_registry_rows_holding_the_null_mark_load_exactly_in_json_documents() -> None:
    """A value equal to the CSV spelling of NULL sends a table's rows through
    JSON documents; 1,200 rows cross two document boundaries, with NULLs,
    the mark itself, quotes and a value that only contains the mark."""
    from slatelake.ducklake.tables import JSON_CHUNK, NULL_MARK, create_sql, load_registry_table

    spec = registry.BY_NAME["ducklake_column"]
    texts = [NULL_MARK, f"a {NULL_MARK} b", "it's", '"q"', None, ""]
    rows = [
        tuple(
            i
            if typ == "BIGINT"
            else texts[(i + n) % len(texts)]
            if typ == "VARCHAR"
            else (None if i % 3 == 0 else bool(i % 2))
            for n, (_, typ) in enumerate(spec.columns)
        )
        for i in range(JSON_CHUNK * 2 + 200)
    ]
    con = duckdb.connect()
    con.execute("ATTACH ':memory:' AS m")
    con.execute(create_sql("m", spec))
    load_registry_table(con, "m", spec, rows)
    got = con.execute(
        f"SELECT {select_list(spec.columns)} FROM m.ducklake_column ORDER BY column_id"
    ).fetchall()
    assert got == rows
