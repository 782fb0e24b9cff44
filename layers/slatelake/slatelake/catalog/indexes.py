"""Equality-index definitions and entry keys (the catalog half; no SQL).

A definition is a ``slatelake_index`` row (registry.INDEX_DEF), versioned like
DuckLake's own rows: live in ``current``, ended into ``history`` by a drop.
Its id comes from DuckLake's ``next_catalog_id`` counter on the head snapshot
row, bumped in place, so tables, views and indexes share one never-reused id
space and a dead index id is dead forever — the invariant the sweep rests on.

Entries live in the ``index`` subspace under
``kind · index_id · value · row_id`` with an empty value: one index is one
contiguous range, ordered by id within its kind. ``EXACT`` holds integer
columns by value; ``DIGEST`` holds everything else by a 64-bit digest of the
value's text (collisions are filtered by the lookup's own predicate).

An index is live when its definition, its table and its column are live at
the head; lookups and the sweep use that one rule. Knows no SQL.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from slatelake.catalog import registry
from slatelake.catalog.changes import RowChanges
from slatelake.catalog.rows import Row, digest, row_key
from slatelake.catalog.state import CatalogView
from slatelake.errors import CorruptionError
from slatelake.store.keys import Subspace, decode_key, encode_key, prefix

EXACT, DIGEST = 0x01, 0x02
INDEX_KINDS = (EXACT, DIGEST)
KIND_NAMES = {EXACT: "exact", DIGEST: "digest"}
# DuckLake column types whose values fit a signed 64-bit key component exactly.
EXACT_TYPES = frozenset({"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32"})
DEF = registry.INDEX_DEF
TABLE = "slatelake_index"


@dataclass(frozen=True)
class IndexDef:
    index_id: int
    table_id: int
    column_id: int
    begin_snapshot: int
    end_snapshot: int | None
    name: str
    kind: int

    @classmethod
    def from_row(cls, row: Row) -> IndexDef:
        if len(row) != DEF.width or row[6] not in INDEX_KINDS:
            raise CorruptionError(f"slatelake_index row {row!r} is not an index definition")
        return cls(row[0], row[1], row[2], row[3], row[4], row[5], row[6])

    def row(self) -> Row:
        return (
            self.index_id,
            self.table_id,
            self.column_id,
            self.begin_snapshot,
            self.end_snapshot,
            self.name,
            self.kind,
        )

    @property
    def prefix(self) -> bytes:
        return index_prefix(self.kind, self.index_id)


# -- keys --------------------------------------------------------------------
def index_prefix(kind: int, index_id: int) -> bytes:
    """Every entry of one index: the skip-scan's unit."""
    return prefix(Subspace.INDEX, kind, index_id)


def kind_prefix(kind: int) -> bytes:
    return prefix(Subspace.INDEX, kind)


def value_prefix(kind: int, index_id: int, component: int) -> bytes:
    return prefix(Subspace.INDEX, kind, index_id, component)


def entry_key(kind: int, index_id: int, component: int, row_id: int) -> bytes:
    return encode_key(Subspace.INDEX, kind, index_id, component, row_id)


def component(kind: int, value: int | str) -> int:
    """The key component of a value: the integer itself, or the digest of its
    canonical text (the caller renders both sides through the same cast)."""
    if kind == EXACT:
        return int(value)
    return digest(str(value))


def kind_for(column_type: str) -> int:
    return EXACT if column_type.lower() in EXACT_TYPES else DIGEST


# -- reading the catalog -----------------------------------------------------
def _live(rows: Iterable[Row], end_at: int) -> list[Row]:
    return [r for r in rows if r[end_at] is None]


def live_tables(state: CatalogView) -> dict[int, Row]:
    spec = registry.spec("ducklake_table")
    return {r[0]: r for r in _live(state.rows(spec.name), spec.index("end_snapshot"))}


def live_columns(state: CatalogView) -> dict[tuple[int, int], Row]:
    spec = registry.spec("ducklake_column")
    end = spec.index("end_snapshot")
    table, col = spec.index("table_id"), spec.index("column_id")
    return {(r[table], r[col]): r for r in _live(state.rows(spec.name), end)}


def definitions(state: CatalogView) -> list[IndexDef]:
    """Every definition the state holds, live and ended, by id."""
    return sorted((IndexDef.from_row(r) for r in state.rows(TABLE)), key=lambda d: d.index_id)


def live_definitions(state: CatalogView) -> list[IndexDef]:
    """Definitions live at the head whose table and column are live too."""
    defs = [d for d in definitions(state) if d.end_snapshot is None]
    if not defs:
        return []
    tables, columns = live_tables(state), live_columns(state)
    return [d for d in defs if d.table_id in tables and (d.table_id, d.column_id) in columns]


