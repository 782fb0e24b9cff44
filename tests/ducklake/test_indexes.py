"""Equality indexes on real DuckDB + DuckLake: entries for Parquet and inlined
rows in the data's own change set, lookups through DuckLake, ids from the
catalog counter, drops that hide entries at once and leave them for the sweep."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import slatelake
from slatelake import retry
from slatelake.catalog import indexes as idx
from slatelake.cli import main
from slatelake.errors import ConflictError, MisconfigurationError, NotFoundError, ReadOnlyError
from slatelake.store.keys import Subspace


@pytest.fixture
def lake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A table with 200 rows in Parquet and 2 inlined rows."""
    monkeypatch.setenv("SLATELAKE_VERIFY_CAPTURE", "1")
    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path / 'data'}/") as s:
        s.sql("CREATE TABLE t (id INTEGER, tag VARCHAR)")
        s.sql("INSERT INTO t SELECT i, 'g' || (i % 10) FROM range(200) r(i)")
        s.sql("INSERT INTO t VALUES (500, 'g3'), (501, 'inline')")
    return url


def _last_change_set(session):  # noqa: ANN001, ANN202
    last = max(s.seq for s in session.lake.log.list_after(0))
    (cs,) = session.lake.log.read(last)
    return cs


def test_create_index_builds_entries_for_parquet_and_inlined_rows(lake: str) -> None:
    with slatelake.connect(lake) as s:
        by_id = s.create_index("t", "id")
        by_tag = s.create_index("main.t", "tag", name="by_tag")
        assert (by_id.kind, by_tag.kind) == ("exact", "digest")
        assert s.lookup("t", "id", 7) == [(7, "g7")]
        assert s.lookup("t", "id", 501) == [(501, "inline")]  # an inlined row
        assert s.lookup("t", "id", "42") == [(42, "g2")]  # text is cast like the column
        tagged = s.lookup("t", "tag", "g3")
        assert sorted(r[0] for r in tagged) == [*range(3, 200, 10), 500]
        assert s.lookup("t", "id", 9999) == []
        assert {i.name for i in s.list_indexes()} == {"t_id_idx", "by_tag"}


def test_entries_land_in_the_same_change_set_as_new_parquet_and_inlined_rows(lake: str) -> None:
    with slatelake.connect(lake) as s:
        s.create_index("t", "tag")
        s.sql("INSERT INTO t SELECT i, 'new' FROM range(1000, 1100) r(i)")  # Parquet
        cs = _last_change_set(s)
        assert cs.mints_snapshot and "ducklake_data_file" in cs.tables
        entries = [k for k, _ in cs.puts if k[0] == Subspace.INDEX]
        assert len(entries) == 100
        s.sql("INSERT INTO t VALUES (2000, 'new')")  # inlined
        cs = _last_change_set(s)
        assert any(t.startswith("ducklake_inlined_data_") for t in cs.tables)
        assert len([k for k, _ in cs.puts if k[0] == Subspace.INDEX]) == 1
        assert len(s.lookup("t", "tag", "new")) == 101
    with slatelake.connect(lake, read_only=True) as ro:  # a fresh view agrees
        assert len(ro.lookup("t", "tag", "new")) == 101


def test_deleted_and_updated_rows_are_filtered_at_lookup(lake: str) -> None:
    with slatelake.connect(lake) as s:
        s.create_index("t", "tag")
        s.sql("DELETE FROM t WHERE id = 13")
        s.sql("UPDATE t SET tag = 'moved' WHERE id = 23")
        assert 13 not in [r[0] for r in s.lookup("t", "tag", "g3")]
        assert 23 not in [r[0] for r in s.lookup("t", "tag", "g3")]
        assert s.lookup("t", "tag", "moved") == [(23, "moved")]


def test_entries_stay_valid_after_flush_merge_and_rewrite(lake: str) -> None:
    with slatelake.connect(lake) as s:
        s.create_index("t", "id")
        s.sql("INSERT INTO t SELECT i, 'x' FROM range(300, 400) r(i)")
        s.sql("DELETE FROM t WHERE id % 3 = 0")
        before = {v: s.lookup("t", "id", v) for v in (1, 3, 350, 501)}
        s.sql("CALL ducklake_flush_inlined_data('lake')")
        s.sql("CALL ducklake_merge_adjacent_files('lake')")
        s.sql("CALL ducklake_rewrite_data_files('lake', delete_threshold => 0.0)")
        assert {v: s.lookup("t", "id", v) for v in before} == before
        assert before[1] == [(1, "g1")] and before[3] == []


