"""An object-store fault injector: an HTTP proxy on loopback in front of moto.

Every S3 client slatelake has (SlateDB's object store, obstore, DuckDB's
httpfs) takes its endpoint from ``AWS_ENDPOINT_URL``; pointing that at
``FaultProxy.url`` puts this proxy on every request they make. It relays
each request to the upstream (moto's server) unless a rule picks it:

    proxy = FaultProxy(upstream=moto_endpoint).start()
    proxy.add(FaultRule(method="PUT", prefix="commits/", kind="503", nth=1, times=1))

A rule counts the requests it matches (HTTP method, or ``LIST`` for a bucket
listing, or ``*``; and a key prefix found at a path-segment boundary, so
``commits/`` matches ``lakes/x/commits/000...``) and fails the ``nth`` one
and the ``times - 1`` after it (``times=None``: every one from the nth on).
Kinds (``KINDS``):

- ``500`` / ``503`` / ``403``: answered here with an S3 XML error body,
  never forwarded (nothing landed);
- ``drop_before``: the connection is reset before forwarding (nothing landed);
- ``drop_after``: forwarded, then the connection is reset instead of
  answering (the write landed, the answer was lost);
- ``delay``: held ``delay_s`` seconds, then forwarded and answered.

``set_random`` adds faults at a rate instead (for a soak). ``injected`` and
``log`` record what was injected; ``settle`` waits until every held request
has gone on to the upstream (a held write lands late, after the client gave
up on it: one that landed after the next case restored the lake would be in
that case's lake). The HTTP plumbing is shared with
``tests/store/faulty_s3.py``.
"""

from __future__ import annotations

import http.client
import random
import re
import socket
import threading
from dataclasses import dataclass, field
from types import TracebackType
from urllib.parse import parse_qs, unquote, urlsplit

from tests.store.faulty_s3 import LoopbackServer, abort, error_response, relay

KINDS = ("500", "503", "403", "drop_before", "drop_after", "delay")
_STATUS_KINDS = {"500": 500, "503": 503, "403": 403}
_FIRST_KEY = re.compile(rb"<Key>([^<]*)</Key>")


@dataclass
class FaultRule:
    """Fail the ``nth`` request matching ``method`` and ``prefix`` (1-based),
    and the ``times - 1`` matching requests after it (``None``: all of them)."""

    method: str = "*"  # an HTTP method, "LIST" (a bucket listing) or "*"
    prefix: str = ""  # a key prefix, matched at a path-segment boundary; "" is any key
    kind: str = "503"
    nth: int = 1
    times: int | None = 1
    delay_s: float = 0.0
    matched: int = field(default=0, init=False)  # requests this rule matched so far
    fired: int = field(default=0, init=False)  # faults it injected

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"fault kind {self.kind!r}: expected one of {', '.join(KINDS)}")
        if self.nth < 1 or (self.times is not None and self.times < 1):
            raise ValueError(f"nth={self.nth}, times={self.times}: both count from 1")
        self.method = self.method.upper()

    def matches(self, method: str, key: str) -> bool:
        return self.method in ("*", method) and key_has_prefix(key, self.prefix)

    def take(self) -> bool:
        """Count one matching request; True when it is one to fail."""
        self.matched += 1
        due = self.matched >= self.nth and (self.times is None or self.fired < self.times)
        self.fired += due
        return due

    @property
    def exhausted(self) -> bool:
        return self.times is not None and self.fired >= self.times


def key_has_prefix(key: str, prefix: str) -> bool:
    """``prefix`` starts ``key`` or one of its path segments."""
    return not prefix or key.startswith(prefix) or f"/{prefix}" in f"/{key}"


def request_key(head: bytes, body: bytes) -> tuple[str, str, str]:
    """(method for matching, bucket, object key) of a path-style S3 request. A
    bucket listing is ``LIST`` with its ``prefix`` as the key; a bulk delete
    (``POST ?delete``) is keyed by the first key it names."""
    method, target, _ = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
    parts = urlsplit(target)
    bucket, _, key = unquote(parts.path).lstrip("/").partition("/")
    query = parse_qs(parts.query, keep_blank_values=True)
    if method == "GET" and not key and "uploads" not in query:
        return "LIST", bucket, query.get("prefix", [""])[0]
    if method == "POST" and "delete" in query:
        found = _FIRST_KEY.search(body)
        return "POST", bucket, unquote(found.group(1).decode()) if found else ""
    return method, bucket, key


