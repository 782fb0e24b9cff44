"""The SlateDB Python bindings, made fit for bulk work, and a sync runner.

slatedb 0.17's generated UniFFI code copies every byte string into Rust one
byte at a time in Python, lifts scanned key-values field by field through a
stream object, and answers each segment-extractor callback through four
layers of generic lifting. All sit on hot paths (one call per key), so this
module swaps in equivalents: one ``memmove`` per value, a direct
``WriteBatch.put``, one pass over one copy of a scanned batch, and a fixed
answer (the one-byte subspace extractor). They mirror one slatedb build, so
they go in only when that build is installed (``PINNED_SLATEDB``); any other
keeps the generated code. ``tests/store/test_bindings.py`` pins each against
the generated code.

``run`` drives the async API from sync callers through one event-loop thread
per process; callers never see a coroutine. Every call has a deadline
(``SLATELAKE_STORE_TIMEOUT_S``, capped by any ``deadline`` a caller opened):
SlateDB retries object-store failures without bound unless told otherwise,
so a missing bucket or a black-holed endpoint would otherwise never answer.
A call past its deadline is cancelled (its Rust future is dropped) and raises
``StoreTimeoutError``. Only ``store`` imports this.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import ctypes
import importlib.metadata
import logging
import struct
import threading
import time
from collections.abc import Coroutine, Iterator
from datetime import timedelta
from typing import Any, TypeVar

from slatedb.uniffi import _slatedb_uniffi as _pkg  # noqa: F401  (loads the library)
from slatedb.uniffi._slatedb_uniffi import slatedb as _gen

from slatelake.durations import env_duration
from slatelake.errors import StoreTimeoutError

T = TypeVar("T")
log = logging.getLogger("slatelake.store")

# The slatedb build the fast paths mirror (pyproject pins the same).
PINNED_SLATEDB = "0.17.0"
# One deadline for every store call (SlateDB and obstore), in seconds.
STORE_TIMEOUT_ENV = "SLATELAKE_STORE_TIMEOUT_S"
DEFAULT_STORE_TIMEOUT_S = 60.0
# SlateDB's own retries per object-store operation (backoff 0.1 s to 1 s);
# unset, SlateDB retries forever, 403s and missing buckets included.
SLATEDB_MAX_RETRIES = 3
# The S3 clients' own per-request bounds (obstore and SlateDB's object store).
_REQUEST_TIMEOUT_S, _CONNECT_TIMEOUT_S, _CLIENT_RETRIES = 30.0, 5.0, 3
# How long a loop thread may take to notice a cancellation before it is
# presumed wedged (stuck inside a Rust call) and replaced.
_WEDGE_GRACE_S = 2.0

_LIB = _gen._UniffiLib
# What UniFFI raises when a buffer from Rust does not lift (a bindings mismatch,
# never the data): ``db`` translates it into a StoreError naming the call.
LiftError = _gen.InternalError
_alloc = _LIB.ffi_slatedb_uniffi_rustbuffer_alloc
_free = _LIB.ffi_slatedb_uniffi_rustbuffer_free
_rust_call = _gen._uniffi_rust_call
_len_prefix = struct.Struct(">i").pack
_generated_bytes_lower = _gen._UniffiFfiConverterBytes.lower


def _lower_bytes(value: bytes) -> Any:
    """Lower a byte string into a RustBuffer: i32 length, then the bytes."""
    payload = _len_prefix(len(value)) + bytes(value)
    size = len(payload)
    rbuf = _rust_call(_alloc, size)
    ctypes.memmove(ctypes.addressof(rbuf.data.contents), payload, size)
    rbuf.len = size
    return rbuf


# Optional<u64> lowered: a 1 tag byte, then the big-endian value.
_SOME_ONE = b"\x01" + struct.pack(">Q", 1)
_NONE = b"\x00"
_HEADER = 8  # enum variant (i32) + byte-string length (i32)


def _fast_subspace_prefix_len(handle: int, target: Any, out: Any, status: Any) -> None:
    """Segment = the first key byte. Same answer as SubspaceExtractor.prefix_len."""
    try:
        key_len = target.len - _HEADER
        _rust_call(_free, target)
        answer = _SOME_ONE if key_len >= 1 else _NONE
        rbuf = _rust_call(_alloc, len(answer))
        ctypes.memmove(ctypes.addressof(rbuf.data.contents), answer, len(answer))
        rbuf.len = len(answer)
        out[0] = rbuf
    except Exception as exc:  # report to Rust as the generated code does
        status.contents.code = _gen._UniffiRustCallStatus.CALL_UNEXPECTED_ERROR
        status.contents.error_buf = _gen._UniffiFfiConverterString.lower(repr(exc))


_I32 = struct.Struct(">i").unpack_from
_KV_TAIL = struct.Struct(">QqB").unpack_from  # seq u64, create_ts i64, expire tag u8
_I64 = struct.Struct(">q").unpack_from
_KeyValue = _gen.KeyValue


def _lift_key_values(rbuf: Any) -> list[Any]:
    """Lift Sequence<KeyValue> in one pass over one copy of the buffer."""
    try:
        data = ctypes.string_at(rbuf.data, rbuf.len)
    finally:
        _rust_call(_free, rbuf)
    (count,) = _I32(data, 0)
    if count < 0:
        raise LiftError("Unexpected negative sequence length")
    off = 4
    out = []
    new = _KeyValue.__new__
    for _ in range(count):
        (klen,) = _I32(data, off)
        off += 4
        key = data[off : off + klen]
        off += klen
        (vlen,) = _I32(data, off)
        off += 4
        value = data[off : off + vlen]
        off += vlen
        seq, create_ts, tag = _KV_TAIL(data, off)
        off += 17
        expire_ts = None
        if tag:
            (expire_ts,) = _I64(data, off)
            off += 8
        kv = new(_KeyValue)
        kv.key, kv.value, kv.seq, kv.create_ts, kv.expire_ts = key, value, seq, create_ts, expire_ts
        out.append(kv)
    if off != len(data):
        raise LiftError(f"junk data left in buffer: {len(data) - off} bytes")
    return out


# The generated code the fast paths replace, kept so a test can hold them equal.
_generated_kv_lift = _gen._UniffiFfiConverterSequenceTypeKeyValue.lift


_batch_put = _LIB.uniffi_slatedb_uniffi_fn_method_writebatch_put
_rust_call_err = _gen._uniffi_rust_call_with_error
_error_converter = _gen._UniffiFfiConverterTypeError


def _write_batch_put(self: Any, key: bytes, value: bytes) -> None:
    """WriteBatch.put without the generic argument checks (bytes are checked here)."""
    if type(key) is not bytes or type(value) is not bytes:
        key, value = bytes(key), bytes(value)
    _rust_call_err(
        _error_converter,
        _batch_put,
        self._uniffi_clone_handle(),
        _lower_bytes(key),
        _lower_bytes(value),
    )


_fast_prefix_len_cb = _gen._UNIFFI_CALLBACK_INTERFACE_SLATEDB_PREFIX_EXTRACTOR_METHOD1(
    _fast_subspace_prefix_len
)
_patched = False
_refused = False
_patch_lock = threading.Lock()


def fast_paths_fit(version: str) -> bool:
    """Whether the fast paths were written for this slatedb version: they
    mirror one build's generated code, so any other keeps the generated
    bindings (slower, never wrong)."""
    return version == PINNED_SLATEDB


def install() -> bool:
    """Swap in the fast paths once per process, when the installed slatedb is
    the pinned one; idempotent. Returns whether they are in place.

    The extractor fast path is valid because slatelake registers exactly one
    extractor (SubspaceExtractor) and its answer depends only on key length.
    """
    global _patched, _refused
    with _patch_lock:
        if _patched or _refused:
            return _patched
        installed = importlib.metadata.version("slatedb")
        if not fast_paths_fit(installed):
            _refused = True
            log.warning(
                "slatedb %s is installed, the fast paths fit %s: using the generated "
                "bindings (correct, slower); pin slatedb==%s for bulk speed",
                installed,
                PINNED_SLATEDB,
                PINNED_SLATEDB,
            )
            return False
        _gen._UniffiFfiConverterBytes.lower = staticmethod(_lower_bytes)
        _gen._UniffiFfiConverterSequenceTypeKeyValue.lift = staticmethod(_lift_key_values)
        _gen.WriteBatch.put = _write_batch_put
        impl = _gen._UniffiTraitImplPrefixExtractorImpl
        impl._uniffi_vtable.prefix_len = _fast_prefix_len_cb
        _patched = True
        return True


def store_timeout_s() -> float:
    """The per-call store deadline in seconds: ``SLATELAKE_STORE_TIMEOUT_S`` or 60."""
    return env_duration(STORE_TIMEOUT_ENV, DEFAULT_STORE_TIMEOUT_S) or DEFAULT_STORE_TIMEOUT_S


def s3_client_options() -> dict[str, str]:
    """Per-request bounds for an S3 client, valid both as SlateDB
    ``ObjectStoreBuilder.with_config`` keys and as obstore ``client_options``:
    no single request outlives the call it serves."""
    limit = store_timeout_s()
    return {
        "timeout": f"{min(_REQUEST_TIMEOUT_S, limit):g}s",
        "connect_timeout": f"{min(_CONNECT_TIMEOUT_S, limit):g}s",
    }


def obstore_retry_config() -> dict[str, Any]:
    """obstore's ``retry_config``: it retries only timeouts, connection
    errors and 5xx (never a 4xx), a few times, within one call's deadline."""
    return {"max_retries": _CLIENT_RETRIES, "retry_timeout": timedelta(seconds=store_timeout_s())}