def test_drop_index_hides_entries_at_once_and_leaves_them_for_the_sweep(lake: str) -> None:
    with slatelake.connect(lake) as s:
        info = s.create_index("t", "id")
        snapshot = s.state.head.snapshot_id
        s.drop_index(info.name)
        assert s.state.head.snapshot_id == snapshot  # head-preserving
        with pytest.raises(NotFoundError, match="no live index"):
            s.lookup("t", "id", 7)
        assert s.list_indexes() == []
        prefix = idx.index_prefix(idx.EXACT, info.index_id)
        assert len(idx.entry_row_ids(s.lake.reader(), s.state, prefix)) == 202
        with pytest.raises(NotFoundError, match="no live index named"):
            s.drop_index(info.name)


def test_drop_table_ends_its_indexes_in_the_same_change_set(lake: str) -> None:
    with slatelake.connect(lake) as s:
        s.create_index("t", "id")
        s.create_index("t", "tag")
        s.sql("DROP TABLE t")
        cs = _last_change_set(s)
        assert cs.mints_snapshot and "slatelake_index" in cs.tables
        ended = [d for d in idx.definitions(s.state) if d.end_snapshot is not None]
        assert len(ended) == 2 and {d.end_snapshot for d in ended} == {s.state.head.snapshot_id}
        assert s.list_indexes() == []


def test_index_ids_come_from_the_catalog_counter_and_are_never_reused(lake: str) -> None:
    with slatelake.connect(lake) as s:
        first = s.create_index("t", "id")
        s.sql("CREATE TABLE u (a INTEGER)")
        table_ids = {r[0] for r in s.state.rows("ducklake_table")}
        assert first.index_id not in table_ids and max(table_ids) > first.index_id
        s.drop_index(first.name)
        second = s.create_index("t", "id")
        assert second.index_id > max(table_ids | {first.index_id})


def test_index_verbs_refuse_what_they_cannot_do(lake: str) -> None:
    with slatelake.connect(lake) as s:
        s.create_index("t", "id")
        with pytest.raises(MisconfigurationError, match="already indexed"):
            s.create_index("t", "id", name="again")
        with pytest.raises(NotFoundError, match="no column"):
            s.create_index("t", "nope")
        with pytest.raises(NotFoundError, match="no table"):
            s.create_index("missing", "id")
        with pytest.raises(MisconfigurationError, match="NULL"):
            s.lookup("t", "id", None)
    with slatelake.connect(lake, read_only=True) as ro:
        with pytest.raises(ReadOnlyError):
            ro.create_index("t", "tag")
        with pytest.raises(ReadOnlyError):
            ro.drop_index("t_id_idx")
        assert ro.lookup("t", "id", 5) == [(5, "g5")]


def test_cli_index_create_list_lookup_drop(lake: str, capsys: pytest.CaptureFixture[str]) -> None:
    def cli(*args: str) -> tuple[int, str, str]:
        """``slatelake index ARGS`` in this process: (exit status, stdout, stderr)."""
        capsys.readouterr()
        code = main(["index", *args])
        return (code, *capsys.readouterr())

    code, out, err = cli("create", lake, "t", "tag", "--name", "tags", "--json")
    assert code == 0, err
    assert json.loads(out)["name"] == "tags"
    listed = json.loads(cli("list", lake, "--json")[1])
    assert [(i["name"], i["table"], i["column"]) for i in listed] == [("tags", "t", "tag")]
    found = json.loads(cli("lookup", lake, "t", "tag", "inline", "--json")[1])
    assert found == [{"id": 501, "tag": "inline"}]
    assert cli("drop", lake, "tags")[0] == 0
    code, _, err = cli("lookup", lake, "t", "tag", "inline")
    assert code == 1 and "NotFoundError" in err


def test_an_insert_racing_create_index_conflicts_and_its_retry_writes_entries(lake: str) -> None:
    with slatelake.connect(lake) as a, slatelake.connect(lake) as b:
        with pytest.raises(ConflictError), a.transaction():
            a.sql("INSERT INTO t VALUES (7000, 'race')")
            b.create_index("t", "id")  # lands first; a validated against the old head
        retry(lambda: a.sql("INSERT INTO t VALUES (7000, 'race')"))
        assert a.lookup("t", "id", 7000) == [(7000, "race")]
        assert b.lookup("t", "id", 7000) == [(7000, "race")]


def test_lookups_render_values_through_the_column_type(tmp_path: Path) -> None:
    """The index and the lookup cast a value the same way, whatever its type
    (a digest of DuckDB's text for non-integers, the integer itself otherwise)."""
    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path / 'data'}/") as s:
        s.sql("CREATE TABLE m (d DATE, x DOUBLE, big UBIGINT, n BIGINT)")
        s.sql(
            "INSERT INTO m SELECT DATE '2026-01-01' + i::INTEGER, i / 2, "
            "18446744073709551615 - i, -i FROM range(300) r(i)"
        )
        kinds = {c: s.create_index("m", c).kind for c in ("d", "x", "big", "n")}
        assert kinds == {"d": "digest", "x": "digest", "big": "digest", "n": "exact"}
        assert [r[3] for r in s.lookup("m", "d", dt.date(2026, 1, 11))] == [-10]
        assert [r[3] for r in s.lookup("m", "d", "2026-01-11")] == [-10]
        assert [r[3] for r in s.lookup("m", "x", 3)] == [-6]  # 3 is rendered as 3.0
        assert [r[3] for r in s.lookup("m", "big", 18446744073709551615)] == [0]
        assert [r[3] for r in s.lookup("m", "n", -299)] == [-299]
        assert [r[3] for r in s.lookup("m", "x", 3.5)] == [-7]
        assert s.lookup("m", "x", 3.25) == []


