"""What a fanned-out pass's phases hand each other (maintenance/fanout.py).

``PassPlan`` (the plan's answer: the run so far and its batches),
``BatchOrder`` (what one batch needs) and ``BatchResult`` (what it did) are
plain JSON, and ``from_dict`` reads each back as outside input: a Step
Functions state's payload is not trusted to be the one the plan wrote.
Owners must be the 32 hex digits a lease owner is, tables ``[schema,
table]`` pairs of bounded names, requests re-read by
``PassRequest.from_mapping``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from slatelake.errors import MaintenanceConfigError
from slatelake.maintenance.options import DUCKLAKE_STEPS
from slatelake.maintenance.report import PassReport, StepReport, StepStatus
from slatelake.maintenance.request import PassRequest
from slatelake.maintenance.steps import TableName
from slatelake.store.location import show_input

TABLE_STEPS = DUCKLAKE_STEPS[1:4]  # flush, merge, rewrite: table by table
MAX_BATCH_TABLES = 1000
MAX_NAME_CHARS = 1024
_OWNER_CHARS = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class BatchOrder:
    """What one batch needs: the run it belongs to and its tables."""

    lake: str
    run_id: int | None
    lease_owner: str
    request: dict[str, Any]
    index: int
    count: int
    tables: tuple[TableName, ...]

    @property
    def name(self) -> str:
        return f"table batch {self.index + 1} of {self.count}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "lake": self.lake,
            "run_id": self.run_id,
            "lease_owner": self.lease_owner,
            "request": self.request,
            "index": self.index,
            "count": self.count,
            "tables": [list(t) for t in self.tables],
        }

    @classmethod
    def from_dict(cls, doc: object) -> BatchOrder:
        d = _mapping(doc, "a table batch")
        count = _int(d.get("count"), "a table batch's count", least=1)
        index = _int(d.get("index"), "a table batch's index", least=0)
        if index >= count:
            raise MaintenanceConfigError(f"table batch index {index} is not below count {count}")
        tables = d.get("tables")
        if not isinstance(tables, list) or len(tables) > MAX_BATCH_TABLES:
            raise MaintenanceConfigError(
                f"a table batch's tables: a list of at most {MAX_BATCH_TABLES} [schema, table]"
            )
        return cls(
            lake=_text(d.get("lake"), "a table batch's lake"),
            run_id=_run_id(d.get("run_id")),
            lease_owner=_owner(d.get("lease_owner")),
            request=dict(_mapping(d.get("request"), "a table batch's request")),
            index=index,
            count=count,
            tables=tuple(_table(t) for t in tables),
        )


@dataclass
class PassPlan:
    """The plan's answer: the run so far and its batches. ``failed`` names
    the step that failed before the batches (none then run);
    ``catalog_before`` is the catalog's bytes when the run began."""

    lake: str
    request: dict[str, Any]
    report: PassReport
    batches: list[BatchOrder]
    catalog_before: int | None = None
    failed: str | None = None

    def pass_request(self) -> PassRequest:
        """The request the run was planned from (checked again: outside input)."""
        return PassRequest.from_mapping(self.request)

    def to_dict(self) -> dict[str, Any]:
        return {
            "lake": self.lake,
            "request": self.request,
            "report": self.report.to_dict(),
            "batches": [b.to_dict() for b in self.batches],
            "catalog_before": self.catalog_before,
            "failed": self.failed,
        }

    @classmethod
    def from_dict(cls, doc: object) -> PassPlan:
        d = _mapping(doc, "a pass plan")
        batches = d.get("batches")
        if not isinstance(batches, list):
            raise MaintenanceConfigError("a pass plan's batches: a list of table batches")
        try:
            report = PassReport.from_dict(dict(_mapping(d.get("report"), "a pass plan's report")))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise MaintenanceConfigError(f"a pass plan's report does not read: {exc}") from None
        if report.lease_owner is not None:
            _owner(report.lease_owner)
        failed = d.get("failed")
        before = d.get("catalog_before")
        return cls(
            lake=_text(d.get("lake"), "a pass plan's lake"),
            request=dict(_mapping(d.get("request"), "a pass plan's request")),
            report=report,
            batches=[BatchOrder.from_dict(b) for b in batches],
            catalog_before=None if before is None else _int(before, "catalog_before", least=0),
            failed=None if failed is None else _text(failed, "a pass plan's failed step"),
        )


@dataclass
class BatchResult:
    """What one batch did: its steps' reports, the tables it deferred, and
    ``error`` when it failed as a whole (it raised, or its item died)."""

    index: int
    tables: list[TableName] = field(default_factory=list)
    steps: list[StepReport] = field(default_factory=list)
    deferred: list[TableName] = field(default_factory=list)
    work_pending: bool = False
    lease_lost: str | None = None
    error: str | None = None
    seconds: float = 0.0
    rss_hwm_mb: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "tables": [list(t) for t in self.tables],
            "steps": [
                {
                    "step": s.step,
                    "status": str(s.status),
                    "detail": s.detail,
                    "counts": s.counts,
                    "seconds": s.seconds,
                }
                for s in self.steps
            ],
            "deferred": [list(t) for t in self.deferred],
            "work_pending": self.work_pending,
            "lease_lost": self.lease_lost,
            "error": self.error,
            "seconds": self.seconds,
            "rss_hwm_mb": self.rss_hwm_mb,
        }

    @classmethod
    def from_dict(cls, doc: object) -> BatchResult:
        d = _mapping(doc, "a table batch's result")
        try:
            steps = [
                StepReport(
                    str(s["step"]),
                    StepStatus(s["status"]),
                    str(s["detail"]),
                    {str(k): int(v) for k, v in dict(s.get("counts") or {}).items()},
                    float(s.get("seconds") or 0.0),
                )
                for s in d.get("steps") or []
            ]
            return cls(
                index=_int(d.get("index"), "a table batch result's index", least=0),
                tables=[_table(t) for t in d.get("tables") or []],
                steps=[s for s in steps if s.step in TABLE_STEPS],
                deferred=[_table(t) for t in d.get("deferred") or []],
                work_pending=bool(d.get("work_pending")),
                lease_lost=None if d.get("lease_lost") is None else str(d["lease_lost"]),
                error=None if d.get("error") is None else str(d["error"]),
                seconds=float(d.get("seconds") or 0.0),
                rss_hwm_mb=float(d.get("rss_hwm_mb") or 0.0),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise MaintenanceConfigError(f"a table batch's result does not read: {exc}") from None


def _mapping(doc: object, what: str) -> Mapping[str, Any]:
    if not isinstance(doc, Mapping):
        raise MaintenanceConfigError(f"{what} is a JSON object, not {type(doc).__name__}")
    return doc


def _text(value: object, what: str) -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_NAME_CHARS or "\x00" in value:
        raise MaintenanceConfigError(f"{what}={show_input(value)}: expected a non-empty name")
    return value


def _int(value: object, what: str, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise MaintenanceConfigError(f"{what}={show_input(value)}: expected an integer >= {least}")
    return value


def _run_id(value: object) -> int | None:
    return None if value is None else _int(value, "run_id", least=0)


def _owner(value: object) -> str:
    if not isinstance(value, str) or len(value) != 32 or not set(value) <= _OWNER_CHARS:
        raise MaintenanceConfigError(
            f"lease_owner={show_input(value)}: expected the 32 hex digits the plan answered"
        )
    return value


def _table(value: object) -> TableName:
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise MaintenanceConfigError(f"table {show_input(value)}: expected [schema, table]")
    return (_text(value[0], "a schema name"), _text(value[1], "a table name"))
