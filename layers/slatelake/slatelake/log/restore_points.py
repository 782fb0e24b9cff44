"""Restore points in the bucket: one record and one catalog file per point.

A restore point is kept beside the lake's other objects, under the lake root:

- ``restore-points/<name>.point``: the record, zlib-compressed JSON: when
  it was made and when it lapses, the head snapshot it holds, the SlateDB
  checkpoint made with it, its catalog object (path, BLAKE2b-128 digest,
  size) and every data and delete file that catalog names (``files``), in
  the spelling DuckLake's cleanup and orphan steps use.
- ``restore-points/<name>-<32 hex>.duckdb``: the catalog at that point, a
  stock DuckLake catalog file (what ``ducklake/transfer.py`` exports), named
  by its digest like an image (``log/images.py``).

Both are written create-if-absent, the catalog first: a record names only a
catalog that is whole, and a name holds one point until it is deleted (the
record first, so the point stops keeping files at once). The delete
boundary lists ``restore-points/`` once per construction and reads each
record; a record that does not decode is CorruptionError naming its object,
never "nothing kept" (what it keeps is then unknown). Knows nothing about
DuckDB or DuckLake: the paths are text to it.
"""

from __future__ import annotations

import builtins
import json
import re
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slatelake.errors import CorruptionError, MisconfigurationError, NotFoundError, StoreError
from slatelake.log.images import digest_of_file
from slatelake.store.location import LakeLocation
from slatelake.store.objects import ObjectClient, object_url, user_url

POINTS_DIR = "restore-points"
RECORD_SUFFIX = ".point"
CATALOG_SUFFIX = ".duckdb"
FORMAT = 1
MAX_NAME_CHARS = 128
# Object keys, file names and shells take these as they are: no quoting anywhere.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_DIGEST = r"[0-9a-f]{32}"


def check_name(name: object) -> str:
    """A restore point's name as given, or MisconfigurationError: 1-128
    letters, digits, ``.``, ``_`` and ``-``, starting with a letter or digit
    (it is part of an object key)."""
    if not isinstance(name, str) or not name.strip():
        raise MisconfigurationError("a restore point needs a name (--name NAME); got an empty one")
    if len(name) > MAX_NAME_CHARS:
        raise MisconfigurationError(
            f"restore point name of {len(name)} characters: at most {MAX_NAME_CHARS}; "
            "choose a shorter one"
        )
    if not _NAME.fullmatch(name):
        raise MisconfigurationError(
            f"restore point name {name!r}: use letters, digits, '.', '_' and '-', starting "
            "with a letter or digit (e.g. before-migration)"
        )
    return name


@dataclass(frozen=True)
class RestorePoint:
    """One restore point as recorded. Times are µs since the epoch."""

    name: str
    lake: str  # the lake URL it was made of
    created_at_us: int
    expires_at_us: int | None  # None: kept until deleted
    snapshot_id: int  # the head snapshot it holds
    data_path: str | None  # the catalog's data path at that point
    catalog_path: str  # its catalog object, under the store base
    catalog_digest: str
    catalog_size: int
    files: tuple[str, ...]  # every data and delete file its catalog names
    checkpoint_id: str | None = None  # the SlateDB checkpoint made with it
    checkpoint_manifest: int | None = None
    created_by: str | None = None

    def lapsed(self, now_us: int | None = None) -> bool:
        """Whether its TTL has run out (it then keeps no file)."""
        at = time.time_ns() // 1000 if now_us is None else now_us
        return self.expires_at_us is not None and at >= self.expires_at_us

    def to_dict(self) -> dict[str, Any]:
        """A summary for answers (the file count, not the paths)."""
        return {
            "name": self.name,
            "lake": self.lake,
            "created_at": self.created_at_us,
            "expires_at": self.expires_at_us,
            "lapsed": self.lapsed(),
            "snapshot_id": self.snapshot_id,
            "data_path": self.data_path,
            "catalog": user_url(LakeLocation.parse(self.lake), self.catalog_path),
            "catalog_bytes": self.catalog_size,
            "files": len(self.files),
            "checkpoint_id": self.checkpoint_id,
            "created_by": self.created_by,
        }


def encode_point(point: RestorePoint) -> bytes:
    doc = {
        "format": FORMAT,
        "name": point.name,
        "lake": point.lake,
        "created_at_us": point.created_at_us,
        "expires_at_us": point.expires_at_us,
        "snapshot_id": point.snapshot_id,
        "data_path": point.data_path,
        "catalog": {
            "path": point.catalog_path,
            "digest": point.catalog_digest,
            "size": point.catalog_size,
        },
        "checkpoint": None
        if point.checkpoint_id is None
        else {"id": point.checkpoint_id, "manifest_id": point.checkpoint_manifest},
        "created_by": point.created_by,
        "count": len(point.files),
        "files": sorted(set(point.files)),
    }
    return zlib.compress(json.dumps(doc, separators=(",", ":")).encode(), 6)


