"""Where a lake lives: one URL turned into a SlateDB object store and an obstore.

A lake URL is ``file:///abs/path``, ``memory://name`` or ``s3://bucket/prefix``.
Under the root: ``store/`` (the SlateDB database) and ``commits/`` (the log).
S3 takes region, credentials and ``AWS_ENDPOINT_URL`` from the environment, so
tests point it at moto's server and Lambda at its role. Memory lakes live for
the process: the same name gives the same objects to every handle.

Parsing refuses, as MisconfigurationError naming the input, every spelling
that would name another place than it seems to: control and invisible
characters, text that is not UTF-8, `.`/`..`/empty segments in object keys,
queries and fragments, and (for a lake root) characters the store clients
rewrite in keys.
"""

from __future__ import annotations

import os
import re
import string
import threading
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote, urlsplit

from slatedb.uniffi import ObjectStore, ObjectStoreBuilder, ObjectStoreType

from slatelake.errors import MisconfigurationError
from slatelake.store._bindings import obstore_retry_config, s3_client_options

STORE_DIR = "store"
COMMITS_DIR = "commits"
# The log's truncation mark: an object, not a slot (the log layer writes it).
TRUNCATION_MARK = "log/truncated"
# Characters a lake root may hold: what SlateDB, obstore and the file system
# all keep as given in an object key (the rest of printable ASCII, and all
# non-ASCII, they percent-encode, each its own way).
_KEY_PUNCTUATION = " !$&'()+,-.:;=@_"
_KEY_SAFE = frozenset(string.ascii_letters + string.digits + _KEY_PUNCTUATION + "/")
_BUCKET = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}")
SHOWN_CHARS = 200

_memory_lock = threading.Lock()
_memory_stores: dict[str, tuple[Any, Any]] = {}


