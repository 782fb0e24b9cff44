"""The sweep (RFC 0021 steps 7, 7b, 7c) on real SlateDB and the real commit
log; catalogs are written as rows (no DuckDB), so each test is about the sweep
alone: what it reclaims, what it spares, how it batches and races commits."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slatelake.catalog import indexes as idx
from slatelake.catalog.changes import RowChanges, build_change_set
from slatelake.catalog.lake import Lake
from slatelake.catalog.state import CatalogState
from slatelake.catalog.sweep import (
    SweepReport,
    SweepRequest,
    discover,
    next_index,
    sweep,
)
from slatelake.errors import ConflictError, MisconfigurationError, ReadOnlyError
from slatelake.log.changeset import ChangeSet, Head
from slatelake.store.db import open_writer
from slatelake.store.keys import Subspace
from slatelake.store.location import LakeLocation
from tests.catalog.index_rows import (
    add_table,
    create_index,
    drop_index,
    drop_table,
    entry,
    fold,
    new_lake,
    row_ids,
    store_index_keys,
)
from tests.catalog.synthetic import commit_changes

pytestmark = pytest.mark.fast

FAST = SweepRequest(pace_s=0)


def test_sweep_reclaims_a_dropped_index_and_those_a_drop_table_ends(lake_url: str) -> None:
    lake, state = new_lake(lake_url)
    with lake:
        a, b = add_table(lake, state, "a"), add_table(lake, state, "b")
        dropped = create_index(lake, state, a, 1, 300)
        b1 = create_index(lake, state, b, 1, 200)
        b2 = create_index(lake, state, b, 2, 100, kind=idx.DIGEST)
        fold(lake_url)  # the entries are in the store, not just the log
        drop_index(lake, state, dropped)
        ended = drop_table(lake, state, b)
        assert {d.index_id for d in ended} == {b1.index_id, b2.index_id}
        assert idx.live_definitions(state) == []

        report = sweep(lake, FAST, state)
        assert (report.indexes_swept, report.index_entries_reclaimed) == (3, 600)
        assert {(r.index_id, r.entries) for r in report.ranges} == {
            (dropped.index_id, 300),
            (b1.index_id, 200),
            (b2.index_id, 100),
        }
        fold(lake_url)
        assert store_index_keys(lake_url) == []


def test_sweep_spares_live_indexes_interleaved_by_id_with_dead_ones(tmp_path) -> None:  # noqa: ANN001
    url = (tmp_path / "lake").as_uri()
    lake, state = new_lake(url)
    with lake:
        t = add_table(lake, state, "t", columns=5)
        defs = [
            create_index(lake, state, t, c, 50 * c, kind=(idx.EXACT, idx.DIGEST)[c % 2])
            for c in range(1, 6)
        ]
        fold(url)
        for d in defs[1::2]:  # ids 2nd and 4th: dead ranges between live ones
            drop_index(lake, state, d)
        live = defs[0::2]
        probes = {
            d.index_id: row_ids(lake, state, d, 5 if d.kind == idx.EXACT else "v5") for d in live
        }
        assert all(probes.values())

        report = sweep(lake, FAST, state)
        assert sorted(r.index_id for r in report.ranges) == [d.index_id for d in defs[1::2]]
        assert report.index_entries_reclaimed == 100 + 200
        fold(url)
        for d in live:
            value = 5 if d.kind == idx.EXACT else "v5"
            assert row_ids(lake, state, d, value) == probes[d.index_id]
            assert len(store_index_keys(url, d.prefix)) == 50 * d.column_id
        for d in defs[1::2]:
            assert store_index_keys(url, d.prefix) == []

        slots = len(list(lake.log.list_after(0)))
        again = sweep(lake, FAST, state)
        assert (again.indexes_swept, again.index_entries_reclaimed, again.batches) == (0, 0, 0)
        assert len(list(lake.log.list_after(0))) == slots  # wrote nothing


def test_sweep_batches_are_bounded_and_preserve_the_head(tmp_path) -> None:  # noqa: ANN001
    url = (tmp_path / "lake").as_uri()
    lake, state = new_lake(url)
    with lake:
        t = add_table(lake, state, "t")
        defn = create_index(lake, state, t, 1, 1000)
        fold(url)
        drop_index(lake, state, defn)
        head, seq0 = state.head, state.last_seq
        snapshots = sorted(state.rows("ducklake_snapshot"))

        report = sweep(lake, SweepRequest(batch_size=64, pace_s=0), state)
        assert report.batches == 16 and report.index_entries_reclaimed == 1000
        assert state.head == Head(head.snapshot_id, head.batch_seq + 16)
        envelopes = [lake.log.read(s.seq) for s in lake.log.list_after(seq0)]
        assert len(envelopes) == 16
        for n, envelope in enumerate(envelopes):
            (cs,) = envelope
            assert not cs.mints_snapshot and not cs.puts
            assert 0 < len(cs.deletes) <= 64
            assert cs.base == Head(head.snapshot_id, head.batch_seq + n)
            assert all(k[0] == Subspace.INDEX for k in cs.deletes)
        assert sum(len(e[0].deletes) for e in envelopes) == 1000
        assert sorted(state.rows("ducklake_snapshot")) == snapshots  # no snapshot record
        # the view remembers one record for the swept range, not one per entry
        assert state.index_overlay == {} and list(state.index_swept) == [defn.prefix]


def test_sweep_interleaved_with_commits_keeps_live_entries(tmp_path) -> None:  # noqa: ANN001
    url = (tmp_path / "lake").as_uri()
    lake, state = new_lake(url)
    with lake, Lake.open(url) as other:
        t = add_table(lake, state, "t")
        live = create_index(lake, state, t, 1, 100)
        dead = create_index(lake, state, t, 2, 500)
        fold(url)
        drop_index(lake, state, dead)
        theirs = other.materialize()
        landed: list[int] = []

        def commit_between_batches(_: float) -> None:
            """An application's INSERT, with entries for the live index, lands
            in the slot the sweep's next batch is about to race for."""
            other.refresh(theirs)
            rows = range(1000 + 10 * len(landed), 1010 + 10 * len(landed))
            cs = build_change_set(theirs, commit_changes(theirs, t), True, "insert")
            puts = cs.puts + tuple(entry(live, r) for r in rows)
            other.commit_change_set(theirs, ChangeSet(cs.base, puts, cs.deletes, True))
            landed.extend(rows)

        request = SweepRequest(batch_size=50, pace_s=0.001)
        report = sweep(lake, request, state, sleep=commit_between_batches)
        assert report.index_entries_reclaimed == 500 and report.batches == 10
        assert report.rebases >= 9  # every batch after the first lost its slot and rebased
        assert len(landed) == 90 and state.head.snapshot_id == theirs.head.snapshot_id
        fold(url)
        assert store_index_keys(url, dead.prefix) == []
        expected = sorted(entry(live, r)[0] for r in [*range(100), *landed])
        assert store_index_keys(url, live.prefix) == expected


