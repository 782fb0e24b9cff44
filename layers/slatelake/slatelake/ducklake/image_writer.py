"""Writing and reading catalog images: the catalog at one folded slot, as a
DuckDB database file that stock DuckLake attaches as it is.

Schema ``main`` holds every ``ducklake_*`` table, live and ended rows, the
on-the-fly inlined data and delete tables included, created with the DDL a
session uses (``tables.create_sql``, ``load_inline_table``): the file is a
valid stock DuckLake catalog, and nothing else is in ``main``. Schema
``slatelake`` holds what only slatelake reads: ``image`` (one row: the image
FORMAT, the folded slot's seq and head, when and from which lake it was
written, and ``slot_digest``: the digest of that slot, which binds the image
to the log) and ``index`` (the ``slatelake_index`` rows, registry.OWN_TABLES).
The ``format`` column of ``slatelake.image`` is forever: a reader checks it
before anything else and refuses a newer format (FormatError).

An image is written from the STORE at its fold cursor, never from a replay
of the log: it never claims a seq the store has not folded. The fold record
is read before and after the rows; if it moved (the reader followed a new
manifest mid-read) the file is rebuilt (StaleViewError after three moves).
The write holds a reader lease at that seq, so the folder keeps every slot
after it (an open is the image plus the slots after it) until the image is
listed.

The slot's digest comes from the store's fold-slot record
(``catalog/fold_slot.py``, written with ``sys/fold``), else from the slot in
the log; with neither (a lake last folded by an older release whose slot is
truncated) no image is written until the next fold. An image at seq 0 (an
imported lake, no slot) records the empty digest. Images written before the
binding have no ``slot_digest`` column: ``ImageRecord.slot_digest`` is None
and an open does not trust them (``ducklake/opening.py`` says why).
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import duckdb

from slatelake.catalog import registry
from slatelake.catalog.fold_slot import SYS_FOLD_SLOT, decode_fold_slot
from slatelake.catalog.rows import Row, decode_entry, table_of_key
from slatelake.catalog.state import CATALOG_SUBSPACES, EMPTY_HEAD, SYS_FOLD, decode_fold
from slatelake.ducklake import extensions
from slatelake.ducklake.sql import ident, literal, run
from slatelake.ducklake.tables import (
    LOAD_CHUNK,
    create_sql,
    load_inline_table,
    load_registry_table,
)
from slatelake.errors import CorruptionError, FormatError, NotFoundError, StaleViewError
from slatelake.log.changeset import Head
from slatelake.log.images import ImageBook, ImageInfo, now_us
from slatelake.log.leases import LeaseBook, ReaderLease
from slatelake.log.slots import SlotLog, slot_digest
from slatelake.store.db import open_reader, store_exists
from slatelake.store.keys import Subspace
from slatelake.store.location import LakeLocation

log = logging.getLogger("slatelake.images")

IMAGE_FORMAT = 1  # what this build writes and the newest it reads
IMAGE_SCHEMA = "slatelake"
RECORD_TABLE = "image"
INDEX_TABLE = "index"
WRITER = "slatelake"
_DB = "__slatelake_image"
FOLD_MOVED_RETRIES = 3
# DuckDB's smallest block: a catalog is ~30 tables, most of them tiny, and
# each table takes at least a block (16 KiB: ~0.7 MB empty, 256 KiB: ~8 MB).
BLOCK_SIZE = 16_384
# The write's own store reader follows no new manifest while it reads (an
# hour between polls): the fold cannot move under it, so a lake a holder
# folds every second still gets its image on the first try.
READER_POLL_MS = 3_600_000


class Source(Protocol):
    """What the writer reads: a store reader, or the holder's own writer."""

    def get(self, key: bytes) -> bytes | None: ...

    def scan_prefix_batches(self, key_prefix: bytes) -> Iterator[list[tuple[bytes, bytes]]]: ...


@dataclass(frozen=True)
class ImageRecord:
    """What an image says about itself (schema ``slatelake``, table ``image``)."""

    format: int
    seq: int  # the folded slot it holds the catalog at
    head: Head  # that slot's head
    written_at_us: int
    lake: str  # the lake URL it was written from
    # ``slot_digest`` of the slot at ``seq`` ("" at seq 0: no slot); None in an
    # image written before images were bound to the log
    slot_digest: str | None = None


