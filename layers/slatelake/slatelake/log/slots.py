"""Slots: ``commits/<20-digit seq>``, each written once, create-if-absent.

The object store picks exactly one winner per seq. Listing returns seqs in
order; slot names are zero-padded so path order is numeric order.

The truncation mark ``log/truncated`` ({"upto": T}) is how a view tells "no
slot is new" from "the slots it needed were truncated": the folder raises it
to T *before* deleting any slot at or below T, and never lowers it. A slot
found at or below T was re-created after its truncation by a stale committer
(an orphan): no reader applies it and no commit there is acknowledged.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass

from slatelake.errors import CorruptionError
from slatelake.log.changeset import ChangeSet, chain_link, decode_envelope
from slatelake.store.location import COMMITS_DIR, TRUNCATION_MARK, LakeLocation
from slatelake.store.objects import ObjectClient

SEQ_WIDTH = 20
_DIGEST_PERSON = b"slatelake-slotid"


def slot_digest(raw: bytes) -> str:
    """What names one slot's content: BLAKE2b-128 (hex) of the slot object's
    bytes, whatever its envelope version. A catalog image records the digest
    of the slot it was cut at (log/images.py), so an image relabelled as
    another slot does not match the log."""
    return hashlib.blake2b(raw, digest_size=16, person=_DIGEST_PERSON).hexdigest()


@dataclass(frozen=True)
class SlotInfo:
    seq: int
    size: int
    last_modified_us: int


class SlotLog:
    def __init__(self, location: LakeLocation, client: ObjectClient | None = None) -> None:
        self.location = location
        self.client = client if client is not None else ObjectClient(location)
        self.prefix = location.path(COMMITS_DIR) + "/"
        self.mark_path = location.path(TRUNCATION_MARK)

    def path(self, seq: int) -> str:
        return f"{self.prefix}{seq:0{SEQ_WIDTH}d}"

    def url(self, seq: int) -> str:
        """The slot's object as a URL under the lake (what errors name)."""
        return f"{self.location.url}/{COMMITS_DIR}/{seq:0{SEQ_WIDTH}d}"

    def describe(self, seq: int) -> str:
        return f"commit log slot {seq} ({self.url(seq)})"

    def seq_of(self, path: str) -> int:
        name = path[len(self.prefix) :]
        if len(name) != SEQ_WIDTH or not name.isdigit():
            raise CorruptionError(f"unexpected object in the commit log: {path}")
        return int(name)

    def list_after(self, seq: int) -> Iterator[SlotInfo]:
        """Slots with a seq greater than ``seq``, ascending.

        Sorted here: S3 lists in key order, local and memory stores do not.
        """
        offset = self.path(seq) if seq > 0 else None
        found = []
        for info in self.client.list(self.prefix, offset=offset):
            s = self.seq_of(info.path)
            if s > seq:
                found.append(SlotInfo(s, info.size, info.last_modified_us))
        found.sort(key=lambda i: i.seq)
        yield from found

    def try_write(self, seq: int, envelope: bytes) -> bool:
        """True when this write created the slot; AmbiguousWriteError if unknown."""
        return self.client.put_if_absent(self.path(seq), envelope)

    def read_raw(self, seq: int) -> bytes | None:
        return self.client.get(self.path(seq))

    def read(self, seq: int) -> list[ChangeSet] | None:
        """The change sets of slot ``seq`` (None when absent); a damaged slot,
        or one holding another slot's envelope, is CorruptionError naming it."""
        data = self.read_raw(seq)
        return None if data is None else decode_envelope(data, seq, self.describe(seq))

    def read_chained(self, seq: int) -> tuple[list[ChangeSet], str, str] | None:
        """``read``, with the slot's chain link (``prev``) and its own
        ``slot_digest``: what a committer that lost a race links to."""
        data = self.read_raw(seq)
        if data is None:
            return None
        change_sets = decode_envelope(data, seq, self.describe(seq))
        return change_sets, chain_link(data), slot_digest(data)

    def delete(self, seq: int) -> None:
        self.client.delete(self.path(seq))

    def truncated_upto(self) -> int:
        """The highest seq the folder may have truncated; 0 when it never did."""
        raw = self.client.get(self.mark_path)
        if raw is None:
            return 0
        try:
            upto = json.loads(raw)["upto"]
        except (ValueError, KeyError, TypeError):
            upto = None
        if not isinstance(upto, int) or isinstance(upto, bool) or upto < 0:
            raise CorruptionError(
                f"the truncation mark {self.mark_path} is unreadable ({bytes(raw[:64])!r}); "
                "run the folder (`slatelake fold`), which rewrites it at its fold cursor"
            )
        return upto

    def mark_truncated(self, upto: int) -> None:
        """Record that slots up to ``upto`` may be deleted (before deleting them)."""
        self.client.put(self.mark_path, json.dumps({"upto": upto}).encode())
