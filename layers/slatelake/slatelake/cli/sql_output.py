"""How ``slatelake sql`` prints a result: DuckDB's box, CSV, JSON or Markdown.

DuckDB renders every value; this module only picks the rendering the user
asked for (``Output.mode``) and writes it to standard output. duckdb is never
imported here: a relation arrives from the session.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MODES = ("box", "csv", "json", "markdown")
JSON_BATCH = 1024  # rows fetched at a time for --json
_SIGNED = ("tinyint", "smallint", "integer", "bigint", "hugeint")
# DuckDB type ids --markdown right-aligns, as DuckDB aligns them in a box
NUMERIC = frozenset((*_SIGNED, *("u" + t for t in _SIGNED), "float", "double", "decimal"))
_ROW = "__slatelake_row"  # the relation's alias in --json: the row as a STRUCT


@dataclass
class Output:
    """How results print: ``mode`` is box, csv, json or markdown; the limits
    apply to box, which DuckDB elides past them (None: DuckDB's defaults)."""

    mode: str = "box"
    max_rows: int | None = None
    max_width: int | None = None

    def show(self, relation: Any) -> None:
        {"box": self._box, "csv": _csv, "json": _json, "markdown": _markdown}[self.mode](relation)

    def _box(self, relation: Any) -> None:
        relation.show(max_width=self.max_width, max_rows=self.max_rows)


def _csv(relation: Any) -> None:
    """DuckDB's CSV writer (header, then rows), through a private temporary file."""
    with tempfile.TemporaryDirectory(prefix="slatelake-sql-") as tmp:
        path = Path(tmp, "result.csv")
        relation.to_csv(str(path), header=True)
        with path.open(encoding="utf-8", newline="") as rendered:
            shutil.copyfileobj(rendered, sys.stdout)


def _json(relation: Any) -> None:
    """One line: a JSON array with an object per row, each made by DuckDB's
    ``to_json`` (a duplicate column name gets DuckDB's ``_1`` suffix)."""
    rows = relation.set_alias(_ROW).project(f"to_json({_ROW})")  # no view left behind
    batch = rows.fetchmany(JSON_BATCH)  # a failing query fails before anything prints
    out = sys.stdout
    out.write("[")
    sep = ""
    while batch:
        for (doc,) in batch:
            out.write(sep + doc)
            sep = ","
        batch = rows.fetchmany(JSON_BATCH)
    out.write("]\n")


def _markdown(relation: Any) -> None:
    """A GitHub pipe table of DuckDB's VARCHAR casts (NULL as ``NULL``), numbers
    right-aligned; every row, then a blank line."""
    names = [_cell(str(n)) for n in relation.columns]
    right = [t.id in NUMERIC for t in relation.types]
    rows = [
        ["NULL" if v is None else _cell(v) for v in row]
        for row in relation.project("COLUMNS(*)::VARCHAR").fetchall()
    ]
    widths = [max(3, len(n), *(len(r[i]) for r in rows)) for i, n in enumerate(names)]
    lines = ["| " + " | ".join(n.center(w) for n, w in zip(names, widths, strict=True)) + " |"]
    lines.append(
        "|"
        + "|".join("-" * (w + 1) + (":" if r else "-") for w, r in zip(widths, right, strict=True))
        + "|"
    )
    for row in rows:
        cells = (
            c.rjust(w) if r else c.ljust(w) for c, w, r in zip(row, widths, right, strict=True)
        )
        lines.append("| " + " | ".join(cells) + " |")
    print("\n".join(lines) + "\n")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\r\n", "<br>").replace("\n", "<br>")
