"""Before a backup: optionally a pass, then everything folded, a fresh
catalog image, and the list of objects a copy must take.

DuckLake's own backup advice is to run compaction and cleanup just before a
manual backup and then copy the catalog and the data. Here the catalog is
the lake root (the SlateDB store, the log, the images) and the data is the
DuckLake data path; ``backup`` makes the root as compact as it gets (every
slot folded, an image at the fold cursor) and answers a manifest of both.
A copy of every object in the manifest, put under another root and data
path, opens as the same lake with the same rows.

When a resident holder holds the lake, the turn cannot take the holder role:
it waits (up to the deadline) for that holder to fold past the log's end as
seen at the start, then writes the image from a store reader.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from slatelake.ducklake.attach_options import stored_data_path
from slatelake.ducklake.guard import data_location
from slatelake.ducklake.image_writer import write_image
from slatelake.ducklake.session import Session
from slatelake.errors import ConflictError, NotFoundError, StoreTimeoutError
from slatelake.log.images import ImageBook
from slatelake.log.slots import SlotLog
from slatelake.maintenance import fold as folding
from slatelake.maintenance.api import run
from slatelake.maintenance.backlog import fold_cursor
from slatelake.maintenance.options import MaintenanceOptions
from slatelake.maintenance.report import PassReport
from slatelake.store.db import store_exists
from slatelake.store.location import LakeLocation
from slatelake.store.objects import ObjectClient, user_url

SUCCEEDED, FAILED = "succeeded", "failed"
# Lake-root folders a copy leaves out: leases name processes of this lake.
LEFT_OUT = ("readers", "maintenance", "holder")
WAIT_POLL_S = 1.0

Progress = Callable[[str, dict[str, Any]], None]


@dataclass(frozen=True)
class BackupObject:
    """One object a copy must take: its URL and size in bytes."""

    url: str
    size: int
    path: str = field(default="", repr=False, compare=False)  # under the store base


@dataclass
class BackupReport:
    """``head_snapshot_id`` and ``image`` are what the copy holds (the image
    is at the fold cursor, which is at or past the log's end when the backup
    began). ``catalog`` lists the lake root's objects (store, log, the newest
    image; never leases), ``data`` every object under the data path (a
    superset of what the catalog references: files awaiting cleanup too)."""

    lake: str
    status: str = SUCCEEDED
    reason: str = ""
    pass_report: PassReport | None = None
    fold: folding.FoldTurn | None = None
    head_snapshot_id: int | None = None
    fold_seq: int | None = None
    image: str | None = None
    data_path: str | None = None
    catalog: list[BackupObject] = field(default_factory=list)
    data: list[BackupObject] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        return self.status == FAILED

    def to_dict(self) -> dict[str, Any]:
        return {
            "lake": self.lake,
            "status": self.status,
            "reason": self.reason,
            "pass": self.pass_report.to_dict() if self.pass_report is not None else None,
            "fold": self.fold.to_dict() if self.fold is not None else None,
            "head_snapshot_id": self.head_snapshot_id,
            "fold_seq": self.fold_seq,
            "image": self.image,
            "data_path": self.data_path,
            "objects": len(self.catalog) + len(self.data),
            "bytes": sum(o.size for o in self.catalog) + sum(o.size for o in self.data),
            "manifest": {
                "catalog": [{"url": o.url, "size": o.size} for o in self.catalog],
                "data": [{"url": o.url, "size": o.size} for o in self.data],
            },
            "seconds": round(self.seconds, 3),
        }


def backup(
    lake: str | Session,
    *,
    options: Mapping[str, object] | MaintenanceOptions | None = None,
    wait_s: float = 0.0,
    deadline: Callable[[], float] | None = None,
    on_progress: Progress | None = None,
    by: str | None = None,
) -> BackupReport:
    """Prepare the lake for a copy (see the module doc) and list what to copy.
    ``lake``: a URL (a session is opened and closed) or an open session. With
    ``options``, one pass runs with them first (trigger ``manual``, waiting
    up to ``wait_s`` for a pass already running); a failed pass fails the
    backup before anything else is done."""
    if isinstance(lake, Session):
        return _backup(lake, options, wait_s, deadline, on_progress, by)
    if not store_exists(LakeLocation.parse(lake)):
        raise NotFoundError(f"no slatelake lake at {lake}; nothing to back up")
    with Session(lake) as session:
        return _backup(session, options, wait_s, deadline, on_progress, by)


def _backup(
    session: Session,
    options: Mapping[str, object] | MaintenanceOptions | None,
    wait_s: float,
    deadline: Callable[[], float] | None,
    on_progress: Progress | None,
    by: str | None,
) -> BackupReport:
    say = on_progress or (lambda message, fields: None)
    t0 = time.monotonic()
    location = session.lake.location
    report = BackupReport(location.url)
    try:
        if options is not None:
            report.pass_report = run(
                session, options, wait_s=wait_s, deadline=deadline, on_progress=on_progress, by=by
            )
            if report.pass_report.failed:
                report.status = FAILED
                report.reason = "the pass before the backup failed; nothing was folded or listed"
                return report
        target = _log_end(location)
        turn = folding.fold_turn(
            location, folding.FoldRequest(image=True, compact=False), deadline=deadline
        )
        report.fold = turn
        seq: int | None
        head: int | None
        if turn.status == folding.SKIPPED:
            say("backup waits for the resident holder", {"until_slot": target})
            _wait_folded(location, target, deadline)
            written = write_image(location)
            seq, head, image = written.seq, written.head.snapshot_id, written.info
        elif turn.status == folding.FOLDED:
            seq, head, image = turn.fold_seq, turn.head_snapshot_id, ImageBook(location).newest()
        else:
            report.status, report.reason = FAILED, f"the fold stopped early: {turn.reason}"
            return report
        if image is None or seq is None or image.seq != seq or seq < target:
            raise ConflictError(
                f"{location.url}: the newest catalog image ({image.seq if image else 'none'}) "
                f"is not at the fold cursor {seq} (another holder imaged meanwhile?); retry "
                "the backup"
            )
        report.fold_seq, report.head_snapshot_id, report.image = seq, head, image.url
        data = stored_data_path(session.state)
        if data is None:
            raise NotFoundError(f"{location.url} has no DuckLake catalog yet: nothing to back up")
        report.data_path = data
        report.catalog = _catalog_objects(location, image.url)
        report.data = _objects_under(data_location(data))
        say(
            "backup ready",
            {"objects": len(report.catalog) + len(report.data), "image": report.image},
        )
        return report
    finally:
        report.seconds = time.monotonic() - t0


def _log_end(location: LakeLocation) -> int:
    """The newest slot now (0 for an empty log): the copy must reach it."""
    last = 0
    for info in SlotLog(location).list_after(0):
        last = info.seq
    return last


def _wait_folded(location: LakeLocation, seq: int, deadline: Callable[[], float] | None) -> None:
    while fold_cursor(location) < seq:
        if deadline is not None and deadline() <= 0:
            raise StoreTimeoutError(
                f"{location.url}: the resident holder did not fold up to slot {seq} before the "
                "deadline; is `slatelake hold` running and healthy? Retry the backup"
            )
        time.sleep(WAIT_POLL_S)


def _catalog_objects(location: LakeLocation, image_url: str) -> list[BackupObject]:
    """Every object under the lake root except leases and images other than
    ``image`` (an open uses the newest image; older ones are dead weight)."""
    out = []
    for obj in _objects_under(location):
        top = obj.path[len(_prefix(location)) :].split("/", 1)[0]
        if top in LEFT_OUT or (top == "images" and obj.url != image_url):
            continue
        out.append(obj)
    return out


def _prefix(location: LakeLocation) -> str:
    root = location.path()
    return f"{root}/" if root else ""


def _objects_under(location: LakeLocation) -> list[BackupObject]:
    return [
        BackupObject(user_url(location, info.path), info.size, info.path)
        for info in ObjectClient(location).list(_prefix(location))
    ]