def test_a_committer_without_a_folder_sweeps_through_the_log(lake_url: str) -> None:
    lake, state = new_lake(lake_url)
    with lake:
        t = add_table(lake, state, "t")
        defn = create_index(lake, state, t, 1, 400)
        drop_index(lake, state, defn)
        snapshot = state.head.snapshot_id
        assert store_index_keys(lake_url) == []  # nothing folded: entries only in the log

        report = sweep(lake, SweepRequest(batch_size=128, pace_s=0), state)
        assert (report.index_entries_reclaimed, report.batches) == (400, 4)
        assert sweep(lake, FAST, state).batches == 0  # the log tail already deleted them

        fold(lake_url)  # the holder folds the batches
        assert store_index_keys(lake_url) == []
        with Lake.open(lake_url, read_only=True) as reader:
            folded = reader.materialize()
        assert folded.head == state.head and folded.head.snapshot_id == snapshot
        assert sweep(lake, FAST).batches == 0


@pytest.fixture(scope="module")
def seeded_store():  # noqa: ANN201
    """A store holding entries of a fixed set of index ids in both kinds."""
    ids = {idx.EXACT: [0, 3, 4, 17, 250, 1 << 40], idx.DIGEST: [1, 2, 99]}
    location = LakeLocation.parse(f"memory://{uuid.uuid4().hex}")
    writer = open_writer(location)
    puts = [
        (idx.entry_key(kind, i, v, r), b"")
        for kind, group in ids.items()
        for i in group
        for v in (-5, 0, 7)
        for r in range(3)
    ]
    writer.write(puts)
    yield writer, ids
    writer.close()


@settings(max_examples=200, deadline=None)
@given(start=st.one_of(st.integers(0, 300), st.integers(0, 1 << 41)))
def test_discovery_seeks_the_next_index_id(seeded_store, start: int) -> None:  # noqa: ANN001
    writer, ids = seeded_store
    for kind, group in ids.items():
        expected = min((i for i in group if i >= start), default=None)
        assert next_index(writer, kind, start) == expected


