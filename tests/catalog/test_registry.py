"""The registry against the pinned DuckLake extension, rows to keys, and change sets.

The extension wheel's own schema is the reference: the pinned DuckDB loads
``ducklake`` from its wheel path (never downloaded), creates a catalog in a
DuckDB file, and we read ``information_schema`` of that file plainly. Only
metadata is read: selecting TIMESTAMPTZ values into Python would need pytz.
"""

from __future__ import annotations

import datetime as dt
import glob
import os
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from slatelake.catalog import registry
from slatelake.catalog.changes import RowChanges, build_change_set
from slatelake.catalog.registry import BY_NAME, TABLES, TableSpec
from slatelake.catalog.rows import (
    NULL_COMPONENT,
    Row,
    decode_entry,
    digest,
    encode_group,
    encode_row,
    group_key,
    row_key,
    table_of_key,
)
from slatelake.catalog.state import CatalogState
from slatelake.errors import CorruptionError, UnsupportedError
from slatelake.log.changeset import Head
from slatelake.store import values
from slatelake.store.keys import Subspace, decode_key, encode_key

pytestmark = pytest.mark.fast

# Rows have up to 16 columns; generating them dominates, so fewer examples than elsewhere.
EXAMPLES = settings(max_examples=100, deadline=None)
FEWER = settings(max_examples=50, deadline=None)
DUCKDB_VERSION = "1.5.5"


# -- the reference schema ----------------------------------------------------------------


def _ducklake_extension_path() -> str:
    import duckdb_extension_ducklake

    pattern = os.path.join(
        duckdb_extension_ducklake.__path__[0],
        "extensions",
        f"v{DUCKDB_VERSION}",
        "ducklake.duckdb_extension",
    )
    found = glob.glob(pattern)
    assert len(found) == 1, f"the ducklake wheel has no extension at {pattern}"
    return found[0]


@pytest.fixture(scope="module")
def ducklake_schema(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list]:
    """{table: [(column, data_type), ...]} of the catalog the pinned extension creates."""
    import duckdb

    assert duckdb.__version__ == DUCKDB_VERSION
    tmp = tmp_path_factory.mktemp("ducklake-reference")
    con = duckdb.connect(
        config={"autoinstall_known_extensions": False, "autoload_known_extensions": False}
    )
    try:
        con.execute(f"LOAD '{_ducklake_extension_path()}'")
        con.execute(f"ATTACH 'ducklake:{tmp / 'meta.duckdb'}' AS lake (DATA_PATH '{tmp / 'data'}')")
        con.execute("DETACH lake")
        con.execute(f"ATTACH '{tmp / 'meta.duckdb'}' AS meta (READ_ONLY)")
        rows = con.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "WHERE table_catalog = 'meta' AND table_name LIKE 'ducklake\\_%' ESCAPE '\\' "
            "ORDER BY table_name, ordinal_position"
        ).fetchall()
    finally:
        con.close()
    schema: dict[str, list] = {}
    for table, column, data_type in rows:
        schema.setdefault(table, []).append((column, data_type))
    return schema


def test_registry_names_every_ducklake_table_of_the_pinned_extension(
    ducklake_schema: dict[str, list],
) -> None:
    assert set(ducklake_schema) == {t.name for t in TABLES}


@pytest.mark.parametrize("spec", TABLES, ids=lambda t: t.name)
def test_registry_columns_and_types_match_the_extension_in_order(
    spec: TableSpec, ducklake_schema: dict[str, list]
) -> None:
    assert list(spec.columns) == ducklake_schema.get(spec.name)


@pytest.mark.parametrize("spec", TABLES, ids=lambda t: t.name)
def test_versioned_tables_are_exactly_those_with_begin_and_end_snapshot(
    spec: TableSpec, ducklake_schema: dict[str, list]
) -> None:
    columns = {c for c, _ in ducklake_schema[spec.name]}
    assert spec.versioned == ({"begin_snapshot", "end_snapshot"} <= columns)


def test_every_kind_byte_is_unique_and_one_byte() -> None:
    kinds = [t.kind for t in TABLES]
    assert len(set(kinds)) == len(kinds)
    assert all(0 <= k <= 0xFF for k in kinds)
    assert {registry.INLINE_ROW_KIND, registry.INLINE_DDL_KIND}.isdisjoint(kinds)
    assert len({t.name for t in TABLES}) == len(TABLES)


