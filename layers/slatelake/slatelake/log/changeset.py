"""Change sets, heads and the slot envelope codec.

A change set is the unit a commit carries: raw-key puts and deletes, range
deletes, the head it validated against, whether it mints a DuckLake
snapshot, the tables it touched, a txn id and DuckLake's ``changes_made``
text. An envelope (one slot) holds one or more, applied in order.

A range delete ``[start, end)`` removes every stored key in it, whatever the
store holds at the change set's base, and counts as one operation: clearing
an inlined-data table of any size is one operation, not one per row. Within
a change set the ranges apply first, then the puts, then the point deletes,
so a put inside a range survives. A range stays inside one kind of one
subspace (``start`` and ``end`` share their first two bytes).

Envelope versions (framed like every stored value, kind ``ENVELOPE_KIND``):
- 1: ``[1, body]``. No checksum, no seq, no ranges. Still read.
- 2: ``[2, [seq, digest, body_bytes]]``: the body is msgpack bytes and
  ``digest`` is a 128-bit BLAKE2b of (seq, body_bytes). A flipped byte fails
  the digest; a slot that holds another slot's envelope (a copy of the
  previous one) names the wrong seq. The outer shape keeps two elements so
  a release that reads only version 1 refuses it by version, not as damage.
  Still read.
- 3: ``[3, [seq, digest, body_bytes, prev]]``: version 2 plus ``prev``, the
  ``slot_digest`` (log/slots.py) of slot seq-1 as its writer saw it ("" when
  the writer did not know it), inside the checksum. It chains the log: a
  slot replaced after its successor was written, or a seq reused after the
  newest slot was cut, no longer matches the ``prev`` of the slot after it
  nor the digest a reader that applied it remembers (log/replay.py). A
  version-2 release refuses it by version (FormatError: upgrade).
BLAKE2b rather than CRC32: a CRC catches single flips and short bursts but
lets other damage (a torn or partly overwritten object) pass once in 2^32
and is trivially forged; BLAKE2b-128 never matches by accident and costs
about 16 ms per 10 MiB on one core, small beside the slot's GET and decode.
A newer version than this build reads is FormatError: upgrade to read it.

A reader of a few keys (the sys records ``status``, ``runs`` and the audit log
read at the log's head) decodes a slot with ``decode_keys``: the same checks
as ``decode_envelope`` (checksum, seq, every field's type), but each change set
comes back with only the writes of the selected keys, so the catalog rows a
slot carries are never built into change sets nor kept.
"""

from __future__ import annotations

import bisect
import hashlib
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from slatelake.errors import CorruptionError, FormatError
from slatelake.store import values
from slatelake.store.keys import Subspace

ENVELOPE_KIND = 0xE1
ENVELOPE_VERSION = 3  # what this build writes
CHECKSUM_VERSION = 2  # checksum and seq, no chain: still read
LEGACY_VERSION = 1  # no checksum, no seq, no ranges: still read
DIGEST_SIZE = 16
_PERSON = b"slatelake-slot"
_SEQ = struct.Struct(">Q")

KeyRange = tuple[bytes, bytes]  # [start, end): every key k with start <= k < end


@dataclass(frozen=True, order=True)
class Head:
    """(snapshot_id, batch_seq): every batch advances batch_seq; commits mint ids."""

    snapshot_id: int
    batch_seq: int

    def after(self, mints_snapshot: bool) -> Head:
        return Head(self.snapshot_id + (1 if mints_snapshot else 0), self.batch_seq + 1)


def prefix_range(prefix: bytes) -> KeyRange:
    """Every key that starts with ``prefix``, as one range.

    The prefix must name at least a subspace and a kind, and the range must
    stay inside that kind (a prefix of 0xff bytes past the kind cannot)."""
    trimmed = prefix.rstrip(b"\xff")
    if len(prefix) < 2 or len(trimmed) < 3:
        raise ValueError(f"prefix {prefix.hex()} does not name one kind's keys")
    return prefix, trimmed[:-1] + bytes((trimmed[-1] + 1,))


def check_range(rng: KeyRange) -> str | None:
    """Why ``rng`` is not a valid range delete, or None."""
    start, end = rng
    if len(start) < 2 or len(end) < 2:
        return "a range bound shorter than a subspace and a kind"
    if start[:2] != end[:2]:
        return "a range that crosses kinds or subspaces"
    if start >= end:
        return "an empty range"
    return None


