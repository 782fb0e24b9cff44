"""Borrowed data files: files an imported lake reads but does not own (the catalog half; no SQL).

``slatelake import`` without ``--copy-data`` leaves the data files where the
stock catalog keeps them, so the source catalog (and whoever still writes
it) goes on referencing them. Every such file is listed in one sys record,
``sys/borrowed_files``, written with the import's rows (before the lake
exists) and shrunk only by ``slatelake release-borrowed``. No cleanup,
orphan or rewrite step in the lake may delete a path ``BorrowedFiles.covers``
answers True for: deleting it would break the source catalog, and cannot be
undone.

Files the source had scheduled for deletion are not borrowed: no snapshot of
the source reads them, and its own cleanup deletes them anyway.

The record is read whole: one that does not decode is CorruptionError,
never "nothing borrowed", because that answer would let a delete through.
Paths are kept normalized (``normalize_path``) in the form DuckLake's cleanup
and orphan dry runs name files: a plain absolute local path or an
``s3://bucket/key`` URL. The list is zlib-compressed JSON: 100k paths of a
usual layout take about 2 MB (sorted paths share their directories).
"""

from __future__ import annotations

import json
import posixpath
import re
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from slatelake.errors import CorruptionError
from slatelake.store import values
from slatelake.store.keys import Subspace, encode_key

BORROWED_KEY = encode_key(Subspace.SYS, 0x0E)
BORROWED_LABEL = "sys/borrowed_files"
_BORROWED_KIND = 0x0E
_FORMAT = 1
_SLASHES = re.compile(r"^/+")


def normalize_path(path: str) -> str:
    """One spelling per file, on both sides of ``covers``: a ``file://`` URL
    becomes its plain path (percent escapes decoded), a local path loses
    ``.``, ``..``, repeated and trailing slashes; an object store URL only its
    trailing slash (object keys are literal: ``a//b`` is another key)."""
    text = str(path)
    if text.startswith("file:"):
        parts = urlsplit(text)
        if parts.netloc in ("", "localhost"):
            text = unquote(parts.path)
    if text.startswith("/"):
        return _SLASHES.sub("/", posixpath.normpath(text))
    return text.rstrip("/") if "://" in text else text


@dataclass(frozen=True)
class BorrowedFiles:
    """The lake's borrowed files: normalized paths, sorted, and where they came
    from. ``covers(path)`` is the one question a delete asks."""

    paths: tuple[str, ...] = ()
    source: str | None = None  # the catalog file they were imported from
    created_at: int | None = None  # µs since the epoch
    _members: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    def __post_init__(self) -> None:
        normalized = tuple(sorted({normalize_path(p) for p in self.paths}))
        object.__setattr__(self, "paths", normalized)
        object.__setattr__(self, "_members", frozenset(normalized))

    def __len__(self) -> int:
        return len(self.paths)

    def covers(self, path: str) -> bool:
        """Whether ``path`` (as a DuckLake dry run names it, or any spelling
        ``normalize_path`` folds to it) is a borrowed file no step may delete."""
        return bool(self._members) and normalize_path(path) in self._members

    def without(self, paths: Iterable[str]) -> BorrowedFiles:
        """The same record with ``paths`` released (each in any spelling)."""
        gone = {normalize_path(p) for p in paths}
        return BorrowedFiles(
            tuple(p for p in self.paths if p not in gone), self.source, self.created_at
        )

    def to_dict(self) -> dict[str, Any]:
        """A summary for answers and the audit log (not the 100k paths)."""
        return {"source": self.source, "created_at": self.created_at, "count": len(self)}


def encode_borrowed(borrowed: BorrowedFiles) -> bytes:
    listed = json.dumps(list(borrowed.paths), separators=(",", ":")).encode()
    return values.frame(
        _BORROWED_KIND,
        {
            "format": _FORMAT,
            "source": borrowed.source,
            "created_at": borrowed.created_at,
            "count": len(borrowed),
            "paths": zlib.compress(listed, 9),
        },
    )


def decode_borrowed(raw: bytes | None) -> BorrowedFiles:
    """The borrowed files (none when the record is absent); CorruptionError
    naming the record when any part of it does not decode or its count does
    not match (what must not be deleted is then unknown)."""
    if raw is None:
        return BorrowedFiles()
    try:
        doc = values.unframe(raw, _BORROWED_KIND, BORROWED_LABEL)
        if doc["format"] != _FORMAT:
            raise ValueError(f"format {doc['format']!r} is not {_FORMAT}")
        paths = json.loads(zlib.decompress(doc["paths"]))
        if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
            raise TypeError("the path list is not a list of text")
        if len(paths) != doc["count"]:
            raise ValueError(f"{len(paths)} paths where the record counts {doc['count']}")
        source, at = doc.get("source"), doc.get("created_at")
        return BorrowedFiles(
            tuple(paths), None if source is None else str(source), None if at is None else int(at)
        )
    except CorruptionError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, zlib.error) as exc:
        raise CorruptionError(
            f"{BORROWED_LABEL} does not decode ({type(exc).__name__}: {exc}); no file may be "
            "deleted until it is rewritten (slatelake release-borrowed LAKE --all rewrites it, "
            "after checking no other catalog still uses the lake's data files)"
        ) from exc


__all__ = [
    "BORROWED_KEY",
    "BORROWED_LABEL",
    "BorrowedFiles",
    "decode_borrowed",
    "encode_borrowed",
    "normalize_path",
]
