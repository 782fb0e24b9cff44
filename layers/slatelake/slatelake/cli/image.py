"""``slatelake image``: write a catalog image now, or print how stock DuckDB
attaches the newest one; and the holder's image cadence (``ImageCadence``,
driven by ``slatelake hold``).

An image is the catalog as of one folded slot (its seq), a DuckDB file under
``images/`` in the lake root that stock DuckLake attaches read-only. It is as
fresh as its seq: commits after it are in the log, not in the image.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slatelake.cli.arguments import lake_verb
from slatelake.errors import FencedError

log = logging.getLogger("slatelake.images")

# Holder defaults. An open replays the slots after the newest image (eight
# GETs at a time): 200 slots is ~25 rounds of GETs, a few hundred ms on S3;
# an image of a 100k-file catalog costs the holder a few seconds to write.
# Ten minutes bounds a trickle's replay; fifteen minutes of grace covers a
# slow download of a superseded image many times over.
DEFAULT_EVERY_SLOTS = 200
DEFAULT_MAX_AGE_S = 600.0
DEFAULT_GRACE_S = 900.0
RETRY_AFTER_S = 60.0  # after a failed image, before the holder tries again


def attach_statement(url: str, alias: str = "lake") -> str:
    """The stock DuckLake ATTACH of an image, every value quoted."""
    from slatelake.ducklake.sql import ident, literal

    return f"ATTACH {literal('ducklake:' + url)} AS {ident(alias)} (READ_ONLY);"


def _cmd_image(args: argparse.Namespace) -> int:
    from slatelake.store.location import LakeLocation

    location = LakeLocation.parse(args.lake)
    if args.print_attach:
        return _print_attach(location, args.json)
    from slatelake.ducklake.image_writer import write_image

    result = write_image(location)
    info = result.info
    doc = {
        "written": result.written,
        "seq": info.seq if info is not None else result.seq,
        "head": {"snapshot_id": result.head.snapshot_id, "batch_seq": result.head.batch_seq},
        "bytes": info.size if info is not None else 0,
        "path": info.url if info is not None else None,
        "seconds": round(result.seconds, 3),
    }
    if not result.written:
        doc["reason"] = result.reason
    if args.json:
        print(json.dumps(doc), flush=True)
    elif result.written and info is not None:
        print(
            f"image of slot {info.seq} (head {result.head.snapshot_id}/{result.head.batch_seq}), "
            f"{info.size} bytes, written in {result.seconds:.2f}s: {info.url}"
        )
    else:
        where = f" ({info.url})" if info is not None else ""
        print(f"no image written: {result.reason}{where}")
    return 0


def _print_attach(location: Any, as_json: bool) -> int:
    from slatelake.ducklake.image_writer import check_image
    from slatelake.errors import NotFoundError, UnsupportedError
    from slatelake.log.images import ImageBook
    from slatelake.store.db import store_exists

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
                f"{location.url} has no usable catalog image; write one with "
                f"`slatelake image {location.url}` (or run `slatelake hold`)"
            )
        info, local = found
        record = check_image(info, local)
    statement = attach_statement(info.url)
    if as_json:
        head = {"snapshot_id": record.head.snapshot_id, "batch_seq": record.head.batch_seq}
        doc = {"attach": statement, "seq": info.seq, "head": head, "path": info.url}
        print(json.dumps(doc), flush=True)
    else:
        print(statement, flush=True)
    return 0


@dataclass
class ImageCadence:
    """When the holder writes an image, and collecting old ones after.

    Due when ``every_slots`` slots were folded since the newest image, or it
    is older than ``max_age_s`` and something was folded since (0 turns a
    trigger off). Only a flushed fold is imaged. A failure is reported on
    stderr and in the log and retried after RETRY_AFTER_S; it never stops
    folding (a fenced holder still stops: that is the fold's answer)."""

    location: Any
    every_slots: int = DEFAULT_EVERY_SLOTS
    max_age_s: float = DEFAULT_MAX_AGE_S
    grace_s: float = DEFAULT_GRACE_S
    as_json: bool = False
    _seq: int | None = None  # the newest image's seq (None: not yet listed)
    _at_us: int = 0  # when it was stored (the store's clock, or ours for our own)
    _retry_at: float = 0.0
    _collect_at: float = 0.0
    _book: Any = field(default=None, repr=False)

    @property
    def enabled(self) -> bool:
        return self.every_slots > 0 or self.max_age_s > 0

    def book(self) -> Any:
        if self._book is None:
            from slatelake.log.images import ImageBook

            self._book = ImageBook(self.location)
        return self._book

    def due(self, fold_seq: int, now_us: int) -> bool:
        if self._seq is None or fold_seq <= self._seq:
            return False
        if self.every_slots and fold_seq - self._seq >= self.every_slots:
            return True
        return bool(self.max_age_s) and now_us - self._at_us >= self.max_age_s * 1_000_000

    def tick(self, folder: Any) -> None:
        """One look after a fold: write an image if due, then collect."""
        if not self.enabled or time.monotonic() < self._retry_at:
            return
        from slatelake.log.images import now_us

        try:
            if self._seq is None:
                newest = self.book().newest()
                self._seq = newest.seq if newest is not None else 0
                self._at_us = newest.last_modified_us if newest is not None else 0
            if folder.seq == folder.flushed_seq and self.due(folder.seq, now_us()):
                self._write(folder)
            if time.monotonic() >= self._collect_at:
                self._collect()
        except FencedError:
            raise
        except Exception as exc:  # noqa: BLE001 - an image never stops folding
            self._retry_at = time.monotonic() + RETRY_AFTER_S
            log.error("catalog image of %s failed: %s", self.location.url, exc)
            print(
                f"slatelake hold: catalog image failed ({type(exc).__name__}: {exc}); "
                f"folding goes on, next try in {RETRY_AFTER_S:g}s",
                file=sys.stderr,
                flush=True,
            )

    def _write(self, folder: Any) -> None:
        from slatelake.ducklake.image_writer import write_image
        from slatelake.log.images import now_us

        result = write_image(self.location, reader=folder.writer, book=self.book())
        if result.info is not None:
            self._seq = result.info.seq
            self._at_us = now_us() if result.written else result.info.last_modified_us
            folder.note_image(result.info.seq)
        if result.written and result.info is not None:
            self._collect_at = 0.0  # the one just superseded starts its grace
            doc = {
                "image": {
                    "seq": result.info.seq,
                    "head": {
                        "snapshot_id": result.head.snapshot_id,
                        "batch_seq": result.head.batch_seq,
                    },
                    "bytes": result.info.size,
                    "path": result.info.url,
                    "seconds": round(result.seconds, 3),
                }
            }
            if self.as_json:
                print(json.dumps(doc), flush=True)
            else:
                print(
                    f"image of slot {result.info.seq}, {result.info.size} bytes, "
                    f"in {result.seconds:.2f}s: {result.info.url}",
                    flush=True,
                )

    def _collect(self) -> None:
        gone = self.book().collect(grace_s=self.grace_s)
        # Nothing more can become collectable before a newer image's grace ends.
        self._collect_at = time.monotonic() + min(self.grace_s, 60.0)
        if not gone:
            return
        if self.as_json:
            print(json.dumps({"images_collected": [i.url for i in gone]}), flush=True)
        else:
            print(f"collected {len(gone)} old image(s): {', '.join(i.url for i in gone)}")


def register(sub: Any) -> None:
    p = lake_verb(
        sub,
        "image",
        _cmd_image,
        "Write a catalog image now: the catalog as of the store's fold cursor, as a DuckDB "
        "file under LAKE/images/ that stock DuckLake attaches read-only. An image is as fresh "
        "as its seq (the last folded slot): commits not yet folded are not in it, so run "
        "`slatelake fold` first for a fresher one. Writes nothing (exit 0) when the newest "
        "image is already at the fold cursor. `slatelake hold` writes images on its own.",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object: written, seq, head {snapshot_id, batch_seq}, bytes, "
        "path (local path or s3:// URL), seconds",
    )
    p.add_argument(
        "--print-attach",
        action="store_true",
        help="write nothing; print the ATTACH statement that opens the newest valid image "
        "read-only in stock DuckDB, as of its seq (not the lake's head). Stock DuckDB needs "
        "only its ducklake extension, and for an s3:// lake httpfs and an S3 secret",
    )