@dataclass(frozen=True)
class ImageWrite:
    """The outcome of ``write_image``: the image written, or why none was."""

    seq: int  # the store's fold cursor
    head: Head
    written: bool
    info: ImageInfo | None  # the image written, else the newest existing one
    seconds: float  # building the file and storing it
    rows: int  # catalog rows in the image (0 when nothing was written)
    reason: str = ""  # why nothing was written


def _fold_of(source: Source, where: str) -> tuple[int, Head]:
    raw = source.get(SYS_FOLD)
    if raw is None:
        raise CorruptionError(f"{where}: the store has no fold cursor")
    return decode_fold(raw)


def _bound_digest(source: Source, seq: int, log: SlotLog | None) -> str | None:
    """The digest of slot ``seq`` (the fold cursor's) an image cut there
    records: the store's fold-slot record, else the slot itself in the log;
    None when neither has it."""
    if seq == 0:
        return ""
    raw = source.get(SYS_FOLD_SLOT)
    if raw is not None:
        at, digest = decode_fold_slot(raw)
        if at == seq:
            return digest
    slot = log.read_raw(seq) if log is not None else None
    return None if slot is None else slot_digest(slot)


def write_image(
    location: LakeLocation,
    *,
    reader: Source | None = None,
    dest_dir: Path | None = None,
    book: ImageBook | None = None,
) -> ImageWrite:
    """Write an image of the store at its fold cursor and store it.

    Nothing is written when no slot is folded yet or the newest image is
    already at the fold cursor (``written`` False, ``reason`` says which).
    ``reader`` is the holder's writer when the holder calls (it folds in the
    same thread, so nothing moves); else a store reader of our own is opened
    and closed. The local file is built in ``dest_dir`` (a temporary
    directory when None) and removed once stored."""
    t0 = time.perf_counter()
    book = book or ImageBook(location)
    own = reader is None
    if own:
        if not store_exists(location):
            raise NotFoundError(
                f"no slatelake lake at {location.url}; create it with `slatelake init`"
            )
        reader = open_reader(location, poll_interval_ms=READER_POLL_MS)
    lease = ReaderLease(LeaseBook(location, book.client))
    scratch: Path | None = None
    try:
        seq, head = _fold_of(reader, location.url)
        newest = book.newest()
        # A lake with no DuckLake catalog folded has nothing to image; an
        # imported lake has one at fold cursor 0 (its rows were laid down folded).
        empty = head == EMPTY_HEAD
        if empty or (newest is not None and newest.seq >= seq and _bound(book, newest)):
            reason = (
                f"nothing is folded yet: `slatelake fold {location.url} --image` folds the "
                "log and writes one"
                if empty
                else f"the newest image is already at the fold cursor {newest.seq}"
            )
            return ImageWrite(seq, head, False, newest, time.perf_counter() - t0, 0, reason)
        lease.hold(seq)  # the slots after the image stay until it is listed
        scratch = Path(tempfile.mkdtemp(prefix="slatelake-image-", dir=dest_dir))
        local = scratch / f"image-{uuid.uuid4().hex}.duckdb"
        try:
            record, rows = write_image_file(
                local, reader, location.url, SlotLog(location, book.client)
            )
        except NotFoundError as exc:  # no digest for the fold cursor's slot
            return ImageWrite(seq, head, False, newest, time.perf_counter() - t0, 0, str(exc))
        info = book.put(record.seq, local)
        seconds = time.perf_counter() - t0
        log.info(
            "catalog image of %s at slot %d (%d rows, %d bytes) written in %.2fs: %s",
            location.url,
            record.seq,
            rows,
            info.size,
            seconds,
            info.url,
        )
        return ImageWrite(record.seq, record.head, True, info, seconds, rows)
    finally:
        try:
            lease.release()
        finally:
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)
            if own:
                reader.close()  # type: ignore[union-attr]


def _bound(book: ImageBook, info: ImageInfo) -> bool:
    """Whether the image ``info`` records the digest of its slot: one that
    does not (written before images were bound to the log) is replaced even
    at the same seq, since no open trusts it."""
    with tempfile.TemporaryDirectory(prefix="slatelake-image-") as scratch:
        try:
            local = book.fetch(info, Path(scratch))
            return check_image(info, local).slot_digest is not None
        except (CorruptionError, FormatError, NotFoundError):
            return False


