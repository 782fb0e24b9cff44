"""One read-modify-write of the lake's sys records, retried on a fresh view.

A policy or hold change, a borrowed-file release and a pass's status record
each read what the lake holds, decide, and write a change set made from that
read. A commit landing in between overlaps it (ConflictError), and the only
sound answer is to read and decide again at the new head. ``build`` does the
reading and deciding once per attempt and returns ``Built``: the change set
and the value the caller reports. So what comes back is always what the
attempt that landed decided, never what a lost attempt had decided.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from slatelake.ducklake.session import Session
from slatelake.errors import ConflictError, OperationLimitError, retry
from slatelake.log.changeset import ChangeSet

T = TypeVar("T")


@dataclass(frozen=True)
class Built(Generic[T]):
    """What one attempt built.

    ``change``: the change set to commit, made on the session's view at
    build time (None: nothing to write, and nothing is committed).
    ``value``: what ``commit_with_retry`` returns when this attempt is the
    one that lands. ``over_limit``: for a plain commit only, called with
    the OperationLimitError when the lake's change-set cap refuses
    ``change``, for a smaller change set to commit in its place (a status
    window without its run history); None lets the error out. Under the
    commit lock the refusal gives the lock back, so a replacement made on
    the old view could land on a head it has not seen: not offered there.
    """

    change: ChangeSet | None
    value: T
    over_limit: Callable[[OperationLimitError], ChangeSet] | None = None


def commit_with_retry(
    session: Session,
    build: Callable[[], Built[T]],
    *,
    attempts: int,
    under_lock: bool = True,
) -> T:
    """Commit what ``build`` makes, re-running it at the new head after each
    ConflictError (at most ``attempts`` builds), and return the value the
    attempt that committed built.

    ``under_lock``: build and commit with the lake's commit lock held
    (``session.commit_under_lock``), so no DuckLake commit lands between
    the checks ``build`` makes against the catalog and the write; the lock
    brings the session to the head. Otherwise the session is refreshed
    before each build and the change set committed plainly (a status
    record, which checks nothing in the catalog and must not wait for the
    lock). Any error but a conflict, from ``build`` or the commit, is raised
    at once; the last conflict is raised when attempts run out.
    """
    if under_lock:
        return retry(lambda: _under_lock(session, build), attempts=attempts, on=ConflictError)
    return retry(lambda: _plain(session, build), attempts=attempts, on=ConflictError)


def _under_lock(session: Session, build: Callable[[], Built[T]]) -> T:
    """One attempt with the commit lock held from the read to the slot."""
    built: Built[T] | None = None

    def change() -> ChangeSet | None:
        nonlocal built
        built = build()
        if built.over_limit is not None:
            raise ValueError("Built.over_limit is for plain commits, not under the commit lock")
        return built.change

    session.commit_under_lock(change)
    if built is None:  # commit_under_lock builds once or raises
        raise AssertionError("commit_under_lock returned without building")
    return built.value


def _plain(session: Session, build: Callable[[], Built[T]]) -> T:
    """One attempt on a freshly refreshed view, committed without the lock."""
    session.refresh()
    built = build()
    if built.change is None:
        return built.value
    try:
        session.commit_change_set(built.change)
    except OperationLimitError as exc:
        if built.over_limit is None:
            raise
        session.commit_change_set(built.over_limit(exc))
    return built.value


__all__ = ["Built", "commit_with_retry"]