@pytest.mark.parametrize("spec", TABLES, ids=lambda t: t.name)
def test_every_key_group_member_and_digest_column_exists(spec: TableSpec) -> None:
    names = set(spec.column_names)
    assert spec.key, "every table needs a key"
    for column in (*spec.key, *spec.group, *spec.member, *spec.digest):
        assert column in names, column
    assert set(spec.digest) <= set(spec.key)
    assert bool(spec.group) == bool(spec.member)


@pytest.mark.parametrize("spec", TABLES, ids=lambda t: t.name)
def test_keys_hold_no_strings_only_integers_and_digests(spec: TableSpec) -> None:
    types = dict(spec.columns)
    for column in spec.key:
        expected = registry.VARCHAR if column in spec.digest else registry.BIGINT
        assert types[column] == expected, column


def test_rows_live_in_current_or_snapshot_never_in_history() -> None:
    for spec in TABLES:
        assert spec.home in (Subspace.CURRENT, Subspace.SNAPSHOT), spec.name
    assert {t.name for t in TABLES if t.home == Subspace.SNAPSHOT} == {
        "ducklake_snapshot",
        "ducklake_snapshot_changes",
    }


def test_spec_lookup_refuses_a_table_that_is_not_ducklake_metadata() -> None:
    assert registry.spec("ducklake_table") is BY_NAME["ducklake_table"]
    with pytest.raises(KeyError, match="not a DuckLake 1.0 metadata table"):
        registry.spec("ducklake_inlined_data_1_1")


def test_inlined_table_names_round_trip() -> None:
    data = registry.inline_table("ducklake_inlined_data_12_3")
    assert data is not None and data.ids == (12, 3) and data.identity == (0, 1)
    assert registry.inline_table_of(data.row_kind, (12, 3, 99, 4)) == data
    assert registry.inline_table_of(data.ddl_kind, (12, 3)) == data
    deletes = registry.inline_table("ducklake_inlined_delete_7")
    assert deletes is not None and deletes.ids == (7,) and deletes.identity == (0, 1)
    assert registry.inline_table_of(deletes.row_kind, (7, 1, 2)) == deletes
    assert registry.inline_table("ducklake_inlined_data_tables") is None
    assert registry.inline_table("ducklake_inlined_data_1_x") is None


# -- rows to keys and values -----------------------------------------------------------

ints64 = st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1)
_BY_TYPE = {
    registry.BIGINT: ints64,
    registry.VARCHAR: st.text(max_size=12),
    registry.BOOLEAN: st.booleans(),
    registry.UUID: st.uuids(),
    registry.TIMESTAMPTZ: st.datetimes(timezones=st.just(dt.UTC)),
}


def rows_of(spec: TableSpec, **fixed: Any) -> st.SearchStrategy[Row]:
    """Rows of a table: NULL anywhere but in integer key columns; ``fixed`` pins columns."""
    parts = []
    for column, typ in spec.columns:
        if column in fixed:
            parts.append(st.just(fixed[column]))
        elif column in spec.key and column not in spec.digest:
            parts.append(ints64)
        elif column == "end_snapshot":
            parts.append(st.none())  # live unless a test ends it
        else:
            parts.append(st.one_of(st.none(), _BY_TYPE[typ]))
    return st.tuples(*parts)


def make_row(table: str, **values: Any) -> Row:
    spec = BY_NAME[table]
    unknown = set(values) - set(spec.column_names)
    assert not unknown, unknown
    return tuple(values.get(c) for c in spec.column_names)


def expected_components(spec: TableSpec, row: Row, columns: tuple[str, ...]) -> tuple[int, ...]:
    out = []
    for column in columns:
        value = row[spec.index(column)]
        if column in spec.digest:
            out.append(digest(value))
        else:
            out.append(NULL_COMPONENT if value is None else value)
    return tuple(out)


versioned_specs = st.sampled_from([t for t in TABLES if t.versioned])
plain_specs = st.sampled_from([t for t in TABLES if not t.grouped])
grouped_specs = st.sampled_from([t for t in TABLES if t.grouped])


