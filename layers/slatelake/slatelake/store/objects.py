"""Plain object access for the log and listings (obstore, sync), and the
translation of every foreign store error into a typed slatelake one.

``put_if_absent`` is the one primitive the log rests on: the object store
picks exactly one winner per path. Other failures after sending are
``AmbiguousWriteError``: the object may or may not have landed, and the caller
must look. A refusal (403/401, a missing bucket, a bad path) is not ambiguous:
nothing landed, and it raises its typed error. Knows nothing about DuckLake.

``translate`` is the boundary for obstore's and SlateDB's errors alike: it
reads the HTTP status, the S3 error code and message, or the OS error out of
their text once, and says it in one line that names the operation and the
object (``PUT s3://bucket/lake/commits/...``). Their multi-line debug dumps
never reach a message; the foreign exception stays reachable as
``__context__`` for a debugger, not in a traceback.

Calls to a network store (S3) run on the store runner with a deadline
(``SLATELAKE_STORE_TIMEOUT_S``) and are cancelled past it; local and memory
stores answer or fail at once and are called directly.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, TypeVar
from urllib.parse import parse_qs, unquote, urlsplit

import obstore
from obstore.exceptions import AlreadyExistsError
from obstore.exceptions import BaseError as ObError
from obstore.exceptions import NotFoundError as ObNotFound

from slatelake.errors import (
    AmbiguousWriteError,
    Backoff,
    CorruptionError,
    MisconfigurationError,
    NotFoundError,
    PermissionDeniedError,
    SlatelakeError,
    StoreError,
    StoreTimeoutError,
    StoreUnavailableError,
    retry,
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
    "lacked valid authentication",
    "Permission denied",
)
# A DELETE that got no answer is sent again (it is idempotent).
_DELETE_ATTEMPTS = 4
_DELETE_BACKOFF = Backoff(first_s=0.1, factor=2.0, cap_s=1.0, jitter=0.5)
_DENIED_TYPES = ("PermissionDeniedError", "UnauthenticatedError")
_NO_BUCKET = ("NoSuchBucket",)
_BAD_PATH = ("File name too long", "os error 36", "KeyTooLong", "Invalid path")
# An object shorter than its manifest says: damage (SSTs are immutable).
_DAMAGED = (
    "Requested range was invalid",
    "Range Not Satisfiable",
    "InvalidRange",
    "part fetch size check failed",
)
# How a request failed without an HTTP answer, in the words of the text.
TIMED_OUT = "the request timed out"
_TRANSPORT = (
    ("timed out", TIMED_OUT),
    ("timeout", TIMED_OUT),
    ("connection refused", "the connection was refused"),
    ("connection reset", "the connection was reset"),
    ("connection closed", "the connection was closed before an answer"),
    ("error sending request", "the request failed without an answer (connection dropped)"),
    ("error trying to connect", "the connection failed"),
    ("dns error", "the endpoint's name did not resolve"),
)
_STATUS = re.compile(r"status(?: code)?:? (\d{3})(?: ([A-Z][A-Za-z -]*?))?\s*(?=[:,(]|$)")
_CODE = re.compile(r"<Code>([^<]{1,80})</Code>")
_MESSAGE = re.compile(r"<Message>([^<]{0,200})</Message>")
_REQUEST = re.compile(r"Error performing (GET|PUT|POST|HEAD|DELETE) (https?://[^\s,]+)")
_RETRIES = re.compile(r"after (\d+) retries")
_OS_ERROR = re.compile(r"([A-Za-z][A-Za-z ,']*?) \(os error (\d+)\)")
_URL = re.compile(r"https?://\S+")
# A local path in the text; obstore's temporary "#N" suffix is not part of it.
_LOCAL_PATH = re.compile(r"(?:on|file|dir|path|location) (/[^\s:,#]+)")
_SETTINGS = re.compile(r",? (?:max_retries|retry_timeout): [^\s,]+")  # a client's knobs
_LIMIT = 240
# Worth another try: EINTR, EAGAIN, EBUSY, and ENOENT (a file SlateDB expected
# may be one a compaction just replaced; a fresh manifest no longer names it).
_TRANSIENT_ERRNOS = (2, 4, 11, 16)


def user_url(location: LakeLocation, path: str) -> str:
    """What a user (stock DuckDB, ``cp``, ``aws s3 cp``) opens: a local path
    for a file store, else the object URL."""
    return "/" + path.lstrip("/") if location.scheme == "file" else object_url(location, path)


def object_url(location: LakeLocation, path: str) -> str:
    """An object of the lake's store, named as a user would look it up."""
    if location.scheme == "s3":
        return f"s3://{location.bucket}/{path}"
    if location.scheme == "memory":
        return f"memory://{location.bucket}/{path}"
    return PurePosixPath("/", path).as_uri()


