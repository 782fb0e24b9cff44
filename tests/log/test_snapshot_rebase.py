"""A snapshot commit rebases past head-preserving winners that wrote no
catalog row, and never past another snapshot or a row write."""

from __future__ import annotations

from pathlib import Path

import pytest

from slatelake.errors import ConflictError
from slatelake.log.changeset import ChangeSet, Head, encode_envelope
from slatelake.log.committer import Committer
from slatelake.log.slots import SlotLog
from slatelake.store.keys import Subspace, encode_key
from slatelake.store.location import LakeLocation

pytestmark = pytest.mark.fast

BASE = Head(3, 7)
STATUS = encode_key(Subspace.SYS, 0x04)
ROW = encode_key(Subspace.CURRENT, 0x10, 1)
SNAPSHOT_ROW = encode_key(Subspace.SNAPSHOT, 0x01, 4)


def _log(tmp_path: Path) -> SlotLog:
    return SlotLog(LakeLocation.parse((tmp_path / "lake").as_uri()))


def _winner(log: SlotLog, cs: ChangeSet) -> None:
    assert log.try_write(1, encode_envelope([cs], 1))


def _snapshot() -> ChangeSet:
    return ChangeSet(base=BASE, puts=((SNAPSHOT_ROW, b"s"),), mints_snapshot=True)


def test_snapshot_commit_rebases_past_a_status_record(tmp_path: Path) -> None:
    log = _log(tmp_path)
    _winner(log, ChangeSet(base=BASE, puts=((STATUS, b"window"),)))
    committed = Committer(log, backoff_s=0).commit(_snapshot(), 1)
    assert committed.seq == 2
    assert committed.head == Head(4, 9)  # one snapshot on top of the status record's batch


def test_snapshot_commit_rebases_past_a_sweep_that_only_deletes(tmp_path: Path) -> None:
    log = _log(tmp_path)
    _winner(log, ChangeSet(base=BASE, deletes=(ROW,)))
    assert Committer(log, backoff_s=0).commit(_snapshot(), 1).seq == 2


def test_snapshot_commit_never_rebases_past_another_snapshot(tmp_path: Path) -> None:
    log = _log(tmp_path)
    _winner(log, ChangeSet(base=BASE, puts=((ROW, b"other"),), mints_snapshot=True))
    with pytest.raises(ConflictError, match="slot 1 was taken"):
        Committer(log, backoff_s=0).commit(_snapshot(), 1)


def test_snapshot_commit_rebases_past_an_expiry_that_writes_rows(tmp_path: Path) -> None:
    log = _log(tmp_path)
    _winner(log, ChangeSet(base=BASE, puts=((ROW, b"scheduled for deletion"),)))
    assert Committer(log, backoff_s=0).commit(_snapshot(), 1).seq == 2


def test_snapshot_commit_never_rebases_past_a_head_snapshot_row_write(tmp_path: Path) -> None:
    log = _log(tmp_path)
    head_row = encode_key(Subspace.SNAPSHOT, 0x01, 3)
    _winner(log, ChangeSet(base=BASE, puts=((head_row, b"an index took a catalog id"),)))
    with pytest.raises(ConflictError):
        Committer(log, backoff_s=0).commit(_snapshot(), 1)