class FaultProxy(LoopbackServer):
    """A relaying S3 endpoint on loopback that fails the requests its rules pick."""

    name = "fault-proxy"

    def __init__(self, upstream: str, record: bool = False) -> None:
        self._init_server()
        self.upstream = upstream
        self.rules: list[FaultRule] = []
        self.log: list[tuple[str, str, str]] = []  # (method, key, kind) per injected fault
        self.requests = 0
        self.trace: list[tuple[str, str]] | None = [] if record else None
        self._lock = threading.Lock()
        self._random: tuple[float, tuple[str, ...], random.Random, tuple[str, ...] | None] | None
        self._random = None
        self.random_delay_s = 1.0
        self._started = False
        self._held = 0  # delayed requests not yet relayed and answered
        self._held_changed = threading.Condition()

    # -- control --------------------------------------------------------------

    def start(self) -> FaultProxy:
        if not self._started:
            self._listen()
            self._started = True
        return self

    def stop(self) -> None:
        self._shutdown()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def add(self, rule: FaultRule) -> FaultRule:
        with self._lock:
            self.rules.append(rule)
        return rule

    def set_random(
        self,
        rate: float,
        kinds: tuple[str, ...],
        seed: int,
        prefixes: tuple[str, ...] | list[str] | None = None,
        delay_s: float = 1.0,
    ) -> None:
        """Fail each request (under one of ``prefixes``, if given) with
        probability ``rate``, with a kind drawn from ``kinds``; reproducible
        from ``seed`` for one request order. ``rate=0`` turns it off."""
        bad = [k for k in kinds if k not in KINDS]
        if bad or not 0 <= rate <= 1 or (rate and not kinds):
            raise ValueError(f"set_random(rate={rate}, kinds={kinds}): rate in [0, 1], {KINDS}")
        with self._lock:
            self.random_delay_s = delay_s
            chosen = tuple(prefixes) if prefixes is not None else None
            self._random = (rate, tuple(kinds), random.Random(seed), chosen) if rate else None

    def clear(self) -> None:
        """Drop every rule and the random faults; relay everything from now on."""
        with self._lock:
            self.rules.clear()
            self._random = None

    @property
    def injected(self) -> int:
        return len(self.log)

    def settle(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` until no delayed request is held or on its
        way upstream; False when one still is."""
        with self._held_changed:
            return self._held_changed.wait_for(lambda: self._held == 0, timeout_s)

    def pending(self) -> list[FaultRule]:
        """Rules that have not injected all their faults yet."""
        with self._lock:
            return [r for r in self.rules if not r.exhausted]

    # -- serving --------------------------------------------------------------

    def _decide(self, method: str, key: str) -> tuple[str, float] | None:
        with self._lock:
            self.requests += 1
            if self.trace is not None:
                self.trace.append((method, key))
            for rule in self.rules:
                if rule.matches(method, key) and rule.take():
                    self.log.append((method, key, rule.kind))
                    return rule.kind, rule.delay_s
            if self._random is not None:
                rate, kinds, rng, prefixes = self._random
                chosen = prefixes is None or any(key_has_prefix(key, p) for p in prefixes)
                if chosen and rng.random() < rate:  # draws only for chosen requests
                    kind = rng.choice(kinds)
                    self.log.append((method, key, kind))
                    return kind, self.random_delay_s
        return None

    def handle(self, conn: socket.socket, head: bytes, body: bytes) -> bool:
        method, _bucket, key = request_key(head, body)
        fault = self._decide(method, key)
        kind, delay_s = fault if fault else ("", 0.0)
        if kind in _STATUS_KINDS:
            return self._send(conn, error_response(_STATUS_KINDS[kind]))
        if kind == "drop_before":
            abort(conn)
            return False
        if kind != "delay":
            return self._forward(conn, head, body, kind)
        with self._held_changed:
            self._held += 1
        try:
            if self._stop.wait(delay_s):
                return False
            return self._forward(conn, head, body, kind)
        finally:
            with self._held_changed:
                self._held -= 1
                self._held_changed.notify_all()

    def _forward(self, conn: socket.socket, head: bytes, body: bytes, kind: str) -> bool:
        try:
            response = relay(self.upstream, head, body)
        except (OSError, http.client.HTTPException):
            abort(conn)  # the upstream failed: the client sees a dropped connection
            return False
        if kind == "drop_after":
            abort(conn)
            return False
        return self._send(conn, response)

    @staticmethod
    def _send(conn: socket.socket, data: bytes) -> bool:
        try:
            conn.sendall(data)
        except OSError:
            return False
        return True