# Absolute time.monotonic() deadlines opened by callers; the earliest caps every call.
_caps: list[float] = []
_caps_lock = threading.Lock()


@contextlib.contextmanager
def deadline(at_monotonic: float) -> Iterator[None]:
    """Cap every store call, in any thread, at ``at_monotonic`` while open.

    A process-wide cap, for a process with one deadline (a Lambda invocation,
    a holder stopping): a call started later gets only the time that is left."""
    with _caps_lock:
        _caps.append(at_monotonic)
    try:
        yield
    finally:
        with _caps_lock:
            _caps.remove(at_monotonic)


def call_timeout(timeout: float | None = None) -> tuple[float, str]:
    """The seconds a call may take now, and what set the bound (for messages)."""
    limit = store_timeout_s() if timeout is None else timeout
    bound = f"{STORE_TIMEOUT_ENV}={limit:g}s" if timeout is None else f"a {limit:g}s bound"
    with _caps_lock:
        cap = min(_caps, default=None)
    if cap is not None and cap - time.monotonic() < limit:
        return max(0.0, cap - time.monotonic()), "the caller's deadline"
    return limit, bound


class _Runner:
    """One daemon thread with an event loop, shared by every store handle.

    The loop thread only polls futures (the I/O runs on SlateDB's and
    obstore's own runtimes), so a cancelled call frees it at once. Should a
    poll ever block inside Rust, the loop is abandoned after a short grace
    and the next call starts a fresh one: the stuck thread (a daemon) and
    whatever its call holds are leaked until that call returns or the
    process exits; callers are never blocked by it."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        self.abandoned = 0

    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="slatelake-slatedb", daemon=True
                )
                thread.start()
                self._loop = loop
            return self._loop

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        limit, bound = call_timeout(timeout)
        if limit <= 0:
            coro.close()
            raise StoreTimeoutError(f"no time left before {bound}; the store call was not made")
        loop = self.loop()
        if _in_loop_thread(loop):
            coro.close()
            raise RuntimeError("store calls must not be made from the store's own loop")
        fut = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return fut.result(limit)
        except concurrent.futures.TimeoutError:
            if fut.done():  # the call itself raised a TimeoutError: not ours
                raise
            self._abandon(fut, loop)
            raise StoreTimeoutError(
                f"no answer within {limit:.3g}s ({bound}); the call was cancelled"
            ) from None
        except BaseException:  # a signal handler's exception, KeyboardInterrupt...
            if not fut.done():
                self._abandon(fut, loop)
            raise

    def _abandon(
        self, fut: concurrent.futures.Future[Any], loop: asyncio.AbstractEventLoop
    ) -> None:
        """Cancel a call (its task is cancelled on the loop, which frees the
        Rust future); replace the loop if it cannot even run that."""
        fut.cancel()
        alive = threading.Event()
        with contextlib.suppress(RuntimeError):  # a closed loop: replaced below
            loop.call_soon_threadsafe(alive.set)
        if alive.wait(_WEDGE_GRACE_S):
            return
        with self._lock:
            if self._loop is loop:
                self._loop = None
                self.abandoned += 1
        log.warning(
            "a store call did not yield after its deadline; its loop thread is left "
            "behind and later calls use a new one"
        )


def _in_loop_thread(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


_runner = _Runner()


def run(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run a store coroutine to completion from sync code, within a deadline:
    ``timeout`` seconds (default ``SLATELAKE_STORE_TIMEOUT_S``), capped by any
    open ``deadline``. Past it the call is cancelled: ``StoreTimeoutError``."""
    return _runner.run(coro, timeout)
