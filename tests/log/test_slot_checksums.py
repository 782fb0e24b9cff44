"""Damaged commit-log slots are refused by every reader, naming the slot.

A slot carries a checksum over its payload and names its own seq (envelope
version 2). A flipped byte, a slot overwritten with a copy of the previous
one and a truncated slot each raise CorruptionError naming the slot's object
from replay (materialize), from ``SlotLog.read`` and from the folder, and
nothing of the damaged slot is ever applied: the fold cursor stays where it
was and the store holds none of its rows. Slots an older release wrote
(version 1, no checksum) are still replayed and folded; a newer version is
refused, saying to upgrade.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from slatelake.catalog.changes import build_change_set
from slatelake.catalog.folder import Folder
from slatelake.catalog.lake import Lake
from slatelake.catalog.state import SYS_FOLD, decode_fold
from slatelake.errors import CorruptionError, FormatError
from slatelake.log.changeset import ENVELOPE_KIND, ENVELOPE_VERSION, LEGACY_VERSION, ChangeSet
from slatelake.store import values
from slatelake.store.keys import Subspace
from slatelake.store.location import LakeLocation
from tests.catalog.helpers import commit_inserts
from tests.catalog.synthetic import commit_changes
from tests.log.test_envelope import body_row

DAMAGED = 3  # the newest of three slots


def _flip_a_byte(slot: bytes, previous: bytes) -> bytes:
    """``t1/f3.parquet`` becomes ``t1/f3.Parquet``: still valid msgpack, so
    without a checksum the slot decodes plausibly (a different file path)."""
    at = slot.rindex(b"parquet")
    return slot[:at] + bytes((slot[at] ^ 0x20,)) + slot[at + 1 :]


def _copy_of_previous(slot: bytes, previous: bytes) -> bytes:
    return previous


def _truncated(slot: bytes, previous: bytes) -> bytes:
    return slot[: len(slot) // 2]


DAMAGE: dict[str, Callable[[bytes, bytes], bytes]] = {
    "flipped-byte": _flip_a_byte,
    "copy-of-previous-slot": _copy_of_previous,
    "truncated": _truncated,
}


@pytest.fixture(params=list(DAMAGE))
def damaged(request: pytest.FixtureRequest, shared_lake_url: str) -> tuple[str, str]:
    """A lake of three slots whose newest was damaged in place; (url, slot path)."""
    url = shared_lake_url
    Lake.create(url).close()
    commit_inserts(url, DAMAGED, 1)
    with Lake.open(url, read_only=True) as lake:
        slot = lake.log.read_raw(DAMAGED)
        previous = lake.log.read_raw(DAMAGED - 1)
        assert slot is not None and previous is not None
        bad = DAMAGE[request.param](slot, previous)
        assert bad != slot
        lake.log.client.put(lake.log.path(DAMAGED), bad)
        return url, f"{lake.location.url}/commits/{DAMAGED:020d}"


def test_damaged_slot_is_refused_by_replay_naming_the_object(damaged: tuple[str, str]) -> None:
    url, name = damaged
    with Lake.open(url, read_only=True) as lake, pytest.raises(CorruptionError) as info:
        lake.materialize()
    assert name in str(info.value)


def test_damaged_slot_is_refused_by_a_direct_read_naming_the_object(
    damaged: tuple[str, str],
) -> None:
    url, name = damaged
    with Lake.open(url, read_only=True) as lake:
        assert lake.log.read(DAMAGED - 1) is not None  # the slot before it is intact
        with pytest.raises(CorruptionError) as info:
            lake.log.read(DAMAGED)
    assert name in str(info.value)


def test_damaged_slot_is_refused_by_the_folder_and_never_folded(damaged: tuple[str, str]) -> None:
    url, name = damaged
    folder = Folder(LakeLocation.parse(url), margin_s=0)
    try:
        with pytest.raises(CorruptionError) as info:
            folder.fold_once()
        assert name in str(info.value)
        assert folder.seq == 0
        assert decode_fold(folder.writer.get(SYS_FOLD))[0] == 0
        rows = [k for k, _ in folder.writer.scan_prefix(bytes((Subspace.CURRENT,)))]
        assert rows == [], "rows of the damaged log reached the store"
        # The slots are all still there: nothing was truncated past the damage.
        assert [s.seq for s in folder.log.list_after(0)] == [1, 2, 3]
    finally:
        folder.close()


def _legacy_slot(cs: ChangeSet) -> bytes:
    """Slot bytes as a release before checksums wrote them (envelope version 1)."""
    return values.frame(ENVELOPE_KIND, [LEGACY_VERSION, [body_row(cs, LEGACY_VERSION)]])


def test_a_version_1_slot_from_an_older_release_is_replayed_and_folded(
    shared_lake_url: str,
) -> None:
    url = shared_lake_url
    Lake.create(url).close()
    commit_inserts(url, 1, 1)
    with Lake.open(url) as lake:
        state = lake.materialize()
        cs = build_change_set(state, commit_changes(state, 1), mints_snapshot=True)
        assert lake.log.try_write(2, _legacy_slot(cs))
        state.apply(cs, 2)
    with Lake.open(url, read_only=True) as reader:
        assert reader.materialize().same_rows(state)
    folder = Folder(LakeLocation.parse(url), margin_s=0)
    try:
        assert folder.fold_once(truncate=False).fold_seq == 2
    finally:
        folder.close()
    with Lake.open(url, read_only=True) as reader:
        assert reader.materialize().same_rows(state)


def test_a_slot_of_a_newer_envelope_version_is_refused_saying_to_upgrade(
    shared_lake_url: str,
) -> None:
    url = shared_lake_url
    Lake.create(url).close()
    with Lake.open(url) as lake:
        future = values.frame(ENVELOPE_KIND, [ENVELOPE_VERSION + 1, [1, b"", b""]])
        assert lake.log.try_write(1, future)
        with pytest.raises(FormatError, match=r"commits/0+1\).*upgrade slatelake"):
            lake.materialize()
