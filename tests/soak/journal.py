"""Each soak writer's journal: what it asked the lake to do, and what it was told.

One JSON object a line, appended and flushed as it happens, so a writer that
is killed mid-operation still leaves its intent behind. An operation is an
``intent`` line (its kind and the row id ranges it inserts and deletes, per
table) followed by an ``outcome`` line with its fate:

- ``ack``: the commit was acknowledged; its inserted rows must be present
  exactly once and its deleted rows absent;
- ``refused``: the lake said no (a conflict, or DuckDB failed the statement
  before anything reached the log); none of its inserted rows may appear;
- ``ambiguous``: anything else (the outcome is unknown to the writer, e.g. a
  slot PUT whose answer was lost); its rows may be present at most once.

An intent without an outcome (the writer died) reads as ambiguous. Row ids
are never reused, so one id names one attempted insert.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ACK, REFUSED, AMBIGUOUS = "ack", "refused", "ambiguous"
TABLES = ("events", "notes")
# Row ids of writer w are (w + 1) * ID_SPAN + n: disjoint across writers.
ID_SPAN = 10**12

Ranges = dict[str, list[tuple[int, int]]]  # table -> half-open [lo, hi) id ranges


@dataclass
class Operation:
    """One writer operation: one DuckLake commit (a statement or a transaction)."""

    op: int
    kind: str
    inserts: Ranges
    deletes: Ranges
    fate: str = AMBIGUOUS
    error: str | None = None
    seconds: float = 0.0

    @property
    def rows_inserted(self) -> int:
        return sum(hi - lo for spans in self.inserts.values() for lo, hi in spans)


@dataclass
class WriterExit:
    """What a writer says when it stops: its own peak RSS and how often it reconnected."""

    rss_mb: float = 0.0
    reconnects: int = 0
    errors: dict[str, int] = field(default_factory=dict)


class Journal:
    """The append side, used by a writer process."""

    def __init__(self, path: Path) -> None:
        self._file = path.open("a", encoding="utf-8", buffering=1)

    def _write(self, doc: dict[str, Any]) -> None:
        self._file.write(json.dumps(doc, separators=(",", ":")) + "\n")
        self._file.flush()

    def intent(self, op: Operation) -> None:
        self._write(
            {"t": "intent", "op": op.op, "kind": op.kind, "ins": op.inserts, "del": op.deletes}
        )

    def outcome(self, op: Operation) -> None:
        self._write(
            {
                "t": "outcome",
                "op": op.op,
                "fate": op.fate,
                "error": op.error,
                "seconds": round(op.seconds, 3),
                "at": round(time.time(), 3),
            }
        )

    def exit(self, done: WriterExit) -> None:
        self._write(
            {
                "t": "exit",
                "rss_mb": done.rss_mb,
                "reconnects": done.reconnects,
                "errors": done.errors,
            }
        )

    def close(self) -> None:
        self._file.close()


def _ranges(doc: dict[str, Any]) -> Ranges:
    return {t: [(int(lo), int(hi)) for lo, hi in spans] for t, spans in doc.items()}


def read_journal(path: Path) -> tuple[list[Operation], WriterExit | None]:
    """Every operation in a journal, in order, and the writer's exit record if
    it wrote one. A torn last line (the writer was killed mid-write) is
    ignored: its operation has no outcome, so it reads as ambiguous."""
    ops: dict[int, Operation] = {}
    done: WriterExit | None = None
    for line in _lines(path):
        t = line["t"]
        if t == "intent":
            ops[line["op"]] = Operation(
                line["op"], line["kind"], _ranges(line["ins"]), _ranges(line["del"])
            )
        elif t == "outcome" and line["op"] in ops:
            op = ops[line["op"]]
            op.fate, op.error, op.seconds = line["fate"], line["error"], line["seconds"]
        elif t == "exit":
            done = WriterExit(line["rss_mb"], line["reconnects"], line["errors"])
    return list(ops.values()), done


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    for raw in path.read_text(encoding="utf-8").splitlines():
        try:
            yield json.loads(raw)
        except json.JSONDecodeError:
            continue