def test_discovery_costs_one_seek_per_distinct_index(seeded_store) -> None:  # noqa: ANN001
    writer, ids = seeded_store
    report = SweepReport()
    state = CatalogState(head=Head(0, 0), last_seq=0)  # nothing unfolded
    head_row = RowChanges().insert("ducklake_snapshot", (0, 0, 0, 1 << 41, 0))
    state.apply(build_change_set(state, head_row, False))  # every seeded id is below the horizon
    state.head = Head(0, 0)
    live = {0, 17, 99}
    dead = discover(writer, state, live, report)
    assert dead == sorted((k, i) for k, g in ids.items() for i in g if i not in live)
    assert report.seeks == sum(len(g) for g in ids.values()) + len(ids)  # + one "none past last"


@settings(max_examples=300, deadline=None)
@given(
    a=st.tuples(
        st.sampled_from(idx.INDEX_KINDS),
        st.integers(0, 1 << 62),
        st.integers(-(1 << 63), (1 << 63) - 1),
        st.integers(0, 1 << 62),
    ),
    b=st.tuples(
        st.sampled_from(idx.INDEX_KINDS),
        st.integers(0, 1 << 62),
        st.integers(-(1 << 63), (1 << 63) - 1),
        st.integers(0, 1 << 62),
    ),
)
def test_index_key_prefixes_ascend_within_a_kind_and_kinds_are_disjoint(
    a: tuple[int, int, int, int], b: tuple[int, int, int, int]
) -> None:
    ka, kb = idx.entry_key(*a), idx.entry_key(*b)
    assert (ka < kb) == (a < b)  # byte order is component order
    assert ka.startswith(idx.index_prefix(a[0], a[1])) and ka.startswith(idx.kind_prefix(a[0]))
    if a[0] == b[0] and a[1] < b[1]:  # a lower index id's whole range sorts first
        assert idx.index_prefix(a[0], a[1]) < idx.index_prefix(b[0], b[1]) and ka < kb
        assert not kb.startswith(idx.index_prefix(a[0], a[1]))
    if a[0] != b[0]:  # kinds occupy disjoint ranges
        assert not ka.startswith(idx.kind_prefix(b[0]))
        assert (ka < kb) == (a[0] < b[0])


def test_sweep_refuses_a_zero_batch_size_and_a_read_only_lake(tmp_path) -> None:  # noqa: ANN001
    with pytest.raises(MisconfigurationError, match="batch_size=0"):
        SweepRequest(batch_size=0)
    url = (tmp_path / "lake").as_uri()
    lake, state = new_lake(url)
    with lake:
        defn = create_index(lake, state, add_table(lake, state, "t"), 1, 10)
        drop_index(lake, state, defn)
    slots = [s.seq for s in lake.log.list_after(0)]
    with Lake.open(url, read_only=True) as ro:
        with pytest.raises(ReadOnlyError, match="read-only"):
            sweep(ro, FAST)
        assert [s.seq for s in ro.log.list_after(0)] == slots


def test_sweep_reclaims_stranded_file_stats_and_inlined_tables(tmp_path) -> None:  # noqa: ANN001
    """A damaged catalog: statistics of a file absent everywhere, and an
    inlined-data table of a table absent everywhere; live ones are spared."""
    url = (tmp_path / "lake").as_uri()
    lake, state = new_lake(url)
    with lake:
        t = add_table(lake, state, "t")
        lake.commit(state, commit_changes(state, t), mints_snapshot=True)
        live_file = state.rows("ducklake_data_file")[0][0]
        damage = RowChanges().insert(
            "ducklake_file_column_stats",
            *[(9_000, 77, c, 1, 1, 0, "1", "2", False, None) for c in (1, 2, 3)],
        )
        gone, kept = "ducklake_inlined_data_77_1", f"ducklake_inlined_data_{t}_1"
        ddl = [(c, "BIGINT") for c in ("row_id", "begin_snapshot", "end_snapshot", "a")]
        damage.created_inline[gone] = ddl
        damage.created_inline[kept] = ddl
        damage.insert(gone, (0, 1, None, 5), (1, 1, None, 6)).insert(kept, (0, 1, None, 7))
        damage.insert("ducklake_inlined_data_tables", (77, gone, 1), (t, kept, 1))
        lake.commit(state, damage, mints_snapshot=False)
        fold(url)

        report = sweep(lake, FAST, state)
        assert (report.file_stats_files, report.file_column_stats_reclaimed) == (1, 3)
        assert (report.inlined_tables_reclaimed, report.inlined_rows_reclaimed) == (1, 2)
        assert {r[0] for r in state.rows("ducklake_file_column_stats")} == {live_file}
        assert set(state.inline_ddl()) == {kept} and len(state.rows(kept)) == 1
        assert [r[0] for r in state.rows("ducklake_inlined_data_tables")] == [t]
        with Lake.open(url, read_only=True) as fresh:
            assert fresh.materialize().same_rows(state)
        again = sweep(lake, FAST, state)
        assert (again.file_column_stats_reclaimed, again.inlined_tables_reclaimed) == (0, 0)


