"""Change sets, heads and the slot envelope codec.

A change set is the unit a commit carries: raw-key puts and deletes, the head
it validated against, whether it mints a DuckLake snapshot, the tables it
touched, a txn id and DuckLake's ``changes_made`` text. An envelope (one slot)
holds one or more, applied in order. Framed like every stored value.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace

from slatelake.errors import CorruptionError
from slatelake.store import values

ENVELOPE_KIND = 0xE1
ENVELOPE_VERSION = 1


@dataclass(frozen=True, order=True)
class Head:
    """(snapshot_id, batch_seq): every batch advances batch_seq; commits mint ids."""

    snapshot_id: int
    batch_seq: int

    def after(self, mints_snapshot: bool) -> Head:
        return Head(self.snapshot_id + (1 if mints_snapshot else 0), self.batch_seq + 1)


@dataclass(frozen=True)
class ChangeSet:
    base: Head
    puts: tuple[tuple[bytes, bytes], ...] = ()
    deletes: tuple[bytes, ...] = ()
    mints_snapshot: bool = False
    tables: tuple[str, ...] = ()
    changes_made: str = ""
    txn_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    @property
    def operations(self) -> int:
        return len(self.puts) + len(self.deletes)

    @property
    def result(self) -> Head:
        return self.base.after(self.mints_snapshot)

    def keys(self) -> set[bytes]:
        return {k for k, _ in self.puts} | set(self.deletes)

    def rebased(self, base: Head) -> ChangeSet:
        return replace(self, base=base)


def encode_envelope(change_sets: list[ChangeSet]) -> bytes:
    body = [
        [
            cs.txn_id,
            cs.base.snapshot_id,
            cs.base.batch_seq,
            cs.mints_snapshot,
            list(cs.tables),
            cs.changes_made,
            [k for k, _ in cs.puts],
            [v for _, v in cs.puts],
            list(cs.deletes),
        ]
        for cs in change_sets
    ]
    return values.frame(ENVELOPE_KIND, [ENVELOPE_VERSION, body])


def _typed(value: object, kind: type, what: str, where: str) -> object:
    if type(value) is not kind:
        raise CorruptionError(
            f"{where}: envelope field {what} is {type(value).__name__}, not {kind.__name__}"
        )
    return value


def _typed_list(value: object, kind: type, what: str, where: str) -> list:
    if type(value) is not list or any(type(v) is not kind for v in value):
        raise CorruptionError(f"{where}: envelope field {what} is not a list of {kind.__name__}")
    return value  # type: ignore[return-value]


def decode_envelope(data: bytes, where: str = "slot") -> list[ChangeSet]:
    """Decode a slot. Every field is type-checked: damage never decodes plausibly."""
    payload = values.unframe(data, ENVELOPE_KIND, where)
    if type(payload) is not list or len(payload) != 2:
        raise CorruptionError(f"{where}: malformed envelope")
    version, body = payload
    if type(version) is not int or version != ENVELOPE_VERSION:
        raise CorruptionError(
            f"{where}: envelope version {version!r} is not {ENVELOPE_VERSION}; "
            "written by a different slatelake release"
        )
    if type(body) is not list:
        raise CorruptionError(f"{where}: malformed envelope body")
    out = []
    for item in body:
        if type(item) is not list or len(item) != 9:
            raise CorruptionError(f"{where}: malformed change set")
        txn, snap, seq, mints, tables, changes, pkeys, pvals, dels = item
        _typed(txn, str, "txn_id", where)
        _typed(snap, int, "base snapshot_id", where)
        _typed(seq, int, "base batch_seq", where)
        _typed(mints, bool, "mints_snapshot", where)
        _typed(changes, str, "changes_made", where)
        _typed_list(tables, str, "tables", where)
        _typed_list(pkeys, bytes, "put keys", where)
        _typed_list(pvals, bytes, "put values", where)
        _typed_list(dels, bytes, "deletes", where)
        if len(pkeys) != len(pvals):
            raise CorruptionError(f"{where}: {len(pkeys)} put keys but {len(pvals)} values")
        out.append(
            ChangeSet(
                base=Head(snap, seq),
                puts=tuple(zip(pkeys, pvals, strict=True)),
                deletes=tuple(dels),
                mints_snapshot=mints,
                tables=tuple(tables),
                changes_made=changes,
                txn_id=txn,
            )
        )
    return out