def write_image_file(
    path: Path, source: Source, lake_url: str, log: SlotLog | None = None
) -> tuple[ImageRecord, int]:
    """Build the image file at ``path`` from ``source`` at its fold cursor;
    returns its record and its row count. Rebuilt when the fold moved during
    the read; StaleViewError after FOLD_MOVED_RETRIES moves. ``log`` is asked
    for the fold cursor's slot when the store has no digest of it;
    NotFoundError when neither has it."""
    for _ in range(FOLD_MOVED_RETRIES):
        seq, head = _fold_of(source, lake_url)
        digest = _bound_digest(source, seq, log)
        if digest is None:
            raise NotFoundError(
                f"{lake_url}: the store records no digest of slot {seq}, its fold cursor (it "
                "was folded by an older slatelake), and the slot is truncated, so an image "
                "cut there could not be checked against the log; the next fold records it "
                f"(`slatelake fold {lake_url}`), then write the image"
            )
        path.unlink(missing_ok=True)
        con = extensions.connect()
        try:
            con.execute(
                f"ATTACH {literal(str(path))} AS {ident(_DB)} (BLOCK_SIZE {int(BLOCK_SIZE)})"
            )
            rows = _fill(con, source)
            if _fold_of(source, lake_url) != (seq, head):
                continue  # moved mid-read: the rows may straddle two folds
            record = ImageRecord(IMAGE_FORMAT, seq, head, now_us(), lake_url, digest)
            _write_record(con, record)
            con.execute(f"DETACH {ident(_DB)}")  # checkpoints: one self-contained file
        finally:
            con.close()
            Path(f"{path}.wal").unlink(missing_ok=True)
        return record, rows
    raise StaleViewError(
        f"{lake_url}: the fold cursor moved during each of {FOLD_MOVED_RETRIES} image reads; "
        "try again"
    )


def _fill(con: duckdb.DuckDBPyConnection, source: Source) -> int:
    """Every catalog row of the store into the image, a chunk at a time."""
    for spec in registry.TABLES:
        con.execute(create_sql(_DB, spec))
    pending: dict[str, list[Row]] = {}
    own: list[Row] = []
    inline_ddl: dict[str, list[tuple[str, str]]] = {}
    inline_rows: dict[str, list[Row]] = {}
    count = 0

    def flush(name: str) -> None:
        rows = pending.pop(name, [])
        if rows:
            load_registry_table(con, _DB, registry.BY_NAME[name], rows)

    for sub in CATALOG_SUBSPACES:
        for batch in source.scan_prefix_batches(bytes((sub,))):
            for key, value in batch:
                entry = decode_entry(key, value)
                if key[0] == Subspace.INLINE:
                    name = table_of_key(key)
                    if key[1] in registry.INLINE_DDL_KINDS:
                        inline_ddl[name] = entry
                    else:
                        inline_rows.setdefault(name, []).append(entry)
                        count += 1
                    continue
                spec = registry.BY_KIND[key[1]]
                if spec.kind == registry.INDEX_DEF.kind:
                    target = own
                else:
                    target = pending.setdefault(spec.name, [])
                if isinstance(entry, list):
                    target.extend(entry)
                    count += len(entry)
                else:
                    target.append(entry)
                    count += 1
                if target is not own and len(target) >= LOAD_CHUNK:
                    flush(spec.name)
    for name in list(pending):
        flush(name)
    # As a session loads them: an inlined table is its DDL plus its rows.
    for name, columns in sorted(inline_ddl.items()):
        load_inline_table(con, _DB, name, columns, inline_rows.get(name, []))
    # slatelake's own rows, with the DDL a session would use, then moved out of
    # main: stock DuckLake sees its own tables only.
    con.execute(f"CREATE SCHEMA {ident(_DB)}.{ident(IMAGE_SCHEMA)}")
    index = registry.INDEX_DEF
    con.execute(create_sql(_DB, index))
    if own:
        load_registry_table(con, _DB, index, own)
    con.execute(
        f"CREATE TABLE {ident(_DB)}.{ident(IMAGE_SCHEMA)}.{ident(INDEX_TABLE)} AS "
        f"SELECT * FROM {ident(_DB)}.main.{ident(index.name)}"
    )
    con.execute(f"DROP TABLE {ident(_DB)}.main.{ident(index.name)}")
    return count


