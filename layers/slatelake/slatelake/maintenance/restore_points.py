"""Restore points: the lake as it was at one moment, kept whole until deleted or lapsed.

``create`` makes one under the pass lease, so no pass runs while the point
is cut and every pass after it reads its record:

1. the lake's head (every acknowledged slot, folded or not) is exported as a
   stock DuckLake catalog (``ducklake/transfer.py``): every snapshot still in
   the catalog with every row, live and ended, so the point time-travels as
   the lake did. Its deletion schedule is emptied: those files belong to
   the lake's own cleanup, and no snapshot reads them;
2. every data and delete file that catalog names (``catalog_files``) is
   listed in the record: the delete boundary keeps each while the point is
   live, so no cleanup or orphan step of any later pass deletes one;
3. a SlateDB checkpoint of the store is made with the same lifetime (the
   store's SSTs as of that manifest outlive merges and garbage collection);
4. the catalog object, then the record, are written create-if-absent
   (``log/restore_points.py``).

Holding the lease closes the one race: a pass that expired a snapshot after
the head was read, and deleted its files before the record landed.

``restore`` lays down a NEW lake from a point's catalog (``import_catalog``):
the same snapshots, rows and ids. The data files stay where they are and
are recorded as borrowed in the new lake (its passes never delete them), or
are copied to a data path of its own (``copy_data``). A point whose TTL has
run out keeps nothing (the next passes may reclaim its files), so it cannot
be restored; ``delete`` removes the record first, then its catalog and its
checkpoint.
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from slatelake.catalog.borrowed import normalize_path
from slatelake.ducklake import extensions
from slatelake.ducklake.catalog_files import referenced_files
from slatelake.ducklake.commit_flow import META_DB
from slatelake.ducklake.image_writer import BLOCK_SIZE
from slatelake.ducklake.sql import ident, literal
from slatelake.ducklake.transfer import export_catalog, import_catalog
from slatelake.durations import parse_duration
from slatelake.errors import (
    AmbiguousWriteError,
    CorruptionError,
    LeaseLostError,
    MisconfigurationError,
    NotFoundError,
    SlatelakeError,
)
from slatelake.log.restore_points import RestorePoint, RestorePointBook, check_name
from slatelake.maintenance.flight import PassLease
from slatelake.store.db import open_admin, store_exists
from slatelake.store.location import LakeLocation
from slatelake.store.objects import ObjectClient, object_url

log = logging.getLogger("slatelake.restore_points")

CHECKPOINT_PREFIX = "slatelake-restore-point:"
DEFAULT_WAIT_S = 60.0  # for a running pass to give back the lease
MAX_TTL_S = 10 * 365 * 86400.0  # a retention rule's years, not a timer's
LEASE_STEP = "restore_point"
SEALED_DB = "__slatelake_restore_point"
RESTORE_SHARES = (
    "the restored lake reads {lake}'s data files where they are (nothing was copied; they "
    "are recorded as borrowed, so its own passes never delete them) and writes new files "
    "into the same data path: keep restore point {name!r} while the restored lake reads "
    "them (deleting it lets {lake}'s passes reclaim them), and run no orphan deletion on "
    "either lake while both write there (each takes the other's new files for orphans); "
    "restore with --copy-data PATH for a lake with files of its own"
)


@dataclass(frozen=True)
class PointRequest:
    """What a caller asks of ``create``, parsed once: a name (default: the
    UTC time, ``rp-20260101T120000Z``) and a TTL in seconds (None: kept
    until deleted)."""

    name: str
    ttl_s: float | None

    @classmethod
    def parse(cls, name: object = None, ttl: object = None) -> PointRequest:
        chosen = datetime.now(UTC).strftime("rp-%Y%m%dT%H%M%SZ") if name is None else name
        return cls(check_name(chosen), parse_ttl(ttl))


def parse_ttl(ttl: object) -> float | None:
    """A restore point's TTL in seconds (None: kept until deleted): a
    duration such as ``30d`` or bare seconds, above zero, at most ten years."""
    return None if ttl is None else parse_duration("restore point ttl", ttl, maximum=MAX_TTL_S)


@dataclass(frozen=True)
class PointChange:
    """What ``create`` or ``delete`` did: the point, the objects written or
    deleted, and the store checkpoint's fate."""

    action: str  # "created" | "deleted"
    name: str
    point: RestorePoint | None  # None: a deleted record that did not decode
    objects: list[str]
    checkpoint: str  # "created", "deleted", "none", or why it was not deleted
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "name": self.name,
            "point": None if self.point is None else self.point.to_dict(),
            "objects": self.objects,
            "checkpoint": self.checkpoint,
            "seconds": round(self.seconds, 3),
        }


