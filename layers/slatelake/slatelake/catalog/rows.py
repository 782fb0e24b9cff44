"""Rows to keys and values, and back.

A row is a tuple in the registry's column order. Its key comes from the
registry (live key; ended versioned rows add ``end_snapshot`` in
``history``); grouped tables store all rows of one parent as one value.
On-the-fly inlined tables key by the ids in their name plus a row's identity
columns, in ``inline``.
"""

from __future__ import annotations

import hashlib
from typing import Any

from slatelake.catalog.registry import (
    BY_KIND,
    INLINE_DDL_KINDS,
    INLINE_ROW_KINDS,
    InlineTable,
    TableSpec,
    inline_table_of,
)
from slatelake.errors import CorruptionError
from slatelake.store import values
from slatelake.store.keys import Subspace, decode_key, encode_key

NULL_COMPONENT = -(1 << 63)

Row = tuple[Any, ...]


def digest(text: str | None) -> int:
    """A stable signed 64-bit digest of a string identity (NULL is distinct)."""
    raw = b"\xff" if text is None else text.encode()
    return int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "big", signed=True)


def key_components(spec: TableSpec, row: Row, columns: tuple[str, ...]) -> tuple[int, ...]:
    out = []
    for col in columns:
        value = row[spec.index(col)]
        if col in spec.digest:
            out.append(digest(value))
        elif value is None:
            out.append(NULL_COMPONENT)
        else:
            out.append(int(value))
    return tuple(out)


def is_ended(spec: TableSpec, row: Row) -> bool:
    return spec.versioned and row[spec.index("end_snapshot")] is not None


def row_key(spec: TableSpec, row: Row) -> bytes:
    """The key a (non-grouped) row is stored under."""
    comps = key_components(spec, row, spec.key)
    if is_ended(spec, row):
        return encode_key(Subspace.HISTORY, spec.kind, *comps, row[spec.index("end_snapshot")])
    return encode_key(spec.home, spec.kind, *comps)


def group_key(spec: TableSpec, row: Row) -> bytes:
    return encode_key(spec.home, spec.kind, *key_components(spec, row, spec.group))


def member_order(spec: TableSpec, row: Row) -> tuple[Any, ...]:
    out = []
    for col in spec.member:
        value = row[spec.index(col)]
        out.append((value is None, 0 if value is None else value))
    return tuple(out)


def encode_row(spec: TableSpec, row: Row) -> bytes:
    if len(row) != len(spec.columns):
        raise ValueError(f"{spec.name}: row has {len(row)} values for {len(spec.columns)} columns")
    return values.frame(spec.kind, list(row))


def encode_group(spec: TableSpec, rows: list[Row]) -> bytes:
    return values.frame(
        spec.kind, [list(r) for r in sorted(rows, key=lambda r: member_order(spec, r))]
    )


def inline_row_key(table: InlineTable, row: Row) -> bytes:
    ident = (row[i] for i in table.identity)
    return encode_key(Subspace.INLINE, table.row_kind, *table.ids, *ident)


def inline_rows_prefix(table: InlineTable) -> bytes:
    return encode_key(Subspace.INLINE, table.row_kind, *table.ids)


def inline_ddl_key(table: InlineTable) -> bytes:
    return encode_key(Subspace.INLINE, table.ddl_kind, *table.ids)


def encode_inline_row(table: InlineTable, row: Row) -> bytes:
    return values.frame(table.row_kind, list(row))


def encode_inline_ddl(table: InlineTable, columns: list[tuple[str, str]]) -> bytes:
    return values.frame(table.ddl_kind, [list(c) for c in columns])


def table_of_key(key: bytes) -> str:
    """The table name a stored key belongs to (catalog subspaces only)."""
    sub, kind, comps = decode_key(key)
    if sub == Subspace.INLINE:
        table = inline_table_of(kind, comps)
        if table is None:
            raise CorruptionError(f"key {key.hex()}: unknown inline kind {kind}")
        return table.name
    spec = BY_KIND.get(kind)
    if spec is None:
        raise CorruptionError(f"key {key.hex()}: unknown table kind 0x{kind:02x}")
    return spec.name


def _row(payload: object, width: int | None, where: str, what: str) -> Row:
    if type(payload) is tuple and (width is None or len(payload) == width):
        return payload  # type: ignore[return-value]
    if type(payload) is list and (width is None or len(payload) == width):
        return tuple(payload)
    expected = "an array" if width is None else f"an array of {width} values"
    raise CorruptionError(f"{where}: {what} is not {expected}")


def _payload(key: bytes, value: bytes, kind: int, tuples: bool) -> Any:
    try:
        return values.unframe(value, kind, "stored value", tuples)
    except CorruptionError as exc:
        raise CorruptionError(f"value of key {key.hex()}: {exc}") from None


def decode_entry(key: bytes, value: bytes) -> Any:
    """Decode a stored catalog value: a row, a list of rows (grouped), or DDL.

    Shapes are checked (arrays, widths, DDL pairs): a well-framed value of the
    wrong shape is corruption, never a plausible row. Hot path of
    materialization: the error text is only built on failure.
    """
    if len(key) < 2:
        raise CorruptionError(f"malformed key {key.hex()}")
    kind = key[1]
    if key[0] == Subspace.INLINE:
        where = f"value of key {key.hex()}"
        payload = _payload(key, value, kind, tuples=False)
        if kind in INLINE_ROW_KINDS:
            row = _row(payload, None, where, "an inlined row")
            if len(row) < 3:
                raise CorruptionError(f"{where}: an inlined row needs its ids and a snapshot")
            return row
        if kind in INLINE_DDL_KINDS:
            if type(payload) is not list:
                raise CorruptionError(f"{where}: inlined-table DDL is not a list")
            columns = [_row(c, 2, where, "a DDL column") for c in payload]
            if any(type(name) is not str or type(typ) is not str for name, typ in columns):
                raise CorruptionError(f"{where}: a DDL column is not a (name, type) pair")
            return columns
        raise CorruptionError(f"{where}: unknown inline kind {kind}")
    spec = BY_KIND.get(kind)
    if spec is None:
        raise CorruptionError(f"value of key {key.hex()}: unknown table kind 0x{kind:02x}")
    payload = _payload(key, value, kind, tuples=True)
    width = spec.width
    if type(payload) is tuple and len(payload) == width and not spec.grouped:
        return payload
    where = f"value of key {key.hex()}"
    if spec.grouped:
        if type(payload) is not tuple or not payload:
            raise CorruptionError(f"{where}: {spec.name} group is not a non-empty array")
        return [_row(r, width, where, f"a {spec.name} row") for r in payload]
    return _row(payload, width, where, f"a {spec.name} row")
