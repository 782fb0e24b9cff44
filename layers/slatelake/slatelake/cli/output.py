"""The CLI's one output layer: every report a verb prints, as text or ``--json``.

A verb gets a report from the lake handle and hands it to ``emit`` with the
view that names how it prints; it prints nothing of its own (its warnings
and failures go to stderr, where its exit status is decided). With
``--json`` the document is exactly the report's ``to_dict()``, the object
the Lambda answers for the same verb; for the few values the library gives
no ``to_dict`` the document is spelled in ``documents``. The text layouts
are ``text_maintenance``, ``text_store`` and ``text_lake``. So one report
prints one way wherever it appears (``maintain`` and ``status`` print a pass
alike, ``runs`` and ``audit`` page alike), and a new verb reuses a view.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from slatelake.cli import documents
from slatelake.cli import text_lake as lake
from slatelake.cli import text_maintenance as maintenance
from slatelake.cli import text_store as store
from slatelake.cli.documents import AtLake, Rows

__all__ = ["AtLake", "Rows", "View", "emit", "print_json"]


def report_document(report: Any) -> Any:
    """A report's own document: ``to_dict()``, as the Lambda answers it."""
    return report.to_dict()


@dataclass(frozen=True)
class View:
    """How one kind of report prints: ``text`` writes its layout to stdout,
    ``document`` makes its ``--json`` object."""

    text: Callable[..., None]
    document: Callable[[Any], Any] = report_document


def emit(view: View, report: Any, as_json: bool = False, **text_options: Any) -> None:
    """Print ``report`` as ``view`` says: its document as one JSON line with
    ``as_json``, else its text (``text_options`` are the text's switches,
    e.g. ``backup``'s ``manifest``)."""
    if as_json:
        print_json(view.document(report))
    else:
        view.text(report, **text_options)


def print_json(doc: Any) -> None:
    """One line of JSON; a value JSON has no type for (a timestamp) as text."""
    print(json.dumps(doc, default=str), flush=True)


# maintenance: passes and what they leave behind
PASS = View(maintenance.pass_report)
THRESHOLD = View(maintenance.threshold)
BACKUP = View(maintenance.backup)
STATUS = View(maintenance.status_window, documents.each)
RUNS = View(maintenance.runs_page, documents.runs_page)
AUDIT = View(maintenance.audit_page, documents.audit_page)
HOLD_PLACED = View(maintenance.hold_placed, documents.hold_change)
HOLD_REMOVED = View(maintenance.hold_removed, documents.hold_change)
HOLDS = View(maintenance.holds, documents.holds)
POLICY_SET = View(maintenance.policy_set)
POLICY_UNSET = View(maintenance.policy_unset)
POLICY = View(maintenance.policy_view)
LEASE = View(maintenance.lease, documents.lease)
LEASE_BROKEN = View(maintenance.lease_broken, documents.lease_broken)
# the store and the catalog's weight
HEALTH = View(store.health)
CENSUS = View(store.census)
CENSUS_OBJECTS = View(store.census_objects)
COMPACT_STORE = View(store.compact_store)
# the lake: creating, folding, images, the log, transfers, indexes
CREATED = View(lake.created)
FOLD_TURN = View(lake.fold_turn)
FOLDED = View(lake.folded, documents.folded)
IMAGE_EVENT = View(lake.image_event, documents.event)
IMAGE_WRITTEN = View(lake.image_written, documents.image_written)
ATTACH = View(lake.attach, documents.attach)
LOG = View(lake.log_summary, documents.log_summary)
EXPORTED = View(lake.exported)
IMPORTED = View(lake.imported)
RELEASED = View(lake.released)
INDEX_CREATED = View(lake.index_created, documents.record)
INDEX_DROPPED = View(lake.index_dropped, documents.record)
INDEXES = View(lake.indexes, documents.records)
ROWS = View(lake.rows, documents.rows)
