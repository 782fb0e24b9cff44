"""The catalog at a head: sys records and the materialized rows.

``sys`` holds the format stamp, ``head`` (snapshot_id, batch_seq) and
``fold`` (last folded slot seq plus the head it produced). An unknown, newer
format refuses with FormatError. ``CatalogState`` is every catalog row
(live and ended) keyed by its stored key, plus the head and the last log slot
it includes; applying a change set advances it exactly as folding would.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from slatelake.catalog import registry
from slatelake.catalog.rows import Row, decode_entry, inline_rows_prefix, table_of_key
from slatelake.errors import FormatError
from slatelake.log.changeset import ChangeSet, Head
from slatelake.store import values
from slatelake.store.keys import Subspace, encode_key

FORMAT_VERSION = 1
SYS_FORMAT = encode_key(Subspace.SYS, 0x01)
SYS_HEAD = encode_key(Subspace.SYS, 0x02)
SYS_FOLD = encode_key(Subspace.SYS, 0x03)
_FORMAT_KIND, _HEAD_KIND, _FOLD_KIND = 0x01, 0x02, 0x03

# The head of a lake with no DuckLake snapshot yet: the first commit mints 0.
EMPTY_HEAD = Head(-1, 0)
CATALOG_SUBSPACES = (Subspace.SNAPSHOT, Subspace.CURRENT, Subspace.HISTORY, Subspace.INLINE)


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


def encode_head(head: Head) -> bytes:
    return values.frame(_HEAD_KIND, [head.snapshot_id, head.batch_seq])


def decode_head(raw: bytes) -> Head:
    snap, seq = values.unframe(raw, _HEAD_KIND, "sys/head")
    return Head(snap, seq)


def encode_fold(seq: int, head: Head) -> bytes:
    return values.frame(_FOLD_KIND, [seq, head.snapshot_id, head.batch_seq])


def decode_fold(raw: bytes) -> tuple[int, Head]:
    seq, snap, bseq = values.unframe(raw, _FOLD_KIND, "sys/fold")
    return seq, Head(snap, bseq)


@dataclass
class CatalogState:
    head: Head
    last_seq: int
    entries: dict[bytes, Any] = field(default_factory=dict)

    def apply(self, cs: ChangeSet, seq: int | None = None) -> None:
        for key, value in cs.puts:
            if key[0] == Subspace.SYS or key[0] == Subspace.INDEX:
                continue  # not catalog rows
            self.entries[key] = decode_entry(key, value)
        for key in cs.deletes:
            self.entries.pop(key, None)
        self.head = cs.result
        if seq is not None:
            self.last_seq = seq

    def load(self, pairs: Iterable[tuple[bytes, bytes]]) -> None:
        entries = self.entries
        for key, value in pairs:
            entries[key] = decode_entry(key, value)

    def tables(self) -> dict[str, list[Row]]:
        """Every table's rows (live and ended), inlined tables included."""
        out: dict[str, list[Row]] = defaultdict(list)
        for key, entry in self.entries.items():
            if key[0] == Subspace.INLINE:
                name = table_of_key(key)
                if key[1] == registry.INLINE_DDL_KIND:
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
        """One table's rows, found by key bytes without touching other tables."""
        ids = registry.inline_table_ids(table)
        if ids is not None:
            rows_prefix = inline_rows_prefix(*ids)
            return [e for k, e in self.entries.items() if k.startswith(rows_prefix)]
        kind = registry.spec(table).kind
        out: list[Row] = []
        for key, entry in self.entries.items():
            if key[1] == kind and key[0] != Subspace.INLINE:
                if isinstance(entry, list):
                    out.extend(entry)
                else:
                    out.append(entry)
        return out

    def get(self, key: bytes) -> Any:
        """The decoded entry stored under ``key``, or None."""
        return self.entries.get(key)

    def inline_ddl(self) -> dict[str, list[tuple[str, str]]]:
        return {
            table_of_key(k): v
            for k, v in self.entries.items()
            if k[0] == Subspace.INLINE and k[1] == registry.INLINE_DDL_KIND
        }

    def row_count(self) -> int:
        total = 0
        for key, entry in self.entries.items():
            if _is_ddl(key):
                continue
            total += len(entry) if isinstance(entry, list) else 1
        return total

    def same_rows(self, other: CatalogState) -> bool:
        return self.head == other.head and self.entries == other.entries

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.entries)


def _is_ddl(key: bytes) -> bool:
    return key[0] == Subspace.INLINE and key[1] == registry.INLINE_DDL_KIND
