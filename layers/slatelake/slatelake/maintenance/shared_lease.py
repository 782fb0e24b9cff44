"""One pass's lease held by several processes at once: a fanned-out pass.

A fanned-out pass (fanout.py) takes the pass lease in its plan and gives it
back in its finish; its table batches run in other processes (Step
Functions' Map items, ``maintain --parallel`` workers) that act under the
same lease. They share its owner token, so every record they write is the
run's, and a commit lock any of them takes names the one lease
(``PassLease.ref``), dying with it.

Co-holders race to write the next generation as the single owner's
heartbeat never does. A co-holder that loses that race to a record of the
same owner, still held, takes the newer generation as its own and goes on;
any other record (released, broken, another owner's) means the lease is
lost, exactly as for a single owner. A co-holder that joins finds the run's
record held, or refuses with ``LeaseLostError`` before doing anything: an
execution whose lease lapsed (its items stalled past the TTL) must not act
beside the pass that took the lease over.
"""

from __future__ import annotations

import time

from slatelake.errors import LeaseLostError
from slatelake.maintenance.flight import HELD, PassLease
from slatelake.store.location import LakeLocation
from slatelake.store.objects import ObjectClient

# How often a renewal re-reads after losing the race to a co-holder's record.
_CO_ATTEMPTS = 5


class SharedLease(PassLease):
    """The pass lease, held by one run's plan, batches and finish alike."""

    @classmethod
    def join(
        cls,
        location: LakeLocation,
        owner: str,
        run_id: int | None,
        client: ObjectClient | None = None,
    ) -> SharedLease:
        """Act under the lease ``owner`` holds: its newest record must be
        that owner's, held and not expired. LeaseLostError otherwise."""
        lease = cls(location, client=client)
        lease.owner, lease.run_id = owner, run_id
        record = lease.current()
        if record is None or record.owner != owner or not record.held():
            now = time.time()
            what = "no lease record" if record is None else record.describe(now)
            raise LeaseLostError(
                f"the fanned-out pass's lease (owner {owner[:8]}) is no longer held ({what}); "
                "its run stops here and the next pass records it failed"
            )
        lease.generation, lease._expires_at = record.generation, record.expires_at
        lease._wrote = True  # the finish gives back what the plan took
        return lease

    def renew(self) -> bool:
        """Write the next generation; a co-holder's newer record of this
        run counts as renewed. False (``lost`` set) on any other record."""
        with self._lock:
            if self.generation is None or self._lost is not None:
                return False
            for _ in range(_CO_ATTEMPTS):
                generation = self.generation + 1
                expires_at = time.time() + self.ttl_s
                if self._claim(generation, self._record(HELD, expires_at)):
                    self.generation, self._expires_at = generation, expires_at
                    return True
                record = self.current()
                if record is None or record.owner != self.owner or not record.held():
                    what = "" if record is None else f" ({record.describe()})"
                    self._lost = f"another process wrote lease generation {generation}{what}"
                    return False
                # a co-holder renewed first: the lease stands until its expiry
                self.generation, self._expires_at = record.generation, record.expires_at
            return True

    def detach(self) -> None:
        """Stop beating without giving the lease back: the run's other
        phases still hold it (the finish releases it)."""
        self.stop_heartbeat()
