"""Reader pins: a session keeps the snapshot it reads from expiry and cleanup.

A pin is written into the session's reader lease (log/leases.py), so it
lives as long as the lease: the process, renewed by the lease's heartbeat,
and no longer than one lease lifetime after a kill -9.

Why the pin cannot be lost to an expiry already under way: every commit
that ends snapshots reads the live leases after taking the commit lock and
is refused for a pinned one (commit_flow.py). A pinner writes its lease
first, then looks at the log's head. An expiry that read the leases before
the pin landed had taken the lock before that too, so the pinner finds
either the lock still standing (and waits for it to go), or the snapshot
already gone (and the pin is refused). Once neither is true, no commit that
missed the pin can still land.

A pin also keeps the files it was read through, not only the files its
snapshot reads at the head: a merge rewrites a snapshot's files into one
that still serves it, and a query planned on the session's copy before the
merge (a lazy relation, ``session.con``) reads the old ones. So the files
the pinned snapshots read in the session's copy are recorded in
``pins/<reader id>`` before the pin is written and again after every
refresh that changed them; the delete boundary keeps them while the lease
lives (log/leases.py).
"""

from __future__ import annotations

import getpass
import os
import socket
import time
from collections.abc import Iterable
from typing import Any, Protocol

from slatelake.catalog.commit_lock import LOCK_KEY
from slatelake.catalog.lake import Lake
from slatelake.ducklake.catalog_files import files_at
from slatelake.ducklake.sql import literal
from slatelake.errors import CommitLockBusyError, MisconfigurationError, NotFoundError
from slatelake.log.leases import Pin, now_us


class Session(Protocol):
    """What pinning needs of a session (ducklake/session.py's)."""

    url: str
    alias: str
    con: Any
    lake: Lake
    state: Any

    @property
    def in_transaction(self) -> bool: ...

    def refresh(self) -> None: ...

    def snapshots_present(self, ids: Iterable[int]) -> set[int]: ...


# How long a pinner waits for a commit lock it saw to go before giving up;
# an expiry holds the lock for one DuckLake call.
LOCK_WAIT_S = 120.0


def owner() -> str:
    """Who pins, in words: user@host pid N."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()} pid {os.getpid()}"


def check_snapshot(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
        raise MisconfigurationError(
            f"snapshot {value!r}: expected a snapshot id, an integer >= 0 (None: the one read)"
        )
    return value


def reading(session: Session) -> int:
    """The snapshot the session reads now (its pinned version, else the head)."""
    con = session.con.cursor()
    try:
        row = con.execute(
            f"SELECT id FROM ducklake_current_snapshot({literal(session.alias)})"
        ).fetchone()
    finally:
        con.close()
    if row is None or row[0] is None:
        raise NotFoundError(f"{session.url} has no snapshot to pin")
    return int(row[0])


def pin(session: Session, snapshot: object = None, onward: bool = False) -> int:
    """Pin ``snapshot`` (None: the one the session reads); returns its id.
    NotFoundError when the snapshot is not (or no longer) in the catalog."""
    if session.in_transaction:
        raise MisconfigurationError("pin outside a transaction: a pin is written at once")
    wanted = reading(session) if snapshot is None else check_snapshot(snapshot)
    lease = session.lake.lease
    if any(p.snapshot_id == wanted and p.onward == onward for p in lease.pins):
        return wanted
    added = Pin(wanted, bool(onward), now_us(), owner())
    record_files(session, (*lease.pins, added))  # before the pin can be seen
    lease.set_pins((*lease.pins, added), session.state.last_seq)
    try:
        _settle(session)  # a refresh that moved the copy records its files (Session.refresh)
        if wanted not in session.snapshots_present([wanted]):
            raise NotFoundError(
                f"snapshot {wanted} is not in the catalog of {session.url} (expired, or not made "
                "yet); nothing was pinned"
            )
    except BaseException:
        lease.set_pins(tuple(p for p in lease.pins if p is not added), session.state.last_seq)
        raise
    return wanted


def unpin(session: Session, snapshot: object = None) -> int:
    """Drop the session's pins on ``snapshot`` (None: all); how many went."""
    lease = session.lake.lease
    gone = check_snapshot(snapshot) if snapshot is not None else None
    kept = tuple(p for p in lease.pins if gone is not None and p.snapshot_id != gone)
    dropped = len(lease.pins) - len(kept)
    if dropped:
        lease.set_pins(kept, session.state.last_seq)
    return dropped


def record_files(session: Session, pins: tuple[Pin, ...] | None = None) -> None:
    """Record the files ``pins`` (default: the session's) read in the
    session's copy of the catalog; one PUT when they grew, none otherwise."""
    lease = session.lake.lease
    held = lease.pins if pins is None else pins
    if not held:
        return
    con = session.con.cursor()
    try:
        paths: list[str] = []
        for pin in held:
            paths += files_at(con, pin.snapshot_id, onward=pin.onward)
    finally:
        con.close()
    lease.record_pin_files(paths)


def _settle(session: Session) -> None:
    """Bring the session to the head, and wait out a commit lock standing
    there: its holder may have read the leases before this pin landed."""
    session.refresh()
    seen = session.lake.read_sys(session.state, LOCK_KEY)
    deadline = time.monotonic() + LOCK_WAIT_S
    wait = 0.01
    while seen is not None:
        if time.monotonic() > deadline:
            raise CommitLockBusyError(
                f"the commit lock of {session.url} stayed taken for {LOCK_WAIT_S:.0f} s while "
                "pinning; nothing was pinned, try again"
            )
        time.sleep(wait)
        wait = min(wait * 2, 0.2)
        session.refresh()
        now = session.lake.read_sys(session.state, LOCK_KEY)
        if now != seen:
            return  # released, or taken anew after the pin landed (that taker sees it)


__all__ = ["LOCK_WAIT_S", "owner", "pin", "reading", "record_files", "unpin"]