@dataclass(frozen=True)
class RestoreReport:
    """What ``restore`` laid down at ``to`` from ``point`` of ``lake``."""

    lake: str
    point: str
    to: str
    snapshot_id: int
    tables: dict[str, int]  # the restored lake's tables: schema.table -> live rows
    rows: int
    data_path: str
    borrowed_files: int
    copied_files: int
    copied_bytes: int
    seconds: float
    warning: str | None = field(default=None)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "seconds": round(self.seconds, 3)}


def _lake(lake_url: str) -> LakeLocation:
    location = LakeLocation.parse(lake_url)
    if not store_exists(location):
        raise NotFoundError(f"no slatelake lake at {location.url}; check the URL")
    return location


# -- create ------------------------------------------------------------------------
def create(
    lake_url: str,
    name: object = None,
    ttl: object = None,
    *,
    by: str | None = None,
    wait_s: float = DEFAULT_WAIT_S,
) -> PointChange:
    """Make restore point ``name`` of the lake at its head, kept ``ttl``
    (a duration; None: until deleted). Waits up to ``wait_s`` for a running
    pass to end (AlreadyRunningError after). MisconfigurationError when the
    name is taken."""
    started = time.perf_counter()
    request = PointRequest.parse(name, ttl)
    location = _lake(lake_url)
    book = RestorePointBook(location)
    if book.get(request.name) is not None:
        raise MisconfigurationError(
            f"restore point {request.name!r} already exists on {location.url}; choose another "
            f"name, or delete it first (`slatelake checkpoint delete {location.url} "
            f"{request.name}`)"
        )
    lease = PassLease(location, client=book.client)
    lease.acquire(wait_s=wait_s)
    try:
        lease.step = LEASE_STEP
        lease.start_heartbeat()
        with tempfile.TemporaryDirectory(prefix="slatelake-restore-point-") as scratch:
            local = Path(scratch) / f"{request.name}.duckdb"
            exported = export_catalog(location.url, Path(scratch) / "export.duckdb")
            files = _seal(Path(exported.path), local)
            point = _store(
                book, lease, request, local, exported.snapshot_id, exported.data_path, files, by
            )
    finally:
        lease.release()
    log.info(
        "restore point %r of %s at snapshot %d: %d files kept",
        point.name,
        location.url,
        point.snapshot_id,
        len(point.files),
    )
    objects = [object_url(location, p) for p in (point.catalog_path, book.record_path(point.name))]
    checkpoint = "created" if point.checkpoint_id else "none"
    return PointChange(
        "created", point.name, point, objects, checkpoint, time.perf_counter() - started
    )


def _seal(exported: Path, sealed: Path) -> list[str]:
    """Every data and delete file the exported catalog names (normalized),
    and the catalog at ``sealed``: its deletion schedule emptied (the source
    lake's to carry out), copied into DuckDB's smallest blocks as images are
    (a catalog is ~30 mostly tiny tables: about a fifth of the bytes)."""
    con = extensions.connect()
    try:
        con.execute(f"ATTACH {literal(str(exported))} AS {ident(META_DB)}")
        files = sorted({normalize_path(p) for p in referenced_files(con)})
        con.execute(f"DELETE FROM {ident(META_DB)}.ducklake_files_scheduled_for_deletion")
        con.execute(
            f"ATTACH {literal(str(sealed))} AS {ident(SEALED_DB)} (BLOCK_SIZE {int(BLOCK_SIZE)})"
        )
        con.execute(f"COPY FROM DATABASE {ident(META_DB)} TO {ident(SEALED_DB)}")
        con.execute(f"DETACH {ident(SEALED_DB)}")  # checkpoints: one self-contained file
        con.execute(f"DETACH {ident(META_DB)}")
    finally:
        con.close()
    for leftover in (f"{exported}.wal", f"{sealed}.wal"):
        Path(leftover).unlink(missing_ok=True)
    return files