@dataclass(frozen=True)
class LakeLocation:
    """A parsed lake URL. ``root`` is the path inside the object store."""

    url: str
    scheme: str  # "file" | "memory" | "s3"
    bucket: str  # s3 bucket, memory name, or "" for file
    root: str  # path under the store's base, no leading or trailing slash
    _stores: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def parse(cls, url: str, *, what: str = "lake URL", lake: bool = True) -> LakeLocation:
        """Parse and normalize once: ``url`` of the result is the canonical spelling,
        so two spellings of one place compare (and lock, and overlap) as one.

        ``lake`` holds a lake root to what the object store clients write
        unchanged (``_check_lake_root``); a data path (``lake=False``, read
        only by DuckDB) is held to the rest. ``what`` names the input in errors.
        """
        shown = f"{what} {show_input(url)}"  # errors name the input as given
        if not isinstance(url, str) or not url:
            raise MisconfigurationError(f"{shown}: expected a URL such as s3://bucket/lake")
        _check_text(shown, url)
        if "://" not in url and url.startswith("/"):
            url = Path(url).as_uri()  # a bare absolute path is that file URL
        try:
            parsed = urlsplit(url)
        except ValueError as exc:  # e.g. an unclosed '[' read as an IPv6 host
            raise MisconfigurationError(f"{shown}: not a URL ({exc})") from None
        scheme = parsed.scheme
        if scheme == "file":
            if parsed.netloc not in ("", "localhost"):
                raise MisconfigurationError(
                    f"{shown}: file URLs need an absolute path, e.g. file:///data/lake"
                )
            if parsed.query or parsed.fragment or "?" in url or "#" in url:
                raise MisconfigurationError(
                    f"{shown}: a file URL takes no query or fragment; "
                    "spell '?' as %3F and '#' as %23"
                )
            try:
                path = unquote(parsed.path, errors="strict")
            except UnicodeDecodeError:
                raise MisconfigurationError(
                    f"{shown}: a percent escape is not UTF-8 text"
                ) from None
            _check_text(shown, path)
            if not path.startswith("/"):
                raise MisconfigurationError(f"{shown}: the path must be absolute")
            # `.`, `..` and symlinks resolved here, once: `/x/sub/..` is `/x`.
            real = os.path.realpath(path)
            if real == "/":
                raise MisconfigurationError(
                    f"{shown}: the file system root cannot be a lake; name a directory"
                )
            _check_text(shown, real)  # a symlink's target is outside input too
            if lake:
                _check_lake_root(shown, real.strip("/"))
            return cls(url=Path(real).as_uri(), scheme="file", bucket="", root=real.strip("/"))
        if scheme == "memory":
            name = (parsed.netloc + parsed.path).strip("/")
            if not name:
                raise MisconfigurationError(f"{shown}: name the memory lake, memory://name")
            if parsed.query or parsed.fragment or "?" in url or "#" in url:
                raise MisconfigurationError(
                    f"{shown}: a memory location takes no query or fragment"
                )
            _check_segments(shown, name)
            return cls(url=f"memory://{name}", scheme="memory", bucket=name, root="")
        if scheme == "s3":
            if not parsed.netloc:
                raise MisconfigurationError(f"{shown}: name the bucket, s3://bucket/prefix")
            if parsed.query or parsed.fragment or "?" in url or "#" in url:
                raise MisconfigurationError(f"{shown}: an S3 location takes no query or fragment")
            if not _BUCKET.fullmatch(parsed.netloc):
                raise MisconfigurationError(
                    f"{shown}: S3 bucket names are lowercase letters, digits, "
                    "'.', '-' and '_' and carry no credentials or port; spell the bucket as "
                    "it is named"
                )
            # one slash after the bucket and one at the end are spelling; any
            # other empty segment ('s3://b//x') names another key than it seems
            rest = parsed.path.removeprefix("/")
            root = rest.removesuffix("/")
            _check_segments(shown, root if root or not rest else "/")
            if lake:
                _check_lake_root(shown, root)
            canonical = f"s3://{parsed.netloc}/{root}" if root else f"s3://{parsed.netloc}"
            return cls(url=canonical, scheme="s3", bucket=parsed.netloc, root=root)
        raise MisconfigurationError(
            f"{shown}: unsupported scheme {scheme!r}; use file:///abs/path, "
            "memory://name or s3://bucket/prefix"
        )

    def path(self, *parts: str) -> str:
        """An object path relative to the store base (for both stores)."""
        return "/".join(p for p in (self.root, *parts) if p)

    @property
    def store_path(self) -> str:
        return self.path(STORE_DIR)

    def slatedb_store(self) -> Any:
        """The SlateDB ObjectStore whose base this location's paths are under."""
        if "slatedb" not in self._stores:
            if self.scheme == "file":
                self._stores["slatedb"] = ObjectStore.resolve("file:///")
            elif self.scheme == "memory":
                self._stores["slatedb"] = _memory_pair(self.bucket)[0]
            else:
                builder = ObjectStoreBuilder(ObjectStoreType.S3)
                # Per-request bounds: no single request outlives its call's deadline.
                for key, value in {**_s3_settings(self.bucket), **s3_client_options()}.items():
                    builder.with_config(key, value)
                self._stores["slatedb"] = builder.build()
        return self._stores["slatedb"]

    def obstore(self) -> Any:
        """The obstore store for the log and listings, rooted at the store base."""
        if "obstore" not in self._stores:
            from obstore.store import LocalStore, S3Store

            if self.scheme == "file":
                self._stores["obstore"] = LocalStore("/")
            elif self.scheme == "memory":
                self._stores["obstore"] = _memory_pair(self.bucket)[1]
            else:
                cfg = _s3_settings(self.bucket)
                client: dict[str, Any] = dict(s3_client_options())
                if cfg.get("allow_http") == "true":
                    client["allow_http"] = True
                kwargs = {k: v for k, v in cfg.items() if k not in ("bucket", "allow_http")}
                self._stores["obstore"] = S3Store(
                    self.bucket,
                    client_options=client,
                    retry_config=obstore_retry_config(),
                    **kwargs,
                )
        return self._stores["obstore"]

    def contains(self, other: LakeLocation) -> bool:
        """True when other is this location or below it, by path component."""
        if (self.scheme, self.bucket) != (other.scheme, other.bucket):
            return False
        mine = [p for p in self.root.split("/") if p]
        theirs = [p for p in other.root.split("/") if p]
        return theirs[: len(mine)] == mine


