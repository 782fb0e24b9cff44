"""Pass reports and the durable status window.

A report is what every surface prints (CLI ``--json``, Python, the Lambda):
``started_at`` (µs since the epoch), ``trigger`` (scheduled | manual),
``work_pending``, ``seconds``, ``rss_hwm_mb``, the head it was recorded
against, and one row per step in the RFC's order, each ``ran``, ``skipped``
or ``failed`` with a ``detail`` saying what happened or why not, its
``counts`` and ``seconds``, and ``dry_run`` when it only said what it would
do; ``operations`` and ``table`` the scope of a manual run that was
limited, and ``plan`` what a dry run found; ``lease_lost`` says why a pass stopped when
another process took its lease (such a pass records nothing). ``status``
sums it up: ``failed``, ``partial`` (``partial_reason``: the retention
fail-safe skipped deletion; or work is pending) or ``succeeded``; a run
history entry is also ``running`` from the moment its pass took the lease
(``running``, with ``lease_generation`` and ``lease_owner``) until the pass
rewrites it with how it ended, and a run that never did (a killed pass) is
rewritten ``failed`` by the next pass, ``failed_reason`` saying why.
``queued_s`` is how long a run waited for another pass's lease.
The window keeps the last 16 passes in ``sys/maintenance_status``. A window
that does not decode is never fatal: reading it salvages the well-formed
records and says what was dropped, and the next pass rewrites it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from slatelake.errors import CorruptionError
from slatelake.store import values
from slatelake.store.keys import Subspace, encode_key

log = logging.getLogger("slatelake.maintenance")


class StepStatus(StrEnum):
    """What became of one step."""

    RAN = "ran"
    SKIPPED = "skipped"
    FAILED = "failed"


class PassStatus(StrEnum):
    """A pass as a whole (``PassReport.status``)."""

    SUCCEEDED = "succeeded"
    PARTIAL = "partial"
    FAILED = "failed"
    # Run history only: the pass holds its lease and has not finished (the
    # status window keeps finished passes only).
    RUNNING = "running"


RAN, SKIPPED, FAILED = StepStatus.RAN, StepStatus.SKIPPED, StepStatus.FAILED
SUCCEEDED, PARTIAL, FAILED_PASS = PassStatus.SUCCEEDED, PassStatus.PARTIAL, PassStatus.FAILED
RUNNING = PassStatus.RUNNING
WINDOW = 16
STATUS_KEY = encode_key(Subspace.SYS, 0x04)
_STATUS_KIND = 0x04


@dataclass
class PlannedStep:
    """What a dry run found one step would do: ``total`` entries, the first
    ones in ``items`` (snapshot ids, file paths, or per-table shares),
    ``truncated`` when more were found than kept, and ``details``: the
    step's own sums and notes (``rows``, ``files``, ``spared``,
    ``kept_by_holds``, ``scheduled_by_expiry``, ...)."""

    total: int
    items: list[Any]
    truncated: bool = False
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "items": self.items,
            "truncated": self.truncated,
            **self.details,
        }

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> PlannedStep:
        details = {k: v for k, v in doc.items() if k not in ("total", "items", "truncated")}
        return cls(int(doc["total"]), list(doc["items"]), bool(doc.get("truncated")), details)


class DryRunPlan(dict[str, PlannedStep]):
    """A dry run's plan: step name -> PlannedStep, in the pass's order."""

    def to_dict(self) -> dict[str, Any]:
        return {step: planned.to_dict() for step, planned in self.items()}

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> DryRunPlan:
        return cls({step: PlannedStep.from_dict(found) for step, found in doc.items()})


@dataclass
class StepReport:
    step: str
    status: StepStatus
    detail: str
    # What the step reclaimed or did, by name (e.g. index_entries_reclaimed);
    # the Lambda emits each as a metric.
    counts: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    # The step only reported what it would do (a DuckLake dry run).
    dry_run: bool = False


@dataclass
class PassReport:
    trigger: str
    started_at: int = field(default_factory=lambda: time.time_ns() // 1000)
    work_pending: bool = False
    steps: list[StepReport] = field(default_factory=list)
    seconds: float = 0.0
    rss_hwm_mb: float = 0.0
    # The head the record was written against (set by record_pass).
    head_snapshot_id: int | None = None
    head_batch_seq: int | None = None
    # Why the pass stopped early: another process took its maintenance lease.
    lease_lost: str | None = None
    # Why the pass is partial though no step failed (the retention fail-safe
    # skipped the deleting steps).
    partial_reason: str | None = None
    # The lake's maintenance policy the pass applied, field by field as
    # spelled (None: no enabled policy, the options alone).
    policy: dict[str, str] | None = None
    # A manual run's scope: the operations it was limited to (the seed's
    # names, None: all) and the one table it worked on (None: the lake).
    operations: list[str] | None = None
    table: str | None = None
    # A dry run's plan (None: the pass ran; maintenance/dry_run.py says
    # what each step lists).
    plan: DryRunPlan | None = None
    # A dry run's price (pricing.py): ``prices`` it was priced at, ``fixed``
    # (the open, leases and records) and ``total`` (fixed plus every planned
    # step's ``estimate``, which rides in the step's plan entry), each with
    # requests by kind, bytes read and written, files and bytes to delete,
    # seconds and USD. None: not a dry run.
    estimate: dict[str, Any] | None = None
    # Who asked (the OS user, the Lambda's request id), and the id the run
    # history keeps it under (set when recorded).
    by: str | None = None
    run_id: int | None = None
    # Bytes reclaimed: the catalog's data and delete file bytes before the
    # pass less after it, and the bytes cleanup removed from storage (None:
    # not measured, e.g. nothing was deleted or a dry run).
    catalog_bytes_reclaimed: int | None = None
    bytes_deleted: int | None = None
    # The run history's entry of a pass that took its lease and has not
    # finished (status ``running``); False in every finished report.
    running: bool = False
    # Why the run failed though no step did: its heartbeat stopped (the
    # process died), or the pass raised.
    failed_reason: str | None = None
    # The pass lease the run took: its generation then, and its owner (what
    # the next pass matches a dead run's last lease record by).
    lease_generation: int | None = None
    lease_owner: str | None = None
    # Seconds the run waited (queued) for another pass's lease before it ran
    # (None: it did not wait).
    queued_s: float | None = None
    # The table batches a fanned-out pass ran its per-table steps in (None:
    # one process ran them all; maintenance/fanout.py).
    batches: int | None = None

    def add(
        self,
        step: str,
        status: str,
        detail: str,
        counts: dict[str, int] | None = None,
        dry_run: bool = False,
    ) -> StepReport:
        report = StepReport(step, StepStatus(status), detail, dict(counts or {}), dry_run=dry_run)
        self.steps.append(report)
        return report

    def step(self, name: str) -> StepReport:
        return next(s for s in self.steps if s.step == name)

    @property
    def failed(self) -> bool:
        """A step failed, the pass lost its lease before it finished, or the
        run never finished (``failed_reason``)."""
        return (
            self.lease_lost is not None
            or self.failed_reason is not None
            or any(s.status == FAILED for s in self.steps)
        )

    @property
    def status(self) -> PassStatus:
        """``running`` (a run history entry of a pass not finished yet),
        ``failed`` (a step failed, the lease was lost, or the run died),
        ``partial`` (the fail-safe skipped deletion, or work is left for the
        next pass), else ``succeeded``."""
        if self.running:
            return RUNNING
        if self.failed:
            return FAILED_PASS
        if self.partial_reason is not None or self.work_pending:
            return PARTIAL
        return SUCCEEDED

    def totals(self) -> dict[str, int]:
        """Every step's counts summed by name (``snapshots_expired``,
        ``files_deleted``, ``bytes_deleted``, ...): what the audit keeps."""
        out: dict[str, int] = {}
        for step in self.steps:
            for name, value in step.counts.items():
                out[name] = out.get(name, 0) + value
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: what the CLI's ``--json`` prints, the Lambda answers and
        the status window keeps."""
        doc = asdict(self)
        doc["plan"] = None if self.plan is None else self.plan.to_dict()
        doc["trigger"] = str(self.trigger)
        for step in doc["steps"]:
            step["status"] = str(step["status"])
        return {"status": str(self.status), **doc}

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> PassReport:
        return cls(
            trigger=doc["trigger"],
            started_at=int(doc["started_at"]),
            work_pending=bool(doc["work_pending"]),
            seconds=float(doc.get("seconds") or 0.0),
            rss_hwm_mb=float(doc.get("rss_hwm_mb") or 0.0),
            head_snapshot_id=doc.get("head_snapshot_id"),
            head_batch_seq=doc.get("head_batch_seq"),
            lease_lost=doc.get("lease_lost"),
            partial_reason=doc.get("partial_reason"),
            policy=doc.get("policy"),
            operations=None if doc.get("operations") is None else list(doc["operations"]),
            table=doc.get("table"),
            plan=None if doc.get("plan") is None else DryRunPlan.from_dict(doc["plan"]),
            estimate=doc.get("estimate"),
            by=doc.get("by"),
            run_id=doc.get("run_id"),
            catalog_bytes_reclaimed=doc.get("catalog_bytes_reclaimed"),
            bytes_deleted=doc.get("bytes_deleted"),
            running=bool(doc.get("running", False)),
            failed_reason=doc.get("failed_reason"),
            lease_generation=doc.get("lease_generation"),
            lease_owner=doc.get("lease_owner"),
            queued_s=doc.get("queued_s"),
            batches=doc.get("batches"),
            steps=[
                StepReport(
                    s["step"],
                    StepStatus(s["status"]),
                    s["detail"],
                    dict(s.get("counts") or {}),
                    float(s.get("seconds") or 0.0),
                    bool(s.get("dry_run", False)),
                )
                for s in doc["steps"]
            ],
        )


