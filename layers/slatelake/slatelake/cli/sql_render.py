"""The text layouts of DuckDB's shell modes, over DuckDB's own VARCHAR casts.

``slatelake sql`` cannot run DuckDB's shell, so the modes DuckDB's shell lays
out itself (box, table, column, line, list, tabs, quote, markdown) are laid
out here the way DuckDB 1.5's shell does (``tools/shell/shell_renderer.cpp``):
the same borders, separators, alignment (names centered in box and table,
values left-aligned) and ``NULL`` for a null. The values are DuckDB's text
for them (``::VARCHAR``), never Python's. Pure functions: no duckdb here.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

MODES = ("box", "column", "line", "list", "markdown", "quote", "table", "tabs")
NULL = "NULL"
_SIGNED = ("tinyint", "smallint", "integer", "bigint", "hugeint")
# DuckDB type ids DuckDB counts numeric (right-aligned in markdown, bare in quote)
NUMERIC = frozenset((*_SIGNED, *("u" + t for t in _SIGNED), "float", "double", "decimal"))
LINE_NAME_WIDTH = 5  # the narrowest field line mode right-aligns a name in

Rows = Sequence[Sequence[str | None]]


def render(
    mode: str,
    names: Sequence[str],
    kinds: Sequence[str],
    rows: Rows,
    headers: bool = True,
    null: str = NULL,
) -> str:
    """The whole text of one result in ``mode`` (one of ``MODES``); without
    ``headers`` the column, list, tabs and quote modes leave the names out
    (DuckDB's ``.headers off``); a NULL prints as ``null``."""
    if mode == "quote":  # a NULL is always NULL here, as in DuckDB
        return _quote(names, kinds, rows, headers, NULL)
    rows = [[null if v is None else v for v in r] for r in rows]
    if mode == "markdown":
        return _markdown(names, kinds, rows)
    if mode == "line":
        return _line(names, rows)
    if mode in ("list", "tabs"):
        sep = "|" if mode == "list" else "\t"
        lines = [sep.join(names)] * headers + [sep.join(_text(v) for v in r) for r in rows]
        return "".join(line + "\n" for line in lines)
    return _columns(mode, names, rows, headers)


def width(text: str) -> int:
    """Terminal cells ``text`` takes: wide (East Asian) characters take two."""
    return sum(
        0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1
        for c in text
    )


def align(text: str, cells: int, how: str = "center") -> str:
    """``text`` padded to ``cells``: left, right or centered (the odd space right)."""
    space = max(0, cells - width(text))
    left = 0 if how == "left" else space if how == "right" else space // 2
    return " " * left + text + " " * (space - left)


def _text(value: str | None) -> str:
    return NULL if value is None else value


def _columns(mode: str, names: Sequence[str], rows: Rows, headers: bool) -> str:
    """box, table and column: every value left-aligned in a column as wide as
    its widest cell; names centered (box, table) or left-aligned (column)."""
    if mode == "box":  # box shows a newline inside a value as \n
        names = [n.replace("\n", "\\n") for n in names]
        rows = [[_text(v).replace("\n", "\\n") for v in r] for r in rows]
    cells = [[_text(v) for v in r] for r in rows]
    widths = [max([width(n), *(width(r[i]) for r in cells)]) for i, n in enumerate(names)]
    if not names:
        return ""

    def line(values: Sequence[str], start: str, sep: str, end: str, how: str) -> str:
        padded = (align(v, w, how) for v, w in zip(values, widths, strict=True))
        return start + sep.join(padded) + end

    def rule(left: str, cross: str, right: str, dash: str) -> str:
        return left + cross.join(dash * (w + 2) for w in widths) + right

    if mode == "column":
        out = [line(names, "", "  ", "", "left"), "  ".join("-" * w for w in widths)] * headers
        out += [line(r, "", "  ", "", "left") for r in cells]
    elif mode == "table":
        out = [rule("+", "+", "+", "-"), line(names, "| ", " | ", " |", "center")]
        out.append(rule("+", "+", "+", "-"))
        out += [line(r, "| ", " | ", " |", "left") for r in cells]
        out.append(rule("+", "+", "+", "-"))
    else:  # box
        out = [rule("┌", "┬", "┐", "─"), line(names, "│ ", " │ ", " │", "center")]
        out.append(rule("├", "┼", "┤", "─"))
        out += [line(r, "│ ", " │ ", " │", "left") for r in cells]
        out.append(rule("└", "┴", "┘", "─"))
    return "".join(text + "\n" for text in out)


def _line(names: Sequence[str], rows: Rows) -> str:
    """One ``name = value`` a line, names right-aligned; a blank line between rows."""
    field = max([LINE_NAME_WIDTH, *(len(n) for n in names)])
    blocks = [
        "".join(f"{n.rjust(field)} = {_text(v)}\n" for n, v in zip(names, r, strict=True))
        for r in rows
    ]
    return "\n".join(blocks)


def _quote(names: Sequence[str], kinds: Sequence[str], rows: Rows, headers: bool, null: str) -> str:
    """Values as SQL literals (numbers, booleans and NULL bare), comma-separated."""

    def quoted(text: str) -> str:
        return "'" + text.replace("'", "''") + "'"

    def literal(value: str | None, kind: str) -> str:
        if value is None:
            return null
        return value if kind in NUMERIC or kind == "boolean" else quoted(value)

    out = [",".join(quoted(n) for n in names)] * headers
    out += [",".join(literal(v, k) for v, k in zip(r, kinds, strict=True)) for r in rows]
    return "".join(text + "\n" for text in out)


def _markdown(names: Sequence[str], kinds: Sequence[str], rows: Rows) -> str:
    """A GitHub pipe table of DuckDB's VARCHAR casts (NULL as ``NULL``), numbers
    right-aligned; every row, then a blank line."""
    heads = [_cell(n) for n in names]
    right = [k in NUMERIC for k in kinds]
    cells = [[_cell(_text(v)) for v in row] for row in rows]
    widths = [max(3, len(n), *(len(r[i]) for r in cells)) for i, n in enumerate(heads)]
    lines = ["| " + " | ".join(n.center(w) for n, w in zip(heads, widths, strict=True)) + " |"]
    lines.append(
        "|"
        + "|".join("-" * (w + 1) + (":" if r else "-") for w, r in zip(widths, right, strict=True))
        + "|"
    )
    for row in cells:
        padded = (
            c.rjust(w) if r else c.ljust(w) for c, w, r in zip(row, widths, right, strict=True)
        )
        lines.append("| " + " | ".join(padded) + " |")
    return "\n".join(lines) + "\n\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\r\n", "<br>").replace("\n", "<br>")