def live_index_ids(state: CatalogView) -> set[int]:
    return {d.index_id for d in live_definitions(state)}


def id_horizon(state: CatalogView) -> int:
    """The head's next catalog id. Every id below it was handed out at or
    before the head, so one not live there is dead forever; an id at or above
    it may belong to an index created after this view and is never judged."""
    snap = registry.spec("ducklake_snapshot")
    row = state.get(row_key(snap, (state.head.snapshot_id, None, None, None, None)))
    return 0 if row is None else row[snap.index("next_catalog_id")]


def has_definitions(state: CatalogView) -> bool:
    """Cheap: whether any definition (live or not) exists; the write path's gate."""
    return bool(state.keys_of_kind(DEF.kind))


# -- changing definitions ----------------------------------------------------
def take_catalog_id(state: CatalogView, changes: RowChanges) -> int:
    """Take the next catalog id by bumping the head snapshot row in place.

    The change set stays head-preserving. It also deletes the (absent) key of
    snapshot S+1, so it shares a key with any commit minting S+1: losing the
    race to one is a conflict, never a rebase that would hand out the id that
    commit's DuckLake transaction took.
    """
    snap = registry.spec("ducklake_snapshot")
    head = state.head.snapshot_id
    row = state.get(row_key(snap, (head, None, None, None, None)))
    if row is None:
        raise CorruptionError(f"the head snapshot {head} has no ducklake_snapshot row")
    at = snap.index("next_catalog_id")
    taken = row[at]
    changes.delete("ducklake_snapshot", row)
    changes.insert("ducklake_snapshot", row[:at] + (taken + 1,) + row[at + 1 :])
    changes.delete("ducklake_snapshot", (head + 1, None, None, None, None))
    return taken


def define(
    state: CatalogView, table_id: int, column_id: int, name: str, kind: int
) -> tuple[RowChanges, IndexDef]:
    changes = RowChanges()
    index_id = take_catalog_id(state, changes)
    defn = IndexDef(index_id, table_id, column_id, state.head.snapshot_id, None, name, kind)
    changes.insert(TABLE, defn.row())
    return changes, defn


def end(changes: RowChanges, defn: IndexDef, at_snapshot: int) -> IndexDef:
    """End a live definition into history (drop_index, or its table's drop)."""
    ended = replace(defn, end_snapshot=at_snapshot)
    changes.delete(TABLE, defn.row())
    changes.insert(TABLE, ended.row())
    return ended


def cascade(state: CatalogView, changes: RowChanges) -> list[IndexDef]:
    """End, in ``changes``, the live definitions whose table or column the
    changes end (DROP TABLE, DROP COLUMN, a column's type change; a rename
    keeps the ids and the index). Returns what it ended."""
    gone_tables = _ended(changes, "ducklake_table", ("table_id",))
    # a column whose type changed is gone too: its entries render the old type
    typed = _ended(changes, "ducklake_column", ("table_id", "column_id", "column_type"))
    gone_columns = {t[:2] for t in typed}
    if not gone_tables and not gone_columns:
        return []
    out = []
    for defn in definitions(state):
        if defn.end_snapshot is not None:
            continue
        if (defn.table_id,) in gone_tables or (defn.table_id, defn.column_id) in gone_columns:
            # the ending commit mints S+1; the definition ends with it
            out.append(end(changes, defn, state.head.snapshot_id + 1))
    return out


def _ended(changes: RowChanges, table: str, ident: tuple[str, ...]) -> set[tuple[int, ...]]:
    spec = registry.spec(table)
    at = [spec.index(c) for c in ident]
    end = spec.index("end_snapshot")
    removed = {tuple(r[i] for i in at) for r in changes.deleted.get(table, []) if r[end] is None}
    kept = {tuple(r[i] for i in at) for r in changes.inserted.get(table, []) if r[end] is None}
    return removed - kept


# -- reading entries ---------------------------------------------------------
def entry_row_ids(reader, state: CatalogView, key_prefix: bytes) -> list[int]:  # noqa: ANN001
    """Row ids under a value prefix: the store's entries overlaid with the
    ones the log tail wrote (or deleted) since the store was read."""
    keys = {k for k, _ in reader.scan_prefix(key_prefix)}
    for key, present in state.index_overlay.items():
        if key.startswith(key_prefix):
            if present:
                keys.add(key)
            else:
                keys.discard(key)
    return sorted(decode_key(k)[2][-1] for k in keys)