def _store(
    book: RestorePointBook,
    lease: PassLease,
    request: PointRequest,
    local: Path,
    snapshot_id: int,
    data_path: str | None,
    files: list[str],
    by: str | None,
) -> RestorePoint:
    """The checkpoint, the catalog object, then the record; what was made is
    undone when a later part fails."""
    location = book.location
    admin = open_admin(location)
    checkpoint = admin.create_checkpoint(CHECKPOINT_PREFIX + request.name, request.ttl_s)
    catalog_path: str | None = None
    try:
        catalog_path, digest, size = book.put_catalog(request.name, local)
        now_us = time.time_ns() // 1000
        point = RestorePoint(
            name=request.name,
            lake=location.url,
            created_at_us=now_us,
            expires_at_us=None if request.ttl_s is None else now_us + round(request.ttl_s * 1e6),
            snapshot_id=snapshot_id,
            data_path=data_path,
            catalog_path=catalog_path,
            catalog_digest=digest,
            catalog_size=size,
            files=tuple(files),
            checkpoint_id=checkpoint.id,
            checkpoint_manifest=checkpoint.manifest_id,
            created_by=by,
        )
        _still_held(lease, request.name)
        try:
            book.put_record(point)
        except AmbiguousWriteError:
            if book.get(request.name) != point:  # it did not land
                raise
    except BaseException:
        _undo(book, admin, checkpoint.id, request.name, catalog_path)
        raise
    try:
        _still_held(lease, request.name)
    except LeaseLostError:
        book.delete(request.name)
        _undo(book, admin, checkpoint.id, request.name, None)
        raise
    return point


def _still_held(lease: PassLease, name: str) -> None:
    """A pass may have started once the lease was lost: the point is not made."""
    lost = lease.lost
    if lost is not None:
        raise LeaseLostError(
            f"restore point {name!r}: the pass lease was lost while it was cut ({lost}), so a "
            "pass may have deleted files it names; nothing was kept: create it again"
        )


def _undo(
    book: RestorePointBook, admin: Any, checkpoint_id: str, name: str, catalog: str | None
) -> None:
    """Remove a failed create's checkpoint and catalog (never another point's)."""
    with contextlib.suppress(SlatelakeError):
        admin.delete_checkpoint(checkpoint_id)
    if catalog is None:
        return
    with contextlib.suppress(SlatelakeError):
        standing = book.get(name)
        if standing is None or standing.catalog_path != catalog:
            book.client.delete(catalog)


# -- list, delete -------------------------------------------------------------------
def points(lake_url: str) -> list[RestorePoint]:
    """Every restore point of the lake, oldest first (lapsed ones included)."""
    return RestorePointBook(_lake(lake_url)).list()


def delete(lake_url: str, name: object) -> PointChange:
    """Delete restore point ``name``: the record first (from then on it keeps
    no file: the next passes reclaim what only it kept), then its catalog
    and its SlateDB checkpoint. A record that does not decode is deleted
    too (``point`` is then None). NotFoundError when there is none."""
    started = time.perf_counter()
    location = _lake(lake_url)
    book = RestorePointBook(location)
    wanted = check_name(name)
    point: RestorePoint | None
    try:
        point = book.require(wanted)
    except CorruptionError as exc:
        log.warning("deleting restore point %r, whose record does not decode: %s", wanted, exc)
        point = None
    gone = [object_url(location, p) for p in book.delete(wanted)]
    checkpoint = "none"
    if point is None or point.checkpoint_id is not None:
        checkpoint = _drop_checkpoint(
            location, wanted, None if point is None else point.checkpoint_id
        )
    return PointChange("deleted", wanted, point, gone, checkpoint, time.perf_counter() - started)