def decode_point(raw: bytes, where: str) -> RestorePoint:
    """The record in ``raw``; CorruptionError naming ``where`` when any part
    of it does not decode, or it is of a newer format."""
    try:
        doc = json.loads(zlib.decompress(raw))
        if not isinstance(doc, dict):
            raise TypeError(f"expected an object, got {type(doc).__name__}")
        if doc["format"] != FORMAT:
            raise ValueError(f"format {doc['format']!r} is not {FORMAT} (a newer slatelake?)")
        files = doc["files"]
        if not isinstance(files, list) or not all(isinstance(p, str) for p in files):
            raise TypeError("the file list is not a list of text")
        if len(files) != doc["count"]:
            raise ValueError(f"{len(files)} files where the record counts {doc['count']}")
        catalog, checkpoint = doc["catalog"], doc.get("checkpoint")
        expires = doc["expires_at_us"]
        return RestorePoint(
            name=check_name(doc["name"]),
            lake=str(doc["lake"]),
            created_at_us=int(doc["created_at_us"]),
            expires_at_us=None if expires is None else int(expires),
            snapshot_id=int(doc["snapshot_id"]),
            data_path=None if doc["data_path"] is None else str(doc["data_path"]),
            catalog_path=str(catalog["path"]),
            catalog_digest=str(catalog["digest"]),
            catalog_size=int(catalog["size"]),
            files=tuple(files),
            checkpoint_id=None if checkpoint is None else str(checkpoint["id"]),
            checkpoint_manifest=None if checkpoint is None else int(checkpoint["manifest_id"]),
            created_by=None if doc.get("created_by") is None else str(doc["created_by"]),
        )
    except (
        KeyError,
        TypeError,
        ValueError,
        AttributeError,
        zlib.error,
        MisconfigurationError,
    ) as e:
        raise CorruptionError(
            f"restore point record {where} does not decode ({type(e).__name__}: {e}); no "
            "cleanup or orphan step deletes a file until it is deleted or rewritten "
            "(`slatelake checkpoint delete` removes it)"
        ) from None


class RestorePointBook:
    """The restore points of one lake: list, read, write, fetch, delete."""

    def __init__(self, location: LakeLocation, client: ObjectClient | None = None) -> None:
        self.location = location
        self.client = client if client is not None else ObjectClient(location)
        self.prefix = location.path(POINTS_DIR) + "/"

    def record_path(self, name: str) -> str:
        return f"{self.prefix}{check_name(name)}{RECORD_SUFFIX}"

    def url_of(self, path: str) -> str:
        return user_url(self.location, path)

    def list(self) -> list[RestorePoint]:
        """Every restore point, oldest first: one LIST, one GET per record."""
        found = []
        for obj in self.client.list(self.prefix):
            name = obj.path[len(self.prefix) :]
            if not name.endswith(RECORD_SUFFIX) or "/" in name:
                continue  # catalogs, and whatever else is not ours to judge
            point = self._read(obj.path)
            if point is not None:
                found.append(point)
        found.sort(key=lambda p: (p.created_at_us, p.name))
        return found

    def get(self, name: str) -> RestorePoint | None:
        return self._read(self.record_path(name))

    def require(self, name: str) -> RestorePoint:
        point = self.get(name)
        if point is None:
            raise NotFoundError(
                f"no restore point {name!r} on {self.location.url}; `slatelake checkpoint "
                f"list {self.location.url}` lists them"
            )
        return point

    def _read(self, path: str) -> RestorePoint | None:
        raw = self.client.get(path)
        return None if raw is None else decode_point(raw, object_url(self.location, path))

    def kept(self, now_us: int | None = None) -> dict[str, str]:
        """Every file a live (unlapsed) restore point keeps -> the first
        point's name. Nothing is listed when the folder is empty."""
        out: dict[str, str] = {}
        for point in self.list():
            if not point.lapsed(now_us):
                for path in point.files:
                    out.setdefault(path, point.name)
        return out

    def put_catalog(self, name: str, local: Path) -> tuple[str, str, int]:
        """Store the point's catalog file (create-if-absent, named by its
        digest: an object already there holds these very bytes); returns its
        path, digest and size."""
        digest, size = digest_of_file(local)
        path = f"{self.prefix}{check_name(name)}-{digest}{CATALOG_SUFFIX}"
        self.client.put_if_absent(path, Path(local).read_bytes())
        return path, digest, size

    def put_record(self, point: RestorePoint) -> None:
        """Write the record; MisconfigurationError when the name is taken."""
        if not self.client.put_if_absent(self.record_path(point.name), encode_point(point)):
            raise MisconfigurationError(
                f"restore point {point.name!r} already exists on {self.location.url}; choose "
                f"another name, or delete it first (`slatelake checkpoint delete "
                f"{self.location.url} {point.name}`)"
            )

    def fetch_catalog(self, point: RestorePoint, dest: Path) -> Path:
        """A verified local copy of the point's catalog at ``dest``."""
        url = self.url_of(point.catalog_path)
        data = self.client.get(point.catalog_path)
        if data is None:
            raise NotFoundError(
                f"restore point {point.name!r}: its catalog {url} is gone; the point cannot "
                "be restored (delete it)"
            )
        dest.write_bytes(data)
        digest, size = digest_of_file(dest)
        if digest != point.catalog_digest or size != point.catalog_size:
            dest.unlink(missing_ok=True)
            raise CorruptionError(
                f"restore point {point.name!r}: its catalog {url} holds {size} bytes with "
                f"digest {digest}, but the record says {point.catalog_size} bytes, digest "
                f"{point.catalog_digest}; it was changed outside slatelake"
            )
        return dest

    def delete(self, name: str) -> builtins.list[str]:
        """Delete the record, then its catalogs (any a failed create left
        too); returns the objects deleted. Absent: nothing to do."""
        record = self.record_path(name)
        gone = []
        if self.client.get(record) is not None:
            self.client.delete(record)
            gone.append(record)
        leftover = re.compile(re.escape(name) + "-" + _DIGEST + re.escape(CATALOG_SUFFIX))
        for obj in self.client.list(self.prefix):
            if leftover.fullmatch(obj.path[len(self.prefix) :]):
                try:
                    self.client.delete(obj.path)
                except StoreError:
                    continue  # an unreferenced catalog: the next delete of the name takes it
                gone.append(obj.path)
        return gone


__all__ = [
    "POINTS_DIR",
    "RestorePoint",
    "RestorePointBook",
    "check_name",
    "decode_point",
    "encode_point",
]