def test_an_index_id_is_never_handed_out_twice_when_a_create_races_a_ddl_commit(
    tmp_path,  # noqa: ANN001
) -> None:
    """Taking an id bumps the head snapshot in place; a DuckLake commit minting
    the next snapshot (which took the same id) must make it conflict, not rebase."""
    url = (tmp_path / "lake").as_uri()
    lake, state = new_lake(url)
    with lake, Lake.open(url) as other:
        t = add_table(lake, state, "t")
        changes, defn = idx.define(state, t, 1, "racing", idx.EXACT)
        cs = build_change_set(state, changes, False, "create_index")
        theirs = other.materialize()
        winner = add_table(other, theirs, "u")  # takes the id ``defn`` took
        assert winner == defn.index_id
        with pytest.raises(ConflictError):
            lake.commit_change_set(state, cs)
        lake.refresh(state)
        changes, again = idx.define(state, t, 1, "racing", idx.EXACT)
        assert again.index_id > winner


def test_progress_every_64_batches_and_once_per_range_and_a_stopped_sweep_resumes(
    tmp_path,  # noqa: ANN001
) -> None:
    url = (tmp_path / "lake").as_uri()
    lake, state = new_lake(url)
    with lake:
        t = add_table(lake, state, "t")
        first = create_index(lake, state, t, 1, 130)
        second = create_index(lake, state, t, 2, 20)
        drop_index(lake, state, first)
        drop_index(lake, state, second)
        lines: list[str] = []
        report = sweep(lake, SweepRequest(batch_size=1, pace_s=0), state, lines.append)
        assert report.batches == 150
        counted = [line for line in lines if "index entries reclaimed in" in line]
        assert counted == [
            "sweep: 64 index entries reclaimed in 64 batches",
            "sweep: 128 index entries reclaimed in 128 batches",
        ]
        assert [line for line in lines if "(kind" in line] == [
            f"sweep: index {first.index_id} (kind 1): 130 entries reclaimed",
            f"sweep: index {second.index_id} (kind 1): 20 entries reclaimed",
        ]

        third = create_index(lake, state, t, 1, 50)
        drop_index(lake, state, third)
        calls = iter(range(1000))
        stopped = sweep(
            lake,
            SweepRequest(batch_size=10, pace_s=0),
            state,
            should_stop=lambda: "deadline" if next(calls) >= 2 else None,
        )
        assert (stopped.batches, stopped.index_entries_reclaimed) == (2, 20)
        assert stopped.stopped == "deadline"
        rest = sweep(lake, SweepRequest(batch_size=10, pace_s=0), state)
        assert (rest.index_entries_reclaimed, rest.stopped) == (30, None)
        fold(url)
        assert store_index_keys(url) == []


def test_discovery_never_judges_an_index_created_after_its_view(tmp_path) -> None:  # noqa: ANN001
    """The store reader follows the newest manifest and can be ahead of the
    view: entries of an index created (and folded) since must not look dead."""
    url = (tmp_path / "lake").as_uri()
    lake, state = new_lake(url)
    with lake, Lake.open(url) as other:
        t = add_table(lake, state, "t")
        old = create_index(lake, state, t, 1, 10)
        drop_index(lake, state, old)
        theirs = other.materialize()
        newer = create_index(other, theirs, t, 2, 10)  # after ``state``'s view
        fold(url)
        reader = lake.reader(fresh=True)
        assert next_index(reader, idx.EXACT, old.index_id + 1) == newer.index_id
        live = idx.live_index_ids(state)
        assert discover(reader, state, live) == [(idx.EXACT, old.index_id)]
        lake.refresh(state)
        assert discover(reader, state, idx.live_index_ids(state)) == [(idx.EXACT, old.index_id)]
