"""How ``slatelake sql`` prints a result: the output modes of DuckDB's shell.

DuckDB renders every value: ``duckbox`` (the default) is the box DuckDB's
Python prints, ``csv`` DuckDB's CSV writer, ``json``/``jsonlines`` rows made
by DuckDB's ``to_json``; the other modes lay out DuckDB's own VARCHAR casts
of the values the way DuckDB's shell lays them out (``sql_render``). This
module picks the rendering (``Output.mode``) and the stream it goes to
(standard output, or a file from ``.output``/``.once``). duckdb is never
imported here: a relation arrives from the session.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from slatelake.cli import sql_render

# DuckDB's shell modes that make sense here (DuckDB's `.mode` list, less html,
# insert, latex, tcl and ascii), in DuckDB's order
MODES = (
    "box",
    "column",
    "csv",
    "duckbox",
    "json",
    "jsonlines",
    "line",
    "list",
    "markdown",
    "quote",
    "table",
    "tabs",
    "trash",
)
DEFAULT_MODE = "duckbox"
JSON_BATCH = 1024  # rows fetched at a time for json and jsonlines
UNLIMITED = 2**31 - 1  # duckbox written to a file: every row and column, as DuckDB's shell does
NUMERIC = sql_render.NUMERIC
_ROW = "__slatelake_row"  # the relation's alias in json: the row as a STRUCT


@dataclass
class Output:
    """How results print: ``mode`` is one of ``MODES``; the limits apply to
    duckbox, which DuckDB elides past them (None: DuckDB's defaults).
    ``stream`` is where results go (None: standard output as it is now);
    ``headers`` and ``null`` are the shell's ``.headers`` and ``.nullvalue``."""

    mode: str = DEFAULT_MODE
    max_rows: int | None = None
    max_width: int | None = None
    stream: IO[str] | None = field(default=None, repr=False)
    whole: bool = False  # duckbox into a file: nothing elided unless asked, as in DuckDB
    headers: bool = True  # column names in csv, column, list, tabs and quote
    null: str | None = None  # what a NULL prints as (None: DuckDB's choice for the mode)

    @property
    def out(self) -> IO[str]:
        return sys.stdout if self.stream is None else self.stream

    def show(self, relation: Any) -> None:
        _RENDER[self.mode](self, relation)
        self.out.flush()

    def _duckbox(self, relation: Any) -> None:
        rows, width = self.max_rows, self.max_width
        if self.whole:
            rows = UNLIMITED if rows is None else rows
            width = UNLIMITED if width is None else width
        with contextlib.redirect_stdout(self.out):
            if self.null is None:
                relation.show(max_width=width, max_rows=rows)
            else:
                relation.show(max_width=width, max_rows=rows, null_value=self.null)

    def _csv(self, relation: Any) -> None:
        """DuckDB's CSV writer (header, then rows), through a private temporary file."""
        with tempfile.TemporaryDirectory(prefix="slatelake-sql-") as tmp:
            path = Path(tmp, "result.csv")
            if self.null is None:
                relation.to_csv(str(path), header=self.headers)
            else:
                relation.to_csv(str(path), header=self.headers, na_rep=self.null)
            with path.open(encoding="utf-8", newline="") as rendered:
                shutil.copyfileobj(rendered, self.out)

    def _json(self, relation: Any) -> None:
        """One line: a JSON array with an object per row, each made by DuckDB's
        ``to_json`` (a duplicate column name gets DuckDB's ``_1`` suffix)."""
        out = self.out
        sep = ""
        for n, doc in enumerate(_json_rows(relation)):
            if n == 0:
                out.write("[")
            out.write(sep + doc)
            sep = ","
        out.write("]\n" if sep else "[]\n")

    def _jsonlines(self, relation: Any) -> None:
        """A JSON object per row, one a line (DuckDB's NDJSON)."""
        docs = list(_json_rows(relation))
        self.out.write("\n".join(docs) + "\n")

    def _trash(self, relation: Any) -> None:
        """Run the query, print nothing (DuckDB's ``trash``)."""
        while relation.fetchmany(JSON_BATCH):
            pass

    def _text(self, relation: Any) -> None:
        """The modes laid out from DuckDB's VARCHAR casts (``sql_render``)."""
        names = [str(n) for n in relation.columns]
        kinds = [t.id for t in relation.types]
        rows = relation.project("COLUMNS(*)::VARCHAR").fetchall()
        null = sql_render.NULL if self.null is None else self.null
        self.out.write(sql_render.render(self.mode, names, kinds, rows, self.headers, null))


def _json_rows(relation: Any) -> Any:
    """Each row as DuckDB's ``to_json`` writes it; a failing query fails
    before anything is yielded."""
    rows = relation.set_alias(_ROW).project(f"to_json({_ROW})")  # no view left behind
    batch = rows.fetchmany(JSON_BATCH)
    while batch:
        for (doc,) in batch:
            yield doc
        batch = rows.fetchmany(JSON_BATCH)


_RENDER: dict[str, Callable[[Output, Any], None]] = {
    "duckbox": Output._duckbox,
    "csv": Output._csv,
    "json": Output._json,
    "jsonlines": Output._jsonlines,
    "trash": Output._trash,
    **{mode: Output._text for mode in sql_render.MODES},
}
assert set(_RENDER) == set(MODES)
