"""The holder lease under a renewal's lost answer: one holder at a time.

A fold turn (maintenance/fold.py) renews its holder lease by heartbeat. A
renewal whose PUT got no answer and reads back absent is withdrawn
(``PassLease._withdraw``): the generation it tried is created first as a
``released`` record, so the lost write cannot land late and hold. That
record is the newest, so the lease is free from then on: the owner claims
the next generation at once, with create-if-absent, and holds only if it
creates it; when that claim fails too it counts itself lost at once
(``_forfeit``), and its next renewal must never adopt its own released
record as a claim (``_claim`` checks the state, not only the owner).
Otherwise a rival takes the lease while the owner still acts on it, opens
the writer and fences it mid-fold. The pass lease (``maintenance/``)
shares the code.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from slatelake.errors import StoreUnavailableError
from slatelake.maintenance.holder import HolderLease
from slatelake.store.location import LakeLocation
from tests.faults.proxy import FaultProxy, FaultRule

TTL_S = 60.0


@pytest.fixture
def holder_lease(
    moto_endpoint: str, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[LakeLocation, FaultProxy]]:
    """A lake location on moto whose object requests go through the fault proxy."""
    with FaultProxy(upstream=moto_endpoint) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
        monkeypatch.setenv("SLATELAKE_STORE_TIMEOUT_S", "4")
        yield LakeLocation.parse(f"s3://{s3_bucket}/lake"), proxy


def test_a_withdrawn_renewal_claims_the_next_generation_and_keeps_the_lease(
    holder_lease: tuple[LakeLocation, FaultProxy],
) -> None:
    """One renewal PUT lost before it reached the store: the owner keeps
    holding (generation 3, after its own released record at 2), and a
    rival finds the lease taken."""
    location, proxy = holder_lease
    owner = HolderLease(location, ttl_s=TTL_S)
    assert owner.try_acquire() and owner.generation == 1
    proxy.add(FaultRule(method="PUT", prefix="holder/", kind="drop_before", times=1))
    assert owner.renew()
    proxy.clear()
    assert proxy.injected == 1
    assert owner.generation == 3 and owner.lost is None
    rival = HolderLease(location, ttl_s=TTL_S)
    assert not rival.try_acquire()
    owner.release()
    assert rival.try_acquire()


@pytest.mark.parametrize("rival_after", ["the withdrawal", "the next renewal"])
def test_a_renewal_whose_answer_was_lost_never_leaves_two_holders(
    rival_after: str, holder_lease: tuple[LakeLocation, FaultProxy]
) -> None:
    """The renewal and the claim of the next generation both lost (the
    withdrawal between them lands): the owner is lost, and a rival that
    takes the lease is then the only holder."""
    location, proxy = holder_lease
    owner = HolderLease(location, ttl_s=TTL_S)
    assert owner.try_acquire() and owner.generation == 1
    # the 1st lease PUT (the renewal) and the 3rd (the next generation's claim);
    # the 2nd, the withdrawal between them, goes through
    proxy.add(FaultRule(method="PUT", prefix="holder/", kind="drop_before", times=1))
    proxy.add(FaultRule(method="PUT", prefix="holder/", kind="drop_before", nth=2, times=1))
    with pytest.raises(StoreUnavailableError, match="withdrawn"):
        owner.renew()  # the heartbeat's renewal: its PUT got no answer, withdrawn
    proxy.clear()
    assert proxy.injected == 2
    assert owner.lost is not None
    renewed = None
    if rival_after == "the next renewal":
        renewed = owner.renew()  # the heartbeat's next beat
    newest = owner.current()
    rival = HolderLease(location, ttl_s=TTL_S)
    took = rival.try_acquire()
    assert not (took and owner.lost is None), (
        f"two holders: the owner (generation {owner.generation}, renewed: {renewed}) is not "
        f"lost, the newest record was {newest}, and a rival took generation {rival.generation}"
    )
