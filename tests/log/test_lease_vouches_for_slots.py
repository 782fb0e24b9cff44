"""A reader lease vouches that a slot its holder wins cannot lie below the
truncation mark, so the commit skips reading the mark; it vouches only for a
slot absent at a look made while the lease was already live, and only while
the lease has the clock-skew allowance left. Otherwise the mark is read, and
a slot below it is refused, as before.
"""

from __future__ import annotations

import time

import pytest

from slatelake.catalog import lake as lake_module
from slatelake.catalog.lake import Lake
from slatelake.errors import ConflictError
from slatelake.log.leases import ADVANCE_STEP, CLOCK_SKEW_S, LeaseBook, ReaderLease
from slatelake.log.slots import SlotLog
from slatelake.store.location import LakeLocation
from tests.catalog.helpers import commit_inserts, fold_all
from tests.catalog.synthetic import commit_changes


def _lease(lake_url: str, ttl_s: float) -> ReaderLease:
    return ReaderLease(LeaseBook(LakeLocation.parse(lake_url)), ttl_s=ttl_s)


def test_a_lease_vouches_only_for_looks_made_while_it_was_live(lake_url: str) -> None:
    before = time.monotonic()
    lease = _lease(lake_url, ttl_s=600)
    assert not lease.pins_since(before)  # no record written yet
    lease.hold(1)
    after = time.monotonic()
    assert lease.pins_since(after)
    assert not lease.pins_since(before)  # a look made before the record existed


def test_a_lease_within_the_clock_skew_allowance_of_its_end_vouches_for_nothing(
    lake_url: str,
) -> None:
    lease = _lease(lake_url, ttl_s=CLOCK_SKEW_S - 1)
    lease.hold(1)
    assert not lease.pins_since(time.monotonic())


def test_a_lease_renewed_in_time_keeps_vouching_for_looks_made_before_the_renewal(
    lake_url: str,
) -> None:
    lease = _lease(lake_url, ttl_s=600)
    lease.hold(1)
    look = time.monotonic()
    lease.hold(1 + ADVANCE_STEP)  # rewritten, the old record still live: no gap
    assert lease.pins_since(look)
    lease.hold(0)  # a lower fold: the record pinned less than this one until now
    assert not lease.pins_since(look)
    assert lease.pins_since(time.monotonic())


def test_a_commit_its_lease_pins_lands_without_reading_the_mark(
    lake_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    Lake.create(lake_url).close()
    commit_inserts(lake_url, 2, 1)
    with Lake.open(lake_url) as lake:
        state = lake.materialize()

        def unread() -> int:
            raise AssertionError("the truncation mark was read")

        monkeypatch.setattr(SlotLog, "truncated_upto", lambda self: unread())
        committed = lake.commit(state, commit_changes(state, 1), mints_snapshot=True)
        again = lake.commit(state, commit_changes(state, 1), mints_snapshot=True)
        assert (committed.seq, again.seq) == (3, 4)


def test_a_slot_won_long_after_the_look_reads_the_mark(
    lake_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past ``VOUCH_SPAN_S`` a slot written since the look may have been
    folded for the margin: the lease alone does not vouch for it."""
    Lake.create(lake_url).close()
    commit_inserts(lake_url, 2, 1)
    with Lake.open(lake_url) as lake:
        state = lake.materialize()
        reads: list[int] = []
        real = SlotLog.truncated_upto

        def counted(self: SlotLog) -> int:
            reads.append(1)
            return real(self)

        monkeypatch.setattr(SlotLog, "truncated_upto", counted)
        lake.commit(state, commit_changes(state, 1), mints_snapshot=True)
        assert reads == []
        monkeypatch.setattr(lake_module, "VOUCH_SPAN_S", 0.0)
        lake.commit(state, commit_changes(state, 1), mints_snapshot=True)
        assert reads == [1]


def test_a_lease_rewritten_after_it_lapsed_vouches_for_no_earlier_look(lake_url: str) -> None:
    """The attacker's order: a view looks, its lease lapses, the folder
    truncates past the view, the lease is written again. The view's next
    slot is re-created in truncated history; the new lease must not vouch
    for it (it was not live at the look), so the mark is read and the commit
    refused."""
    Lake.create(lake_url).close()
    commit_inserts(lake_url, 2, 1)
    with Lake.open(lake_url) as stale:
        state = stale.materialize()  # a view at slot 2
        stale.lease.release()  # lapsed: no folder honours it
        commit_inserts(lake_url, 3, 1)  # slots 3..5
        fold_all(lake_url)  # slots up to 4 truncated, 5 kept
        stale.lease.hold(state.last_seq)  # written again, after the gap
        with pytest.raises(ConflictError, match="already truncated"):
            stale.commit(state, commit_changes(state, 1), mints_snapshot=True)
        assert stale.log.read(3) is None  # withdrawn


def test_a_commit_whose_lease_ran_out_reads_the_mark_and_is_refused_below_it(
    lake_url: str,
) -> None:
    Lake.create(lake_url).close()
    commit_inserts(lake_url, 2, 1)
    with Lake.open(lake_url) as stale:
        stale.lease.ttl_s = 0.5
        state = stale.materialize()  # a view at slot 2, its lease ending in half a second
        time.sleep(0.6)
        commit_inserts(lake_url, 3, 1)
        fold_all(lake_url)  # the lease has expired: slots up to 4 truncated
        with pytest.raises(ConflictError, match="already truncated"):
            stale.commit(state, commit_changes(state, 1), mints_snapshot=True)
