"""The keyspace: subspace byte, kind byte, fixed-width big-endian integers.

Byte order equals component order: each integer is 8 bytes big-endian with
the sign bit flipped, so negative ids (never written, but decodable) sort
below zero. No strings in keys; callers digest string identities to ints.
The subspace byte is the SlateDB segment, so every subspace is its own tree.
Knows nothing about DuckLake.
"""

from __future__ import annotations

import enum
import struct

from slatelake.errors import CorruptionError

_COMPONENT = struct.Struct(">Q")
_SIGN = 1 << 63
COMPONENT_WIDTH = 8


class Subspace(enum.IntEnum):
    SYS = 0x01
    SNAPSHOT = 0x02
    CURRENT = 0x03
    HISTORY = 0x04
    INLINE = 0x05
    INDEX = 0x06

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def from_label(cls, label: str) -> Subspace:
        """The subspace named ``label`` (ASCII, any case: ``CURRENT`` too,
        never a look-alike that upper-cases to a name)."""
        found = cls.__members__.get(label.upper()) if label.isascii() else None
        if found is None:
            names = ", ".join(s.label for s in cls)
            raise ValueError(f"unknown subspace {label!r}; expected one of {names}")
        return found


def subspace_label(byte: int) -> str:
    """The census name of a segment prefix byte: ours by name, else 'unknown'."""
    try:
        return Subspace(byte).label
    except ValueError:
        return "unknown"


_MIN, _MAX = -(1 << 63), (1 << 63) - 1


def encode_int(value: int) -> bytes:
    if not _MIN <= value <= _MAX:
        raise ValueError(f"key component {value} is outside the signed 64-bit range")
    return _COMPONENT.pack((value + _SIGN) & 0xFFFFFFFFFFFFFFFF)


def decode_int(raw: bytes) -> int:
    return _COMPONENT.unpack(raw)[0] - _SIGN


def encode_key(subspace: Subspace, kind: int, *components: int) -> bytes:
    if not 0 <= kind <= 0xFF:
        raise ValueError(f"kind byte out of range: {kind}")
    return bytes((subspace, kind)) + b"".join(encode_int(c) for c in components)


def prefix(subspace: Subspace, kind: int | None = None, *components: int) -> bytes:
    """The scan prefix for a subspace, a kind in it, or leading components."""
    if kind is None:
        if components:
            raise ValueError("components need a kind")
        return bytes((subspace,))
    return encode_key(subspace, kind, *components)


def decode_key(key: bytes) -> tuple[Subspace, int, tuple[int, ...]]:
    """Split a key into subspace, kind and its integer components."""
    if len(key) < 2 or (len(key) - 2) % COMPONENT_WIDTH:
        raise CorruptionError(f"malformed key {key.hex()}: length {len(key)}")
    try:
        sub = Subspace(key[0])
    except ValueError:
        raise CorruptionError(f"key {key.hex()} is in unknown subspace 0x{key[0]:02x}") from None
    count = (len(key) - 2) // COMPONENT_WIDTH
    comps = tuple(
        decode_int(key[2 + i * COMPONENT_WIDTH : 10 + i * COMPONENT_WIDTH]) for i in range(count)
    )
    return sub, key[1], comps
