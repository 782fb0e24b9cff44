"""Catalogs with equality indexes written as rows (no DuckDB), for the sweep
tests and the sweep benchmark: DuckLake-shaped CREATE/DROP TABLE, index
definitions with entries, folding, and reading the store's index subspace."""

from __future__ import annotations

import uuid

from slatelake.catalog import indexes as idx
from slatelake.catalog.changes import RowChanges, build_change_set
from slatelake.catalog.folder import Folder
from slatelake.catalog.lake import Lake
from slatelake.catalog.state import CatalogState
from slatelake.log.changeset import ChangeSet
from slatelake.store.keys import Subspace
from slatelake.store.location import LakeLocation
from tests.catalog.synthetic import EPOCH_2026_US, genesis_changes


def new_lake(url: str) -> tuple[Lake, CatalogState]:
    Lake.create(url).close()
    lake = Lake.open(url)
    state = lake.materialize()
    lake.commit(state, genesis_changes(), mints_snapshot=True, changes_made="genesis")
    return lake, state


def add_table(lake: Lake, state: CatalogState, name: str, columns: int = 2) -> int:
    """What DuckLake's CREATE TABLE writes: a snapshot taking the next catalog id."""
    head = state.head.snapshot_id
    snap_row = next(r for r in state.rows("ducklake_snapshot") if r[0] == head)
    table_id, snap = snap_row[3], head + 1
    changes = (
        RowChanges()
        .insert("ducklake_snapshot", (snap, EPOCH_2026_US + snap, 0, table_id + 1, snap_row[4]))
        .insert("ducklake_snapshot_changes", (snap, f"created_table:{name}", None, None, None))
        .insert("ducklake_table", (table_id, uuid.uuid4(), snap, None, 0, name, f"{name}/", True))
    )
    for col in range(1, columns + 1):
        changes.insert(
            "ducklake_column",
            (
                col,
                snap,
                None,
                table_id,
                col,
                f"c{col}",
                "int64",
                None,
                None,
                True,
                None,
                None,
                None,
            ),
        )
    lake.commit(state, changes, mints_snapshot=True, changes_made=f"created_table:{name}")
    return table_id


def drop_table(lake: Lake, state: CatalogState, table_id: int) -> list[idx.IndexDef]:
    """DROP TABLE as DuckLake writes it, with the index cascade the session adds."""
    snap = state.head.snapshot_id + 1
    row = idx.live_tables(state)[table_id]
    changes = (
        RowChanges()
        .insert("ducklake_snapshot", (snap, EPOCH_2026_US + snap, 0, 1_000, 0))
        .insert("ducklake_snapshot_changes", (snap, f"dropped_table:{table_id}", None, None, None))
        .delete("ducklake_table", row)
        .insert("ducklake_table", row[:3] + (snap,) + row[4:])
    )
    ended = idx.cascade(state, changes)
    lake.commit(state, changes, mints_snapshot=True, changes_made=f"dropped_table:{table_id}")
    return ended


def create_index(
    lake: Lake, state: CatalogState, table_id: int, column_id: int, rows: int, kind: int = idx.EXACT
) -> idx.IndexDef:
    """A definition plus one entry per row (value = row id % 97), in one change set."""
    changes, defn = idx.define(state, table_id, column_id, f"i{table_id}_{column_id}", kind)
    cs = build_change_set(state, changes, False, "create_index")
    puts = tuple(entry(defn, r) for r in range(rows))
    lake.commit_change_set(state, ChangeSet(cs.base, cs.puts + puts, cs.deletes, tables=cs.tables))
    return defn


def entry(defn: idx.IndexDef, row_id: int) -> tuple[bytes, bytes]:
    value = row_id % 97 if defn.kind == idx.EXACT else f"v{row_id % 97}"
    return idx.entry_key(defn.kind, defn.index_id, idx.component(defn.kind, value), row_id), b""


def drop_index(lake: Lake, state: CatalogState, defn: idx.IndexDef) -> None:
    changes = RowChanges()
    idx.end(changes, defn, state.head.snapshot_id)
    lake.commit(state, changes, mints_snapshot=False, changes_made="drop_index")


def fold(url: str) -> None:
    folder = Folder(LakeLocation.parse(url))
    try:
        folder.fold_once(truncate=False)
    finally:
        folder.close()


def store_index_keys(url: str, key_prefix: bytes = bytes((Subspace.INDEX,))) -> list[bytes]:
    with Lake.open(url, read_only=True) as lake:
        return [k for k, _ in lake.reader(fresh=True).scan_prefix(key_prefix)]


def row_ids(lake: Lake, state: CatalogState, defn: idx.IndexDef, value: int | str) -> list[int]:
    prefix = idx.value_prefix(defn.kind, defn.index_id, idx.component(defn.kind, value))
    return idx.entry_row_ids(lake.reader(fresh=True), state, prefix)