def encode_window(passes: list[PassReport]) -> bytes:
    """Oldest to newest, at most WINDOW passes."""
    return values.frame(_STATUS_KIND, [p.to_dict() for p in passes[-WINDOW:]])


class StatusWindow(list[PassReport]):
    """The status window as a list of reports, plus ``warning``: what was
    unreadable in the stored record (None when all of it decoded)."""

    def __init__(self, passes: Iterable[PassReport] = (), warning: str | None = None) -> None:
        super().__init__(passes)
        self.warning = warning


def decode_window(raw: bytes | None) -> StatusWindow:
    """Oldest to newest, keeping every well-formed record; ``warning`` names
    what was dropped (the whole value when its framing is bad)."""
    if raw is None:
        return StatusWindow()
    try:
        docs = list(values.unframe(raw, _STATUS_KIND, "sys/maintenance_status"))
    except (CorruptionError, TypeError) as exc:
        return StatusWindow(warning=f"sys/maintenance_status is unreadable ({exc})")
    passes, bad = [], []
    for n, doc in enumerate(docs):
        try:
            passes.append(PassReport.from_dict(doc))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            bad.append(f"record {n}: {type(exc).__name__}: {exc}")
    if not bad:
        return StatusWindow(passes)
    return StatusWindow(
        passes,
        f"sys/maintenance_status: dropped {len(bad)} malformed pass records ({'; '.join(bad)})",
    )


def newest_first(raw: bytes | None) -> StatusWindow:
    """The stored window as callers read it: newest first, with what did not
    decode logged (the next pass rewrites the record)."""
    window = decode_window(raw)
    if window.warning is not None:
        log.warning("%s; the next pass rewrites it", window.warning)
    return StatusWindow(reversed(window), window.warning)
