"""The one place SQL text is built from values: identifiers and literals.

Every name or value that reaches SQL text (an alias, a data path, a table
name, an option, a credential) goes through ``ident`` or ``literal`` (or is
bound as a parameter). ``value_sql`` spells a Python value as a typed literal,
through ``literal``, so our own statements need not bind parameters at all
(see below for why). Both refuse a NUL byte, which DuckDB's parser would
read as the end of the statement, so nothing after it could hide.
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import json
import uuid
from collections.abc import Sequence
from typing import Any

import duckdb

from slatelake.errors import MisconfigurationError


def _checked(value: str, what: str) -> str:
    if not isinstance(value, str):
        raise MisconfigurationError(f"{what} {value!r}: expected text")
    if "\x00" in value:
        raise MisconfigurationError(f"{what} {value!r}: contains a NUL byte")
    return value


def ident(name: str) -> str:
    """A double-quoted SQL identifier."""
    return '"' + _checked(name, "SQL identifier").replace('"', '""') + '"'


def literal(value: str) -> str:
    """A single-quoted SQL string literal."""
    return "'" + _checked(value, "SQL string").replace("'", "''") + "'"


# -- values as literals ---------------------------------------------------------
# DuckDB's Python binding imports pandas, numpy and pyarrow (~85 MB, ~0.5 s) the
# first time it converts any parameter, to check whether the value is one of
# theirs. Our own statements therefore spell their values as typed literals, of
# the type DuckDB would give the bound parameter; a value with no such spelling
# (a dict, a HUGEINT, a DECIMAL DuckDB would widen) is still bound.
_INT32 = 2**31
_INT64 = 2**63
_DECIMAL_WIDTH = 38


def value_sql(value: Any) -> str | None:
    """``value`` as a SQL literal that reads back as the same value and type as
    the bound parameter would; None when there is no such spelling."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        # a literal in INTEGER's range is an INTEGER, past it a BIGINT, as bound
        return str(int(value)) if -_INT64 <= value < _INT64 else None
    if isinstance(value, float):
        # float's own repr: a subclass's (numpy's "np.float64(1.5)") is no number
        return f"CAST({literal(float.__repr__(value))} AS DOUBLE)"
    if isinstance(value, str):
        return None if "\x00" in value else literal(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return f"from_hex({literal(bytes(value).hex())})"
    if isinstance(value, uuid.UUID):
        return f"CAST({literal(str(value))} AS UUID)"
    if isinstance(value, decimal.Decimal):
        return _decimal_sql(value)
    if isinstance(value, dt.datetime):
        return _datetime_sql(value)
    if isinstance(value, dt.date):
        return f"CAST({literal(value.isoformat())} AS DATE)"
    if isinstance(value, dt.time) and value.tzinfo is None:
        return f"CAST({literal(value.isoformat())} AS TIME)"
    if isinstance(value, list | tuple):
        return _list_sql(value)
    return None


def _list_sql(values: Sequence[Any]) -> str | None:
    # DuckDB binds a list literal element by element (~5 us each: 24 ms for
    # 5,000 ids, against 2.7 ms to cast one text), so lists of integers or of
    # text travel as one text cast to the list type a bound list would have.
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        if not all(-_INT64 <= v < _INT64 for v in present):
            return None
        small = all(-_INT32 <= v < _INT32 for v in present)
        text = ", ".join("NULL" if v is None else str(int(v)) for v in values)
        return f"CAST({literal('[' + text + ']')} AS {'INTEGER[]' if small else 'BIGINT[]'})"
    if present and all(isinstance(v, str) and "\x00" not in v for v in present):
        return f"from_json({literal(json.dumps(list(values)))}, '[\"VARCHAR\"]')"
    if len({type(v) for v in present}) > 1:
        return None  # DuckDB's own rules unite mixed element types
    items = [value_sql(v) for v in values]
    if any(item is None for item in items):
        return None
    return "[" + ", ".join(item for item in items if item is not None) + "]"


def _decimal_sql(value: decimal.Decimal) -> str | None:
    # DuckDB types a bound Decimal DECIMAL(its digits, its scale) when it has a
    # digit before the point and fits 38; others (0.5, 1E+2, 39 digits) it
    # types by rules of its own, so they stay bound.
    _, digits, exponent = value.as_tuple()
    if not isinstance(exponent, int) or exponent > 0:
        return None
    scale = -exponent
    width = len(digits)
    if width <= scale or width > _DECIMAL_WIDTH:
        return None
    return f"CAST({literal(str(value))} AS DECIMAL({int(width)}, {int(scale)}))"


def _datetime_sql(value: dt.datetime) -> str | None:
    offset = value.utcoffset()
    if offset is None:
        return f"CAST({literal(value.isoformat(sep=' '))} AS TIMESTAMP)"
    if offset % dt.timedelta(minutes=1):
        return None
    return f"CAST({literal(value.isoformat(sep=' '))} AS TIMESTAMPTZ)"


def bound(sql: str, params: Sequence[Any]) -> str | None:
    """``sql`` with each ``?`` placeholder (found by DuckDB's own tokenizer, so
    never one inside a string, a quoted name or a comment) replaced by its
    value's literal; None when a value has none."""
    values = [value_sql(p) for p in params]
    if any(v is None for v in values):
        return None
    raw = sql.encode()
    marks = _placeholders(sql)
    if len(marks) != len(values):
        raise ValueError(f"{len(marks)} placeholders for {len(values)} values in: {sql[:200]}")
    pieces: list[bytes] = []
    start = 0
    for offset, text in zip(marks, values, strict=True):
        pieces.extend((raw[start:offset], str(text).encode()))
        start = offset + 1
    pieces.append(raw[start:])
    return b"".join(pieces).decode()


_OPERATOR = duckdb.token_type.operator


@functools.lru_cache(maxsize=256)
def _placeholders(sql: str) -> tuple[int, ...]:
    """Byte offsets (DuckDB's tokenizer counts UTF-8 bytes) of the ``?``s.
    Our statements repeat (a few hundred shapes), so each is tokenized once."""
    raw = sql.encode()
    return tuple(
        offset for offset, kind in duckdb.tokenize(sql) if raw[offset] == 0x3F and kind == _OPERATOR
    )


def run(
    con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any] = ()
) -> duckdb.DuckDBPyConnection:
    """Execute one of our own statements with its values spelled in (``bound``),
    or bound as parameters when one has no spelling."""
    text = bound(sql, params)
    return con.execute(sql, list(params)) if text is None else con.execute(text)
