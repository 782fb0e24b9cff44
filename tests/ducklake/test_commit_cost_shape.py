"""The shape of a commit's cost: which DuckDB queries capture and the base
issue for one statement, compared between a lake of one table and one of
many (not a timing: what a commit reads must follow what it changed).
"""

from __future__ import annotations

import itertools
import re
import threading
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest

import slatelake
from slatelake.ducklake.session import VERIFY_ENV, Session
from slatelake.ducklake.sql import literal

PER_BLOCK = 25


class _CountingCursor:
    """Forwards to a DuckDB cursor, keeping the SQL of each query it issues."""

    def __init__(self, cursor: duckdb.DuckDBPyConnection, queries: list[str] | None = None) -> None:
        self._cursor = cursor
        self.queries: list[str] = [] if queries is None else queries

    def cursor(self) -> _CountingCursor:
        """A cursor of its own (capture's worker reads ahead on one), counted here too."""
        return _CountingCursor(self._cursor.cursor(), self.queries)

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
        counter = _CountingCursor(session.session._aux)
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
    session = getattr(session, "session", session)  # slatelake.connect's owns a Session
    aux = cursor._cursor
    found = []
    for owner_name, owner in [("session", session), *vars(session).items()]:
        attrs = getattr(owner, "__dict__", {})
        for name, value in list(attrs.items()):
            if value is aux:
                setattr(owner, name, cursor)
                found.append(f"{owner_name}.{name}")
    ahead = session.capture._ahead  # capture's worker reads ahead on a cursor of its own
    if ahead._cursor is not None:
        ahead._cursor = _CountingCursor(ahead._cursor, cursor.queries)
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
    flat = _flat(queries)
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


def test_a_parquet_insert_is_read_by_new_ids_alone_with_no_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DuckLake only inserted (its log says so): the new file, its column
    statistics and the snapshot rows are read by their new ids, one read a
    table, and nothing is counted (a count once checked the statistics, and
    a second half looked for ended files no insert can end)."""
    monkeypatch.delenv(VERIFY_ENV, raising=False)
    url = _lake_of(tmp_path, 3)
    warm, counted = PARQUET_INSERT.format(1000, 1000), PARQUET_INSERT.format(2000, 2000)
    flat = _flat(_queries_of(url, warm, counted))
    counts = [q for q in flat if "count(*)" in q]
    assert not counts, f"an insert counted rows: {counts}"
    reads = {
        table: [q for q in flat if re.search(rf'FROM "__slatelake_meta"\."{table}"', q)]
        for table in ("ducklake_data_file", "ducklake_file_column_stats", "ducklake_snapshot")
    }
    for table, found in reads.items():
        assert len(found) == 1, f"{table}: {found}"
        assert "UNION ALL" not in found[0] and " OR " not in found[0], found[0]


def test_an_inserts_reads_are_shared_between_the_helper_cursor_and_a_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each read of an insert's new rows is a small query of mostly fixed
    cost; a worker's cursor answers every other one while the helper cursor
    answers the rest, each table read once, and the worker's thread ends with
    the session."""
    monkeypatch.delenv(VERIFY_ENV, raising=False)
    url = _lake_of(tmp_path, 3)
    warm, counted = PARQUET_INSERT.format(1000, 1000), PARQUET_INSERT.format(2000, 2000)
    with slatelake.connect(url) as session:
        session.sql(warm)
        helper = _CountingCursor(session.session._aux)
        _use_cursor(session, helper)
        ahead = session.capture._ahead
        worker = _CountingCursor(ahead._cursor._cursor)  # its own count, not the helper's
        ahead._cursor = worker
        session.sql(counted)
    assert ahead._pool is None and ahead._cursor is None
    alive = [t.name for t in threading.enumerate() if t.name.startswith("slatelake-read-ahead")]
    assert not alive, alive

    def tables(queries: list[str]) -> list[str]:
        return [m for q in queries for m in re.findall(r'FROM "__slatelake_meta"\."(\w+)"', q)]

    on_helper, on_worker = tables(helper.queries), tables(worker.queries)
    assert on_worker and on_helper, (on_helper, on_worker)
    read = sorted(on_helper + on_worker)
    assert len(read) == len(set(read)), f"a table read twice: {read}"
    assert {
        "ducklake_snapshot",
        "ducklake_snapshot_changes",
        "ducklake_data_file",
        "ducklake_file_column_stats",
        "ducklake_table_stats",
        "ducklake_table_column_stats",
    } <= set(read)


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