@EXAMPLES
@given(versioned_specs, st.data())
def test_live_versioned_row_is_keyed_in_current_by_its_key_columns(
    spec: TableSpec, data: st.DataObject
) -> None:
    row = data.draw(rows_of(spec))
    key = row_key(spec, row)
    assert key == encode_key(Subspace.CURRENT, spec.kind, *expected_components(spec, row, spec.key))
    assert table_of_key(key) == spec.name


@EXAMPLES
@given(versioned_specs, ints64, st.data())
def test_ended_versioned_row_is_keyed_in_history_with_end_snapshot_appended(
    spec: TableSpec, end: int, data: st.DataObject
) -> None:
    row = data.draw(rows_of(spec, end_snapshot=end))
    live = list(row)
    live[spec.index("end_snapshot")] = None
    key = row_key(spec, row)
    sub, kind, comps = decode_key(key)
    assert (sub, kind) == (Subspace.HISTORY, spec.kind)
    assert comps == (*expected_components(spec, row, spec.key), end)
    assert key[2:].startswith(row_key(spec, tuple(live))[2:])
    assert table_of_key(key) == spec.name


@FEWER
@given(st.sampled_from([t for t in TABLES if not t.versioned and not t.grouped]), st.data())
def test_unversioned_row_is_keyed_in_its_home_subspace(
    spec: TableSpec, data: st.DataObject
) -> None:
    row = data.draw(rows_of(spec))
    assert row_key(spec, row) == encode_key(
        spec.home, spec.kind, *expected_components(spec, row, spec.key)
    )


def test_null_key_component_encodes_as_the_minimum_integer() -> None:
    spec = BY_NAME["ducklake_metadata"]
    row = make_row("ducklake_metadata", key="data_path", value="/x", scope=None, scope_id=None)
    assert decode_key(row_key(spec, row))[2] == (digest("data_path"), digest(None), NULL_COMPONENT)


@FEWER
@given(ints64, st.data())
def test_file_column_stats_of_one_data_file_share_one_group_key(
    data_file_id: int, data: st.DataObject
) -> None:
    spec = BY_NAME["ducklake_file_column_stats"]
    rows = data.draw(st.lists(rows_of(spec, data_file_id=data_file_id), min_size=1, max_size=5))
    keys = {group_key(spec, r) for r in rows}
    assert keys == {encode_key(Subspace.CURRENT, spec.kind, data_file_id)}


def test_file_column_stats_of_different_data_files_get_different_group_keys() -> None:
    spec = BY_NAME["ducklake_file_column_stats"]
    a = make_row("ducklake_file_column_stats", data_file_id=1, table_id=1, column_id=1)
    b = make_row("ducklake_file_column_stats", data_file_id=2, table_id=1, column_id=1)
    assert group_key(spec, a) != group_key(spec, b)


def test_digest_is_stable_across_releases() -> None:
    # Keys persist: these values must never change (blake2b-64, big-endian, signed).
    assert digest("") == -1970711489451281740
    assert digest(None) == -6399915402472931439
    assert digest("data_path") == 6254512368721873916


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_digest_distinguishes_none_from_every_string(text: str) -> None:
    assert digest(text) == digest(text)
    assert digest(text) != digest(None)
    assert -(1 << 63) <= digest(text) < (1 << 63)


def test_digest_distinguishes_none_from_empty_string() -> None:
    assert digest(None) != digest("")


@EXAMPLES
@given(plain_specs, st.data())
def test_row_round_trips_through_encode_row_and_decode_entry(
    spec: TableSpec, data: st.DataObject
) -> None:
    row = data.draw(rows_of(spec))
    assert decode_entry(row_key(spec, row), encode_row(spec, row)) == row


@FEWER
@given(grouped_specs, ints64, st.data())
def test_group_round_trips_in_member_order(
    spec: TableSpec, parent: int, data: st.DataObject
) -> None:
    pinned = {c: parent for c in spec.group}
    rows = data.draw(st.lists(rows_of(spec, **pinned), min_size=1, max_size=5))
    decoded = decode_entry(group_key(spec, rows[0]), encode_group(spec, rows))
    columns = [spec.index(c) for c in spec.member]
    # Ordered by the member columns, a NULL after every value in its position.
    assert decoded == sorted(rows, key=lambda r: tuple((r[i] is None, r[i]) for i in columns))


