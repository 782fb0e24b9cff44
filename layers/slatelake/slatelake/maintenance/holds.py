"""Retention holds, the maintenance half: protect, unprotect and list them;
what expiry leaves out and what the cleanup fail-safe checks.

Holds bind every runner, because they are kept on the lake (``sys/retention_holds``,
catalog/holds.py) and enforced where commits land: a session refuses any
commit that would expire a held snapshot (HeldSnapshotError), whether a pass
or a direct ``ducklake_expire_snapshots`` call made it. The pass subtracts
the holds from what it expires, so it is never refused for them, and
counts what they kept. A hold is placed or removed under the commit lock,
after checking its snapshot is in the catalog at the head.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from slatelake.catalog.holds import (
    HELD_FILES_KEY,
    HELD_FILES_LABEL,
    HOLDS_KEY,
    HOLDS_LABEL,
    Hold,
    check_name,
    check_note,
    decode_held_files,
    decode_holds,
    encode_held_files,
    encode_holds,
    held_snapshots,
)
from slatelake.catalog.lake import Lake
from slatelake.ducklake.catalog_files import files_at
from slatelake.ducklake.session import Session
from slatelake.errors import MisconfigurationError, NotFoundError
from slatelake.log.changeset import ChangeSet
from slatelake.maintenance import history
from slatelake.maintenance.commit_retry import Built, commit_with_retry
from slatelake.store.location import show_input

ATTEMPTS = 3  # head-preserving records landing beside it (status, sweep) can race the slot


@dataclass(frozen=True)
class HoldChange:
    """What ``protect``/``unprotect`` did: the hold, and whether it changed
    anything (protecting a snapshot again under the same name changes nothing)."""

    hold: Hold
    changed: bool


def check_snapshot_id(value: object) -> int:
    """A snapshot id: a non-negative integer (digits only when given as text)."""
    if isinstance(value, bool):
        raise MisconfigurationError(f"snapshot id {show_input(value)}: expected a whole number")
    if isinstance(value, str):
        if not (value.isascii() and value.isdigit()):
            raise MisconfigurationError(
                f"snapshot id {show_input(value)}: expected digits only (e.g. 42)"
            )
        value = int(value)
    if not isinstance(value, int) or value < 0 or value >= 2**63:
        raise MisconfigurationError(f"snapshot id {show_input(value)}: expected 0 or more")
    return value


def holds(session: Session) -> list[Hold]:
    """The holds as of the session's view, by name."""
    return decode_holds(session.lake.read_sys(session.state, HOLDS_KEY))


def holds_at_head(lake: Lake) -> list[Hold]:
    """The holds at the log's head, without loading the catalog."""
    return decode_holds(lake.read_sys_at_head(HOLDS_KEY))


def held_files(session: Session) -> dict[str, list[str]]:
    """Hold name -> the files its snapshot read when it was placed."""
    return decode_held_files(session.lake.read_sys(session.state, HELD_FILES_KEY))


def held(session: Session) -> dict[int, list[str]]:
    """Held snapshot id -> hold names, as of the session's view."""
    return held_snapshots(session.lake.read_sys(session.state, HOLDS_KEY))


def protect(
    session: Session,
    snapshot_id: object,
    name: object,
    note: object = None,
    by: str | None = None,
) -> HoldChange:
    """Hold ``snapshot_id`` under ``name``: expiry keeps it until the hold is
    removed. NotFoundError when the catalog has no such snapshot (expired or
    never made); MisconfigurationError when ``name`` holds another snapshot."""
    snapshot = check_snapshot_id(snapshot_id)
    label, text = check_name(name), check_note(note)

    def build() -> Built[HoldChange]:
        current = holds(session)
        same = next((h for h in current if h.name == label), None)
        if same is not None and same.snapshot_id == snapshot:
            return Built(None, HoldChange(same, changed=False))
        if same is not None:
            raise MisconfigurationError(
                f"a retention hold named {show_input(label)} already protects snapshot "
                f"{same.snapshot_id}; remove it first (slatelake unprotect) or choose another name"
            )
        if snapshot not in session.snapshots_present([snapshot]):
            raise NotFoundError(
                f"snapshot {snapshot} is not in the catalog of {session.url} (expired, or not "
                "made yet); the lake's snapshots() table function lists those there are"
            )
        hold = Hold(label, snapshot, text, time.time_ns() // 1000, by)
        files = held_files(session)
        with session.con.cursor() as con:
            files[label] = files_at(con, snapshot)
        change = _change([*current, hold], files, session, "hold.protect", by, hold)
        return Built(change, HoldChange(hold, changed=True))

    return commit_with_retry(session, build, attempts=ATTEMPTS)


def unprotect(session: Session, name: object, by: str | None = None) -> HoldChange:
    """Remove the hold ``name``; NotFoundError naming the holds there are
    when there is none by that name."""
    label = check_name(name)

    def build() -> Built[HoldChange]:
        current = holds(session)
        gone = next((h for h in current if h.name == label), None)
        if gone is None:
            names = ", ".join(show_input(h.name) for h in current[:10]) or "none"
            raise NotFoundError(
                f"no retention hold named {show_input(label)} on {session.url} "
                f"(holds: {names}); list them with slatelake protected LAKE"
            )
        kept = [h for h in current if h.name != label]
        files = {k: v for k, v in held_files(session).items() if k != label}
        change = _change(kept, files, session, "hold.unprotect", by, gone)
        return Built(change, HoldChange(gone, changed=True))

    return commit_with_retry(session, build, attempts=ATTEMPTS)


def _change(
    new: list[Hold],
    files: dict[str, list[str]],
    session: Session,
    kind: str,
    by: str | None,
    hold: Hold,
) -> ChangeSet:
    """The holds record, their file sets and the audit entry, in one change set."""
    puts, deletes = history.audit_writes(
        lambda key: session.lake.read_sys(session.state, key), kind, by, hold.to_dict()
    )
    return ChangeSet(
        base=session.state.head,
        puts=(
            (HOLDS_KEY, encode_holds(new)),
            (HELD_FILES_KEY, encode_held_files(files)),
            *puts,
        ),
        deletes=tuple(deletes),
        tables=(HOLDS_LABEL, HELD_FILES_LABEL, "sys/audit_log"),
        changes_made=f"retention_holds: {kind} {hold.name}",
    )


def cleanup_blocked(session: Session) -> str | None:
    """Why cleanup and orphan deletion must not run now (None: they may).

    The fail-safe: a held snapshot the catalog no longer has (expired by a
    process that ignores holds), or a file a held snapshot references that is
    scheduled for deletion, means deleting files could take what a hold keeps."""
    by_snapshot = held(session)
    if not by_snapshot:
        return None
    missing = sorted(set(by_snapshot) - session.snapshots_present(by_snapshot))
    if missing:
        named = "; ".join(f"{s} (held by {', '.join(map(repr, by_snapshot[s]))})" for s in missing)
        return (
            f"held snapshots are gone from the catalog: {named}; files they referenced may be "
            "scheduled for deletion, so nothing is deleted until the holds are reviewed"
        )
    doomed = session.held_files_scheduled(sorted(by_snapshot))
    if doomed:
        shown = ", ".join(doomed[:5]) + (f" and {len(doomed) - 5} more" if len(doomed) > 5 else "")
        return (
            f"{len(doomed)} files that held snapshots reference are scheduled for deletion "
            f"({shown}); nothing is deleted until the catalog is repaired"
        )
    return None
