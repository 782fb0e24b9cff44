"""A counting S3 endpoint on loopback in front of moto: every request the
lake's clients make (SlateDB's object store, obstore, DuckDB's httpfs), by
kind and key, with the bytes each sent and received.

Point ``AWS_ENDPOINT_URL`` at ``CountingProxy.url`` (``s3_endpoint`` in
tests/store/faulty_s3.py) and every request is relayed to moto unchanged and
recorded as a ``Seen``: its kind as S3 prices it (``LIST`` for a bucket
listing, ``GET`` for a GET or HEAD, ``PUT`` for a PUT, COPY or POST other
than a bulk delete, ``DELETE`` for a DELETE or a bulk delete), the key it
names (a listing's prefix), the body bytes it sent and the body bytes it got
back. ``counts`` sums a window of them, so a test can compare what a pass
did with what its dry run said it would do.
"""

from __future__ import annotations

import http.client
import socket
import threading
from collections import Counter
from dataclasses import dataclass
from types import TracebackType

from tests.faults.proxy import request_key
from tests.store.faulty_s3 import LoopbackServer, abort, relay

KINDS = ("LIST", "GET", "PUT", "DELETE")


@dataclass(frozen=True)
class Seen:
    """One request as S3 bills it."""

    kind: str  # LIST, GET, PUT or DELETE
    method: str  # the HTTP method (LIST for a bucket listing)
    key: str
    sent: int  # request body bytes
    received: int  # response body bytes
    status: int


def price_kind(method: str, target: bytes) -> str:
    """S3's request class of one request: a HEAD is priced as a GET, a bulk
    delete (POST ?delete) as a DELETE (free), any other POST as a PUT."""
    if method == "LIST":
        return "LIST"
    if method in ("GET", "HEAD"):
        return "GET"
    if method == "DELETE" or (method == "POST" and b"delete" in target.split(b"?", 1)[-1]):
        return "DELETE"
    return "PUT"


def _status_and_length(response: bytes) -> tuple[int, int]:
    head, _, body = response.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, len(body)


class CountingProxy(LoopbackServer):
    """Relays every request to ``upstream`` and records it."""

    name = "counting-proxy"

    def __init__(self, upstream: str) -> None:
        self._init_server()
        self.upstream = upstream
        self.seen: list[Seen] = []
        self._lock = threading.Lock()

    def __enter__(self) -> CountingProxy:
        self._listen()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._shutdown()

    def mark(self) -> int:
        """Where the record stands now: ``counts(since=mark)`` sums what came after."""
        with self._lock:
            return len(self.seen)

    def counts(self, since: int = 0, under: str = "") -> dict[str, int]:
        """Requests per kind and bytes read and written, from ``since`` on, on
        keys containing ``under``."""
        with self._lock:
            seen = [s for s in self.seen[since:] if under in s.key]
        kinds = Counter(s.kind for s in seen)
        out = {kind: kinds.get(kind, 0) for kind in KINDS}
        out["bytes_read"] = sum(s.received for s in seen if s.kind == "GET")
        out["bytes_written"] = sum(s.sent for s in seen if s.kind == "PUT")
        return out

    def handle(self, conn: socket.socket, head: bytes, body: bytes) -> bool:
        method, _bucket, key = request_key(head, body)
        target = head.split(b"\r\n", 1)[0].split(b" ")[1]
        try:
            response = relay(self.upstream, head, body)
        except (OSError, http.client.HTTPException):
            abort(conn)
            return False
        status, length = _status_and_length(response)
        if method == "HEAD":
            length = 0
        seen = Seen(price_kind(method, target), method, key, len(body), length, status)
        with self._lock:
            self.seen.append(seen)
        try:
            conn.sendall(response)
        except OSError:
            return False
        return True
