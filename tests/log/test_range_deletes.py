"""Range deletes in change sets: one operation, and a lost race treats a
range as touching every key inside it.

A range ``[start, end)`` stays inside one kind of one subspace; a prefix
range covers exactly the keys that start with the prefix. The committer
rebases a head-preserving change set past a winner only when neither
touches the other's keys, ranges included, and encodes each attempt for the
seq it is written at.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slatelake.errors import ConflictError
from slatelake.log.changeset import ChangeSet, Head, encode_envelope, prefix_range
from slatelake.log.committer import Committer
from slatelake.log.slots import SlotLog
from slatelake.store.location import LakeLocation

pytestmark = pytest.mark.fast

TABLE = b"\x05\x40" + bytes(8) + b"\x01"  # an inlined table's rows prefix (shortened)
OTHER = b"\x05\x40" + bytes(8) + b"\x02"
BASE = Head(4, 9)


def _key(prefix: bytes, n: int) -> bytes:
    return prefix + n.to_bytes(8, "big")


@settings(max_examples=200, deadline=None)
@given(
    st.binary(min_size=3, max_size=12).filter(lambda p: p[2:].rstrip(b"\xff")),
    st.binary(max_size=14),
)
def test_a_prefix_range_covers_exactly_the_keys_with_the_prefix(prefix: bytes, key: bytes) -> None:
    cs = ChangeSet(base=BASE, ranges=(prefix_range(prefix),))
    assert cs.covers(prefix + key)
    candidate = prefix[:2] + key
    assert cs.covers(candidate) == candidate.startswith(prefix)


def test_a_range_is_one_operation_however_many_keys_it_covers() -> None:
    cs = ChangeSet(base=BASE, deletes=(_key(OTHER, 1),), ranges=(prefix_range(TABLE),))
    assert cs.operations == 2
    assert cs.keys() == {_key(OTHER, 1)}  # point keys only: ranges are seen by overlaps()


@pytest.mark.parametrize("prefix", [b"", b"\x05", b"\x05\x40", b"\x05\x40\xff\xff"])
def test_a_prefix_that_names_no_single_kind_is_refused(prefix: bytes) -> None:
    with pytest.raises(ValueError, match="does not name one kind"):
        prefix_range(prefix)


@pytest.mark.parametrize(
    "rng",
    [(b"\x05\x40b", b"\x05\x40a"), (b"\x05\x40a", b"\x05\x41a"), (b"\x05", b"\x05\x40")],
    ids=["empty", "crosses-kinds", "short"],
)
def test_a_change_set_refuses_a_malformed_range(rng: tuple[bytes, bytes]) -> None:
    with pytest.raises(ValueError, match="range"):
        ChangeSet(base=BASE, ranges=(rng,))


@pytest.mark.parametrize(
    ("mine", "theirs", "overlap"),
    [
        ({"ranges": (prefix_range(TABLE),)}, {"puts": ((_key(TABLE, 7), b"v"),)}, True),
        ({"ranges": (prefix_range(TABLE),)}, {"deletes": (_key(TABLE, 7),)}, True),
        ({"puts": ((_key(TABLE, 7), b"v"),)}, {"ranges": (prefix_range(TABLE),)}, True),
        ({"ranges": (prefix_range(TABLE),)}, {"ranges": ((_key(TABLE, 3), OTHER),)}, True),
        ({"ranges": (prefix_range(TABLE),)}, {"puts": ((_key(OTHER, 7), b"v"),)}, False),
        ({"ranges": (prefix_range(TABLE),)}, {"ranges": (prefix_range(OTHER),)}, False),
        ({"puts": ((_key(TABLE, 1), b"v"),)}, {"deletes": (_key(TABLE, 1),)}, True),
        ({"puts": ((_key(TABLE, 1), b"v"),)}, {"deletes": (_key(TABLE, 2),)}, False),
    ],
)
def test_change_sets_overlap_on_a_key_inside_a_range(
    mine: dict, theirs: dict, overlap: bool
) -> None:
    a, b = ChangeSet(base=BASE, **mine), ChangeSet(base=BASE, **theirs)
    assert a.overlaps(b) is overlap
    assert b.overlaps(a) is overlap


# -- the committer's lost race ----------------------------------------------------------


@pytest.fixture(params=["file", "s3"])
def log(request: pytest.FixtureRequest, tmp_path) -> SlotLog:  # noqa: ANN001
    if request.param == "file":
        return SlotLog(LakeLocation.parse((tmp_path / "lake").as_uri()))
    bucket = request.getfixturevalue("s3_bucket")
    return SlotLog(LakeLocation.parse(f"s3://{bucket}/lake"))


def _winner(log: SlotLog, **fields: object) -> ChangeSet:
    """Another committer's head-preserving change set, already in slot 1."""
    winner = ChangeSet(base=BASE, **fields)  # type: ignore[arg-type]
    assert log.try_write(1, encode_envelope([winner], 1))
    return winner


@pytest.mark.parametrize(
    ("mine", "theirs"),
    [
        ({"puts": ((_key(TABLE, 7), b"mine"),)}, {"ranges": (prefix_range(TABLE),)}),
        ({"ranges": (prefix_range(TABLE),)}, {"puts": ((_key(TABLE, 7), b"theirs"),)}),
    ],
    ids=["my-put-inside-their-range", "my-range-over-their-put"],
)
def test_a_lost_race_against_a_range_over_my_keys_is_a_conflict(
    log: SlotLog, mine: dict, theirs: dict
) -> None:
    _winner(log, **theirs)
    with pytest.raises(ConflictError, match="slot 1: txn .* changed the same keys"):
        Committer(log, backoff_s=0).commit(ChangeSet(base=BASE, **mine), 1)
    assert [s.seq for s in log.list_after(0)] == [1]


def test_a_lost_race_against_a_disjoint_range_rebases_and_is_encoded_for_its_new_seq(
    log: SlotLog,
) -> None:
    winner = _winner(log, ranges=(prefix_range(OTHER),))
    mine = ChangeSet(base=BASE, puts=((_key(TABLE, 7), b"mine"),), ranges=(prefix_range(TABLE),))
    committed = Committer(log, backoff_s=0).commit(mine, 1)
    assert (committed.seq, committed.attempts) == (2, 2)
    assert committed.change_set.base == winner.result
    # Slot 2 names seq 2 (a slot encoded for seq 1 would be refused when read here).
    (read,) = log.read(2) or []
    assert read == committed.change_set and read.ranges == mine.ranges