def _write_record(con: duckdb.DuckDBPyConnection, record: ImageRecord) -> None:
    con.execute(
        f"CREATE TABLE {ident(_DB)}.{ident(IMAGE_SCHEMA)}.{ident(RECORD_TABLE)} ("
        "format INTEGER NOT NULL, seq BIGINT NOT NULL, "
        "snapshot_id BIGINT NOT NULL, batch_seq BIGINT NOT NULL, "
        "written_at TIMESTAMP WITH TIME ZONE NOT NULL, lake VARCHAR NOT NULL, "
        "writer VARCHAR NOT NULL, slot_digest VARCHAR NOT NULL)"
    )
    run(
        con,
        f"INSERT INTO {ident(_DB)}.{ident(IMAGE_SCHEMA)}.{ident(RECORD_TABLE)} "
        "VALUES (?, ?, ?, ?, make_timestamptz(?), ?, ?, ?)",
        [
            record.format,
            record.seq,
            record.head.snapshot_id,
            record.head.batch_seq,
            record.written_at_us,
            record.lake,
            WRITER,
            record.slot_digest,
        ],
    )


def read_image_record(con: duckdb.DuckDBPyConnection, db: str) -> ImageRecord:
    """The record of the image attached as ``db``. FormatError for a newer
    format (only the ``format`` column is read first: it is forever);
    CorruptionError when the record is missing or not one row."""
    try:
        formats = con.execute(
            f"SELECT format FROM {ident(db)}.{ident(IMAGE_SCHEMA)}.{ident(RECORD_TABLE)}"
        ).fetchall()
    except duckdb.CatalogException:
        raise CorruptionError(
            f"database {db!r} holds no slatelake image record ({IMAGE_SCHEMA}.{RECORD_TABLE}); "
            "it is not a catalog image"
        ) from None
    if len(formats) != 1 or not isinstance(formats[0][0], int):
        raise CorruptionError(
            f"database {db!r}: the image record has {len(formats)} rows, expected one"
        )
    version = formats[0][0]
    if version > IMAGE_FORMAT:
        raise FormatError(
            f"database {db!r}: catalog image format {version} is newer than this slatelake "
            f"reads ({IMAGE_FORMAT}); upgrade slatelake to use it"
        )
    table = f"{ident(db)}.{ident(IMAGE_SCHEMA)}.{ident(RECORD_TABLE)}"
    try:
        columns = {d[0] for d in con.execute(f"SELECT * FROM {table} LIMIT 0").description}
        bound = "slot_digest" if "slot_digest" in columns else "NULL"  # older: unbound
        row = con.execute(
            f"SELECT seq, snapshot_id, batch_seq, epoch_us(written_at), lake, {bound} FROM {table}"
        ).fetchone()
    except duckdb.Error as exc:
        raise CorruptionError(f"database {db!r}: the image record is unreadable ({exc})") from None
    assert row is not None  # one row, counted above
    seq, snap, bseq, written, lake, digest = row
    if digest is not None and not isinstance(digest, str):
        raise CorruptionError(f"database {db!r}: the image record's slot_digest is not text")
    return ImageRecord(version, seq, Head(snap, bseq), written, lake, digest)


def check_image(info: ImageInfo, local: Path) -> ImageRecord:
    """Open a fetched image read-only and check it is the image its name says:
    a DuckDB file with a record this build reads, at the named seq. Every
    refusal names the object (for ``ImageBook.newest_valid``'s ``check``)."""
    con = duckdb.connect(
        config={"autoinstall_known_extensions": False, "autoload_known_extensions": False}
    )
    try:
        try:
            con.execute(f"ATTACH {literal(str(local))} AS {ident(_DB)} (READ_ONLY)")
        except duckdb.Error as exc:
            raise CorruptionError(
                f"catalog image {info.url} is not a DuckDB database ({_first_line(exc)})"
            ) from None
        try:
            record = read_image_record(con, _DB)
        except CorruptionError as exc:
            raise type(exc)(f"catalog image {info.url}: {exc}") from None
    finally:
        with contextlib.suppress(duckdb.Error):
            con.close()
    if record.seq != info.seq:
        raise CorruptionError(
            f"catalog image {info.url} records slot {record.seq} but is named for slot "
            f"{info.seq}; it is skipped"
        )
    return record


def _first_line(exc: Any) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