def show_input(value: object) -> str:
    """An outside value for an error message: quoted (no raw newline reaches a
    log line) and bounded (a megabyte of input is not echoed back)."""
    try:
        text = repr(value)
    except ValueError:  # an integer past Python's 4300-digit limit has no repr
        return f"<{type(value).__name__} too large to show>"
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "..."


def _check_text(shown: str, text: str) -> None:
    """No control or invisible formatting character (urlsplit silently drops
    tabs and newlines, and a right-to-left mark shows another name than it
    holds), and nothing that is not UTF-8 text (a lone surrogate)."""
    bad = sorted({ch for ch in text if unicodedata.category(ch) in ("Cc", "Cf", "Cs")})
    if bad:
        raise MisconfigurationError(
            f"{shown}: contains the control or invisible character(s) "
            f"{', '.join(map(repr, bad))}; spell the location without them"
        )


def _check_segments(shown: str, path: str) -> None:
    """Object keys are literal: `.`, `..` or an empty segment would name a
    different place than it seems to (and escape the overlap guard)."""
    if not path:
        return
    bad = [seg for seg in path.split("/") if seg in ("", ".", "..")]
    if bad:
        raise MisconfigurationError(
            f"{shown}: the path has an empty, '.' or '..' segment; spell the location without them"
        )


def _check_lake_root(shown: str, root: str) -> None:
    """A lake root holds only characters every store client writes as given.

    SlateDB and obstore percent-encode the others in object keys, and not the
    same number of times: a root with '~', '%' or 'é' put the log, the
    manifests and the SSTs under three different prefixes, none of which the
    overlap guard saw.
    """
    bad = sorted({ch for ch in root if ch not in _KEY_SAFE})
    if bad:
        raise MisconfigurationError(
            f"{shown}: a lake path holds letters, digits, spaces and "
            f"{_KEY_PUNCTUATION!r} only, not {', '.join(map(repr, bad))} "
            "(object stores rewrite those in keys); choose another name"
        )


def _memory_pair(name: str) -> tuple[Any, Any]:
    """A SlateDB in-memory store and an obstore MemoryStore, shared by name.

    The two are distinct stores: the database lives in one, the log in the
    other. Nothing reads across them, so this is sound.
    """
    from obstore.store import MemoryStore

    with _memory_lock:
        if name not in _memory_stores:
            _memory_stores[name] = (ObjectStore.resolve("memory:///"), MemoryStore())
        return _memory_stores[name]


def _s3_settings(bucket: str) -> dict[str, str]:
    env = os.environ
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    if not region:
        raise MisconfigurationError(
            "s3 lake: no region; set AWS_REGION (or AWS_DEFAULT_REGION) in the environment"
        )
    cfg = {"bucket": bucket, "region": region}
    endpoint = env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
    if endpoint:
        cfg["endpoint"] = endpoint
        if endpoint.startswith("http://"):
            cfg["allow_http"] = "true"
    for key, var in (
        ("access_key_id", "AWS_ACCESS_KEY_ID"),
        ("secret_access_key", "AWS_SECRET_ACCESS_KEY"),
        ("token", "AWS_SESSION_TOKEN"),
    ):
        if env.get(var):
            cfg[key] = env[var]
    return cfg


class Located(Protocol):
    """Anything that knows its lake's location (a Lake handle, a session's lake)."""

    @property
    def location(self) -> LakeLocation: ...


def location_of(target: LakeLocation | Located | str) -> LakeLocation:
    """A location from a lake URL, a location, or a handle that has one."""
    if isinstance(target, LakeLocation):
        return target
    if isinstance(target, str):
        return LakeLocation.parse(target)
    return target.location
