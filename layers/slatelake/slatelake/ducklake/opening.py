"""Opening a lake's catalog into DuckDB: the newest image plus the log's tail.

An open finds the newest catalog image with one LIST (log/images.py), checks
it (digest, size, format, the seq it names), copies the file into the
session's work directory and attaches it as the base: DuckDB reads it
lazily, so opening costs a file copy, not a load. The slots after the
image's seq are then applied in SQL (a few statements per table). DuckLake's
working copy is a second copy of the same file with the same tail applied.

An image is bound to the log: it records the digest of the slot it was cut
at, and it is trusted only when that is the digest of the slot the log holds
at that seq (``Lake.slot_digest``: the slot, or the store's record of the
slot its fold cursor stands on). An image relabelled as another slot (an
old catalog under a newer seq, its own checksum recomputed) would hide every
commit in between; it fails here instead. An image written before the
binding records no digest and is not trusted either: anyone able to write
``images/`` can write that older form as easily, and refusing it costs only
opens from the store until the holder's next image (``slatelake image``
writes one now). An image at seq 0 (an imported lake) has no slot to check:
a relabel to seq 0 replays every retained slot over the image, which a
change set applied twice leaves as it was, or finds the log truncated.

Any image that cannot serve (missing, truncated, of a newer format, failing
its checksum, not bound to the slot the log holds, or older than what the
log still holds) is skipped with a warning naming it; with none left the
open reads the store as before (``Lake.materialize``), so an image never
gives a wrong answer, only a faster right one.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path

import duckdb

from slatelake.catalog import registry
from slatelake.catalog.lake import Lake
from slatelake.ducklake import catalog_db
from slatelake.ducklake.duck_state import DuckState
from slatelake.ducklake.extensions import TEMP_DIRECTORY_ENV
from slatelake.ducklake.image_writer import (
    IMAGE_SCHEMA,
    INDEX_TABLE,
    ImageRecord,
    check_image,
    read_image_record,
)
from slatelake.ducklake.sql import ident, literal
from slatelake.errors import CorruptionError, SlatelakeError
from slatelake.log.images import ImageBook, ImageInfo

log = logging.getLogger("slatelake.session")


def work_dir() -> Path:
    """A private directory for a session's catalog files (removed at close)."""
    parent = os.environ.get(TEMP_DIRECTORY_ENV) or None
    if parent is not None:  # DuckDB creates its spill directory lazily; we need it now
        os.makedirs(parent, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="slatelake-session-", dir=parent))


def open_base(lake: Lake, con: duckdb.DuckDBPyConnection, db: str, workdir: Path) -> DuckState:
    """The committed catalog at the log's head in ``db``: from the newest usable
    image and the tail after it, else from the store."""
    state = _from_newest_image(lake, con, db, workdir)
    if state is not None:
        return state
    return DuckState.from_state(con, db, lake.materialize())


def _from_newest_image(
    lake: Lake, con: duckdb.DuckDBPyConnection, db: str, workdir: Path
) -> DuckState | None:
    book = ImageBook(lake.location, lake.log.client)
    downloads = workdir / "images"
    downloads.mkdir(exist_ok=True)
    try:
        found = book.newest_valid(
            downloads, check=lambda info, local: check_bound(lake, info, local)
        )
    except SlatelakeError as exc:  # the LIST itself failed: the store serves
        log.warning(
            "catalog images of %s not listed (%s); opening from the store", lake.location.url, exc
        )
        return None
    if found is None:
        return None
    info, local = found
    try:
        return _from_image(lake, con, db, local, workdir)
    except SlatelakeError as exc:
        log.warning(
            "catalog image %s not used (%s: %s); opening from the store",
            info.url,
            type(exc).__name__,
            exc,
        )
        con.execute(f"DETACH DATABASE IF EXISTS {ident(db)}")
        return None


def check_bound(lake: Lake, info: ImageInfo, local: Path) -> ImageRecord:
    """``check_image``, then the image's slot digest against the log's slot at
    its seq (module docstring); CorruptionError naming the image when it is
    not the image of that slot, or cannot be shown to be."""
    record = check_image(info, local)
    if record.slot_digest is None:
        raise CorruptionError(
            f"catalog image {info.url} was written before images were bound to the log "
            "(it records no slot digest), so it cannot be checked and is not trusted; "
            f"`slatelake image {lake.location.url}` writes one that can"
        )
    if record.seq == 0:
        if record.slot_digest:
            raise CorruptionError(
                f"catalog image {info.url} is at seq 0 (no slot) but records a slot digest"
            )
        return record
    held = lake.slot_digest(record.seq)
    if held is None:
        raise CorruptionError(
            f"catalog image {info.url}: slot {record.seq} it was cut at is truncated and the "
            "store's fold cursor has moved past it, so the image cannot be checked against "
            "the log"
        )
    if held != record.slot_digest:
        raise CorruptionError(
            f"catalog image {info.url} records slot {record.seq} with digest "
            f"{record.slot_digest}, but {lake.log.describe(record.seq)} has digest {held}: "
            "the image is not of that slot (relabelled, or the slot was rewritten)"
        )
    return record


def _from_image(
    lake: Lake, con: duckdb.DuckDBPyConnection, db: str, image: Path, workdir: Path
) -> DuckState:
    attach_copy(con, image, workdir / f"{db}.duckdb", db)
    record = read_image_record(con, db)
    _adopt_own_records(con, db)
    state = DuckState(con, db, record.head, record.seq)
    state.source = f"image at slot {record.seq}"
    state.list_inline_names()  # the image names its inlined tables nowhere else
    # StaleViewError: truncated past it; the first slot after must chain to the image's
    tail = lake.tail_after(record.head, record.seq, record.slot_digest or None)
    state.apply_tail(tail.applied)
    state.last_seq = tail.last_seq
    state.image_file = image  # DuckLake's copy starts from the same file, same tail
    return state


def attach_copy(con: duckdb.DuckDBPyConnection, image: Path, copy: Path, db: str) -> None:
    """Attach a private, writable copy of an image file as ``db``, hidden from
    the user's listings as stock DuckLake hides its metadata catalog (DuckLake
    attaching ``ducklake:<copy>`` takes this database as it finds it)."""
    con.execute(f"DETACH DATABASE IF EXISTS {ident(db)}")
    copy.unlink(missing_ok=True)
    shutil.copyfile(image, copy)
    con.execute(f"ATTACH {literal(str(copy))} AS {ident(db)} (HIDDEN)")


def _adopt_own_records(con: duckdb.DuckDBPyConnection, db: str) -> None:
    """Move slatelake's own rows into the base's ``main`` (where a store-loaded
    base keeps them) and add any registry table the image lacks."""
    catalog_db.create_tables(con, db, own=True)
    for spec in registry.OWN_TABLES:
        cols = ", ".join(ident(c) for c in spec.column_names)
        con.execute(
            f"INSERT INTO {ident(db)}.{ident(spec.name)} SELECT {cols} "
            f"FROM {ident(db)}.{ident(IMAGE_SCHEMA)}.{ident(INDEX_TABLE)}"
        )
    drop_image_schema(con, db)


def drop_image_schema(con: duckdb.DuckDBPyConnection, db: str) -> None:
    con.execute(f"DROP SCHEMA IF EXISTS {ident(db)}.{ident(IMAGE_SCHEMA)} CASCADE")
