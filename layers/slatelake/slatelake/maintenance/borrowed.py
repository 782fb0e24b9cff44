"""Borrowed files, the maintenance half: read them, and release them.

An import without ``--copy-data`` records the source catalog's files as
borrowed (``sys/borrowed_files``, catalog/borrowed.py). Every delete the lake
makes asks ``borrowed_files(session).covers(path)`` first and spares what it
covers. ``release_borrowed`` is the only way files leave the record: the
user says the source catalog no longer needs them (it was dropped, or its
files were copied elsewhere). It commits the shrunk record and an audit
entry in one change set under the commit lock, retried as holds are.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from slatelake.catalog.borrowed import (
    BORROWED_KEY,
    BORROWED_LABEL,
    BorrowedFiles,
    decode_borrowed,
    encode_borrowed,
    normalize_path,
)
from slatelake.catalog.lake import Lake
from slatelake.ducklake.session import Session
from slatelake.errors import MisconfigurationError, NotFoundError
from slatelake.log.changeset import ChangeSet
from slatelake.maintenance import history
from slatelake.maintenance.commit_retry import Built, commit_with_retry
from slatelake.store.db import store_exists
from slatelake.store.location import location_of, show_input

ATTEMPTS = 3  # as holds: head-preserving records landing beside it can race the slot
AUDIT_SAMPLE = 10  # paths named in the audit entry; the rest are counted


@dataclass(frozen=True)
class BorrowedRelease:
    """What ``release_borrowed`` did: the paths released, how many remain."""

    lake: str
    released: tuple[str, ...]
    remaining: int

    def to_dict(self) -> dict[str, Any]:
        return {"lake": self.lake, "released": list(self.released), "remaining": self.remaining}


def borrowed_files(session: Session) -> BorrowedFiles:
    """The borrowed files as of the session's view: ``.covers(path)`` is the
    one call a delete makes (CorruptionError when the record is damaged)."""
    return decode_borrowed(session.lake.read_sys(session.state, BORROWED_KEY))


def borrowed_at_head(lake: Lake) -> BorrowedFiles:
    """The borrowed files at the log's head, without loading the catalog."""
    return decode_borrowed(lake.read_sys_at_head(BORROWED_KEY))


def release_borrowed(
    lake: str | Session,
    paths: Iterable[str] | None = None,
    *,
    everything: bool = False,
    by: str | None = None,
) -> BorrowedRelease:
    """Release ``paths`` (any spelling ``normalize_path`` folds) or, with
    ``everything``, every borrowed file: cleanup and orphan steps may then
    delete them. NotFoundError when a named path is not borrowed (nothing is
    released then); MisconfigurationError when neither or both are given."""
    named = None if paths is None else [_check_path(p) for p in paths]
    if everything == bool(named):
        raise MisconfigurationError(
            "release-borrowed needs either --all or the paths to release (as `slatelake "
            "release-borrowed LAKE PATH ...`), not both and not neither"
        )

    def build(session: Session) -> Built[BorrowedRelease]:
        current = borrowed_files(session)
        if not current:
            raise NotFoundError(f"{session.url} has no borrowed files; nothing to release")
        if everything:
            released = current.paths
        else:
            assert named is not None
            wanted = list(dict.fromkeys(normalize_path(p) for p in named))
            absent = [p for p in wanted if not current.covers(p)]
            if absent:
                shown = ", ".join(show_input(p) for p in absent[:AUDIT_SAMPLE])
                raise NotFoundError(
                    f"{len(absent)} of the paths are not borrowed by {session.url} "
                    f"({shown}); nothing was released: give paths as the import recorded "
                    "them (absolute local paths or s3:// URLs), or --all"
                )
            released = tuple(wanted)
        kept = current.without(released)
        change = _change(session, kept, released, by)
        return Built(change, BorrowedRelease(session.url, tuple(released), len(kept)))

    with _session(lake) as session:
        return commit_with_retry(session, lambda: build(session), attempts=ATTEMPTS)


def _check_path(path: object) -> str:
    if not isinstance(path, str) or not path or "\x00" in path:
        raise MisconfigurationError(
            f"borrowed path {show_input(path)}: give a file's absolute path or s3:// URL"
        )
    return path


def _change(
    session: Session, kept: BorrowedFiles, released: tuple[str, ...], by: str | None
) -> ChangeSet:
    """The shrunk record (deleted when empty) and its audit entry, in one change set."""
    what = {
        "released": len(released),
        "remaining": len(kept),
        "paths": list(released[:AUDIT_SAMPLE]),
        "source": kept.source,
    }
    puts, deletes = history.audit_writes(
        lambda key: session.lake.read_sys(session.state, key), "borrowed.release", by, what
    )
    if kept:
        puts = [(BORROWED_KEY, encode_borrowed(kept)), *puts]
    else:
        deletes = [BORROWED_KEY, *deletes]
    return ChangeSet(
        base=session.state.head,
        puts=tuple(puts),
        deletes=tuple(deletes),
        tables=(BORROWED_LABEL, "sys/audit_log"),
        changes_made=f"borrowed_files: released {len(released)}, {len(kept)} remain",
    )


@contextlib.contextmanager
def _session(lake: str | Session) -> Iterator[Session]:
    """The caller's session as is, or one opened on an existing lake and closed after."""
    if isinstance(lake, Session):
        yield lake
        return
    location = location_of(lake)
    if not store_exists(location):
        raise NotFoundError(f"no slatelake lake at {location.url}; check the URL")
    with Session(location.url) as session:
        yield session


__all__ = [
    "BorrowedRelease",
    "borrowed_at_head",
    "borrowed_files",
    "release_borrowed",
]
