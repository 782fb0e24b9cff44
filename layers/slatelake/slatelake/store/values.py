"""Value framing and the value codec for stored records.

Every value is ``MAGIC`` (2 bytes), a codec version (1 byte) and a kind byte,
then a msgpack payload. A wrong magic, a newer version, a kind other than the
one expected, or a payload msgpack cannot read raises CorruptionError, so a
damaged or misplaced value fails loudly instead of decoding plausibly wrong.

msgpack (see DESIGN.md "Value codec"): compact, a C extension with no
dependencies, and positional arrays keep a row to its values with no column
names repeated per key. Types msgpack lacks travel as extension types:
Decimal, UUID, date, time, datetime (naive and aware), timedelta.
"""

from __future__ import annotations

import datetime as dt
import decimal
import struct
import uuid
from typing import Any

import msgpack

from slatelake.errors import CorruptionError

MAGIC = b"\xd1\x1a"
CODEC_VERSION = 1
HEADER = 4

_EXT_DECIMAL = 1
_EXT_UUID = 2
_EXT_DATE = 3
_EXT_TIME = 4
_EXT_DATETIME = 5
_EXT_DATETIME_TZ = 6
_EXT_TIMEDELTA = 7
_I64 = struct.Struct(">q")
_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_TZ = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _micros(delta: dt.timedelta) -> int:
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _default(obj: Any) -> msgpack.ExtType:
    if isinstance(obj, decimal.Decimal):
        return msgpack.ExtType(_EXT_DECIMAL, str(obj).encode())
    if isinstance(obj, uuid.UUID):
        return msgpack.ExtType(_EXT_UUID, obj.bytes)
    if isinstance(obj, dt.datetime):
        if obj.tzinfo is None:
            return msgpack.ExtType(_EXT_DATETIME, _I64.pack(_micros(obj - _EPOCH)))
        return msgpack.ExtType(_EXT_DATETIME_TZ, _I64.pack(_micros(obj - _EPOCH_TZ)))
    if isinstance(obj, dt.date):
        return msgpack.ExtType(_EXT_DATE, _I64.pack(obj.toordinal()))
    if isinstance(obj, dt.time):
        if obj.tzinfo is not None:
            raise TypeError("time with a time zone is not storable; convert it to UTC")
        micros = ((obj.hour * 60 + obj.minute) * 60 + obj.second) * 1_000_000 + obj.microsecond
        return msgpack.ExtType(_EXT_TIME, _I64.pack(micros))
    if isinstance(obj, dt.timedelta):
        return msgpack.ExtType(_EXT_TIMEDELTA, _I64.pack(_micros(obj)))
    raise TypeError(f"cannot store a value of type {type(obj).__name__}")


def _ext_hook(code: int, data: bytes) -> Any:
    if code == _EXT_DECIMAL:
        return decimal.Decimal(data.decode())
    if code == _EXT_UUID:
        return uuid.UUID(bytes=data)
    if code in (_EXT_DATE, _EXT_TIME, _EXT_DATETIME, _EXT_DATETIME_TZ, _EXT_TIMEDELTA):
        (n,) = _I64.unpack(data)
        if code == _EXT_DATE:
            return dt.date.fromordinal(n)
        if code == _EXT_TIME:
            return (dt.datetime.min + dt.timedelta(microseconds=n)).time()
        if code == _EXT_DATETIME:
            return _EPOCH + dt.timedelta(microseconds=n)
        if code == _EXT_DATETIME_TZ:
            return _EPOCH_TZ + dt.timedelta(microseconds=n)
        return dt.timedelta(microseconds=n)
    raise CorruptionError(f"unknown value extension type {code}")


def pack(obj: Any) -> bytes:
    """Encode a payload (no frame): lists, dicts, scalars and the ext types."""
    return msgpack.packb(obj, default=_default, use_bin_type=True, datetime=False)


def unpack(data: bytes, tuples: bool = False) -> Any:
    """Decode a payload; ``tuples`` gives arrays as tuples (rows), else lists."""
    try:
        return msgpack.unpackb(
            data, ext_hook=_ext_hook, raw=False, strict_map_key=False, use_list=not tuples
        )
    except CorruptionError:
        raise
    except Exception as exc:
        raise CorruptionError(f"undecodable payload ({type(exc).__name__}: {exc})") from None


def frame(kind: int, obj: Any) -> bytes:
    return MAGIC + bytes((CODEC_VERSION, kind)) + pack(obj)


def unframe(data: bytes, kind: int, what: str = "value", tuples: bool = False) -> Any:
    """Decode a framed value, checking magic, codec version and kind."""
    check_frame(data, kind, what)
    return unpack(data[HEADER:], tuples)


def check_frame(data: bytes, kind: int, what: str = "value") -> None:
    if len(data) < HEADER or data[:2] != MAGIC:
        raise CorruptionError(
            f"{what}: bad magic {data[:2].hex() or 'empty'}; not a slatelake value"
        )
    if data[2] != CODEC_VERSION:
        raise CorruptionError(
            f"{what}: codec version {data[2]} is not {CODEC_VERSION}; "
            "written by a different slatelake release"
        )
    if data[3] != kind:
        raise CorruptionError(f"{what}: kind {data[3]} where {kind} was expected")
