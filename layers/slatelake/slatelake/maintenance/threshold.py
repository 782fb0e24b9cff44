"""The threshold trigger: tables whose small files call for a compaction run now.

Between cadence runs a cheap check (catalog reads only: ``health``'s few
set-based queries) finds the tables of a lake with an enabled policy that
hold at least their policy's ``small_file_min_count`` files under the target
size, with compaction on for them. Each gets a run scoped to itself of
flush, merge and rewrite only: a threshold run never expires or deletes
anything lake-wide. The target size is the lake policy's (else DuckLake's
own setting per table); the count is each table's own.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from slatelake.ducklake.session import Session
from slatelake.maintenance.health import HealthPolicy, health
from slatelake.maintenance.policy import AUTO, POLICY_KEY, decode_rows, lake_enabled, resolve

OPERATIONS = ("flush", "merge", "rewrite")


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
    rows = decode_rows(session.lake.read_sys(session.state, POLICY_KEY))
    if not lake_enabled(rows):
        return []
    lake = resolve(rows)
    target = lake["target_file_size"]
    report = health(session, HealthPolicy(target_file_size=None if target == AUTO else target))
    due = []
    for table in report.tables:
        policy = resolve(rows, table.schema, table.table)
        wanted = int(policy["small_file_min_count"])
        if policy["enabled"] and policy["compaction"] and table.small_files >= wanted:
            due.append(DueTable(table.schema, table.table, table.small_files, wanted))
    return due
