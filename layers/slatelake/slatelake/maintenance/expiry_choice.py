"""Which snapshots a pass expires: what the options select, less what
thinning, retention holds and reader pins keep.

DuckLake is always handed an explicit versions list, never a window, so
every keeper is subtracted before DuckLake sees the list. The pass's step
and its dry run read the same choice, each keeper counted apart (a snapshot
two keepers keep counts for the first: thinning, holds, pins).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from slatelake.ducklake.session import Session
from slatelake.ducklake.sql import literal
from slatelake.log.leases import pinned
from slatelake.maintenance import holds
from slatelake.maintenance.option_values import Value, Versions
from slatelake.maintenance.thinning import Keep, kept


@dataclass(frozen=True)
class ExpiryChoice:
    expire: list[int]  # sorted
    kept_by_thinning: list[int]
    kept_by_holds: list[int]
    kept_by_pins: list[int]

    def counts(self) -> dict[str, int]:
        """The pass report's counts of what each keeper kept."""
        return {
            "snapshots_kept_by_thinning": len(self.kept_by_thinning),
            "snapshots_kept_by_holds": len(self.kept_by_holds),
            "snapshots_kept_by_pins": len(self.kept_by_pins),
        }


_WORDS = {
    "snapshots_kept_by_thinning": "thinning",
    "snapshots_kept_by_holds": "retention holds",
    "snapshots_kept_by_pins": "reader pins",
}


def kept_words(counts: dict[str, int]) -> str:
    """'; 3 kept by thinning, 1 kept by retention holds' or ''."""
    parts = [f"{n} kept by {_WORDS[k]}" for k, n in counts.items() if n and k in _WORDS]
    return "; " + ", ".join(parts) if parts else ""


@dataclass(frozen=True)
class Keepers:
    """What holds and reader pins keep, read once and re-read after a race."""

    held: dict[int, list[str]]
    exact_pins: dict[int, list[str]]
    onward_pin: int | None

    @classmethod
    def read(cls, session: Session) -> Keepers:
        exact, onward = pinned(session.lake.lease.book.live(prune=False))
        return cls(holds.held(session), exact, onward)

    def pins(self, snapshot: int) -> bool:
        return snapshot in self.exact_pins or (
            self.onward_pin is not None and snapshot >= self.onward_pin
        )


def snapshot_times(session: Session) -> list[tuple[int, datetime]]:
    """Every snapshot of the catalog with its time, on a cursor of its own."""
    con = session.con.cursor()
    try:
        return con.execute(
            f"SELECT snapshot_id, snapshot_time FROM ducklake_snapshots({literal(session.alias)}) "
            "ORDER BY snapshot_id"
        ).fetchall()
    finally:
        con.close()


def choose(
    session: Session,
    params: dict[str, Value],
    candidates: Callable[[dict[str, Value]], list[int]],
) -> ExpiryChoice:
    """The choice for one pass. ``candidates``: DuckLake's own dry run for
    the options left once ``keep`` and ``versions`` are taken out. ``keep``
    alone (no window, no versions) selects every snapshot but the newest."""
    args = dict(params)
    keep = args.pop("keep", None)
    given = args.pop("versions", None)
    times = snapshot_times(session) if isinstance(keep, Keep) else []
    if isinstance(given, Versions):
        chosen = list(given.ids)
    elif isinstance(keep, Keep) and "older_than" not in args:
        chosen = [s for s, _ in times[:-1]]
    else:
        chosen = candidates(args)
    thin = kept(keep, times) if isinstance(keep, Keep) else set()
    found = Keepers.read(session)
    out: dict[str, list[int]] = {"expire": [], "thin": [], "held": [], "pinned": []}
    for snapshot in sorted(set(chosen)):
        if snapshot in thin:
            out["thin"].append(snapshot)
        elif snapshot in found.held:
            out["held"].append(snapshot)
        elif found.pins(snapshot):
            out["pinned"].append(snapshot)
        else:
            out["expire"].append(snapshot)
    return ExpiryChoice(out["expire"], out["thin"], out["held"], out["pinned"])


__all__ = ["ExpiryChoice", "Keepers", "choose", "kept_words", "snapshot_times"]
