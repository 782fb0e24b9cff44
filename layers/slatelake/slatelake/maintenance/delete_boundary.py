"""The delete boundary: every data file a pass deletes is proven deletable here.

DuckLake decides what cleanup and orphan deletion would delete (their dry
runs, so its rules stay its own); slatelake deletes. Each path must be inside
the lake's data path once parsed (``..``, symlinks and ``file://`` spellings
resolved), not named by any snapshot the catalog still has, not kept (see
below), and not borrowed from an imported catalog. A path that fails is
spared and counted, never deleted, whatever the catalog's rows say: a
hand-written metadata row, an imported catalog that points outside its data
path, or a hold written around cannot reach a file through a pass.

What keeps a file is one map, ``kept``: normalized path -> the reason a
pass reports it spared for. Retention holds keep the file set each hold
recorded when it was placed and every file a held snapshot reads now
("kept by retention holds"); live restore points keep every file their
catalog names, ended rows included ("kept by restore points",
``log/restore_points.py``: one LIST of ``restore-points/`` per boundary, a
GET per point); reader pins keep every file their snapshots read
("kept by reader pins", ``pins.py``). A lapsed or deleted restore point,
like a lapsed pin, keeps nothing, so the next pass reclaims what only it kept.

Orphans have one more rule, which is DuckLake's own filter with a tighter
window: a file newer than the oldest live writer's start (``writing_since``
in its reader lease, less the clock skew the leases allow) is never listed
as an orphan, whatever age the pass was given (``orphan_window``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime

from slatelake.catalog.borrowed import BORROWED_KEY, decode_borrowed, normalize_path
from slatelake.ducklake.catalog_files import files_at, referenced_files
from slatelake.ducklake.commit_flow import META_DB
from slatelake.ducklake.guard import data_location
from slatelake.ducklake.session import Session
from slatelake.ducklake.sql import ident, literal
from slatelake.errors import (
    MisconfigurationError,
    PermissionDeniedError,
    SlatelakeError,
    StoreError,
    StoreTimeoutError,
    StoreUnavailableError,
)
from slatelake.log.leases import CLOCK_SKEW_S, LeaseBook, oldest_write
from slatelake.log.restore_points import RestorePointBook
from slatelake.maintenance import holds
from slatelake.maintenance.option_values import Instant, Interval, Value
from slatelake.maintenance.pins import pinned_files
from slatelake.store.location import LakeLocation
from slatelake.store.objects import ObjectClient

DELETE_WORKERS = 8  # deletes in flight at once (each bounded by the store deadline)
SKEW_ENV = "SLATELAKE_ORPHAN_SKEW_S"
TIME_RESOLUTION_S = 1.0  # file times reach DuckLake's orphan filter in whole seconds
KEPT_BY_HOLDS = "kept by retention holds"
KEPT_BY_RESTORE_POINTS = "kept by restore points"
KEPT_BY_PINS = "kept by reader pins"


@dataclass
class Verdicts:
    """What the boundary let through and what it spared, by reason."""

    allowed: list[str] = field(default_factory=list)
    spared: dict[str, list[str]] = field(default_factory=dict)

    @property
    def spared_count(self) -> int:
        return sum(len(v) for v in self.spared.values())

    def why_spared(self) -> str:
        """``N spared: 2 outside the data path (e.g. /x), ...`` or ''."""
        if not self.spared:
            return ""
        parts = [
            f"{len(paths)} {reason} (e.g. {paths[0]})"
            for reason, paths in sorted(self.spared.items())
        ]
        return f"; {self.spared_count} spared by the delete boundary: " + ", ".join(parts)


@dataclass
class Deleted:
    paths: list[str]
    failed: list[tuple[str, SlatelakeError]]


class DeleteBoundary:
    """The lake's deletable set as of the session's view (at the head: a
    pass refreshes before each step)."""

    def __init__(self, session: Session, data_path: str) -> None:
        self.root = data_location(data_path)
        # normalized path -> why no pass may delete it (the reason it is spared for)
        self.kept: dict[str, str] = {}
        con = session.con.cursor()
        try:
            self.referenced = {normalize_path(p) for p in referenced_files(con)}
            for paths in holds.held_files(session).values():
                self.keep(paths, KEPT_BY_HOLDS)
            for snapshot in holds.held(session):
                self.keep(files_at(con, snapshot), KEPT_BY_HOLDS)
        finally:
            con.close()
        self.keep(RestorePointBook(session.lake.location).kept(), KEPT_BY_RESTORE_POINTS)
        self.keep(pinned_files(session), KEPT_BY_PINS)
        self.borrowed = decode_borrowed(session.lake.read_sys(session.state, BORROWED_KEY))

    def keep(self, paths: Iterable[str], reason: str) -> None:
        """No pass deletes ``paths`` (any spelling) while this boundary stands;
        a path kept for two reasons is reported for the first."""
        for path in paths:
            self.kept.setdefault(normalize_path(path), reason)

    def refusal(self, path: str, named_ok: bool = False) -> str | None:
        """Why ``path`` must not be deleted (None: it may). ``named_ok``: the
        catalog's naming it does not count (a dry run's prediction of what
        this very pass schedules)."""
        try:
            where = data_location(path)
        except MisconfigurationError:
            return "not a path inside the data path"
        if not self.root.contains(where) or where.root.strip("/") == self.root.root.strip("/"):
            return "outside the data path"
        kept = self.kept.get(normalize_path(path))
        if kept is not None:
            return kept
        if self.borrowed.covers(path):
            return "borrowed from an imported catalog"
        if normalize_path(path) in self.referenced and not named_ok:
            return "named by the catalog"
        return None

    def judge(self, paths: Iterable[str], named_ok: bool = False) -> Verdicts:
        out = Verdicts()
        for path in dict.fromkeys(paths):
            reason = self.refusal(path, named_ok)
            if reason is None:
                out.allowed.append(path)
            else:
                out.spared.setdefault(reason, []).append(path)
        return out

    def delete(self, paths: list[str]) -> Deleted:
        """Delete ``paths`` (each judged allowed), a few at a time; the ones
        the store did not delete come back with their typed errors."""
        client = ObjectClient(self.root)
        done: list[str] = []
        failed: list[tuple[str, SlatelakeError]] = []

        def one(path: str) -> tuple[str, SlatelakeError | None]:
            key = data_location(path).root
            try:
                try:
                    client.delete(key)
                except StoreTimeoutError:  # a DELETE is idempotent: once more
                    client.delete(key)
                return path, None
            except SlatelakeError as exc:
                return path, exc

        with ThreadPoolExecutor(DELETE_WORKERS, thread_name_prefix="delete") as pool:
            for path, error in pool.map(one, paths):
                if error is None:
                    done.append(path)
                else:
                    failed.append((path, error))
        return Deleted(done, failed)


@dataclass(frozen=True)
class WriteWindow:
    """No file newer than ``cutoff`` (epoch seconds) is an orphan: the oldest
    live writer's start, or the moment the leases were read (a write that
    starts after that is in no lease the pass read), less the clock skew
    allowed between hosts and the store. ``writers``: live leases writing."""

    cutoff: float
    writers: int

    def note(self) -> str:
        """The step's word on the window (empty: no writer was live)."""
        if not self.writers:
            return ""
        when = datetime.fromtimestamp(self.cutoff, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        return f"; files newer than {when} spared: {self.writers} writes in flight"


def skew_s() -> float:
    """The clock skew the orphan window allows (``SLATELAKE_ORPHAN_SKEW_S``,
    default the leases' own): hosts whose clocks agree closer may lower it."""
    raw = os.environ.get(SKEW_ENV)
    try:
        value = float(raw) if raw is not None else CLOCK_SKEW_S
    except ValueError:
        raise MisconfigurationError(f"{SKEW_ENV}={raw!r}: expected seconds, e.g. 120") from None
    if not 0 <= value <= 86_400 or value != value:
        raise MisconfigurationError(f"{SKEW_ENV}={raw!r}: expected 0 to 86400 seconds")
    return value


def write_window(
    lake_location: LakeLocation, client: ObjectClient | None = None, own: str | None = None
) -> WriteWindow:
    """The orphan step's window from the live reader leases. ``own``: the
    asking session's lease, left out (its writes are done when it asks; its
    record may still carry the last one's mark). DuckLake compares a file's
    modification time to the whole second (S3's LastModified, and DuckDB
    truncates a local file's too), so one second more is taken off: a file
    written just after a writer's mark may carry a time just before it."""
    read_at = time.time()
    leases = [lease for lease in LeaseBook(lake_location, client).live() if lease.reader_id != own]
    oldest = oldest_write(leases)
    start = read_at if oldest is None else min(read_at, oldest / 1e6)
    writing = sum(1 for lease in leases if lease.writing_since_us is not None)
    return WriteWindow(start - skew_s() - TIME_RESOLUTION_S, writing)


def orphan_window(params: dict[str, Value], window: WriteWindow) -> list[dict[str, Value]]:
    """The orphan step's dry-run parameter sets whose answers, intersected,
    are the files it may delete: its own, with the window ending no later
    than ``window.cutoff``. A window DuckLake computes itself (no
    ``older_than``, no ``cleanup_all``: the lake's ``delete_older_than`` or
    DuckLake's default) is asked as given and again with the cutoff."""
    rest = {k: v for k, v in params.items() if k not in ("older_than", "cleanup_all")}
    older = params.get("older_than")
    if params.get("cleanup_all") is True:
        configured: float | None = time.time()
    elif isinstance(older, Interval):
        configured = time.time() - older.seconds
    elif isinstance(older, Instant) and older.epoch_s is not None:
        configured = older.epoch_s
    else:
        configured = None
    if configured is None:
        return [params, {**rest, "older_than": instant(window.cutoff)}]
    return [{**rest, "older_than": instant(min(configured, window.cutoff))}]


def instant(epoch_s: float) -> Instant:
    when = datetime.fromtimestamp(epoch_s, UTC)
    return Instant(when.strftime("%Y-%m-%d %H:%M:%S.%f+00"), epoch_s)


def unschedule(session: Session, paths: list[str]) -> None:
    """Remove deleted files' rows from DuckLake's schedule, as its own
    cleanup does after deleting them (one commit). A scheduled row's path is
    relative to the data path unless it says otherwise."""
    gone = {normalize_path(p) for p in paths}
    con = session.con.cursor()
    try:
        (root,) = con.execute(
            f"SELECT value FROM {ident(META_DB)}.ducklake_metadata "
            "WHERE key = 'data_path' AND scope IS NULL"
        ).fetchone() or ("",)
        rows = con.execute(
            "SELECT data_file_id, path, path_is_relative "
            f"FROM {ident(META_DB)}.ducklake_files_scheduled_for_deletion"
        ).fetchall()
    finally:
        con.close()
    ids, names = [], []
    for file_id, path, relative in rows:
        if normalize_path(f"{root}{path}" if relative else str(path)) in gone:
            ids.append(int(file_id))
            names.append(str(path))
    if not ids:
        return
    # literals, not parameters: binding a Python value imports pandas (85 MB)
    id_list = ", ".join(str(i) for i in ids)
    name_list = ", ".join(literal(n) for n in names)
    with session.writing_metadata():
        session.sql(
            f"DELETE FROM {ident(META_DB)}.ducklake_files_scheduled_for_deletion WHERE "
            f"list_contains([{id_list}]::BIGINT[], data_file_id) "
            f"AND list_contains([{name_list}]::VARCHAR[], path)",
            writes=True,
        )


def not_deleted(step: str, deleted: int, failed: list[tuple[str, SlatelakeError]]) -> StoreError:
    """Deletes the boundary allowed that the store refused or did not answer:
    the step fails naming them (all refusals: PermissionDeniedError)."""
    refused = all(isinstance(exc, PermissionDeniedError) for _, exc in failed)
    cls = PermissionDeniedError if refused else StoreUnavailableError
    shown = "; ".join(f"{path}: {exc}" for path, exc in failed[:3])
    more = f"; and {len(failed) - 3} more" if len(failed) > 3 else ""
    return cls(
        f"{step} deleted {deleted} files, but {len(failed)} were not deleted ({shown}{more}): "
        "they are left for the next pass"
    )