@dataclass(frozen=True)
class Fault:
    """What a foreign store error says, read once from its text."""

    status: int | None  # the HTTP status, when the store answered
    code: str | None  # the S3 error code (AccessDenied, NoSuchBucket, SlowDown...)
    errno: int | None  # the OS error, for a local store (or a socket)
    cause: str  # one readable line: status, code and message, or the OS or transport cause
    request: str | None  # "GET s3://bucket/key" when the text names the request
    text: str  # the whole text, first line first, for matching


def _text_of(exc: BaseException) -> str:
    """The error's text without obstore's debug dump (SlateDB's ``message``
    when it has one: its ``str`` wraps it in ``message='...'``)."""
    text = str(getattr(exc, "message", None) or exc)
    text = text.split("\n\nDebug source:", 1)[0]
    return f"{type(exc).__name__}: {text}"


def _request_of(text: str, location: LakeLocation) -> str | None:
    """The request (S3) or the file (local) the error text names, as a user names it."""
    if location.scheme == "file":
        local = _LOCAL_PATH.search(text)
        return None if local is None else PurePosixPath(local.group(1)).as_uri()
    match = _REQUEST.search(text)
    if match is None or location.scheme != "s3":
        return None
    method, url = match.groups()
    parts = urlsplit(url)
    path = unquote(parts.path).lstrip("/")
    bucket = location.bucket
    path_style = path == bucket or path.startswith(bucket + "/")  # else the host names it
    key = path[len(bucket) + 1 :] if path_style else path
    query = parse_qs(parts.query)
    if method == "GET" and "list-type" in query:
        return f"LIST s3://{bucket}/{query.get('prefix', [''])[0]}"
    return f"{method} s3://{bucket}/{key}"


def _answer_of(flat: str) -> tuple[int | None, str | None, list[str]]:
    """The HTTP status, the S3 error code, and how to say them."""
    status = _STATUS.search(flat)
    code = _CODE.search(flat)
    message = _MESSAGE.search(flat)
    said = []
    if status is not None:
        said.append(f"HTTP {status.group(1)}" + (f" {status.group(2)}" if status.group(2) else ""))
    if code is not None:
        said.append(code.group(1) + (f": {message.group(1)}" if message else ""))
    return (
        int(status.group(1)) if status else None,
        code.group(1) if code else None,
        said,
    )


def read_fault(exc: BaseException, location: LakeLocation) -> Fault:
    """Status, code, OS error and a one-line cause out of obstore's or
    SlateDB's error text (the client's own knobs and the endpoint's URLs left out)."""
    text = _text_of(exc)
    flat = _SETTINGS.sub("", " ".join(text.split()))
    status, code, said = _answer_of(flat)
    os_error = _OS_ERROR.search(flat)
    errno = int(os_error.group(2)) if os_error else None
    if not said and os_error is not None:
        said.append(f"{os_error.group(1).strip()} (os error {errno})")
    if not said:
        lowered = flat.lower()
        transport = next((say for word, say in _TRANSPORT if word in lowered), None)
        first = text.strip().splitlines()[0] if text.strip() else ""
        said.append(transport or _URL.sub("<url>", first))  # unknown: its first line
    retries = _RETRIES.search(flat)
    if retries is not None:
        said.append(f"after {retries.group(1)} retries")
    cause = ", ".join(p for p in said if p)
    if len(cause) > _LIMIT:
        cause = cause[:_LIMIT] + "..."
    return Fault(status, code, errno, cause, _request_of(flat, location), text)


def translate(what: str, location: LakeLocation, exc: BaseException) -> SlatelakeError:
    """The typed slatelake error for a failed store call, in one line.

    ``what`` names the operation and its object (``GET s3://b/lake/commits/1``,
    ``open store reader s3://b/lake``). Terminal: permission
    (``PermissionDeniedError``), a missing bucket (``NotFoundError``), a path
    the store cannot hold (``MisconfigurationError``), an object cut short
    (``CorruptionError``). Transient (``StoreUnavailableError``, retryable): a
    5xx, a dropped or refused connection. Anything else: ``StoreError``."""
    if isinstance(exc, SlatelakeError):
        return exc
    fault = read_fault(exc, location)
    text = fault.text
    at = f" at {fault.request}" if fault.request and fault.request.split()[-1] not in what else ""
    if (
        type(exc).__name__ in _DENIED_TYPES
        or fault.status in (401, 403)
        or any(w in text for w in _DENIED)
    ):
        return PermissionDeniedError(
            f"{what}: access denied{at} ({fault.cause}); check the credentials and that they "
            f"may read and write under the lake root {location.url}"
        )
    if fault.code in _NO_BUCKET or any(w in text for w in _NO_BUCKET):
        return NotFoundError(
            f"{what}: bucket {location.bucket!r} does not exist; create it or fix the lake "
            f"URL {location.url}"
        )
    if type(exc).__name__ == "InvalidPathError" or any(w in text for w in _BAD_PATH):
        return MisconfigurationError(
            f"{what}: the store cannot hold this path ({fault.cause}); use a shorter lake "
            "path (each segment at most 255 bytes)"
        )
    if fault.status == 416 or any(w in text for w in _DAMAGED):
        return CorruptionError(
            f"{what}: an object under {location.url} is shorter than recorded{at} "
            f"({fault.cause}); it was truncated or replaced outside slatelake"
        )
    if location.scheme == "file" and fault.errno not in (None, *_TRANSIENT_ERRNOS):
        # A local file system answers for sure: nothing was written, and asking
        # again cannot help (not a directory, no space, read-only...).
        return StoreError(f"{what}: the file system refused it{at} ({fault.cause})")
    if isinstance(exc, OSError | ObError) or type(exc).__name__ == "Unavailable":
        return StoreUnavailableError(f"{what}: the store did not answer usably{at} ({fault.cause})")
    return StoreError(f"{what}: the store failed{at} ({fault.cause})")


