"""Single flight: at most one pass per lake, in a process and across processes.

In a process, a lock per lake URL. Across processes (two Lambda invocations
can overlap), a lease in the bucket built only on create-if-absent:
``maintenance/lease-<generation>`` objects, the highest generation holding
the lease until its expiry. Taking a free or stale lease means creating the
next generation; the object store lets exactly one taker win. Renewal is the
holder creating the next generation itself.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass

from slatelake.errors import SlatelakeError
from slatelake.store.location import LakeLocation
from slatelake.store.objects import ObjectClient

LEASE_DIR = "maintenance"
DEFAULT_TTL_S = 900.0
_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


class AlreadyRunningError(SlatelakeError):
    """Another pass holds this lake's maintenance lease."""

    retryable = True


def process_lock(url: str) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(url, threading.Lock())


@dataclass(frozen=True)
class Holder:
    generation: int
    owner: str
    expires_at: float


class PassLease:
    def __init__(
        self,
        location: LakeLocation,
        ttl_s: float | None = None,
        client: ObjectClient | None = None,
    ) -> None:
        self.client = client if client is not None else ObjectClient(location)
        self.prefix = location.path(LEASE_DIR) + "/"
        self.ttl_s = DEFAULT_TTL_S if ttl_s is None else ttl_s
        self.owner = uuid.uuid4().hex
        self.generation: int | None = None
        self._written_at = 0.0

    def _path(self, generation: int) -> str:
        return f"{self.prefix}lease-{generation:020d}"

    def current(self) -> Holder | None:
        paths = sorted(
            i.path
            for i in self.client.list(self.prefix)
            if i.path[len(self.prefix) :].startswith("lease-")
        )
        if not paths:
            return None
        raw = self.client.get(paths[-1])
        generation = int(paths[-1].rsplit("-", 1)[1])
        if raw is None:
            return Holder(generation, "", 0.0)
        try:
            doc = json.loads(raw)
            return Holder(generation, str(doc["owner"]), float(doc["expires_at"]))
        except (ValueError, KeyError, TypeError):
            return Holder(generation, "", 0.0)  # unreadable: treat as expired

    def try_acquire(self) -> bool:
        holder = self.current()
        if holder is not None and holder.owner != self.owner and holder.expires_at > time.time():
            return False
        generation = 1 if holder is None else holder.generation + 1
        body = json.dumps({"owner": self.owner, "expires_at": time.time() + self.ttl_s})
        if not self.client.put_if_absent(self._path(generation), body.encode()):
            return False
        self.generation = generation
        self._written_at = time.monotonic()
        if holder is not None:
            self.client.delete(self._path(holder.generation))
        return True

    def acquire(self, wait_s: float = 0.0, poll_s: float = 0.5) -> None:
        deadline = time.monotonic() + wait_s
        while not self.try_acquire():
            if time.monotonic() >= deadline:
                holder = self.current()
                raise AlreadyRunningError(
                    "maintenance already running on this lake"
                    + (
                        f" (lease generation {holder.generation}, owner {holder.owner[:8]})"
                        if holder
                        else ""
                    )
                    + "; retry later"
                )
            time.sleep(poll_s)

    def renew(self) -> None:
        if self.generation is not None:
            self.try_acquire()

    def renew_if_due(self) -> None:
        """Extend a held lease once a third of its life is gone, so a pass
        longer than the TTL keeps it; cheap to call at every boundary."""
        if self.generation is not None and time.monotonic() - self._written_at > self.ttl_s / 3:
            self.renew()

    def release(self) -> None:
        if self.generation is not None:
            holder = self.current()
            if holder is not None and holder.owner == self.owner:
                self.client.delete(self._path(holder.generation))
            self.generation = None