def test_one_transaction_inserting_into_two_indexed_tables_writes_both(lake: str) -> None:
    with slatelake.connect(lake) as s:
        s.sql("CREATE TABLE u (k VARCHAR)")
        s.create_index("t", "id")
        s.create_index("u", "k")
        with s.transaction():
            s.sql("INSERT INTO t SELECT i, 'tx' FROM range(800, 900) r(i)")
            s.sql("INSERT INTO u VALUES ('a'), ('b')")
            s.sql("UPDATE t SET tag = 'tx2' WHERE id = 7")
        assert s.lookup("t", "id", 850) == [(850, "tx")]
        assert s.lookup("t", "id", 7) == [(7, "tx2")]
        assert s.lookup("u", "k", "b") == [("b",)]
        s.sql("CALL ducklake_rewrite_data_files('lake', delete_threshold => 0.0)")
        assert not [k for k, _ in _last_change_set(s).puts if k[0] == Subspace.INDEX]


def test_a_renamed_column_keeps_its_index_and_a_retyped_one_ends_it(lake: str) -> None:
    with slatelake.connect(lake) as s:
        s.create_index("t", "id")
        s.create_index("t", "tag")
        s.sql("ALTER TABLE t RENAME COLUMN tag TO label")
        assert s.lookup("t", "label", "inline") == [(501, "inline")]
        s.sql("ALTER TABLE t ALTER COLUMN id SET DATA TYPE BIGINT")
        assert [(i.name, i.column) for i in s.list_indexes()] == [("t_tag_idx", "label")]
        with pytest.raises(NotFoundError, match="no live index"):
            s.lookup("t", "id", 7)


_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("insert"), st.lists(st.integers(0, 5), min_size=1, max_size=40)),
        st.tuples(st.just("delete"), st.integers(0, 5)),
        st.tuples(st.just("update"), st.integers(0, 5), st.integers(0, 5)),
    ),
    min_size=1,
    max_size=5,
)


@settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=_OPS)
def test_lookup_agrees_with_a_plain_equality_query_after_any_writes(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple]
) -> None:
    root = tmp_path_factory.mktemp("prop")
    with slatelake.connect(root.joinpath("lake").as_uri(), data_path=f"{root / 'data'}/") as s:
        s.sql("CREATE TABLE p (v INTEGER, w VARCHAR)")
        s.sql("INSERT INTO p SELECT i % 6, 'w' || (i % 6) FROM range(60) r(i)")
        s.create_index("p", "v")
        s.create_index("p", "w")
        for op in ops:
            if op[0] == "insert":
                rows = ", ".join(f"({v}, 'w{v}')" for v in op[1])
                s.sql(f"INSERT INTO p VALUES {rows}")
            elif op[0] == "delete":
                s.sql(f"DELETE FROM p WHERE v = {op[1]}")
            else:
                s.sql(f"UPDATE p SET v = {op[2]}, w = 'w{op[2]}' WHERE v = {op[1]}")
        for v in range(6):
            expected = s.sql("SELECT * FROM p WHERE v = ? ORDER BY rowid", [v]).fetchall()
            assert s.lookup("p", "v", v) == expected
            assert s.lookup("p", "w", f"w{v}") == expected


def test_a_session_ignores_the_processs_default_connection_and_its_aborted_transaction(
    lake: str,
) -> None:
    """A user's `duckdb.sql` transaction, left aborted, must not break a lake in the process."""
    import duckdb

    default = duckdb.default_connection()
    default.execute("BEGIN")
    with pytest.raises(duckdb.ConversionException):
        default.execute("SELECT CAST('x' AS INTEGER)")
    try:
        with slatelake.connect(lake) as session:
            session.sql("CREATE TABLE u (id BIGINT, name VARCHAR)")
            session.sql("INSERT INTO u VALUES (1, 'a'), (2, 'b')")
            session.create_index("u", "id")
            session.create_index("u", "name")
            assert session.lookup("u", "id", 2) == [(2, "b")]
            assert session.lookup("u", "name", "a") == [(1, "a")]
        past = dt.datetime.now(dt.UTC).isoformat()
        with slatelake.connect(lake, snapshot_time=past) as session:
            assert session.sql("SELECT count(*) FROM u").fetchone() == (2,)
    finally:
        default.execute("ROLLBACK")
