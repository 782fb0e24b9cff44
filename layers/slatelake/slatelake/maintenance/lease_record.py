"""The pass lease's record: what one generation says, and how it is read.

Kept apart from the lease's rules (``flight.py``) so both stay short. A
record that does not decode is ``unreadable`` and counts as free; its
owner, state and expiry are what every taker compares. A pass's records
also say which run holds the lease and the step it was at (``run_id``,
``step``, beaten at each step's start); a ``broken`` record keeps those of
the lease it broke (``broke_run_id``, ``broke_step``, ``broke_heartbeat_at``).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

# A heartbeat older than this many intervals is stale: ``lease break`` may break it.
STALE_BEATS = 3
HELD, RELEASED, BROKEN, UNREADABLE = "held", "released", "broken", "unreadable"
_RECORD_KEYS = frozenset(
    {"owner", "state", "expires_at", "heartbeat_at", "heartbeat_s", "pid", "host"}
)


@dataclass(frozen=True)
class LeaseRecord:
    """The newest lease record. ``state`` is held, released, broken or
    unreadable; only a held record whose expiry is ahead holds the lease."""

    generation: int
    owner: str
    expires_at: float
    state: str = HELD
    heartbeat_at: float = 0.0
    heartbeat_s: float = 0.0
    pid: int | None = None
    host: str = ""
    # What the owner said beside the lease (a holder's fold cursor and when).
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def run_id(self) -> int | None:
        """The run history id of the pass that wrote this record (None: not a
        pass's, or written before its run was recorded)."""
        return _int(self.extra.get("run_id"))

    @property
    def step(self) -> str | None:
        """The step the pass was at when it wrote this record (None: before its first)."""
        step = self.extra.get("step")
        return step if isinstance(step, str) else None

    def held(self, now: float | None = None) -> bool:
        return self.state == HELD and self.expires_at > (time.time() if now is None else now)

    def heartbeat_fresh(self, now: float | None = None) -> bool:
        """Held, and the owner beat within STALE_BEATS intervals (a record
        without a heartbeat, from an older slatelake, is never fresh)."""
        now = time.time() if now is None else now
        return (
            self.held(now)
            and self.heartbeat_s > 0
            and now - self.heartbeat_at < STALE_BEATS * self.heartbeat_s
        )

    def describe(self, now: float | None = None) -> str:
        now = time.time() if now is None else now
        who = f"owner {self.owner[:8] or '?'}"
        if self.pid is not None:
            who += f" (pid {self.pid} on {self.host or '?'})"
        if self.run_id is not None:
            who += f", run {self.run_id}" + (f" at step {self.step}" if self.step else "")
        if self.state != HELD:
            return f"lease generation {self.generation}: {self.state} by {who}"
        beat = "no heartbeat recorded"
        if self.heartbeat_at:
            beat = f"last heartbeat {now - self.heartbeat_at:.1f}s ago"
        left = self.expires_at - now
        expiry = f"expires in {left:.1f}s" if left > 0 else f"expired {-left:.1f}s ago"
        return f"lease generation {self.generation} held by {who}, {beat}, {expiry}"


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def decode_record(generation: int, raw: bytes) -> LeaseRecord:
    try:
        doc = json.loads(raw)
        pid = doc.get("pid")
        return LeaseRecord(
            generation,
            str(doc["owner"]),
            float(doc["expires_at"]),
            state=str(doc.get("state", HELD)),
            heartbeat_at=float(doc.get("heartbeat_at") or 0.0),
            heartbeat_s=float(doc.get("heartbeat_s") or 0.0),
            pid=int(pid) if pid is not None else None,
            host=str(doc.get("host") or ""),
            extra={k: v for k, v in doc.items() if k not in _RECORD_KEYS},
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return LeaseRecord(generation, "", 0.0, state=UNREADABLE)  # counts as free