@dataclass(frozen=True)
class ChangeSet:
    base: Head
    puts: tuple[tuple[bytes, bytes], ...] = ()
    deletes: tuple[bytes, ...] = ()
    mints_snapshot: bool = False
    tables: tuple[str, ...] = ()
    changes_made: str = ""
    txn_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    # Last, so positional construction of the fields above keeps working.
    ranges: tuple[KeyRange, ...] = ()

    def __post_init__(self) -> None:
        for rng in self.ranges:
            if (why := check_range(rng)) is not None:
                raise ValueError(f"change set {self.txn_id}: {why}: {rng[0].hex()}..{rng[1].hex()}")

    @property
    def operations(self) -> int:
        """What the change-set cap counts: each put, delete and range is one."""
        return len(self.puts) + len(self.deletes) + len(self.ranges)

    @property
    def result(self) -> Head:
        return self.base.after(self.mints_snapshot)

    @property
    def puts_snapshot_rows(self) -> bool:
        """True when it writes snapshot rows without minting one (an index
        taking a catalog id bumps the head snapshot's ``next_catalog_id``):
        a DuckLake commit made on the old row would hand the same id out."""
        return any(key[:1] == bytes((Subspace.SNAPSHOT,)) for key, _ in self.puts)

    def keys(self) -> set[bytes]:
        """The keys put or deleted one by one (ranges not included: see ``overlaps``)."""
        return {k for k, _ in self.puts} | set(self.deletes)

    def covers(self, key: bytes) -> bool:
        """True when one of the range deletes includes ``key``."""
        return any(start <= key < end for start, end in self.ranges)

    def overlaps(self, other: ChangeSet) -> bool:
        """True when the two change sets touch a common key: a key both name,
        a key one names inside a range of the other, or two ranges that meet."""
        mine, theirs = self.keys(), other.keys()
        if mine & theirs:
            return True
        if _hits(self.ranges, theirs) or _hits(other.ranges, mine):
            return True
        return any(a < d and c < b for a, b in self.ranges for c, d in other.ranges)

    def rebased(self, base: Head) -> ChangeSet:
        return replace(self, base=base)


def _hits(ranges: tuple[KeyRange, ...], keys: set[bytes]) -> bool:
    if not ranges or not keys:
        return False
    ordered = sorted(keys)
    for start, end in ranges:
        i = bisect.bisect_left(ordered, start)
        if i < len(ordered) and ordered[i] < end:
            return True
    return False


@dataclass(frozen=True)
class KeySelection:
    """The keys a reader asks the log about: some exact keys and every key
    under some prefixes (the records an index names share one)."""

    keys: frozenset[bytes] = frozenset()
    prefixes: tuple[bytes, ...] = ()

    def __contains__(self, key: object) -> bool:
        if key in self.keys:
            return True
        return bool(self.prefixes) and isinstance(key, bytes) and key.startswith(self.prefixes)

    def positions(self, found: list[bytes]) -> list[int]:
        """Where in ``found`` the selected keys are. A slot's keys are checked
        at C speed where they can be (a set of exact keys, disjoint from most
        slots' keys), so a slot that touches none of them costs little more
        than its checksum and its msgpack."""
        keys, prefixes = self.keys, self.prefixes
        if not prefixes:
            if keys.isdisjoint(found):
                return []
            return [i for i, k in enumerate(found) if k in keys]
        return [i for i, k in enumerate(found) if k in keys or k.startswith(prefixes)]


def _digest(seq: int, body: bytes, prev: str | None = None) -> bytes:
    """Version 2's checksum over (seq, body); version 3's over (seq, prev, body)."""
    h = hashlib.blake2b(digest_size=DIGEST_SIZE, person=_PERSON)
    h.update(_SEQ.pack(seq))
    if prev is not None:
        h.update(bytes((len(prev),)) + prev.encode())
    h.update(body)
    return h.digest()


_HEX = frozenset("0123456789abcdef")


def valid_prev(prev: object) -> bool:
    """A chain link: "" (unknown) or a ``slot_digest``, 32 lowercase hex."""
    return type(prev) is str and (prev == "" or (len(prev) == 32 and set(prev) <= _HEX))


def encode_envelope(change_sets: list[ChangeSet], seq: int, prev: str = "") -> bytes:
    """The bytes of slot ``seq``, chained to slot seq-1 by ``prev`` (its
    ``slot_digest``; "" when unknown). The seq and ``prev`` are part of the
    checksummed content, so a committer that moves to a later seq encodes
    again."""
    if seq < 0:
        raise ValueError(f"slot seq {seq} is negative")
    if not valid_prev(prev):
        raise ValueError(f"slot {seq}: {prev!r} is not a slot digest")
    body = values.pack(
        [
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
                [[start, end] for start, end in cs.ranges],
            ]
            for cs in change_sets
        ]
    )
    return values.frame(
        ENVELOPE_KIND, [ENVELOPE_VERSION, [seq, _digest(seq, body, prev), body, prev]]
    )


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


def decode_envelope(data: bytes, seq: int, where: str | None = None) -> list[ChangeSet]:
    """Decode slot ``seq`` (read from the object ``where`` names).

    Every field is type-checked and a version-2 slot must pass its checksum
    and name ``seq``: damage never decodes plausibly, and a slot holding
    another slot's bytes is never taken for an already-folded one."""
    where = where or f"commit log slot {seq}"
    body, width, _prev = _body(data, seq, where)
    return _change_sets(body, width, where, _every_write)


def decode_chained(data: bytes, seq: int, where: str | None = None) -> tuple[list[ChangeSet], str]:
    """``decode_envelope`` and the slot's ``prev``: the digest of slot seq-1
    its writer saw ("" when unknown, and in slots older than version 3)."""
    return decode_envelope(data, seq, where), chain_link(data)


