"""An S3 endpoint that misbehaves on purpose, on loopback, for the hang tests.

``silent`` accepts TCP connections, reads the request and never answers (an
endpoint behind a black-holing proxy); ``status`` answers every request with
one HTTP status and an S3-style XML error body (403 AccessDenied, 500
InternalError...); ``forward`` relays requests to a real S3 (moto) until a
test switches ``mode`` to one of the others mid-run. ``closed_port`` is a
loopback port nothing listens on. Each server counts the requests it saw, so
a test can prove a refusal happened before any request.

The HTTP plumbing (``LoopbackServer``, ``read_requests``, ``error_response``,
``relay``) is shared with the fault proxy in ``tests/faults/proxy.py``.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import socket
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from urllib.parse import urlparse

_CODES = {403: "AccessDenied", 404: "NoSuchBucket", 500: "InternalError", 503: "SlowDown"}
_REASONS = {403: "Forbidden", 404: "Not Found", 500: "Internal Server Error", 503: "Slow Down"}


def _header(head: bytes, name: bytes) -> bytes | None:
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == name:
            return value.strip()
    return None


def _read_chunked(conn: socket.socket, buffer: bytearray, stop: threading.Event) -> bytes | None:
    """A chunked body, decoded; the bytes after it stay in ``buffer``."""
    body = bytearray()
    while True:
        while b"\r\n" not in buffer:
            if not _fill(conn, buffer, stop):
                return None
        size_line, _, rest = bytes(buffer).partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        while len(rest) < size + 2:
            if not _fill(conn, buffer, stop):
                return None
            size_line, _, rest = bytes(buffer).partition(b"\r\n")
        body += rest[:size]
        del buffer[: len(size_line) + 2 + size + 2]
        if size == 0:  # trailers are not used by S3 clients here
            return bytes(body)


def _fill(conn: socket.socket, buffer: bytearray, stop: threading.Event) -> bool:
    """Read more bytes into ``buffer``; False when the peer closed or we stop."""
    while not stop.is_set():
        try:
            chunk = conn.recv(1 << 20)
        except TimeoutError:
            continue
        except OSError:
            return False
        if not chunk:
            return False
        buffer += chunk
        return True
    return False


def read_requests(conn: socket.socket, stop: threading.Event) -> Iterator[tuple[bytes, bytes]]:
    """Each request on a (kept-alive) connection: its head (request line and
    headers, chunked encoding undone) and its body, until the peer closes."""
    conn.settimeout(0.5)
    buffer = bytearray()
    while True:
        while b"\r\n\r\n" not in buffer:
            if not _fill(conn, buffer, stop):
                return
        end = buffer.index(b"\r\n\r\n")
        head = bytes(buffer[:end])
        del buffer[: end + 4]
        if (_header(head, b"expect") or b"").lower() == b"100-continue":
            # botocore waits a second for this before sending a PUT's body.
            lines = [ln for ln in head.split(b"\r\n") if not ln.lower().startswith(b"expect:")]
            head = b"\r\n".join(lines)
            try:
                conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
            except OSError:
                return
        if (_header(head, b"transfer-encoding") or b"").lower() == b"chunked":
            body = _read_chunked(conn, buffer, stop)
            if body is None:
                return
            lines = [
                ln for ln in head.split(b"\r\n") if not ln.lower().startswith(b"transfer-encoding")
            ]
            head = b"\r\n".join([*lines, b"Content-Length: %d" % len(body)])
        else:
            length = int(_header(head, b"content-length") or 0)
            while len(buffer) < length:
                if not _fill(conn, buffer, stop):
                    return
            body = bytes(buffer[:length])
            del buffer[:length]
        yield head, body


def error_response(status: int) -> bytes:
    """A whole HTTP response: ``status`` with an S3-style XML error body."""
    code = _CODES.get(status, "InternalError")
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f"<Error><Code>{code}</Code><Message>injected {status}</Message>"
        "<RequestId>injected</RequestId></Error>"
    ).encode()
    head = (
        f"HTTP/1.1 {status} {_REASONS.get(status, code)}\r\nContent-Type: application/xml\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    return head + body


def relay(upstream: str, head: bytes, body: bytes) -> bytes:
    """Send one request to ``upstream`` and return its whole response, re-framed
    with a Content-Length. Raises OSError (or http.client's errors) when the
    upstream fails."""
    lines = head.decode("latin-1").split("\r\n")
    method, target, _ = lines[0].split(" ", 2)
    up = urlparse(upstream)
    client = http.client.HTTPConnection(up.hostname, up.port, timeout=30)
    try:
        client.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
        for line in lines[1:]:
            name, _, value = line.partition(":")
            client.putheader(name.strip(), value.strip())
        client.endheaders(body)
        resp = client.getresponse()
        data = resp.read()
        drop = {"transfer-encoding", "connection"}
        if method != "HEAD":
            drop.add("content-length")
        out = [f"HTTP/1.1 {resp.status} {resp.reason}"]
        out += [f"{n}: {v}" for n, v in resp.getheaders() if n.lower() not in drop]
        if method != "HEAD":
            out.append(f"Content-Length: {len(data)}")
        payload = ("\r\n".join(out) + "\r\n\r\n").encode("latin-1")
        return payload + (b"" if method == "HEAD" else data)
    finally:
        client.close()


def abort(conn: socket.socket) -> None:
    """Drop a connection with a reset, as a dying proxy or load balancer would."""
    with contextlib.suppress(OSError):
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        conn.close()


class LoopbackServer:
    """A TCP server on a free loopback port, one thread per connection; a
    subclass answers each request in ``handle`` (False: close the connection)."""

    name = "loopback-s3"

    def _init_server(self) -> None:
        self._sock = socket.socket()
        self._stop = threading.Event()
        self._conns: set[socket.socket] = set()
        self._conns_lock = threading.Lock()

    @property
    def url(self) -> str:
        host, port = self._sock.getsockname()
        return f"http://{host}:{port}"

    def _listen(self) -> None:
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(128)
        self._sock.settimeout(0.2)
        threading.Thread(target=self._accept, name=self.name, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._conns_lock:
                self._conns.add(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            for head, body in read_requests(conn, self._stop):
                if not self.handle(conn, head, body):
                    break
        finally:
            with contextlib.suppress(OSError):
                conn.close()
            with self._conns_lock:
                self._conns.discard(conn)

    def handle(self, conn: socket.socket, head: bytes, body: bytes) -> bool:
        raise NotImplementedError

    def _shutdown(self) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            self._sock.close()
        with self._conns_lock:
            conns, self._conns = list(self._conns), set()
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.close()


@dataclass
class FaultyEndpoint(LoopbackServer):
    mode: str  # "silent" | "status" | "forward"
    status: int = 0
    upstream: str = ""  # for "forward": the real endpoint's URL
    requests: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self._init_server()
        self.name = f"faulty-s3-{self.mode}"

    def start(self) -> FaultyEndpoint:
        self._listen()
        return self

    def handle(self, conn: socket.socket, head: bytes, body: bytes) -> bool:
        with self._lock:
            self.requests += 1
        if self.mode == "silent":
            return True  # keep reading (and counting), answer nothing; stop() closes it
        try:
            if self.mode == "forward":
                conn.sendall(relay(self.upstream, head, body))
            else:
                conn.sendall(error_response(self.status))
        except (OSError, http.client.HTTPException):
            return False
        return True

    def stop(self) -> None:
        self._shutdown()


@contextlib.contextmanager
def faulty_endpoint(mode: str, status: int = 0, upstream: str = "") -> Iterator[FaultyEndpoint]:
    endpoint = FaultyEndpoint(mode, status, upstream).start()
    try:
        yield endpoint
    finally:
        endpoint.stop()


def closed_port() -> str:
    """An http URL on loopback where nothing listens (connections are refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@contextlib.contextmanager
def s3_endpoint(url: str) -> Iterator[None]:
    """Point S3 at ``url`` (and give it fake credentials) for the block."""
    keys = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION")
    saved = {k: os.environ.get(k) for k in keys}
    os.environ.update(
        AWS_ENDPOINT_URL=url,
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_REGION="us-east-1",
    )
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
