"""Asking S3 once whether it refuses these credentials under SlateDB's folders.

SlateDB retries every failed object-store request, a 403 too, and then
reports "unavailable" or runs out of its deadline without the status, so a
refused write would read as a store that may recover (retryable). When a
SlateDB call fails that way, ``refused_under`` asks the store directly, one
request of each kind per folder, on a key that never exists:

- LIST with the probe key as prefix (one page, nothing listed);
- GET of the probe key (404 when allowed);
- PUT of it with ``If-Match`` (S3 answers 404 or 412 when allowed and never
  creates the object; 403 when refused).

So the probe reads nothing of the store and writes nothing into it (a
store that ignores ``If-Match`` gets the empty object deleted at once). A
request that gets no answer settles nothing and ends the probe (a held store
must not cost a deadline per request). Knows nothing about DuckLake.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Coroutine, Iterable
from typing import Any

import obstore
from obstore.exceptions import NotFoundError, PreconditionError

from slatelake.errors import PermissionDeniedError, StoreTimeoutError, StoreUnavailableError
from slatelake.store import _bindings
from slatelake.store.location import LakeLocation
from slatelake.store.objects import object_url, translate

# SlateDB's folders under the store directory.
SLATEDB_DIRS = ("manifest/", "wal/", "compacted/", "compactions/")
PROBE_KEY = "slatelake-permission-probe"
# What a store allowed to serve the request answers about an absent key.
_ALLOWED = (FileNotFoundError, NotFoundError, PreconditionError)
# Each probe request's bound: the store deadline, at most this.
PROBE_TIMEOUT_S = 5.0


def refused_under(
    location: LakeLocation, prefixes: Iterable[str], store: Any | None = None
) -> PermissionDeniedError | None:
    """The store's refusal of a LIST, GET or PUT under one of ``prefixes``
    (folder paths ending in '/'), naming the request; None when every probe
    was allowed, or the store did not answer (nothing to say). S3 only: a
    local file system reports its refusal itself."""
    if location.scheme != "s3":
        return None
    store = store if store is not None else location.obstore()
    limit = min(PROBE_TIMEOUT_S, _bindings.store_timeout_s())
    for prefix in prefixes:
        key = prefix + PROBE_KEY
        for op, call in probe_requests(store, key, ("LIST", "GET", "PUT")):
            try:
                _bindings.run(call(), limit)
            except _ALLOWED:
                continue  # 404 or 412: the request was allowed
            except Exception as exc:
                seen = translate(f"{op} {object_url(location, key)}", location, exc)
                if isinstance(seen, PermissionDeniedError):
                    return seen
                if isinstance(seen, StoreTimeoutError | StoreUnavailableError):
                    return None  # no answer: the store is down, not known to refuse
    return None


def probe_requests(
    store: Any, key: str, ops: Iterable[str]
) -> list[tuple[str, Callable[[], Coroutine]]]:
    """The requests that ask about ``key`` without touching anything, by
    method: LIST (the key as prefix), GET, HEAD, PUT with ``If-Match``."""

    async def listing() -> None:
        with contextlib.suppress(StopAsyncIteration):  # nothing listed: allowed
            await obstore.list(store, key, chunk_size=1).__anext__()

    async def reading() -> None:
        await obstore.get_async(store, key)

    async def heading() -> None:
        await obstore.head_async(store, key)

    async def writing() -> None:  # If-Match on an absent key: never lands
        await obstore.put_async(store, key, b"", mode={"e_tag": PROBE_KEY})
        # it landed: a store that ignores If-Match; take the empty object out again
        await obstore.delete_async(store, key)

    calls = {"LIST": listing, "GET": reading, "HEAD": heading, "PUT": writing}
    return [(op, calls[op]) for op in ops]
