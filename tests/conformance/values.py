"""Results rendered and compared the way DuckDB's sqllogictest runner does it.

DuckDB's runner casts every value to VARCHAR and compares text: NULL is
``NULL``, an empty string ``(empty)``; a mismatch is retried as numbers of the
column's type (floating point within 1 %) and as booleans (``true``/``1``). A
single ``N values hashing to MD5`` line, or a label, compares the MD5 of the
values instead. Expected rows are tab-separated, or one value per line. The
runner sorts only the actual rows (``rowsort``, ``valuesort``); the file holds
them sorted.

Python receives typed values, so ``render`` rebuilds DuckDB's VARCHAR text
from the value and the column's DuckDBPyType: shortest round-trip floats,
decimals at their scale, nested values with DuckDB's quoting rules. An
INTERVAL arrives as a timedelta (months as 30 days) and cannot be told apart
from its day count; the suite does not print one.
"""

from __future__ import annotations

import datetime as dt
import decimal
import hashlib
import math
import re
import struct
import uuid
from collections.abc import Sequence
from typing import Any

INTEGERS = {
    "tinyint",
    "smallint",
    "integer",
    "bigint",
    "hugeint",
    "utinyint",
    "usmallint",
    "uinteger",
    "ubigint",
    "uhugeint",
}
FLOATS = {"float", "double"}
_HASH = re.compile(r"^(\d+) values hashing to ([0-9a-z]{32})$")
# a string inside a LIST/STRUCT/MAP is quoted when it holds one of these or edge whitespace
_NESTED_QUOTE = set(",[]{}()'\"=:")


def _type_id(typ: Any) -> str:
    return str(getattr(typ, "id", "") or "")


def _children(typ: Any) -> list[tuple[str, Any]]:
    try:
        return list(typ.children)
    except Exception:
        return []


def render(value: Any, typ: Any) -> str:
    """A result cell as DuckDB's runner prints it."""
    if value is None:
        return "NULL"
    text = _text(value, typ, nested=False)
    return "(empty)" if text == "" else text.replace("\0", "\\0")


