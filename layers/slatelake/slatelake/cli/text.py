"""The text layouts' shared pieces: aligned tables, sizes, shares, ages, times.

Every text view (``text_maintenance``, ``text_store``, ``text_lake``) spells
a size, a time or a table the same way through these, so two verbs never
print one quantity two ways.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any


def print_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Aligned columns with a rule under the header; None prints as NULL."""
    cells = [list(columns)] + [["NULL" if v is None else str(v) for v in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    for n, row in enumerate(cells):
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
        if n == 0:
            print("  ".join("-" * w for w in widths))


def name(text: str) -> str:
    """A catalog name as it is, unless it holds what a terminal would act on."""
    from slatelake import show_input

    return text if text.isprintable() else show_input(text)


def size(n: float | None) -> str:
    """Bytes in binary units, e.g. ``12.5 MiB``."""
    if n is None:
        return "unknown bytes"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"  # unreachable


def share(fraction: float | None) -> str:
    return "-" if fraction is None else f"{fraction:.1%}"


def age(seconds: float | None) -> str:
    """Whole seconds in the duration grammar's units, e.g. ``7d`` or ``1h5m3s``."""
    if seconds is None:
        return "-"
    rest, parts = max(0, round(seconds)), []
    for unit, span in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if rest >= span or (unit == "s" and not parts):
            parts.append(f"{rest // span}{unit}")
            rest %= span
    return "".join(parts)


def when(us: int, zone: bool = False) -> str:
    """Microseconds since the epoch as a UTC time, to the second."""
    text = dt.datetime.fromtimestamp(us / 1e6, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
    return f"{text} UTC" if zone else text


def more(next_before: int | None) -> None:
    """The line that continues a paged listing, when there is more."""
    if next_before is not None:
        print(f"more: --before {next_before}")
