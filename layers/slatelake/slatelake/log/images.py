"""Catalog images: immutable copies of the catalog at one folded slot.

An image is a DuckDB database file (what is inside it is the ducklake layer's
business, ``ducklake/image_writer.py``) stored under the lake root as
``images/<20-digit seq>-<32 hex>.duckdb``: the seq of the folded slot it holds
and the BLAKE2b-128 digest of its bytes. The object is written once,
create-if-absent, so a name never holds two contents, and the digest in the
name is what a reader checks a download against: a truncated, damaged or
replaced image fails as CorruptionError naming its object, never loads.
A checksum the writer of a file computes proves nothing about which slot
it is of: the record inside names the digest of its slot (``log.slots.
slot_digest``), and an open trusts an image only when that matches the log
(``ducklake/opening.py``), so an old catalog relabelled as a newer slot is
skipped like a damaged one.

The newest image is found with one LIST of ``images/`` (names parse to seq and
digest; anything else there is ignored with a warning, never deleted).
``newest_valid`` falls back from an image that fails to the next older one,
with a warning naming it; ``collect`` deletes images older than the newest
``keep`` once the image that superseded them has existed for a grace period
(a reader may still be downloading one). Every call goes through the lake's
``ObjectClient``, so store deadlines and typed errors apply. Knows nothing
about DuckDB or DuckLake.
"""

from __future__ import annotations

import builtins
import hashlib
import logging
import os
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from slatelake.errors import (
    CorruptionError,
    MisconfigurationError,
    NotFoundError,
    SlatelakeError,
    StoreError,
)
from slatelake.log.slots import SEQ_WIDTH
from slatelake.store.location import LakeLocation
from slatelake.store.objects import ObjectClient, object_url, user_url

log = logging.getLogger("slatelake.images")

IMAGES_DIR = "images"
SUFFIX = ".duckdb"
DIGEST_BYTES = 16
DEFAULT_KEEP = 2
# A reader that listed an image before a newer one landed may still be
# downloading it; 15 minutes covers a large image on a slow link many times.
DEFAULT_GRACE_S = 900.0
_NAME = re.compile(rf"(\d{{{SEQ_WIDTH}}})-([0-9a-f]{{{DIGEST_BYTES * 2}}}){re.escape(SUFFIX)}")
_CHUNK = 1 << 20


@dataclass(frozen=True)
class ImageInfo:
    """One image object, as a LIST shows it."""

    seq: int  # the folded slot the image holds the catalog at
    digest: str  # BLAKE2b-128 of the object's bytes, hex
    size: int  # bytes, as listed
    path: str  # the object's path under the store base
    url: str  # what a user (or stock DuckDB) opens: a local path or an object URL
    last_modified_us: int = 0  # the store's clock, as listed

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


def image_name(seq: int, digest: str) -> str:
    return f"{seq:0{SEQ_WIDTH}d}-{digest}{SUFFIX}"


def digest_of_file(path: Path) -> tuple[str, int]:
    """BLAKE2b-128 (hex) and size of a local file, read in chunks."""
    h = hashlib.blake2b(digest_size=DIGEST_BYTES)
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size


def _digest_of_bytes(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=DIGEST_BYTES).hexdigest()


def now_us() -> int:
    return time.time_ns() // 1000