def _missing_bucket(exc: BaseException) -> bool:
    return any(w in str(exc) for w in _NO_BUCKET)


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

    def _call(
        self,
        op: str,
        path: str,
        sync: Callable[[], T],
        remote: Callable[[], Coroutine],
        answers: tuple[type[BaseException], ...] = (),
    ) -> T:
        """One store call: bounded when remote; every failure typed and named
        ``op object``. The foreign exceptions in ``answers`` (AlreadyExists,
        NotFound for an absent object, the end of a listing) pass through
        for the caller to read as answers; a missing bucket never does."""
        what = f"{op} {object_url(self.location, path)}"
        try:
            return _bindings.run(remote()) if self._remote else sync()
        except answers as exc:
            if not _missing_bucket(exc):
                raise
            raise translate(what, self.location, exc) from None
        except StoreTimeoutError as exc:
            raise StoreTimeoutError(f"{what}: {exc}") from None
        except SlatelakeError:
            raise
        except Exception as exc:
            raise translate(what, self.location, exc) from None

    def put_if_absent(self, path: str, data: bytes) -> bool:
        """Create path with data. False when the object already exists."""
        try:
            self._call(
                "PUT",
                path,
                lambda: obstore.put(self.store, path, data, mode="create"),
                lambda: _acall(obstore.put_async, self.store, path, data, mode="create"),
                answers=(AlreadyExistsError,),
            )
            return True
        except AlreadyExistsError:
            return False
        except SlatelakeError as exc:
            if not exc.retryable:  # refused outright (403, no bucket...): nothing landed
                raise
            raise AmbiguousWriteError(  # no usable answer: it may have landed
                f"{exc}; whether the write landed is unknown: look before writing again"
            ) from None

    def put(self, path: str, data: bytes) -> None:
        self._call(
            "PUT",
            path,
            lambda: obstore.put(self.store, path, data),
            lambda: _acall(obstore.put_async, self.store, path, data),
        )

    def get(self, path: str) -> bytes | None:
        """The object's bytes; None when it does not exist."""
        try:
            return self._call(
                "GET",
                path,
                lambda: bytes(obstore.get(self.store, path).bytes()),
                lambda: _get_bytes(self.store, path),
                answers=(ObNotFound, FileNotFoundError),
            )
        except (ObNotFound, FileNotFoundError):
            return None

    def delete(self, path: str) -> None:
        """Delete path (absent is done). A DELETE is idempotent, so one that
        got no answer (a dropped connection, which obstore does not retry for
        a write) is sent again, a few times; a timeout is not (a held store
        would cost a deadline each)."""
        retry(
            lambda: self._delete_once(path),
            attempts=_DELETE_ATTEMPTS,
            backoff=_DELETE_BACKOFF,
            retry_if=lambda exc: type(exc) is StoreUnavailableError,
        )

    def _delete_once(self, path: str) -> None:
        with contextlib.suppress(ObNotFound, FileNotFoundError):
            self._call(
                "DELETE",
                path,
                lambda: obstore.delete(self.store, path),
                lambda: _acall(obstore.delete_async, self.store, path),
                answers=(ObNotFound, FileNotFoundError),
            )

    def list(self, prefix: str, offset: str | None = None) -> Iterator[ObjectInfo]:
        """Objects under prefix (a folder path ending in '/'), in path order.
        Each page is one bounded call."""
        kwargs: dict[str, Any] = {}
        if offset is not None:
            kwargs["offset"] = offset
        stream = obstore.list(self.store, prefix, **kwargs)  # lazy: no request yet
        while True:  # one page per call, not a retry
            try:
                batch = self._call(
                    "LIST",
                    prefix,
                    lambda: next(stream),
                    lambda: _acall(stream.__anext__),
                    answers=(StopIteration, StopAsyncIteration),
                )
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
