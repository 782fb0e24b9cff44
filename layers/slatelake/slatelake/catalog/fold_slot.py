"""The digest of the slot the store's fold cursor stands on (``sys`` 0x20).

The folder writes it in the WriteBatch that advances ``sys/fold``, so the two
always name the same slot: ``(seq, digest)``, the digest being
``log.slots.slot_digest`` of the slot's bytes. A catalog image records the
digest of the slot it was cut at from here (the slot itself may be truncated
by then), and an open checks an image against the log with it
(``Lake.slot_digest``): an image relabelled as another slot carries the wrong
digest. A lake folded by an older release has no record until its next fold.
A damaged value is CorruptionError naming the key.
"""

from __future__ import annotations

from slatelake.errors import CorruptionError
from slatelake.store import values
from slatelake.store.keys import Subspace, encode_key

SYS_FOLD_SLOT = encode_key(Subspace.SYS, 0x20)
_KIND = 0x20


def encode_fold_slot(seq: int, digest: str) -> bytes:
    return values.frame(_KIND, [seq, digest])


def decode_fold_slot(raw: bytes) -> tuple[int, str]:
    """``(seq, digest hex)``; CorruptionError when damaged."""
    found = values.unframe(raw, _KIND, "sys/fold-slot")
    if (
        type(found) is not list
        or len(found) != 2
        or type(found[0]) is not int
        or type(found[1]) is not str
    ):
        raise CorruptionError(
            f"sys/fold-slot: malformed record {found!r}; the next fold rewrites it"
        )
    return found[0], found[1]
