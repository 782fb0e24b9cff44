"""An S3 endpoint that misbehaves on purpose, on loopback, for the hang tests.

``silent`` accepts TCP connections, reads the request and never answers (an
endpoint behind a black-holing proxy); ``status`` answers every request with
one HTTP status and an S3-style XML error body (403 AccessDenied, 500
InternalError...); ``forward`` relays requests to a real S3 (moto) until a
test switches ``mode`` to one of the others mid-run. ``closed_port`` is a
loopback port nothing listens on. Each server counts the requests it saw, so
a test can prove a refusal happened before any request.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from urllib.parse import urlparse

_CODES = {403: "AccessDenied", 404: "NoSuchBucket", 500: "InternalError", 503: "SlowDown"}


@dataclass
class FaultyEndpoint:
    mode: str  # "silent" | "status" | "forward"
    status: int = 0
    upstream: str = ""  # for "forward": the real endpoint's URL
    requests: int = 0
    _sock: socket.socket = field(default_factory=socket.socket, repr=False)
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    _held: list[socket.socket] = field(default_factory=list, repr=False)

    @property
    def url(self) -> str:
        host, port = self._sock.getsockname()
        return f"http://{host}:{port}"

    def start(self) -> FaultyEndpoint:
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self._sock.settimeout(0.2)
        threading.Thread(target=self._accept, name=f"faulty-s3-{self.mode}", daemon=True).start()
        return self

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(0.5)
        buffer = b""
        while not self._stop.is_set():
            try:
                chunk = conn.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                break
            if not chunk:
                break
            buffer += chunk
            while b"\r\n\r\n" in buffer:
                head, _, rest = buffer.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value.strip())
                if len(rest) < length:
                    break
                body, buffer = rest[:length], rest[length:]
                self.requests += 1
                if self.mode == "silent":
                    self._held.append(conn)  # keep it open, answer nothing
                    continue
                if self.mode == "forward":
                    self._forward(conn, head, body)
                    continue
                self._answer(conn)
        if self.mode != "silent":
            with contextlib.suppress(OSError):
                conn.close()

    def _answer(self, conn: socket.socket) -> None:
        code = _CODES.get(self.status, "InternalError")
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>'
            f"<Error><Code>{code}</Code><Message>injected {self.status}</Message></Error>"
        ).encode()
        head = (
            f"HTTP/1.1 {self.status} {code}\r\nContent-Type: application/xml\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        with contextlib.suppress(OSError):
            conn.sendall(head + body)

    def _forward(self, conn: socket.socket, head: bytes, body: bytes) -> None:
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        up = urlparse(self.upstream)
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
            conn.sendall(payload + (b"" if method == "HEAD" else data))
        except OSError:
            with contextlib.suppress(OSError):
                conn.close()
        finally:
            client.close()

    def stop(self) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            self._sock.close()
        for conn in self._held:
            with contextlib.suppress(OSError):
                conn.close()


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
