"""Where a lake lives: one URL turned into a SlateDB object store and an obstore.

A lake URL is ``file:///abs/path``, ``memory://name`` or ``s3://bucket/prefix``.
Under the root: ``store/`` (the SlateDB database) and ``commits/`` (the log).
S3 takes region, credentials and ``AWS_ENDPOINT_URL`` from the environment, so
tests point it at moto's server and Lambda at its role. Memory lakes live for
the process: the same name gives the same objects to every handle.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from slatedb.uniffi import ObjectStore, ObjectStoreBuilder, ObjectStoreType

from slatelake.errors import MisconfigurationError
from slatelake.store._bindings import obstore_retry_config, s3_client_options

STORE_DIR = "store"
COMMITS_DIR = "commits"

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
    def parse(cls, url: str) -> LakeLocation:
        """Parse and normalize once: ``url`` of the result is the canonical spelling,
        so two spellings of one place compare (and lock, and overlap) as one."""
        if not isinstance(url, str) or not url:
            raise MisconfigurationError(
                f"lake URL {url!r}: expected a URL such as s3://bucket/lake"
            )
        if any(ch in url for ch in "\x00\r\n"):
            raise MisconfigurationError(f"lake URL {url!r}: contains a control character")
        parsed = urlparse(url)
        scheme = parsed.scheme
        if scheme == "file":
            if parsed.netloc not in ("", "localhost"):
                raise MisconfigurationError(
                    f"lake URL {url!r}: file URLs need an absolute path, e.g. file:///data/lake"
                )
            path = unquote(parsed.path)
            if not path.startswith("/"):
                raise MisconfigurationError(f"lake URL {url!r}: the path must be absolute")
            # `.`, `..` and symlinks resolved here, once: `/x/sub/..` is `/x`.
            real = os.path.realpath(path)
            if real == "/":
                raise MisconfigurationError(
                    f"lake URL {url!r}: the file system root cannot be a lake; name a directory"
                )
            return cls(url=Path(real).as_uri(), scheme="file", bucket="", root=real.strip("/"))
        if scheme == "memory":
            name = (parsed.netloc + parsed.path).strip("/")
            if not name:
                raise MisconfigurationError(
                    f"lake URL {url!r}: name the memory lake, memory://name"
                )
            _check_segments(url, name)
            return cls(url=f"memory://{name}", scheme="memory", bucket=name, root="")
        if scheme == "s3":
            if not parsed.netloc:
                raise MisconfigurationError(
                    f"lake URL {url!r}: name the bucket, s3://bucket/prefix"
                )
            if parsed.query or parsed.fragment or parsed.params:
                raise MisconfigurationError(
                    f"lake URL {url!r}: an S3 location takes no query or fragment"
                )
            if parsed.netloc != parsed.netloc.lower() or "@" in parsed.netloc:
                raise MisconfigurationError(
                    f"lake URL {url!r}: S3 bucket names are lowercase and carry no "
                    "credentials; spell the bucket as it is named"
                )
            root = parsed.path.strip("/")
            _check_segments(url, root)
            canonical = f"s3://{parsed.netloc}/{root}" if root else f"s3://{parsed.netloc}"
            return cls(url=canonical, scheme="s3", bucket=parsed.netloc, root=root)
        if "://" not in url and url.startswith("/"):
            return cls.parse(Path(url).as_uri())
        raise MisconfigurationError(
            f"lake URL {url!r}: unsupported scheme {scheme!r}; use file:///abs/path, "
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


def _check_segments(url: str, path: str) -> None:
    """Object keys are literal: `.`, `..` or an empty segment would name a
    different place than it seems to (and escape the overlap guard)."""
    if not path:
        return
    bad = [seg for seg in path.split("/") if seg in ("", ".", "..")]
    if bad:
        raise MisconfigurationError(
            f"lake URL {url!r}: the path has an empty, '.' or '..' segment; "
            "spell the location without them"
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
