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

An outcome also says whether the refusal was a conflict (``conflict``), with
the error's message. Work that only appends (autocommit INSERTs, transactions
of INSERTs) conflicts by DuckLake's rules in one case only: a commit that
wrote a delete file on the same table since it began (the pass's flush of
inlined deletes does; stock DuckLake refuses the insert with the same words,
``test_soak_smoke``). Such a refusal, DuckLake's own and in its own words
(``DUCKLAKE_RULE``), is counted apart; any other conflict raised on appends is
a finding (``tally_conflicts``). A delete may conflict with a pass that
merged, rewrote or flushed the same table, so its conflicts are only counted.

An intent without an outcome (the writer died) reads as ambiguous. Row ids
are never reused, so one id names one attempted insert. Each writer has a
table of its own (``own_table``) and all share one (``SHARED``).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ACK, REFUSED, AMBIGUOUS = "ack", "refused", "ambiguous"
SHARED = "shared"  # the table every writer appends to
# Row ids of writer w are (w + 1) * ID_SPAN + n: disjoint across writers.
ID_SPAN = 10**12

Ranges = dict[str, list[tuple[int, int]]]  # table -> half-open [lo, hi) id ranges
# Samples of conflicts on non-conflicting work, kept verbatim in the figures.
SAMPLES = 10
# DuckLake's refusal of an insert over a commit that deleted from the table,
# as slatelake passes it on (``ducklake.statements.refused``): the one
# DuckLake rule an append can meet.
DUCKLAKE_RULE = re.compile(
    r'^ConflictError: Transaction conflict - attempting to insert into table with index "\d+" '
    r"- but another transaction has deleted from it; nothing was committed$"
)


def own_table(writer: int) -> str:
    """The table only writer ``writer`` writes to."""
    return f"own_{writer}"


def soak_tables(writers: int) -> tuple[str, ...]:
    """Every table of a soak with ``writers`` writers: the shared one first."""
    return (SHARED, *(own_table(i) for i in range(writers)))


def lake_tables(con: Any) -> list[str]:
    """The tables in the attached lake's ``main`` schema (the soak's tables,
    whatever the writer count was), sorted."""
    rows = con.execute(
        "SELECT table_name FROM duckdb_tables() "
        "WHERE database_name = 'lake' AND schema_name = 'main' ORDER BY 1"
    ).fetchall()
    return [r[0] for r in rows]


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
    conflict: bool = False  # the lake refused it as a conflict (``error`` says how)
    writer: int | None = None  # set when read back from a writer's journal

    @property
    def rows_inserted(self) -> int:
        return sum(hi - lo for spans in self.inserts.values() for lo, hi in spans)

    @property
    def appends_only(self) -> bool:
        """Only INSERTs: non-conflicting work by DuckLake's rules."""
        return not any(self.deletes.values())


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
                "conflict": op.conflict,
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
    ignored: its operation has no outcome, so it reads as ambiguous. The
    writer's index is read from the file name (``writer-<index>.jsonl``)."""
    ops: dict[int, Operation] = {}
    done: WriterExit | None = None
    index = path.stem.removeprefix("writer-")
    writer = int(index) if index.isdigit() else None
    for line in _lines(path):
        t = line["t"]
        if t == "intent":
            ops[line["op"]] = Operation(
                line["op"], line["kind"], _ranges(line["ins"]), _ranges(line["del"]), writer=writer
            )
        elif t == "outcome" and line["op"] in ops:
            op = ops[line["op"]]
            op.fate, op.error, op.seconds = line["fate"], line["error"], line["seconds"]
            op.conflict = bool(line.get("conflict", False))
        elif t == "exit":
            done = WriterExit(line["rss_mb"], line["reconnects"], line["errors"])
    return list(ops.values()), done


def tally_conflicts(ops: list[Operation]) -> dict[str, Any]:
    """Conflicts raised to writers: on non-conflicting work (appends only and
    not DuckLake's own insert-over-delete refusal, a finding), DuckLake's
    refusals of appends (counted) and on work that may conflict (deletes,
    counted), with the first few findings verbatim."""
    appends = [op for op in ops if op.conflict and op.appends_only]
    rule = [op for op in appends if DUCKLAKE_RULE.match(op.error or "")]
    bad = [op for op in appends if op not in rule]
    return {
        "conflicts_nonconflicting": len(bad),
        "conflicts_ducklake_rule": len(rule),
        "conflicts_may_conflict": sum(op.conflict and not op.appends_only for op in ops),
        "conflict_samples": [
            f"writer {op.writer} op {op.op} ({op.kind}): {op.error}" for op in bad[:SAMPLES]
        ],
    }


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    for raw in path.read_text(encoding="utf-8").splitlines():
        try:
            yield json.loads(raw)
        except json.JSONDecodeError:
            continue