def _drop_checkpoint(location: LakeLocation, name: str, checkpoint_id: str | None) -> str:
    """Delete the point's SlateDB checkpoint (every one named for it when
    the record could not say which); what happened, in words."""
    admin = open_admin(location)
    try:
        standing = {c.id for c in admin.list_checkpoints(CHECKPOINT_PREFIX + name)}
        doomed = standing if checkpoint_id is None else standing & {checkpoint_id}
        for one in sorted(doomed):
            admin.delete_checkpoint(one)
    except SlatelakeError as exc:
        return f"not deleted ({exc}); it lapses with its lifetime"
    return "deleted" if doomed else "already gone (lapsed)"


# -- restore ------------------------------------------------------------------------
def restore(
    lake_url: str,
    name: object,
    to: str,
    *,
    copy_data: str | None = None,
    share_data: bool = False,
) -> RestoreReport:
    """Lay down a new lake at ``to`` from restore point ``name``: it opens
    with the point's snapshots and rows. ``copy_data``: an empty data path
    the files are copied to (the new lake's own). ``share_data``: borrow them
    where they are instead, which is safe only while one of the two lakes
    writes (each lake's orphan step would take the other's new files); one
    of the two must be chosen. Refused when anything lives at ``to``."""
    if (copy_data is None) == (not share_data):
        raise MisconfigurationError(
            "restore needs copy_data (a data path of the new lake's own; CLI --copy-data PATH) "
            "or share_data=True (borrow the files in place; CLI --share-data), not both: "
            "a restored lake that writes into the source's data path loses files to the "
            "source's orphan step"
        )
    started = time.perf_counter()
    location = _lake(lake_url)
    target = LakeLocation.parse(to)
    point = RestorePointBook(location).require(check_name(name))
    if point.lapsed():
        lapsed_at = datetime.fromtimestamp(point.expires_at_us / 1e6, UTC)  # type: ignore[operator]
        raise MisconfigurationError(
            f"restore point {point.name!r} of {location.url} lapsed at "
            f"{lapsed_at:%Y-%m-%d %H:%M:%S} UTC: passes since may have deleted its files, so "
            "it cannot be restored; delete it, and give the next one a longer --ttl"
        )
    _require_empty(location, target)
    book = RestorePointBook(location)
    with tempfile.TemporaryDirectory(prefix="slatelake-restore-") as scratch:
        local = book.fetch_catalog(point, Path(scratch) / f"{point.name}.duckdb")
        report = import_catalog(local, target.url, copy_data=copy_data)
    shared = report.copied_files == 0 and copy_data is None
    return RestoreReport(
        lake=location.url,
        point=point.name,
        to=target.url,
        snapshot_id=report.snapshot_id,
        tables=report.lake_tables,
        rows=report.lake_rows,
        data_path=report.data_path,
        borrowed_files=report.borrowed_files,
        copied_files=report.copied_files,
        copied_bytes=report.copied_bytes,
        seconds=time.perf_counter() - started,
        warning=RESTORE_SHARES.format(lake=location.url, name=point.name) if shared else None,
    )


def _require_empty(source: LakeLocation, target: LakeLocation) -> None:
    """A restore writes a new lake: nothing may live at ``target``, and it
    may not be inside the source lake (or hold it)."""
    if source.contains(target) or target.contains(source):
        raise MisconfigurationError(
            f"restore target {target.url} overlaps the lake {source.url}; a restore writes "
            "a new lake beside it: choose a location outside it, e.g. a sibling prefix"
        )
    prefix = target.path() + "/" if target.path() else ""
    found = next(iter(ObjectClient(target).list(prefix)), None)
    if found is not None:
        raise MisconfigurationError(
            f"restore target {target.url} is not empty (it holds "
            f"{object_url(target, found.path)}); a restore writes a new lake: choose an empty "
            "location, or delete what is there first"
        )


__all__ = [
    "PointChange",
    "PointRequest",
    "RestoreReport",
    "create",
    "delete",
    "parse_ttl",
    "points",
    "restore",
]