@FEWER
@given(plain_specs, plain_specs, st.data())
def test_value_framed_for_another_kind_raises_corruption_error(
    spec: TableSpec, other: TableSpec, data: st.DataObject
) -> None:
    if spec.kind == other.kind:
        return
    row = data.draw(rows_of(spec))
    foreign = data.draw(rows_of(other))
    with pytest.raises(CorruptionError):
        decode_entry(row_key(spec, row), encode_row(other, foreign))


def test_row_with_the_wrong_column_count_is_refused_both_ways() -> None:
    spec = BY_NAME["ducklake_table_stats"]
    with pytest.raises(ValueError):
        encode_row(spec, (1, 2, 3))
    key = row_key(spec, (1, 2, 3, 4))
    with pytest.raises(CorruptionError, match="not an array of 4 values"):
        decode_entry(key, values.frame(spec.kind, [1, 2, 3]))


def test_key_of_an_unknown_table_kind_raises_corruption_error() -> None:
    key = encode_key(Subspace.CURRENT, 0x7F, 1)
    with pytest.raises(CorruptionError):
        table_of_key(key)
    with pytest.raises(CorruptionError):
        decode_entry(key, encode_row(BY_NAME["ducklake_table_stats"], (1, 2, 3, 4)))


_GROUPED = BY_NAME["ducklake_file_column_stats"]
_GROUP_KEY = encode_key(Subspace.CURRENT, _GROUPED.kind, 1)
_INLINE_ROW_KEY = encode_key(Subspace.INLINE, registry.INLINE_ROW_KIND, 1, 1, 1)
_INLINE_DDL_KEY = encode_key(Subspace.INLINE, registry.INLINE_DDL_KIND, 1, 1)
_catalog_keys = st.one_of(
    st.sampled_from(TABLES).map(lambda t: encode_key(t.home, t.kind, 1)),
    st.sampled_from([_INLINE_ROW_KEY, _INLINE_DDL_KEY]),
)
_payloads = st.recursive(
    st.one_of(st.none(), st.booleans(), ints64, st.text(max_size=6), st.binary(max_size=6)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=12,
)


def _frame_for(key: bytes, payload: Any) -> bytes:
    return values.frame(key[1], payload)


def assert_decoded_shape(key: bytes, entry: Any) -> None:
    """What decode_entry returns must look like what rows.py stores under that key."""
    if key == _INLINE_ROW_KEY:
        assert isinstance(entry, tuple)
        return
    if key == _INLINE_DDL_KEY:
        assert isinstance(entry, list)
        assert all(isinstance(c, tuple) and len(c) == 2 for c in entry), entry
        return
    spec = registry.BY_KIND[key[1]]
    rows = entry if spec.grouped else [entry]
    assert isinstance(entry, list if spec.grouped else tuple)
    assert all(isinstance(r, tuple) and len(r) == len(spec.columns) for r in rows), entry


# BUG (reported): decode_entry calls tuple() on whatever a well-framed payload holds, so
# a grouped value, an inlined row or inlined DDL of the wrong shape escapes as TypeError,
# and grouped rows / DDL entries of the wrong width decode plausibly wrong.
@pytest.mark.parametrize(
    ("key", "payload"),
    [
        (_GROUP_KEY, [1, 2]),
        (_GROUP_KEY, [None]),
        (_GROUP_KEY, [[1, 2, 3]]),
        (_GROUP_KEY, [{"a": 1}]),
        (_INLINE_ROW_KEY, 5),
        (_INLINE_ROW_KEY, None),
        (_INLINE_DDL_KEY, None),
        (_INLINE_DDL_KEY, [1]),
        (_INLINE_DDL_KEY, [["only-a-name"]]),
    ],
    ids=[
        "group-of-ints",
        "group-of-none",
        "group-row-too-narrow",
        "group-row-a-map",
        "inline-row-an-int",
        "inline-row-none",
        "inline-ddl-none",
        "inline-ddl-of-ints",
        "inline-ddl-column-without-type",
    ],
)
def test_well_framed_value_of_the_wrong_shape_raises_corruption_error(
    key: bytes, payload: Any
) -> None:
    with pytest.raises(CorruptionError):
        decode_entry(key, _frame_for(key, payload))


@EXAMPLES
@given(_catalog_keys, _payloads)
@example(key=_GROUP_KEY, payload=[1, 2])  # the reported bug, found by this property
def test_garbage_payload_under_a_catalog_key_raises_only_corruption_error(
    key: bytes, payload: Any
) -> None:
    try:
        entry = decode_entry(key, _frame_for(key, payload))
    except CorruptionError:
        return
    assert_decoded_shape(key, entry)


# -- change sets from row changes --------------------------------------------------------

BASE_HEAD = Head(3, 7)


def state_with(changes: RowChanges) -> CatalogState:
    state = CatalogState(head=BASE_HEAD, last_seq=0)
    state.apply(build_change_set(state, changes, mints_snapshot=False))
    state.head = BASE_HEAD
    return state


def stats(table_id: int, records: int) -> Row:
    return make_row(
        "ducklake_table_stats",
        table_id=table_id,
        record_count=records,
        next_row_id=records,
        file_size_bytes=records * 100,
    )


def data_file(data_file_id: int, begin: int, end: int | None = None) -> Row:
    return make_row(
        "ducklake_data_file",
        data_file_id=data_file_id,
        table_id=1,
        begin_snapshot=begin,
        end_snapshot=end,
        path=f"ducklake-{data_file_id}.parquet",
        path_is_relative=True,
        file_format="parquet",
        record_count=10,
    )


def column_stats(data_file_id: int, column_id: int, nulls: int = 0) -> Row:
    return make_row(
        "ducklake_file_column_stats",
        data_file_id=data_file_id,
        table_id=1,
        column_id=column_id,
        value_count=10,
        null_count=nulls,
        min_value="a",
        max_value="z",
    )


def test_updating_table_stats_in_place_puts_the_key_and_deletes_nothing() -> None:
    spec = BY_NAME["ducklake_table_stats"]
    base = state_with(RowChanges().insert("ducklake_table_stats", stats(1, 10), stats(2, 5)))
    changes = RowChanges().delete("ducklake_table_stats", stats(1, 10))
    changes.insert("ducklake_table_stats", stats(1, 20))
    cs = build_change_set(base, changes, mints_snapshot=True, changes_made="inserted_into_table:1")
    key = row_key(spec, stats(1, 20))
    assert [k for k, _ in cs.puts] == [key]
    assert cs.deletes == ()
    assert cs.base == BASE_HEAD
    assert cs.tables == ("ducklake_table_stats",)
    assert cs.changes_made == "inserted_into_table:1"
    base.apply(cs)
    assert sorted(base.rows("ducklake_table_stats")) == [stats(1, 20), stats(2, 5)]
    assert base.head == BASE_HEAD.after(True)


def test_ending_a_versioned_row_deletes_its_live_key_and_puts_its_history_key() -> None:
    spec = BY_NAME["ducklake_data_file"]
    live, ended = data_file(5, begin=1), data_file(5, begin=1, end=3)
    base = state_with(RowChanges().insert("ducklake_data_file", live, data_file(6, begin=2)))
    changes = RowChanges().delete("ducklake_data_file", live).insert("ducklake_data_file", ended)
    cs = build_change_set(base, changes, mints_snapshot=True)
    live_key = encode_key(Subspace.CURRENT, spec.kind, 5)
    history_key = encode_key(Subspace.HISTORY, spec.kind, 5, 3)
    assert cs.deletes == (live_key,)
    assert [k for k, _ in cs.puts] == [history_key]
    base.apply(cs)
    assert live_key not in base.entries
    assert base.entries[history_key] == ended
    assert sorted(base.rows("ducklake_data_file"), key=repr) == sorted(
        [ended, data_file(6, begin=2)], key=repr
    )


def test_two_different_rows_for_one_key_are_refused() -> None:
    base = CatalogState(head=BASE_HEAD, last_seq=0)
    changes = RowChanges().insert("ducklake_table_stats", stats(1, 10), stats(1, 11))
    with pytest.raises(UnsupportedError, match="two different rows"):
        build_change_set(base, changes, mints_snapshot=True)


def test_the_same_row_inserted_twice_is_one_put() -> None:
    base = CatalogState(head=BASE_HEAD, last_seq=0)
    changes = RowChanges().insert("ducklake_table_stats", stats(1, 10), stats(1, 10))
    cs = build_change_set(base, changes, mints_snapshot=True)
    assert len(cs.puts) == 1


def test_grouped_rows_rewrite_the_group_from_the_base_state() -> None:
    spec = BY_NAME["ducklake_file_column_stats"]
    base = state_with(
        RowChanges().insert(
            "ducklake_file_column_stats",
            column_stats(7, 1),
            column_stats(7, 2),
            column_stats(7, 3),
            column_stats(8, 1),
        )
    )
    changes = RowChanges().delete("ducklake_file_column_stats", column_stats(7, 2))
    changes.insert("ducklake_file_column_stats", column_stats(7, 2, nulls=4), column_stats(7, 4))
    cs = build_change_set(base, changes, mints_snapshot=True)
    key7 = encode_key(Subspace.CURRENT, spec.kind, 7)
    assert [k for k, _ in cs.puts] == [key7]
    assert cs.deletes == ()
    assert decode_entry(key7, dict(cs.puts)[key7]) == [
        column_stats(7, 1),
        column_stats(7, 2, nulls=4),
        column_stats(7, 3),
        column_stats(7, 4),
    ]
    base.apply(cs)
    assert sorted(base.rows("ducklake_file_column_stats")) == sorted(
        [
            column_stats(7, 1),
            column_stats(7, 2, nulls=4),
            column_stats(7, 3),
            column_stats(7, 4),
            column_stats(8, 1),
        ]
    )


def test_an_emptied_group_is_deleted() -> None:
    spec = BY_NAME["ducklake_file_column_stats"]
    base = state_with(
        RowChanges().insert(
            "ducklake_file_column_stats", column_stats(7, 1), column_stats(7, 2), column_stats(8, 1)
        )
    )
    changes = RowChanges().delete(
        "ducklake_file_column_stats", column_stats(7, 1), column_stats(7, 2)
    )
    cs = build_change_set(base, changes, mints_snapshot=True)
    key7 = encode_key(Subspace.CURRENT, spec.kind, 7)
    assert cs.puts == ()
    assert cs.deletes == (key7,)
    base.apply(cs)
    assert key7 not in base.entries
    assert base.rows("ducklake_file_column_stats") == [column_stats(8, 1)]


def test_a_new_group_is_put_whole() -> None:
    spec = BY_NAME["ducklake_file_column_stats"]
    base = CatalogState(head=BASE_HEAD, last_seq=0)
    changes = RowChanges().insert(
        "ducklake_file_column_stats", column_stats(9, 2), column_stats(9, 1)
    )
    cs = build_change_set(base, changes, mints_snapshot=True)
    key9 = encode_key(Subspace.CURRENT, spec.kind, 9)
    assert decode_entry(key9, dict(cs.puts)[key9]) == [column_stats(9, 1), column_stats(9, 2)]


@FEWER
@given(
    st.dictionaries(st.integers(0, 20), st.integers(0, 1000), max_size=8),
    st.dictionaries(st.integers(0, 20), st.one_of(st.none(), st.integers(0, 1000)), max_size=8),
)
def test_applied_change_set_leaves_exactly_the_changed_rows(
    before: dict[int, int], updates: dict[int, int | None]
) -> None:
    base = state_with(
        RowChanges().insert("ducklake_table_stats", *(stats(t, n) for t, n in before.items()))
    )
    changes = RowChanges()
    after = dict(before)
    for table_id, records in updates.items():
        if table_id in before:
            changes.delete("ducklake_table_stats", stats(table_id, before[table_id]))
            del after[table_id]
        if records is not None:
            changes.insert("ducklake_table_stats", stats(table_id, records))
            after[table_id] = records
    cs = build_change_set(base, changes, mints_snapshot=False)
    assert not {k for k, _ in cs.puts} & set(cs.deletes)
    base.apply(cs)
    assert sorted(base.rows("ducklake_table_stats")) == sorted(
        stats(t, n) for t, n in after.items()
    )
    assert base.head == BASE_HEAD.after(False)


def test_census_splits_current_by_the_registry_kind_of_the_deletion_schedule() -> None:
    from slatelake.store.census import SCHEDULED_DELETION_KIND

    spec = registry.spec("ducklake_files_scheduled_for_deletion")
    assert spec.kind == SCHEDULED_DELETION_KIND
