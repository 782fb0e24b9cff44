"""The SlateDB Python bindings, made fit for bulk work, and a sync runner.

slatedb 0.17's generated UniFFI code copies every byte string into Rust one
byte at a time in Python, lifts scanned key-values field by field through a
stream object, and answers each segment-extractor callback through four
layers of generic lifting. All sit on hot paths (one call per key), so this
module swaps in equivalents: one ``memmove`` per value, a direct
``WriteBatch.put``, one pass over one copy of a scanned batch, and a fixed
answer (the one-byte subspace extractor). ``tests/store/test_bindings.py`` pins each against the
generated code.

``run`` drives the async API from sync callers through one event-loop thread
per process; callers never see a coroutine. Only ``store`` imports this.
"""

from __future__ import annotations

import asyncio
import ctypes
import struct
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from slatedb.uniffi import _slatedb_uniffi as _pkg  # noqa: F401  (loads the library)
from slatedb.uniffi._slatedb_uniffi import slatedb as _gen

T = TypeVar("T")

_LIB = _gen._UniffiLib
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


def generated_lower_bytes(value: bytes) -> bytes:
    """The generated lowering, kept for the equivalence test."""
    rbuf = _generated_bytes_lower(value)
    try:
        return ctypes.string_at(rbuf.data, rbuf.len)
    finally:
        _rust_call(_free, rbuf)


def fast_lower_bytes(value: bytes) -> bytes:
    rbuf = _lower_bytes(value)
    try:
        return ctypes.string_at(rbuf.data, rbuf.len)
    finally:
        _rust_call(_free, rbuf)


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
        raise _gen.InternalError("Unexpected negative sequence length")
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
        raise _gen.InternalError(f"junk data left in buffer: {len(data) - off} bytes")
    return out


_generated_kv_lift = _gen._UniffiFfiConverterSequenceTypeKeyValue.lift


def lift_key_values_both(items: list[Any]) -> tuple[list[Any], list[Any]]:
    """Lower ``items`` with the generated writer; lift with both liftings (tests)."""
    conv = _gen._UniffiFfiConverterSequenceTypeKeyValue
    lowered = [_gen._UniffiConverterRustBuffer.lower.__func__(conv, items) for _ in range(2)]
    return _generated_kv_lift(lowered[0]), _lift_key_values(lowered[1])


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
_patch_lock = threading.Lock()


def install() -> None:
    """Swap in the fast paths once per process. Idempotent.

    The extractor fast path is valid because slatelake registers exactly one
    extractor (SubspaceExtractor) and its answer depends only on key length.
    """
    global _patched
    with _patch_lock:
        if _patched:
            return
        _gen._UniffiFfiConverterBytes.lower = staticmethod(_lower_bytes)
        _gen._UniffiFfiConverterSequenceTypeKeyValue.lift = staticmethod(_lift_key_values)
        _gen.WriteBatch.put = _write_batch_put
        impl = _gen._UniffiTraitImplPrefixExtractorImpl
        impl._uniffi_vtable.prefix_len = _fast_prefix_len_cb
        _patched = True


class _Runner:
    """One daemon thread with an event loop, shared by every store handle."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

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
        loop = self.loop()
        if _in_loop_thread(loop):
            coro.close()
            raise RuntimeError("store calls must not be made from the store's own loop")
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout)


def _in_loop_thread(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


_runner = _Runner()


def run(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run a SlateDB coroutine to completion from sync code."""
    return _runner.run(coro, timeout)
