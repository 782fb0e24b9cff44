"""The ``--json`` documents of the reports the library gives no ``to_dict``.

A report with ``to_dict()`` prints exactly that (``output.report_document``),
the object the Lambda answers for the same verb. The ones below have none
(the log summary, an image written, the pass lease, holds, a page of history,
index records, the holder's folds), so their documents are spelled here, in
one place, and nowhere in a verb. ``AtLake`` carries the lake for the few
documents that name it though the library's value does not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class AtLake:
    """A value the library returns without its lake, and the lake (as given)."""

    lake: str
    report: Any


@dataclass(frozen=True)
class Rows:
    """Rows under their column names (an index lookup's answer)."""

    columns: Sequence[str]
    rows: Sequence[Sequence[Any]]


def head(value: Any) -> dict[str, int]:
    return {"snapshot_id": value.snapshot_id, "batch_seq": value.batch_seq}


def each(reports: Sequence[Any]) -> list[Any]:
    """A list of reports (the status window), each its ``to_dict()``."""
    return [r.to_dict() for r in reports]


def runs_page(page: Any) -> dict[str, Any]:
    return {"runs": each(page.items), "next_before": page.next_before}


def audit_page(page: Any) -> dict[str, Any]:
    return {"entries": each(page.items), "next_before": page.next_before}


def hold_change(shown: AtLake) -> dict[str, Any]:
    change = shown.report
    return {"lake": shown.lake, "changed": change.changed, "hold": change.hold.to_dict()}


def holds(shown: AtLake) -> dict[str, Any]:
    return {"lake": shown.lake, "holds": each(shown.report)}


def lease(shown: AtLake) -> dict[str, Any]:
    record = shown.report
    return {
        "lake": shown.lake,
        "lease": asdict(record) if record else None,
        "held": bool(record and record.held()),
    }


def lease_broken(shown: AtLake) -> dict[str, Any]:
    result = shown.report
    return {
        "lake": shown.lake,
        "broken": result.broken is not None,
        "lease": asdict(result.broken) if result.broken else None,
        "generation": result.generation,
        "detail": result.detail,
    }


def log_summary(shown: AtLake) -> dict[str, Any]:
    summary = shown.report
    return {
        "lake": shown.lake,
        "head": head(summary.head),
        "last_slot": summary.last_slot,
        "fold_cursor": summary.fold_cursor,
        "unfolded_slots": summary.unfolded_slots,
        "retained_slots": summary.retained_slots,
        "retained_bytes": summary.retained_bytes,
        "catalog_rows": summary.catalog_rows,
    }


def folded(report: Any) -> dict[str, Any]:
    """One of the resident holder's folds (a JSON line each)."""
    return {
        "slots": report.slots,
        "change_sets": report.change_sets,
        "operations": report.operations,
        "batches": report.batches,
        "seconds": round(report.seconds, 3),
        "fold_seq": report.fold_seq,
        "head": head(report.head),
        "truncated": report.truncated,
    }


def event(doc: dict[str, Any]) -> dict[str, Any]:
    """A holder's image event is a document already."""
    return doc


def image_written(result: Any) -> dict[str, Any]:
    info = result.info
    doc: dict[str, Any] = {
        "written": result.written,
        "seq": info.seq if info is not None else result.seq,
        "head": head(result.head),
        "bytes": info.size if info is not None else 0,
        "path": info.url if info is not None else None,
        "seconds": round(result.seconds, 3),
    }
    if not result.written:
        doc["reason"] = result.reason
    return doc


def attach(newest: Any) -> dict[str, Any]:
    return {
        "attach": newest.attach,
        "seq": newest.info.seq,
        "head": head(newest.record.head),
        "path": newest.info.url,
    }


def record(info: Any) -> dict[str, Any]:
    """A dataclass record (an index) as its fields."""
    return asdict(info)


def records(infos: Sequence[Any]) -> list[dict[str, Any]]:
    return [asdict(i) for i in infos]


def rows(found: Rows) -> list[dict[str, Any]]:
    return [dict(zip(found.columns, r, strict=True)) for r in found.rows]
