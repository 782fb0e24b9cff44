"""The lake-administration API: what the CLI's lake verbs call.

Create a lake, fold its log once or as the holder, read the log's summary,
write a catalog image or find the newest one stock DuckDB can attach, move a
catalog to and from stock DuckLake, name a table's columns for a lookup's
answer, and run the demo. Maintenance has its own API
(``slatelake.maintenance``); sessions are ``slatelake.connect``. Every value
that ends up in SQL is quoted here (``attach_statement``), never by a caller.
Importing this module is cheap (a CLI's ``--help`` reads its defaults): the
layers are imported by the calls that need them.
"""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slatelake.errors import MisconfigurationError, NotFoundError, UnsupportedError

if TYPE_CHECKING:
    from slatelake.catalog.folder import Folder, FoldReport
    from slatelake.catalog.lake import LogSummary
    from slatelake.ducklake.image_writer import ImageRecord, ImageWrite
    from slatelake.ducklake.session import Session
    from slatelake.ducklake.transfer import ExportReport, ImportReport
    from slatelake.log.images import ImageInfo
    from slatelake.maintenance.holder import Event, HolderLease, ImageCadence

# Consecutive transient fold failures a holder rides out before it exits.
HOLD_RETRIES = 3
# Image defaults. An open replays the slots after the newest image (eight GETs
# at a time): 200 slots is ~25 rounds of GETs, a few hundred ms on S3; an image
# of a 100k-file catalog costs the holder a few seconds to write. Ten minutes
# bounds a trickle's replay; fifteen minutes of grace covers a slow download of
# a superseded image many times over.
DEFAULT_EVERY_SLOTS = 200
DEFAULT_MAX_AGE_S = 600.0
DEFAULT_GRACE_S = 900.0


def create(url: str, data_path: str | None = None, encrypted: bool = False) -> int | None:
    """Create an empty lake at ``url``; with ``data_path`` also DuckLake's
    catalog (through a session; ``encrypted``: DuckLake's ENCRYPTED, its data
    files encrypted). Returns the catalog's head snapshot id, or None without
    a data path. Refused when a lake is already there."""
    from slatelake.catalog.lake import Lake
    from slatelake.ducklake.session import Session
    from slatelake.store.db import store_exists
    from slatelake.store.location import LakeLocation

    if store_exists(LakeLocation.parse(url)):
        raise MisconfigurationError(f"a lake already exists at {url}; open it instead")
    if data_path is None:
        if encrypted:
            raise MisconfigurationError(
                "an encrypted lake is made with its catalog: give a data path too"
            )
        Lake.create(url).close()
        return None
    with Session(url, data_path=data_path, encrypted=encrypted) as session:
        return session.state.head.snapshot_id


def folder(url: str, margin_s: float, folded_before: tuple[int, float] | None = None) -> Folder:
    """The lake's folder: it takes the store's writer (fencing an older one).
    ``folded_before``: the previous holder's (seq, time), from its lease."""
    from slatelake.catalog.folder import Folder
    from slatelake.store.location import LakeLocation

    return Folder(LakeLocation.parse(url), margin_s=margin_s, folded_before=folded_before)


def holder_lease(url: str) -> HolderLease:
    """The lake's holder lease, not yet taken, carrying the previous
    holder's fold record: take it before ``folder`` so holders never fight."""
    from slatelake.maintenance.holder import take_holder
    from slatelake.store.location import LakeLocation

    return take_holder(LakeLocation.parse(url))[0]


def fold_once(url: str, margin_s: float) -> FoldReport:
    """Fold what the log holds now, then let the writer go."""
    handle = folder(url, margin_s)
    try:
        return handle.fold_once()
    finally:
        handle.close()


def hold(
    handle: Folder,
    poll_s: float,
    stop: threading.Event,
    images: ImageCadence | None = None,
    on_fold: Callable[[FoldReport], None] | None = None,
    on_retry: Callable[[int, BaseException, float], None] | None = None,
    lease: HolderLease | None = None,
) -> None:
    """Be the holder until ``stop``: fold every ``poll_s`` seconds, riding out
    HOLD_RETRIES transient failures in a row (``maintenance.holder.hold``);
    ``lease`` (taken) records each fold and ends the loop when lost."""
    from slatelake.maintenance import holder

    holder.hold(handle, poll_s, stop, HOLD_RETRIES, images, on_fold, on_retry, lease)


