"""The threshold trigger: tables whose small files call for a compaction run now.

Between cadence runs a cheap check (catalog reads only: ``health``'s few
set-based queries) finds the tables of a lake with an enabled policy that
hold at least their policy's ``small_file_min_count`` files under the target
size, with compaction on for them. Each gets a run scoped to itself of
flush, merge and rewrite only: a threshold run never expires or deletes
anything lake-wide. The target size is each table's policy's (else DuckLake's
own setting per table); the count is each table's own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from slatelake.ducklake.session import Session
from slatelake.maintenance.health import health
from slatelake.maintenance.options import bind
from slatelake.maintenance.policy import lake_enabled, resolve, rows_at_head
from slatelake.maintenance.progress import Sink
from slatelake.maintenance.report import PassReport
from slatelake.maintenance.runner import run_pass
from slatelake.maintenance.scope import RunScope

OPERATIONS = ("flush", "merge", "rewrite")
TRIGGER = "threshold"


@dataclass(frozen=True)
class DueTable:
    schema: str
    table: str
    small_files: int
    min_count: int

    @property
    def name(self) -> str:
        return f"{self.schema}.{self.table}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def due_tables(session: Session) -> list[DueTable]:
    """The tables a threshold run is due for; none unless the lake's policy
    is enabled."""
    session.refresh()
    rows = rows_at_head(session)
    if not lake_enabled(rows):
        return []
    report = health(session)  # each table's target: policy.target_file_sizes
    due = []
    for table in report.tables:
        policy = resolve(rows, table.schema, table.table)
        wanted = int(policy["small_file_min_count"])
        if policy["enabled"] and policy["compaction"] and table.small_files >= wanted:
            due.append(DueTable(table.schema, table.table, table.small_files, wanted))
    return due


@dataclass
class ThresholdReport:
    """What a threshold check found and did: the due tables, one pass report
    per table it ran (trigger ``threshold``), and why it stopped early, if it did."""

    due: list[DueTable]
    runs: list[PassReport] = field(default_factory=list)
    stopped: str | None = None

    @property
    def failed(self) -> bool:
        return any(r.failed for r in self.runs)

    def to_dict(self) -> dict[str, Any]:
        return {
            "due": [d.to_dict() for d in self.due],
            "runs": [r.to_dict() for r in self.runs],
            "stopped": self.stopped,
        }


def run_due(
    session: Session,
    *,
    wait_s: float = 0.0,
    deadline: Callable[[], float] | None = None,
    stop: threading.Event | None = None,
    on_progress: Sink | None = None,
    by: str | None = None,
) -> ThresholdReport:
    """Check, then give each due table its own run of flush, merge and
    rewrite (what the lake's policy enables for it; nothing lake-wide)."""
    report = ThresholdReport(due_tables(session))
    for table in report.due:
        if stop is not None and stop.is_set():
            report.stopped = "shutdown requested"
        elif deadline is not None and deadline() <= 0:
            report.stopped = "the invocation deadline is near"
        if report.stopped is not None:
            break
        scope = RunScope(operations=OPERATIONS, table=(table.schema, table.table))
        report.runs.append(
            run_pass(
                session,
                bind({}),
                trigger=TRIGGER,
                wait_s=wait_s,
                stop=stop,
                deadline=deadline,
                on_progress=on_progress,
                scope=scope,
                by=by,
            )
        )
    return report
