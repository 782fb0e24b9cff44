"""Plain object access for the log and listings (obstore, sync).

``put_if_absent`` is the one primitive the log rests on: the object store
picks exactly one winner per path. Other failures after sending are
``AmbiguousWriteError``: the object may or may not have landed, and the caller
must look. Knows nothing about DuckLake.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import obstore
from obstore.exceptions import AlreadyExistsError
from obstore.exceptions import NotFoundError as ObNotFound

from slatelake.errors import SlatelakeError
from slatelake.store.location import LakeLocation


class AmbiguousWriteError(SlatelakeError):
    """A PUT failed after it may have reached the store."""

    retryable = True


@dataclass(frozen=True)
class ObjectInfo:
    path: str
    size: int
    last_modified_us: int


class ObjectClient:
    """Thin sync wrapper over obstore for one lake location."""

    def __init__(self, location: LakeLocation, store: Any | None = None) -> None:
        self.location = location
        self.store = store if store is not None else location.obstore()

    def put_if_absent(self, path: str, data: bytes) -> bool:
        """Create path with data. False when the object already exists."""
        try:
            obstore.put(self.store, path, data, mode="create")
            return True
        except AlreadyExistsError:
            return False
        except Exception as exc:
            raise AmbiguousWriteError(f"PUT {path}: {type(exc).__name__}: {exc}") from exc

    def put(self, path: str, data: bytes) -> None:
        obstore.put(self.store, path, data)

    def get(self, path: str) -> bytes | None:
        try:
            return bytes(obstore.get(self.store, path).bytes())
        except (ObNotFound, FileNotFoundError):
            return None

    def delete(self, path: str) -> None:
        with contextlib.suppress(ObNotFound, FileNotFoundError):
            obstore.delete(self.store, path)

    def list(self, prefix: str, offset: str | None = None) -> Iterator[ObjectInfo]:
        """Objects under prefix (a folder path ending in '/'), in path order."""
        kwargs: dict[str, Any] = {}
        if offset is not None:
            kwargs["offset"] = offset
        for batch in obstore.list(self.store, prefix, **kwargs):
            for meta in batch:
                yield ObjectInfo(
                    path=meta["path"],
                    size=int(meta["size"]),
                    last_modified_us=int(meta["last_modified"].timestamp() * 1_000_000),
                )

    def any_under(self, prefix: str) -> bool:
        return next(iter(self.list(prefix)), None) is not None