def _text(value: Any, typ: Any, nested: bool) -> str:
    if value is None:
        return "NULL"
    tid = _type_id(typ)
    kids = _children(typ)
    if isinstance(value, bool):
        return "true" if value else "false"
    if tid in ("list", "array") or isinstance(value, (list, tuple)):
        child = kids[0][1] if kids else None
        return "[" + ", ".join(_text(v, child, True) for v in value) + "]"
    if tid == "map":
        ktype = kids[0][1] if kids else None
        vtype = kids[1][1] if len(kids) > 1 else None
        items = value.items() if isinstance(value, dict) else value
        return (
            "{"
            + ", ".join(f"{_text(k, ktype, True)}={_text(v, vtype, True)}" for k, v in items)
            + "}"
        )
    if isinstance(value, dict):  # a STRUCT
        types = dict(kids)
        parts = (f"{_quoted(str(k))}: {_text(v, types.get(k), True)}" for k, v in value.items())
        return "{" + ", ".join(parts) + "}"
    if isinstance(value, float):
        return _float32(value) if tid == "float" else _double(value)
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return _nested_string(value) if nested else value
    if isinstance(value, dt.datetime):
        text = value.strftime("%Y-%m-%d %H:%M:%S") + _fraction(value.microsecond)
        return text + _offset(value.utcoffset()) if value.tzinfo is not None else text
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, dt.time):
        text = value.strftime("%H:%M:%S") + _fraction(value.microsecond)
        return text + _offset(value.utcoffset()) if value.tzinfo is not None else text
    if isinstance(value, dt.timedelta):
        return _interval(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "".join(
            chr(b) if 32 <= b < 127 and chr(b) not in "\\'\"" else f"\\x{b:02X}"
            for b in bytes(value)
        )
    if isinstance(value, uuid.UUID):
        return str(value)
    return str(value)


def _quoted(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _nested_string(text: str) -> str:
    bare = (
        text != ""
        and text == text.strip()
        and text.lower() != "null"
        and not any(c in _NESTED_QUOTE for c in text)
    )
    return text if bare else _quoted(text)


def _double(value: float) -> str:
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return repr(value)  # Python's shortest round-trip text is DuckDB's, exponents included


def _float32(value: float) -> str:
    if math.isnan(value) or math.isinf(value):
        return _double(value)
    target = struct.unpack("f", struct.pack("f", value))[0]
    for digits in range(1, 10):
        text = f"{target:.{digits}g}"
        if struct.unpack("f", struct.pack("f", float(text)))[0] == target:
            return repr(float(text))
    return repr(target)


def _fraction(micros: int) -> str:
    return ("." + f"{micros:06d}").rstrip("0") if micros else ""


def _offset(offset: dt.timedelta | None) -> str:
    if offset is None:
        return ""
    seconds = int(offset.total_seconds())
    sign = "+" if seconds >= 0 else "-"
    hours, rest = divmod(abs(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{sign}{hours:02d}"
    if minutes or secs:
        text += f":{minutes:02d}"
    if secs:
        text += f":{secs:02d}"
    return text


def _interval(delta: dt.timedelta) -> str:
    parts = []
    if delta.days:
        parts.append(f"{delta.days} day" + ("" if abs(delta.days) == 1 else "s"))
    if delta.seconds or delta.microseconds or not parts:
        hours, rest = divmod(delta.seconds, 3600)
        minutes, secs = divmod(rest, 60)
        parts.append(f"{hours:02d}:{minutes:02d}:{secs:02d}" + _fraction(delta.microseconds))
    return " ".join(parts)


# -- comparison -------------------------------------------------------------------


def value_matches(actual: str, expected: str, typ: Any) -> bool:
    """One cell: text, then regex, then as numbers of the column's type or booleans."""
    if actual == expected:
        return True
    for prefix, want in (("<REGEX>:", True), ("<!REGEX>:", False)):
        if expected.startswith(prefix):
            found = re.fullmatch(expected[len(prefix) :], actual, re.DOTALL) is not None
            return found == want
    tid = _type_id(typ)
    if tid in INTEGERS or tid in FLOATS or tid == "decimal":
        return _numbers_equal(actual, expected, tid)
    if tid == "boolean":
        truth = {"true": 1, "1": 1, "false": 0, "0": 0}
        a, e = truth.get(actual.lower()), truth.get(expected.lower())
        return a is not None and a == e
    return False


def _numbers_equal(actual: str, expected: str, tid: str) -> bool:
    if actual == "NULL" or expected == "NULL":
        return False
    try:
        a, e = decimal.Decimal(actual), decimal.Decimal(expected)
    except decimal.InvalidOperation:
        return False
    if tid in FLOATS:
        fa, fe = float(a), float(e)
        if math.isnan(fa) or math.isnan(fe):
            return math.isnan(fa) and math.isnan(fe)
        if math.isinf(fa) or math.isinf(fe):
            return fa == fe
        return abs(fa - fe) <= abs(fe) * 0.01 + 1e-8  # DuckDB's ApproxEqual
    if not a.is_finite() or not e.is_finite():
        return False
    # the expected text is cast to the column's type, which rounds half away from zero
    scale = a.as_tuple().exponent if tid == "decimal" else 0
    quantum = decimal.Decimal(1).scaleb(scale if isinstance(scale, int) else 0)
    return e.quantize(quantum, rounding=decimal.ROUND_HALF_UP) == a


def result_hash(values: Sequence[str]) -> str:
    digest = hashlib.md5("".join(v + "\n" for v in values).encode()).hexdigest()
    return f"{len(values)} values hashing to {digest}"


def compare(
    columns: int,
    sort: str,
    expected: Sequence[str],
    types: Sequence[Any],
    rows: Sequence[Sequence[Any]],
    label: str | None,
    labels: dict[str, str],
) -> str | None:
    """None when the rows match the expected lines; otherwise what differs."""
    width = len(types)
    values = [render(v, types[c]) for row in rows for c, v in enumerate(row)]
    if sort == "rowsort" and width:
        ordered = sorted(values[k : k + width] for k in range(0, len(values), width))
        values = [v for row in ordered for v in row]
    elif sort == "valuesort":
        values.sort()
    nrows = len(rows)
    if label is not None or (len(expected) == 1 and _HASH.match(expected[0])):
        digest = result_hash(values)
        if label is not None:
            earlier = labels.setdefault(label, digest)
            if earlier != digest:
                return f"label {label}: {digest}, but an earlier query with it gave {earlier}"
        if len(expected) == 1 and _HASH.match(expected[0]) and expected[0] != digest:
            return f"expected {expected[0]}, got {digest}"
        return None
    if width == 0:
        return "the query returned no columns"
    row_wise = (width > 1 and len(expected) == nrows) or all("\t" in e for e in expected)
    if row_wise:
        cells = []
        for n, line in enumerate(expected):
            split = line.split("\t")
            if len(split) != width:
                return f"expected row {n + 1} has {len(split)} values, the result {width} columns"
            cells.extend(split)
    elif len(expected) % width:
        return f"{len(expected)} expected values do not divide into {width} columns" + _show(
            expected, values, width
        )
    else:
        cells = list(expected)
    if len(cells) != len(values):
        return f"expected {len(cells) // width} rows, got {nrows}" + _show(expected, values, width)
    for n, (got, want) in enumerate(zip(values, cells, strict=True)):
        if not value_matches(got, want, types[n % width]):
            row, col = divmod(n, width)
            return f"row {row + 1} column {col + 1}: expected {want!r}, got {got!r}" + _show(
                expected, values, width
            )
    if columns != width:
        return f"expected {columns} columns, the result has {width} (values match)"
    return None


def _show(expected: Sequence[str], values: Sequence[str], width: int, limit: int = 12) -> str:
    rows = ["\t".join(values[k : k + width]) for k in range(0, len(values), width)]

    def block(lines: Sequence[str]) -> str:
        shown = [f"    {ln}" for ln in lines[:limit]]
        if len(lines) > limit:
            shown.append(f"    ... ({len(lines)} lines)")
        return "\n".join(shown)

    return f"\nexpected:\n{block(expected)}\ngot:\n{block(rows)}"