def image_cadence(
    url: str,
    every_slots: int = DEFAULT_EVERY_SLOTS,
    max_age_s: float = DEFAULT_MAX_AGE_S,
    grace_s: float = DEFAULT_GRACE_S,
    on_event: Callable[[Event], None] | None = None,
    on_error: Callable[[str], None] | None = None,
) -> ImageCadence:
    """When the holder writes catalog images of ``url`` and collects old ones."""
    from slatelake.maintenance.holder import ImageCadence
    from slatelake.store.location import LakeLocation

    return ImageCadence(
        LakeLocation.parse(url), every_slots, max_age_s, grace_s, on_event, on_error
    )


def log_summary(url: str) -> LogSummary:
    """Head, fold cursor and what the log retains (read-only)."""
    from slatelake.catalog.lake import Lake

    with Lake.open(url, read_only=True) as lake:
        return lake.summary()


def write_image(url: str) -> ImageWrite:
    """A catalog image of the store's fold cursor, unless the newest is there."""
    from slatelake.ducklake.image_writer import write_image as write
    from slatelake.store.location import LakeLocation

    return write(LakeLocation.parse(url))


@dataclass(frozen=True)
class NewestImage:
    """The newest image that checks out, and the ATTACH that opens it."""

    info: ImageInfo
    record: ImageRecord
    attach: str


def newest_image(url: str) -> NewestImage:
    """The newest valid image of the lake at ``url`` (downloaded and checked)."""
    from slatelake.ducklake.image_writer import check_image
    from slatelake.log.images import ImageBook
    from slatelake.store.db import store_exists
    from slatelake.store.location import LakeLocation

    location = LakeLocation.parse(url)
    if location.scheme == "memory":
        raise UnsupportedError(
            f"{location.url}: a memory lake lives in one process; no other DuckDB can attach "
            "its images"
        )
    if not store_exists(location):
        raise NotFoundError(f"no slatelake lake at {location.url}")
    with tempfile.TemporaryDirectory(prefix="slatelake-image-") as tmp:
        found = ImageBook(location).newest_valid(Path(tmp), check=check_image)
        if found is None:
            raise NotFoundError(
                f"{location.url} has no usable catalog image; fold and write one with "
                f"`slatelake fold {location.url} --image` (or run `slatelake hold`)"
            )
        info, local = found
        record = check_image(info, local)
    return NewestImage(info, record, attach_statement(info.url))


def attach_statement(path: str, alias: str = "lake") -> str:
    """Stock DuckLake's read-only ATTACH of a catalog file or image, quoted."""
    from slatelake.ducklake.sql import ident, literal

    return f"ATTACH {literal('ducklake:' + path)} AS {ident(alias)} (READ_ONLY);"


def check_local_file(text: str, what: str) -> None:
    """Refuse a catalog file argument that is a URL, or not UTF-8 text without
    NUL (MisconfigurationError naming it)."""
    from slatelake.ducklake.catalog_file import local_file

    local_file(text, what, "give a local file path")


def check_data_location(text: str) -> None:
    """Refuse a data path that is not absolute or a URL (import and restore
    take no relative one; MisconfigurationError naming it)."""
    from slatelake.ducklake.guard import data_location

    data_location(text)


def resolve_data_path(lake: str, text: str) -> str | None:
    """A lake's data path as a session reads it: a relative one against the
    current directory (refused for an S3 lake); '' is none."""
    from slatelake.ducklake.guard import resolve_data_path as resolve

    return resolve(lake, text)


def export_catalog(lake: str, path: str) -> ExportReport:
    """The lake's catalog as a stock DuckLake catalog file (DuckDB or SQLite)."""
    from slatelake.ducklake.transfer import export_catalog as export

    return export(lake, path)


def import_catalog(
    source: str, lake: str, data_path: str | None = None, copy_data: str | None = None
) -> ImportReport:
    """A stock DuckLake catalog file into a new lake at ``lake`` (its data
    files copied to ``copy_data``, else borrowed)."""
    from slatelake.ducklake.transfer import import_catalog as imp

    return imp(source, lake, data_path=data_path, copy_data=copy_data)


def column_names(session: Session | Any, table: str) -> list[str]:
    """The columns of ``table`` as a lookup returns them."""
    from slatelake.ducklake.indexes import column_names as names

    return names(session, table)


def connect(url: str, data_path: str | None = None, read_only: bool = False) -> Session:
    """A plain session (no maintenance options or scheduler), as ``slatelake sql`` opens."""
    from slatelake.ducklake.session import connect as open_session

    return open_session(url, data_path=data_path, read_only=read_only)


def run_demo(directory: str, commits: int = 20) -> None:
    """``slatelake demo``: a local lake end to end (see ``slatelake.demo``)."""
    from slatelake.demo import run_demo as demo

    demo(directory, commits=commits)