def test_a_read_of_one_base_table_applies_only_what_waits_for_that_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The base lags per table: a read of one table (a merge's capture reads
    the base's data files) applies that table's waiting change sets and no
    other's; the rest are applied when read, and the base then equals
    DuckLake's copy."""
    monkeypatch.delenv(VERIFY_ENV, raising=False)
    url = _lake_of(tmp_path, 3)
    with slatelake.connect(url) as session:
        state = session.session.state
        state.settle()
        session.sql(PARQUET_INSERT.format(1000, 1000))
        session.sql("INSERT INTO t001 VALUES (7, 'inlined')")
        session.sql("DELETE FROM t002 WHERE id = 2")
        counter = _CountingCursor(state.con)
        state.con = counter
        state.settle(["ducklake_data_file"])
        first = _base_tables_written(counter.queries)
        counter.queries.clear()
        state.settle(["ducklake_data_file"])
        again = list(counter.queries)
        state.settle()
        rest = _base_tables_written(counter.queries)
        state.con = counter._cursor
        session.session.capture.verify(state)  # the base equals DuckLake's copy, table by table
    assert first == {"ducklake_data_file"}, first
    assert not again, f"a table with nothing waiting was applied again: {again}"
    assert "ducklake_data_file" not in rest, rest
    assert {"ducklake_snapshot", "ducklake_table_stats", "ducklake_file_column_stats"} <= rest
    assert any(t.startswith("ducklake_inlined_data_") for t in rest), rest


def test_a_merge_reads_the_files_it_scheduled_by_their_ids(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A merge deletes the files no snapshot needs and schedules them for
    deletion: capture reads the schedule's new rows by the ids it found gone
    from the file tables, not the whole schedule against the base (which
    first had to bring the base's schedule up to date)."""
    monkeypatch.delenv(VERIFY_ENV, raising=False)
    url = _lake_of(tmp_path, 2)
    with slatelake.connect(url) as session:
        for start in (1000, 2000, 3000):
            session.sql(PARQUET_INSERT.format(start, start))
        session.sql("CALL ducklake_expire_snapshots('lake', older_than => now())")
        counter = _CountingCursor(session.session._aux)
        _use_cursor(session, counter)
        merged = session.sql("CALL ducklake_merge_adjacent_files('lake', 't000')").fetchall()
        flat = _flat(counter.queries)
        scheduled = session.con.execute(
            "SELECT count(*) FROM __slatelake_meta.ducklake_files_scheduled_for_deletion"
        ).fetchone()[0]
        session.session.capture.verify(session.session.state)  # captured is what DuckLake holds
    assert merged and merged[0][2] == 3, merged  # (schema, table, files processed, created)
    assert scheduled >= 3, scheduled
    _read_by_ids_not_diffed(flat, "ducklake_files_scheduled_for_deletion", "data_file_id IN")


def test_a_create_table_reads_its_inlined_tables_registration_by_its_new_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CREATE TABLE registers the new table's inlined table: capture reads
    that row by the new table id, not the whole registry against the base
    (which first had to bring the base's registry up to date)."""
    monkeypatch.delenv(VERIFY_ENV, raising=False)
    url = _lake_of(tmp_path, 3)
    flat = _flat(
        _queries_of(url, "CREATE TABLE warm (i INTEGER)", "CREATE TABLE counted (i INTEGER)")
    )
    _read_by_ids_not_diffed(flat, "ducklake_inlined_data_tables", "table_id >=")
    with slatelake.connect(url, read_only=True) as fresh:  # and it landed
        tables = {t for (t,) in fresh.sql("SHOW TABLES").fetchall()}
    assert {"warm", "counted"} <= tables


def _read_by_ids_not_diffed(queries: list[str], table: str, predicate: str) -> None:
    """``table`` was read once from DuckLake's copy by ``predicate`` and never
    compared with the base's (a count of both is not a comparison)."""
    quoted = f'"__slatelake_meta"."{table}"'
    diffs = [q for q in queries if quoted in q and "__slatelake_base" in q]
    diffs = [q for q in diffs if "count(*)" not in q]
    assert not diffs, f"{table} was diffed against the base: {diffs}"
    reads = [q for q in queries if f"{quoted} WHERE {predicate}" in q]
    assert len(reads) == 1, reads


def _base_tables_written(queries: list[str]) -> set[str]:
    """The base's tables that ``queries`` delete from or insert into."""
    verbs = r'(?:DELETE FROM|INSERT INTO) "__slatelake_base"\."(\w+)"'
    return {m for q in queries for m in re.findall(verbs, q)}


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
        mine.sql("DELETE FROM t000 WHERE id = 0")  # counts the inlined rows on both sides
        other.sql("INSERT INTO t000 VALUES (11, 'other')")
        counter = _CountingCursor(mine.session._aux)
        _use_cursor(mine, counter)
        mine.sql("DELETE FROM t000 WHERE id = 10")
        rows = sorted(mine.sql("SELECT id FROM t000").fetchall())
    # the capture's counts-only query (the full check's signatures hash columns)
    inlined_counted = [
        q
        for q in counter.queries
        if "count(*), 0::HUGEINT" in q and '"__slatelake_base"."ducklake_inlined_data_' in q
    ]
    assert inlined_counted, "the base's inlined rows were not counted again after another commit"
    assert rows == [(11,)]
    with slatelake.connect(url, read_only=True) as fresh:
        assert sorted(fresh.sql("SELECT id FROM t000").fetchall()) == [(11,)]


def _shape(queries: list[str]) -> list[str]:
    """Queries up to their numbers and the UUIDs of new files' names, sorted:
    capture's worker reads ahead while the helper cursor reads, in either order."""
    named = (re.sub(r"ducklake-[0-9a-f-]{36}", "ducklake-UUID", q) for q in queries)
    return sorted(re.sub(r"\d+", "N", " ".join(q.split())) for q in named)


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


def test_a_one_row_insert_is_captured_without_counting_a_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DuckLake only inserted into the tables a one-row INSERT writes (its
    snapshot, the snapshot's changes, the inlined rows; the statistics are
    diffed), the query log says so, and every row it inserts carries the new
    snapshot id: the reads by that id need no row count to check them."""
    monkeypatch.delenv(VERIFY_ENV, raising=False)
    queries = _queries_to_commit_one_row(_lake_of(tmp_path, 3))
    assert queries, "the counting cursor saw no query: the session no longer uses it"
    counting = [q for q in queries if "count(" in q.lower()]
    assert not counting, f"a one-row INSERT counted rows: {counting}"


def _twelve_files(tmp_path: Path, expire: bool = False) -> str:
    """A lake whose one table has 12 small Parquet files for a merge to join;
    ``expire``: and no snapshot left that needs them once merged."""
    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path}/data/") as session:
        session.sql("CREATE TABLE t000 (id INTEGER, v VARCHAR)")
        for i in range(12):
            session.sql(PARQUET_INSERT.format(i * 100, i * 100))
        if expire:
            session.sql("CALL ducklake_expire_snapshots('lake', older_than => now())")
    return url


def _flat(queries: list[str]) -> list[str]:
    """Each query on one line, its whitespace collapsed."""
    return [" ".join(q.split()) for q in queries]


def test_a_merge_reads_the_statistics_of_the_files_it_ended_in_one_query(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file's column statistics are stored as one group; a merge that ends
    a dozen files reads their stored groups from the base together (one
    query per file once made a 40-table merge spend 31 ms reading them)."""
    monkeypatch.delenv(VERIFY_ENV, raising=False)
    url = _twelve_files(tmp_path)
    flat = _flat(_queries_of(url, "SELECT 1", "CALL ducklake_merge_adjacent_files('lake')"))
    by_file = '"__slatelake_base"."ducklake_file_column_stats" WHERE "data_file_id"'
    reads = [q for q in flat if q.startswith("SELECT") and by_file in q]
    assert len(reads) == 1, f"{len(reads)} reads of stored groups by file: {reads[:3]}"
    with slatelake.connect(url, read_only=True) as fresh:
        files = fresh.sql("SELECT count(*) FROM ducklake_list_files('lake', 't000')").fetchall()
        assert files == [(1,)]
        assert fresh.sql("SELECT count(*) FROM t000").fetchall() == [(600,)]


def test_an_expiry_reads_no_table_it_only_deleted_nothing_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DuckLake's expiry deletes from every table that could hold a row of
    an expired snapshot (views, macros, tags, mappings...). Where the log
    shows only deletes and the count did not move, no row went: capture
    reads nothing of that table beyond its count."""
    monkeypatch.delenv(VERIFY_ENV, raising=False)
    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path}/data/") as session:
        session.sql("CREATE TABLE t000 (id INTEGER, v VARCHAR)")
        for i in range(4):
            session.sql(f"INSERT INTO t000 VALUES ({i}, 'x')")
    expire = "CALL ducklake_expire_snapshots('lake', versions => [{}])"
    flat = _flat(_queries_of(url, expire.format(1), expire.format(2)))
    quiet = ("ducklake_view", "ducklake_macro", "ducklake_tag", "ducklake_column_mapping")
    reads = [
        q
        for q in flat
        if "count(*)" not in q and any(f'"__slatelake_meta"."{t}"' in q for t in quiet)
    ]
    assert not reads, f"tables nothing was deleted from were read: {reads}"
    with slatelake.connect(url, read_only=True) as fresh:
        snapshots = fresh.sql("SELECT snapshot_id FROM ducklake_snapshots('lake')").fetchall()
        assert (1,) not in snapshots and (2,) not in snapshots
        assert fresh.sql("SELECT count(*) FROM t000").fetchall() == [(4,)]


def test_a_merge_that_deletes_files_diffs_no_file_table_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once no snapshot needs the files it merges, DuckLake deletes their
    rows and statistics outright. Capture finds them by the file ids that
    vanished (an anti-join in DuckDB), not by reading both copies of the
    file tables whole into Python: a batched merge on a 200-table lake did
    that for every table."""
    monkeypatch.delenv(VERIFY_ENV, raising=False)
    url = _twelve_files(tmp_path, expire=True)
    flat = _flat(_queries_of(url, "SELECT 1", "CALL ducklake_merge_adjacent_files('lake')"))
    whole = [
        q
        for q in flat
        if "UNION ALL SELECT false" in q
        and ('"ducklake_data_file"' in q or '"ducklake_file_column_stats"' in q)
    ]
    assert not whole, f"file tables diffed whole: {whole}"
    monkeypatch.setenv(VERIFY_ENV, "1")
    with slatelake.connect(url) as again:
        again.capture.verify(again.state)
        files = again.sql("SELECT count(*) FROM ducklake_list_files('lake', 't000')").fetchall()
        assert files == [(1,)]
        assert again.sql("SELECT count(*), sum(id) FROM t000").fetchall() == [(600, 344700)]
