"""Plain object access for the log and listings (obstore, sync).

``put_if_absent`` is the one primitive the log rests on: the object store
picks exactly one winner per path. Other failures after sending are
``AmbiguousWriteError``: the object may or may not have landed, and the caller
must look. A refusal (403, a missing bucket, a bad path) is not ambiguous:
nothing landed, and it raises its typed error. Knows nothing about DuckLake.

Calls to a network store (S3) run on the store runner with a deadline
(``SLATELAKE_STORE_TIMEOUT_S``) and are cancelled past it; local and memory
stores answer or fail at once and are called directly.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import obstore
from obstore.exceptions import AlreadyExistsError
from obstore.exceptions import BaseError as ObError
from obstore.exceptions import NotFoundError as ObNotFound

from slatelake.errors import (
    CorruptionError,
    MisconfigurationError,
    NotFoundError,
    PermissionDeniedError,
    SlatelakeError,
    StoreError,
    StoreTimeoutError,
    StoreUnavailableError,
)
from slatelake.store import _bindings
from slatelake.store.location import LakeLocation

T = TypeVar("T")

# Words in a store's error text (obstore's and SlateDB's both carry the HTTP
# status and S3 error code, or the OS error) that make a failure terminal.
_DENIED = (
    "403 Forbidden",
    "401 Unauthorized",
    "AccessDenied",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "ExpiredToken",
    "InvalidToken",
    "lacked the necessary privileges",
    "Permission denied",
)
_NO_BUCKET = ("NoSuchBucket",)
_BAD_PATH = ("File name too long", "os error 36", "KeyTooLong", "Invalid path")
# An object shorter than its manifest says: damage (SSTs are immutable).
_DAMAGED = (
    "Requested range was invalid",
    "Range Not Satisfiable",
    "InvalidRange",
    "part fetch size check failed",
)


class AmbiguousWriteError(SlatelakeError):
    """A PUT failed after it may have reached the store."""

    retryable = True


def first_line(text: str, limit: int = 400) -> str:
    """A store error's first line, bounded (obstore appends a debug dump)."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[:limit] + "..."


def classify(what: str, location: LakeLocation, exc: BaseException) -> SlatelakeError:
    """The typed slatelake error for a failed store call, by its error text.

    Terminal: permission (``PermissionDeniedError``), a missing bucket
    (``NotFoundError``), a path the store cannot hold (``MisconfigurationError``),
    an object cut short (``CorruptionError``). Everything else is transient
    (``StoreUnavailableError``, retryable): a 5xx, a refused connection."""
    if isinstance(exc, SlatelakeError):
        return exc
    text = f"{type(exc).__name__}: {exc}"
    detail = first_line(text)
    if type(exc).__name__ in ("PermissionDeniedError", "UnauthenticatedError") or any(
        w in text for w in _DENIED
    ):
        return PermissionDeniedError(
            f"{what}: the store refused access to {location.url} ({detail}); check the "
            "credentials and that they may read and write under the lake root"
        )
    if any(w in text for w in _NO_BUCKET):
        return NotFoundError(
            f"{what}: bucket {location.bucket!r} does not exist ({location.url}); create it "
            "or fix the lake URL"
        )
    if type(exc).__name__ == "InvalidPathError" or any(w in text for w in _BAD_PATH):
        return MisconfigurationError(
            f"{what}: the store cannot hold a path under {location.url} ({detail}); use a "
            "shorter lake path (each segment at most 255 bytes)"
        )
    if any(w in text for w in _DAMAGED):
        return CorruptionError(
            f"{what}: an object under {location.url} is shorter than recorded ({detail}); "
            "it was truncated or replaced outside slatelake"
        )
    if isinstance(exc, OSError | ObError) or type(exc).__name__ == "Unavailable":
        return StoreUnavailableError(f"{what}: {detail}")
    return StoreError(f"{what}: {detail}")


@dataclass(frozen=True)
class ObjectInfo:
    path: str
    size: int
    last_modified_us: int


async def _acall(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call an obstore async function on the runner's loop (it needs a running
    loop when called, not only when awaited)."""
    return await func(*args, **kwargs)


async def _get_bytes(store: Any, path: str) -> bytes:
    result = await obstore.get_async(store, path)
    return bytes(await result.bytes_async())


class ObjectClient:
    """Thin sync wrapper over obstore for one lake location."""

    def __init__(self, location: LakeLocation, store: Any | None = None) -> None:
        self.location = location
        self.store = store if store is not None else location.obstore()
        self._remote = location.scheme == "s3"

    def _call(self, what: str, sync: Callable[[], T], remote: Callable[[], Coroutine]) -> T:
        """One store call: bounded when remote; failures typed. obstore's
        AlreadyExists and NotFound (not for a missing bucket) pass through for
        the caller to read as answers."""
        try:
            return _bindings.run(remote()) if self._remote else sync()
        except (AlreadyExistsError, StopIteration, StopAsyncIteration):
            raise
        except (ObNotFound, FileNotFoundError) as exc:
            if any(w in str(exc) for w in _NO_BUCKET):
                raise classify(what, self.location, exc) from exc
            raise
        except StoreTimeoutError as exc:
            raise StoreTimeoutError(f"{what} on {self.location.url}: {exc}") from None
        except SlatelakeError:
            raise
        except Exception as exc:
            raise classify(what, self.location, exc) from exc

    def put_if_absent(self, path: str, data: bytes) -> bool:
        """Create path with data. False when the object already exists."""
        try:
            self._call(
                f"PUT {path}",
                lambda: obstore.put(self.store, path, data, mode="create"),
                lambda: _acall(obstore.put_async, self.store, path, data, mode="create"),
            )
            return True
        except AlreadyExistsError:
            return False
        except (PermissionDeniedError, NotFoundError, MisconfigurationError):
            raise  # refused outright: nothing landed, and retrying cannot help
        except Exception as exc:
            raise AmbiguousWriteError(f"PUT {path}: {type(exc).__name__}: {exc}") from exc

    def put(self, path: str, data: bytes) -> None:
        self._call(
            f"PUT {path}",
            lambda: obstore.put(self.store, path, data),
            lambda: _acall(obstore.put_async, self.store, path, data),
        )

    def get(self, path: str) -> bytes | None:
        try:
            return self._call(
                f"GET {path}",
                lambda: bytes(obstore.get(self.store, path).bytes()),
                lambda: _get_bytes(self.store, path),
            )
        except (ObNotFound, FileNotFoundError):
            return None

    def delete(self, path: str) -> None:
        with contextlib.suppress(ObNotFound, FileNotFoundError):
            self._call(
                f"DELETE {path}",
                lambda: obstore.delete(self.store, path),
                lambda: _acall(obstore.delete_async, self.store, path),
            )

    def list(self, prefix: str, offset: str | None = None) -> Iterator[ObjectInfo]:
        """Objects under prefix (a folder path ending in '/'), in path order.
        Each page is one bounded call."""
        kwargs: dict[str, Any] = {}
        if offset is not None:
            kwargs["offset"] = offset
        what = f"LIST {prefix}"
        stream = obstore.list(self.store, prefix, **kwargs)  # lazy: no request yet
        while True:
            try:
                batch = self._call(what, lambda: next(stream), lambda: _acall(stream.__anext__))
            except (StopIteration, StopAsyncIteration):
                return
            for meta in batch:
                yield ObjectInfo(
                    path=meta["path"],
                    size=int(meta["size"]),
                    last_modified_us=int(meta["last_modified"].timestamp() * 1_000_000),
                )

    def any_under(self, prefix: str) -> bool:
        return next(iter(self.list(prefix)), None) is not None