class ImageBook:
    """The images of one lake: list, put, fetch and verify, collect."""

    def __init__(self, location: LakeLocation, client: ObjectClient | None = None) -> None:
        self.location = location
        self.client = client if client is not None else ObjectClient(location)
        self.prefix = location.path(IMAGES_DIR) + "/"

    def path(self, seq: int, digest: str) -> str:
        return self.prefix + image_name(seq, digest)

    def url_of(self, path: str) -> str:
        """A local path for a file lake (what DuckDB attaches), else the object URL."""
        return user_url(self.location, path)

    def info(self, seq: int, digest: str, size: int, last_modified_us: int = 0) -> ImageInfo:
        path = self.path(seq, digest)
        return ImageInfo(seq, digest, size, path, self.url_of(path), last_modified_us)

    def list(self) -> list[ImageInfo]:
        """Every image, newest first (seq, then the store's time): one LIST.

        A name that does not parse is not an image: warned about and left alone
        (never deleted: it is not ours to judge)."""
        found = []
        for obj in self.client.list(self.prefix):
            name = obj.path[len(self.prefix) :]
            match = _NAME.fullmatch(name)
            if match is None:
                if not name.startswith("."):  # a store's own temporary file
                    log.warning(
                        "ignoring %s under %s: not a catalog image name "
                        "(<20-digit seq>-<32 hex digest>%s)",
                        object_url(self.location, obj.path),
                        self.url_of(self.prefix),
                        SUFFIX,
                    )
                continue
            seq, digest = int(match.group(1)), match.group(2)
            found.append(self.info(seq, digest, obj.size, obj.last_modified_us))
        found.sort(key=lambda i: (i.seq, i.last_modified_us, i.digest), reverse=True)
        return found

    def newest(self) -> ImageInfo | None:
        images = self.list()
        return images[0] if images else None

    def put(self, seq: int, local_file: Path) -> ImageInfo:
        """Store a local image file as the image of slot ``seq``, create-if-absent.

        The name carries the file's digest, so an existing object of that name
        holds these very bytes: finding it is success, not a conflict. A PUT
        whose answer was lost raises AmbiguousWriteError (a whole object or
        none landed: S3 PUTs are atomic)."""
        if seq < 0:  # 0: an imported lake, its rows laid down folded before any slot
            raise MisconfigurationError(f"an image holds a fold cursor; seq {seq} is not one")
        digest, size = digest_of_file(local_file)
        info = self.info(seq, digest, size, now_us())
        data = Path(local_file).read_bytes()
        self.client.put_if_absent(info.path, data)
        return info

    def fetch(self, info: ImageInfo, dest_dir: Path) -> Path:
        """A verified local copy of the image: its digest and size checked.

        A file lake's image is verified in place and its own path returned;
        others download into ``dest_dir`` (an already downloaded copy that
        verifies is reused: images are immutable). A missing object is
        NotFoundError, a truncated or damaged one CorruptionError, each
        naming the object."""
        if self.location.scheme == "file":
            local = Path(info.url)
            try:
                digest, size = digest_of_file(local)
            except FileNotFoundError:
                raise self._missing(info) from None
            except OSError as exc:
                raise StoreError(f"GET {info.url}: reading the image failed ({exc})") from None
            self._verify(info, digest, size)
            return local
        dest = Path(dest_dir) / info.name
        if dest.is_file():
            digest, size = digest_of_file(dest)
            if digest == info.digest:
                return dest
            dest.unlink(missing_ok=True)
        data = self.client.get(info.path)
        if data is None:
            raise self._missing(info)
        self._verify(info, _digest_of_bytes(data), len(data))
        partial = dest.with_name(f".{info.name}.{uuid.uuid4().hex}.part")
        try:
            partial.write_bytes(data)
            os.replace(partial, dest)
        except OSError as exc:
            partial.unlink(missing_ok=True)
            raise StoreError(
                f"GET {info.url}: writing the local copy {dest} failed ({exc})"
            ) from None
        return dest

    def _missing(self, info: ImageInfo) -> NotFoundError:
        return NotFoundError(
            f"catalog image {info.url} is gone (deleted after it was listed); "
            "an older image or the store serves instead"
        )

    def _verify(self, info: ImageInfo, digest: str, size: int) -> None:
        if digest != info.digest or size != info.size:
            raise CorruptionError(
                f"catalog image {info.url}: {size} bytes with digest {digest}, but it was "
                f"listed at {info.size} bytes and named for digest {info.digest}; it was "
                "truncated or changed outside slatelake and is skipped"
            )

    def newest_valid(
        self,
        dest_dir: Path,
        check: Callable[[ImageInfo, Path], object] | None = None,
    ) -> tuple[ImageInfo, Path] | None:
        """The newest image that fetches, verifies and passes ``check`` (which
        raises a SlatelakeError for an image it refuses, e.g. a newer format),
        with its local path; None when none does. Each one skipped is a
        warning naming its object; the caller then falls back to the store."""
        for info in self.list():
            try:
                local = self.fetch(info, dest_dir)
                if check is not None:
                    check(info, local)
                return info, local
            except SlatelakeError as exc:
                log.warning(
                    "catalog image %s skipped (%s: %s); trying the next older image",
                    info.url,
                    type(exc).__name__,
                    exc,
                )
                if self.location.scheme != "file":
                    (Path(dest_dir) / info.name).unlink(missing_ok=True)
        return None

    def collect(
        self,
        keep: int = DEFAULT_KEEP,
        grace_s: float = DEFAULT_GRACE_S,
        now: int | None = None,
    ) -> builtins.list[ImageInfo]:
        """Delete images older than the newest ``keep`` whose superseding
        image has existed for ``grace_s``; returns those deleted.

        An image stopped being the newest when the first newer one landed, so
        its readers started before then: the grace counts from the oldest of
        the newer images' store times (``now`` and those times are epoch µs;
        the holder's clock against the store's, so skew shortens or lengthens
        the grace by the skew, seconds against minutes)."""
        if keep < DEFAULT_KEEP:
            raise MisconfigurationError(
                f"keep={keep}: at least the newest {DEFAULT_KEEP} images always stay"
            )
        at = now_us() if now is None else now
        images = self.list()
        doomed = []
        superseded_at = min((i.last_modified_us for i in images[:keep]), default=at)
        for older in images[keep:]:
            if at - superseded_at >= grace_s * 1_000_000:
                doomed.append(older)
            superseded_at = min(superseded_at, older.last_modified_us)
        for info in doomed:
            self.client.delete(info.path)
        return doomed