def chain_link(data: bytes) -> str:
    """The ``prev`` of a slot ``decode_envelope`` accepted ("" before version
    3): its outer frame read again, the body's rows not unpacked."""
    version, content = values.unframe(data, ENVELOPE_KIND, "slot envelope")
    return content[3] if version > CHECKSUM_VERSION else ""


def decode_keys(
    data: bytes, seq: int, select: KeySelection, where: str | None = None
) -> list[ChangeSet]:
    """Decode slot ``seq`` for a reader of the ``select`` keys only.

    The checks are ``decode_envelope``'s, every one (checksum, seq, the type
    of every field and value), so a slot this refuses is one a replay
    refuses; but each change set keeps only the puts and deletes of the
    selected keys (and all its ranges, few and small), so the rest of the
    slot is never built into change sets nor held. What comes back is a
    view for that reader, never a change set to apply to a catalog."""
    where = where or f"commit log slot {seq}"
    body, width, _prev = _body(data, seq, where)
    return _change_sets(body, width, where, select.positions)


def _body(data: bytes, seq: int, where: str) -> tuple[Any, int, str]:
    """The unpacked body of a slot, checked, the width of its change sets and
    its chain link (``prev``; "" before version 3)."""
    try:
        payload = values.unframe(data, ENVELOPE_KIND, where)
    except CorruptionError as exc:
        text = str(exc)
        raise CorruptionError(text if text.startswith(where) else f"{where}: {text}") from None
    if type(payload) is not list or len(payload) != 2:
        raise CorruptionError(f"{where}: malformed envelope")
    version, content = payload
    if type(version) is not int or version < LEGACY_VERSION:
        raise CorruptionError(f"{where}: envelope version {version!r} is not a known version")
    if version > ENVELOPE_VERSION:
        raise FormatError(
            f"{where}: envelope version {version} is newer than this slatelake reads "
            f"(up to {ENVELOPE_VERSION}); upgrade slatelake to read this lake"
        )
    if version == LEGACY_VERSION:
        return content, 9, ""
    fields = 3 if version == CHECKSUM_VERSION else 4
    if type(content) is not list or len(content) != fields:
        raise CorruptionError(f"{where}: malformed version-{version} envelope")
    named, digest, body = content[:3]
    prev = content[3] if version > CHECKSUM_VERSION else None
    _typed(named, int, "seq", where)
    _typed(digest, bytes, "checksum", where)
    _typed(body, bytes, "body", where)
    if prev is not None and not valid_prev(prev):
        raise CorruptionError(f"{where}: envelope field prev is not a slot digest")
    if not 0 <= named < 1 << 64 or digest != _digest(named, body, prev):
        raise CorruptionError(
            f"{where}: checksum mismatch: the slot's bytes changed after it was written"
        )
    if named != seq:
        raise CorruptionError(
            f"{where}: holds the envelope of slot {named}, not slot {seq} (a copy of "
            "another slot); refusing to read it"
        )
    try:
        rows = values.unpack(body)
    except CorruptionError as exc:
        raise CorruptionError(f"{where}: {exc}") from None
    return rows, 10, prev or ""


# Which of a change set's keys (put keys, then delete keys) a decode keeps: by
# index, or None for every one.
Keep = Callable[[list[bytes]], list[int] | None]


def _every_write(keys: list[bytes]) -> None:
    return None


def _change_sets(body: Any, width: int, where: str, keep: Keep) -> list[ChangeSet]:
    if type(body) is not list:
        raise CorruptionError(f"{where}: malformed envelope body")
    out = []
    for item in body:
        if type(item) is not list or len(item) != width:
            raise CorruptionError(f"{where}: malformed change set")
        txn, snap, seq, mints, tables, changes, pkeys, pvals, dels = item[:9]
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
        ranges = _ranges(item[9], where) if width > 9 else ()
        kept_puts, kept_dels = keep(pkeys), keep(dels)
        out.append(
            ChangeSet(
                base=Head(snap, seq),
                puts=tuple(zip(pkeys, pvals, strict=True))
                if kept_puts is None
                else tuple((pkeys[i], pvals[i]) for i in kept_puts),
                deletes=tuple(dels) if kept_dels is None else tuple(dels[i] for i in kept_dels),
                mints_snapshot=mints,
                tables=tuple(tables),
                changes_made=changes,
                txn_id=txn,
                ranges=ranges,
            )
        )
    return out


def _ranges(value: object, where: str) -> tuple[KeyRange, ...]:
    _typed_list(value, list, "ranges", where)
    out = []
    for pair in value:  # type: ignore[union-attr]
        _typed_list(pair, bytes, "range", where)
        if len(pair) != 2:
            raise CorruptionError(f"{where}: a range is not a (start, end) pair")
        rng = (pair[0], pair[1])
        if (why := check_range(rng)) is not None:
            raise CorruptionError(f"{where}: {why}")
        out.append(rng)
    return tuple(out)
