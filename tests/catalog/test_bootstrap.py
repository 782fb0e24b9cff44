"""Bootstrap: a new lake laid down from catalog rows as folded state.

The reference is the commit path: the same rows committed as change sets and
materialized. A bootstrapped store must hold exactly those keys and values,
open at (newest snapshot, 0) with fold cursor 0 and an empty log, and take
the next commit on top. Refusals leave nothing new behind.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from slatelake.catalog import registry
from slatelake.catalog.bootstrap import Bootstrap
from slatelake.catalog.changes import RowChanges
from slatelake.catalog.lake import Lake
from slatelake.catalog.rows import Row
from slatelake.catalog.state import CatalogState
from slatelake.errors import MisconfigurationError, UnsupportedError
from slatelake.log.changeset import Head
from slatelake.log.slots import SlotLog
from slatelake.store.location import LakeLocation
from tests.catalog.helpers import fold_all
from tests.catalog.synthetic import EPOCH_2026_US, commit_changes, genesis_changes

pytestmark = pytest.mark.fast

INLINE = "ducklake_inlined_data_1_1"
INLINE_COLUMNS = [
    ("row_id", "BIGINT"),
    ("begin_snapshot", "BIGINT"),
    ("end_snapshot", "BIGINT"),
    ("id", "INTEGER"),
    ("v", "VARCHAR"),
]
INLINE_DELETE = "ducklake_inlined_delete_1"
INLINE_DELETE_COLUMNS = [("file_id", "BIGINT"), ("row_id", "BIGINT"), ("begin_snapshot", "BIGINT")]


@pytest.fixture(params=["file", "memory"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "file":
        return (tmp_path / "lake").as_uri()
    return f"memory://{uuid.uuid4().hex}"


def _reference(url: str) -> CatalogState:
    """A lake built the ordinary way: genesis, inserts, an ended table row (a
    history key), grouped stats, inlined data and inlined deletes."""
    lake = Lake.create(url)
    try:
        state = lake.materialize()
        lake.commit(state, genesis_changes(), mints_snapshot=True)
        for _ in range(3):
            lake.commit(state, commit_changes(state, table_id=1), mints_snapshot=True)
        table = registry.spec("ducklake_table")
        live = (1, uuid.UUID(int=1), 1, None, 0, "t", "t/", True)
        lake.commit(state, _snapshot(state).insert(table.name, live), mints_snapshot=True)
        ended = live[:3] + (state.head.snapshot_id + 1,) + live[4:]
        changes = _snapshot(state).delete(table.name, live).insert(table.name, ended)
        changes.created_inline[INLINE] = INLINE_COLUMNS
        changes.insert(INLINE, (0, 2, None, 1, "a"), (1, 2, 5, 2, "b"))
        changes.created_inline[INLINE_DELETE] = INLINE_DELETE_COLUMNS
        changes.insert(INLINE_DELETE, (2, 7, 5))
        lake.commit(state, changes, mints_snapshot=True)
        return state
    finally:
        lake.close()


def _snapshot(state: CatalogState) -> RowChanges:
    """The snapshot rows every DuckLake commit writes."""
    snap = state.head.snapshot_id + 1
    return (
        RowChanges()
        .insert("ducklake_snapshot", (snap, EPOCH_2026_US + snap, 0, 2, snap + 1))
        .insert("ducklake_snapshot_changes", (snap, "altered", None, None, None))
    )


def _bootstrap(url: str, state: CatalogState, batch_keys: int = 20_000) -> Head:
    tables = state.tables()
    ddl = state.inline_ddl()
    with Bootstrap(url, batch_keys=batch_keys) as boot:
        for name, rows in tables.items():
            boot.add_table(name, rows, ddl.get(name))
        return boot.finish().head


def _materialize(url: str) -> CatalogState:
    with Lake.open(url, read_only=True) as lake:
        return lake.materialize()


def test_bootstrapped_store_holds_exactly_what_the_commit_path_stores(
    url: str, tmp_path: Path
) -> None:
    reference = _reference((tmp_path / "reference").as_uri())
    head = _bootstrap(url, reference)
    state = _materialize(url)
    assert head == Head(reference.head.snapshot_id, 0)
    assert state.head == head and state.last_seq == 0
    assert state.entries == reference.entries
    assert state.tables()[INLINE] == reference.tables()[INLINE]


def test_a_lake_bootstrapped_in_many_small_batches_equals_one_in_one(tmp_path: Path) -> None:
    reference = _reference((tmp_path / "reference").as_uri())
    url = (tmp_path / "small").as_uri()
    _bootstrap(url, reference, batch_keys=3)
    assert _materialize(url).entries == reference.entries


def test_next_commit_on_a_bootstrapped_lake_mints_the_following_snapshot(url: str) -> None:
    with Bootstrap(url) as boot:
        for name, rows in genesis_changes().inserted.items():
            boot.add_table(name, rows)
        assert boot.finish().head == Head(0, 0)
    with Lake.open(url) as lake:
        state = lake.materialize()
        committed = lake.commit(state, commit_changes(state), mints_snapshot=True)
        assert committed.seq == 1
        assert state.head == Head(1, 1)
    fold_all(url)  # the holder folds slot 1 onto the bootstrapped fold cursor
    state = _materialize(url)
    assert state.head == Head(1, 1) and state.last_seq == 1


def test_bootstrap_refuses_an_existing_lake_naming_it(url: str) -> None:
    Lake.create(url).close()
    with pytest.raises(MisconfigurationError, match="a lake already exists at") as err:
        Bootstrap(url)
    assert LakeLocation.parse(url).url in str(err.value)


def test_bootstrap_refuses_a_root_that_holds_anything(tmp_path: Path) -> None:
    root = tmp_path / "lake"
    (root / "commits").mkdir(parents=True)
    (root / "commits" / "00000000000000000001").write_bytes(b"a slot of another lake")
    with pytest.raises(MisconfigurationError, match="is not empty") as err:
        Bootstrap(root.as_uri())
    assert "commits/00000000000000000001" in str(err.value)


def test_an_abandoned_bootstrap_is_refused_as_a_partial_import_until_deleted(url: str) -> None:
    boot = Bootstrap(url, batch_keys=1)
    boot.add_table("ducklake_metadata", genesis_changes().inserted["ducklake_metadata"])
    boot.close()  # never finished: rows without sys records
    with pytest.raises(MisconfigurationError, match="partial import"):
        Bootstrap(url)
    assert not list(SlotLog(LakeLocation.parse(url)).list_after(0))


@pytest.mark.parametrize(
    ("name", "rows", "columns", "message"),
    [
        ("ducklake_future", [(1,)], None, "'ducklake_future' is not a DuckLake 1.0"),
        ("slatelake_index", [], None, "'slatelake_index' is not a DuckLake 1.0"),
        ("ducklake_metadata", [("version", "1.0", None)], None, "a row has 3 values for 4"),
        (
            "ducklake_metadata",
            [("data_path", "/a/", None, None), ("data_path", "/b/", None, None)],
            None,
            "two rows map to stored key",
        ),
        (INLINE, [(0, 1, None, 1, "a"), (0, 1, None, 2, "b")], INLINE_COLUMNS, "two rows map"),
        (INLINE, [(0, 1, None, 1, "a")], None, "needs its columns"),
        (INLINE, [(0, 1, None, 1 << 70, "a")], INLINE_COLUMNS, "cannot be stored by slatelake"),
    ],
)
def test_bootstrap_refuses_rows_it_cannot_keep_whole(
    url: str, name: str, rows: list[Row], columns: list[tuple[str, str]] | None, message: str
) -> None:
    with Bootstrap(url) as boot, pytest.raises(UnsupportedError, match=message):
        boot.add_table(name, rows, columns)


def test_bootstrap_refuses_a_catalog_without_snapshots(url: str) -> None:
    with Bootstrap(url) as boot:
        boot.add_table("ducklake_metadata", genesis_changes().inserted["ducklake_metadata"])
        with pytest.raises(UnsupportedError, match="no ducklake_snapshot rows"):
            boot.finish()


def test_bootstrap_refuses_a_table_given_twice(url: str) -> None:
    rows = genesis_changes().inserted["ducklake_snapshot"]
    with Bootstrap(url) as boot:
        boot.add_table("ducklake_snapshot", rows)
        with pytest.raises(UnsupportedError, match="already written"):
            boot.add_table("ducklake_snapshot", rows)
