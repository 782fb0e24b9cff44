"""The catalog at a head: sys records and the materialized rows.

``sys`` holds the format stamp, ``head`` (snapshot_id, batch_seq) and
``fold`` (last folded slot seq plus the head it produced). An unknown, newer
format refuses with FormatError. ``CatalogState`` is every catalog row
(live and ended) keyed by its stored key, plus the head and the last log slot
it includes; applying a change set advances it exactly as folding would
(range deletes included: they remove every row key in the range).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from slatelake.catalog import registry
from slatelake.catalog.rows import Row, decode_entry, inline_rows_prefix, table_of_key
from slatelake.errors import CorruptionError, FormatError
from slatelake.log.changeset import ChangeSet, Head
from slatelake.store import values
from slatelake.store.keys import Subspace, encode_key, subspace_label

FORMAT_VERSION = 1
SYS_FORMAT = encode_key(Subspace.SYS, 0x01)
# 0x02 was sys/head, written and never read (sys/fold holds the head): retired,
# never reused; older lakes still hold it, and nothing reads it.
SYS_FOLD = encode_key(Subspace.SYS, 0x03)
_FORMAT_KIND, _FOLD_KIND = 0x01, 0x03

# The ``tables`` of a sweep batch of index entries (catalog/sweep.py), and the
# length of one index's key prefix: subspace, kind, index id.
SWEEP_INDEX_TABLE = "index"
INDEX_RANGE_PREFIX = 2 + 8

# The head of a lake with no DuckLake snapshot yet: the first commit mints 0.
EMPTY_HEAD = Head(-1, 0)
CATALOG_SUBSPACES = (Subspace.SNAPSHOT, Subspace.CURRENT, Subspace.HISTORY, Subspace.INLINE)


def check_catalog_ranges(cs: ChangeSet, seq: int | None = None) -> None:
    """Range deletes remove catalog rows only: a range over ``sys`` or the
    index entries is refused as damage (no slatelake release writes one)."""
    for start, end in cs.ranges:
        if start[0] not in CATALOG_SUBSPACES:
            where = f"commit log slot {seq}: " if seq is not None else ""
            raise CorruptionError(
                f"{where}change set {cs.txn_id} range-deletes in subspace "
                f"{subspace_label(start[0])} ({start.hex()}..{end.hex()}); only catalog "
                "rows are range-deleted"
            )


def encode_format() -> bytes:
    return values.frame(_FORMAT_KIND, {"format": FORMAT_VERSION, "writer": "slatelake"})


def check_format(raw: bytes | None, where: str) -> None:
    if raw is None:
        return
    doc = values.unframe(raw, _FORMAT_KIND, f"{where} format stamp")
    version = doc.get("format") if isinstance(doc, dict) else None
    if not isinstance(version, int):
        raise FormatError(f"{where}: the format stamp is unreadable")
    if version > FORMAT_VERSION:
        raise FormatError(
            f"{where}: lake format {version} is newer than this slatelake understands "
            f"({FORMAT_VERSION}); upgrade slatelake to open it"
        )


def encode_fold(seq: int, head: Head) -> bytes:
    return values.frame(_FOLD_KIND, [seq, head.snapshot_id, head.batch_seq])


def decode_fold(raw: bytes) -> tuple[int, Head]:
    seq, snap, bseq = values.unframe(raw, _FOLD_KIND, "sys/fold")
    return seq, Head(snap, bseq)


class SideRecords(Protocol):
    """What a view of the catalog keeps besides catalog rows: sys records and
    index entries written by change sets it applied (see CatalogState)."""

    sys_overlay: dict[bytes, bytes | None]
    index_overlay: dict[bytes, bool]
    index_swept: dict[bytes, bytes]


def apply_side_records(view: SideRecords, cs: ChangeSet) -> None:
    """Record a change set's sys and index-entry writes in ``view``'s overlays."""
    sweep = cs.tables == (SWEEP_INDEX_TABLE,)
    for key, value in cs.puts:
        if key[0] == Subspace.SYS:
            view.sys_overlay[key] = value
        elif key[0] == Subspace.INDEX:
            view.index_overlay[key] = True  # not a catalog row
    for key in cs.deletes:
        if key[0] == Subspace.SYS:
            view.sys_overlay[key] = None
        elif key[0] == Subspace.INDEX:
            if sweep:
                view.index_overlay.pop(key, None)
                rng = key[:INDEX_RANGE_PREFIX]
                view.index_swept[rng] = max(view.index_swept.get(rng, key), key)
            else:
                view.index_overlay[key] = False


class CatalogView(SideRecords, Protocol):
    """The catalog at a head as its readers use it, however it is held: a
    Python ``CatalogState`` (the folder, the sweep's own materialization) or a
    session's DuckDB-resident base (ducklake/duck_state.py)."""

    head: Head
    last_seq: int

    def apply(self, cs: ChangeSet, seq: int | None = None) -> None: ...

    def apply_tail(self, tail: Iterable[tuple[int | None, ChangeSet]]) -> None: ...

    def replace_with(self, other: CatalogState) -> None: ...

    def rows(self, table: str) -> list[Row]: ...

    def get(self, key: bytes) -> Any: ...

    def group(self, key: bytes) -> list[Row]: ...

    def groups(self, keys: Iterable[bytes]) -> dict[bytes, list[Row]]: ...

    def keys_of_kind(self, kind: int) -> set[bytes]: ...

    def inline_ddl(self) -> dict[str, list[tuple[str, str]]]: ...

    def inline_row_keys(self, inline: registry.InlineTable) -> set[bytes]: ...


@dataclass
class CatalogState:
    head: Head
    last_seq: int
    entries: dict[bytes, Any] = field(default_factory=dict)

    _by_kind: dict[int, set[bytes]] = field(default_factory=dict, repr=False)
    # sys records changed by replayed change sets (raw values; None = deleted)
    sys_overlay: dict[bytes, bytes | None] = field(default_factory=dict, repr=False)
    # index entries written (True) or deleted (False) by change sets applied to
    # this state, i.e. not yet seen in the store it was materialized from
    index_overlay: dict[bytes, bool] = field(default_factory=dict, repr=False)
    # per dead index range (its 18-byte prefix): the highest key a sweep batch
    # deleted. A sweep deletes a range's stored entries in ascending order, so
    # every stored key at or below it is gone: one record per range, not per key.
    index_swept: dict[bytes, bytes] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        for key in self.entries:
            self._index(key)

    def _index(self, key: bytes) -> None:
        kinds = self._by_kind.get(key[1])
        if kinds is None:
            kinds = self._by_kind[key[1]] = set()
        kinds.add(key)

    def keys_of_kind(self, kind: int) -> set[bytes]:
        return self._by_kind.get(kind, set())

    def apply(self, cs: ChangeSet, seq: int | None = None) -> None:
        """Advance by one change set: its ranges, then puts, then deletes
        (the order the folder writes them in)."""
        check_catalog_ranges(cs, seq)  # before anything changes
        for start, end in cs.ranges:
            kinds = self._by_kind.get(start[1], set())
            for key in [k for k in kinds if start <= k < end]:
                del self.entries[key]
                kinds.discard(key)
        for key, value in cs.puts:
            if key[0] in CATALOG_SUBSPACES:
                self.entries[key] = decode_entry(key, value)
                self._index(key)
        for key in cs.deletes:
            if key[0] in CATALOG_SUBSPACES and self.entries.pop(key, None) is not None:
                self._by_kind[key[1]].discard(key)
        apply_side_records(self, cs)
        self.head = cs.result
        if seq is not None:
            self.last_seq = seq

    def apply_tail(self, tail: Iterable[tuple[int | None, ChangeSet]]) -> None:
        for seq, cs in tail:
            self.apply(cs, seq)

    def load(self, pairs: Iterable[tuple[bytes, bytes]]) -> None:
        entries = self.entries
        index = self._index
        for key, value in pairs:
            entries[key] = decode_entry(key, value)
            index(key)

    def tables(self) -> dict[str, list[Row]]:
        """Every table's rows (live and ended), inlined tables included."""
        out: dict[str, list[Row]] = defaultdict(list)
        for key, entry in self.entries.items():
            if key[0] == Subspace.INLINE:
                name = table_of_key(key)
                if key[1] in registry.INLINE_DDL_KINDS:
                    out.setdefault(name, [])
                else:
                    out[name].append(entry)
                continue
            name = registry.BY_KIND[key[1]].name
            if isinstance(entry, list):
                out[name].extend(entry)
            else:
                out[name].append(entry)
        return dict(out)

    def rows(self, table: str) -> list[Row]:
        """One table's rows, found through the kind index, not a scan."""
        inline = registry.inline_table(table)
        if inline is not None:
            rows_prefix = inline_rows_prefix(inline)
            keys = self.keys_of_kind(inline.row_kind)
            return [self.entries[k] for k in keys if k.startswith(rows_prefix)]
        out: list[Row] = []
        for key in self.keys_of_kind(registry.spec(table).kind):
            if key[0] == Subspace.INLINE:
                continue
            entry = self.entries[key]
            if isinstance(entry, list):
                out.extend(entry)
            else:
                out.append(entry)
        return out

    def get(self, key: bytes) -> Any:
        """The decoded entry stored under ``key``, or None."""
        return self.entries.get(key)

    def group(self, key: bytes) -> list[Row]:
        """The rows of one grouped value (empty when absent)."""
        return list(self.entries.get(key, []))

    def groups(self, keys: Iterable[bytes]) -> dict[bytes, list[Row]]:
        return {key: self.group(key) for key in keys}

    def inline_row_keys(self, inline: registry.InlineTable) -> set[bytes]:
        """The stored row keys of one inlined table, through the kind index."""
        rows_prefix = inline_rows_prefix(inline)
        return {k for k in self.keys_of_kind(inline.row_kind) if k.startswith(rows_prefix)}

    def inline_ddl(self) -> dict[str, list[tuple[str, str]]]:
        """DDL of the on-the-fly inlined tables, through the kind index."""
        return {
            table_of_key(k): self.entries[k]
            for kind in registry.INLINE_DDL_KINDS
            for k in self.keys_of_kind(kind)
            if k[0] == Subspace.INLINE
        }

    def row_count(self) -> int:
        total = 0
        for key, entry in self.entries.items():
            if _is_ddl(key):
                continue
            total += len(entry) if isinstance(entry, list) else 1
        return total

    def replace_with(self, other: CatalogState) -> None:
        """Become ``other`` in place (handles holding this state see the change)."""
        self.head, self.last_seq = other.head, other.last_seq
        self.entries, self._by_kind = other.entries, other._by_kind
        self.sys_overlay = other.sys_overlay
        self.index_overlay = other.index_overlay
        self.index_swept = other.index_swept

    def same_rows(self, other: CatalogState) -> bool:
        return self.head == other.head and self.entries == other.entries

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.entries)


def _is_ddl(key: bytes) -> bool:
    return key[0] == Subspace.INLINE and key[1] in registry.INLINE_DDL_KINDS
