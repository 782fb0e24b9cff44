"""Text layouts of the maintenance reports: passes, plans, threshold runs,
backups, the status window, run history and audit log, retention holds,
policies and the pass lease.

``cli/output.py`` picks one of these for a verb without ``--json``; each
prints one report to standard output and nothing else (warnings and
failures go to stderr from the verb, where the exit status is decided).
"""

from __future__ import annotations

import json
from typing import Any

from slatelake.cli.text import more, print_table, size, when

SHOWN = 20  # plan entries printed per step (--json: all the report kept)


def pass_report(report: Any) -> None:
    """A pass: one line, a line per step, the partial reason; a dry run's
    plan after it, announced before it."""
    if report.plan is not None:
        print("dry run: what a pass would do; nothing was written")
    print(
        f"pass {report.trigger} {report.status} started_at={report.started_at} "
        f"work_pending={str(report.work_pending).lower()}"
    )
    for step in report.steps:
        print(f"  {step.step:<22} {step.status:<8} {step.detail}")
    if report.partial_reason:
        print(f"partial: {report.partial_reason}")
    if report.plan is not None:
        _plan(report.plan)
    if report.plan is not None and report.estimate:
        _estimate(report.plan, report.estimate)


def _estimate(plan: Any, estimate: dict[str, Any]) -> None:
    """A dry run's price: a line per planned step, the pass's fixed costs, the total."""
    prices = estimate["prices"]
    where = (
        "list prices" if prices.get("source") == "default" else f"prices from {prices['source']}"
    )
    print(f"estimate (S3 requests and Lambda GB-seconds, {where} as of {prices['as_of']}):")
    for step, found in plan.items():
        if "estimate" in found.details:
            print(f"  {step:<22} {_priced(found.details['estimate'])}")
    print(f"  {'fixed (open, leases)':<22} {_priced(estimate['fixed'])}")
    print(f"  {'total':<22} {_priced(estimate['total'])}")


def _priced(doc: dict[str, Any]) -> str:
    """One estimate on one line: requests by kind, bytes, deletions, USD."""
    kinds = " ".join(f"{kind} {n}" for kind, n in doc["requests"].items())
    line = f"{kinds}; read {size(doc['bytes_read'])}, written {size(doc['bytes_written'])}"
    if doc["files_to_delete"]:
        line += f"; delete {doc['files_to_delete']} files ({size(doc['bytes_to_delete'])})"
    return f"{line}; ${doc['usd']:.6f}"


def _plan(plan: Any) -> None:
    """What a dry run found (a ``DryRunPlan``), step by step, a few entries each."""
    print("plan:")
    for step, found in plan.items():
        items = [_entry(i) for i in found.items[:SHOWN]]
        rest = found.total - len(items)
        shown = ", ".join(items) + (f" and {rest} more" if rest > 0 else "")
        sums = found.details
        total = sums.get("files", sums.get("rows", found.total))  # a table's share: summed
        print(f"  {step:<22} {total:>6}  {shown}")
        if sums.get("kept_by_holds"):
            kept = ", ".join(str(i) for i in sums["kept_by_holds"][:SHOWN])
            print(f"  {'':<22} {'':>6}  kept by retention holds: {kept}")


def _entry(item: Any) -> str:
    if isinstance(item, dict):  # a table's share: {"table": ..., "rows"|"files": n}
        (what, n), *_ = ((k, v) for k, v in item.items() if k != "table")
        return f"{item['table']} ({n} {what})"
    return str(item)


def threshold(found: Any) -> None:
    """The threshold trigger's runs, one report per due table."""
    if not found.due:
        print("no table is due a threshold run (or the lake's policy is not enabled)")
    for due, report in zip(found.due, found.runs, strict=False):
        print(f"{due.name}: {due.small_files} small files (policy: {due.min_count})")
        pass_report(report)
    if found.stopped:
        print(f"stopped: {found.stopped}")


def backup(report: Any, manifest: bool = False) -> None:
    """What a copy takes (every object with ``manifest``); nothing on a
    failure, which the verb words on stderr."""
    if report.failed:
        return
    doc = report.to_dict()
    print(
        f"ready to copy: snapshot {report.head_snapshot_id}, image of slot {report.fold_seq}"
        f" ({report.image}); {doc['objects']} objects, {doc['bytes']} bytes"
    )
    if not manifest:
        print("(--manifest lists them; --json prints everything)")
        return
    for part in ("catalog", "data"):
        for item in doc["manifest"][part]:
            print(f"{part}\t{item['size']}\t{item['url']}")


def status_window(window: Any) -> None:
    """The recorded passes, newest first."""
    if not window:
        print("no maintenance pass recorded")
    for report in window:
        pass_report(report)


def _counts(report: Any) -> str:
    totals: dict[str, int] = {}
    for step in report.steps:
        for key, value in step.counts.items():
            totals[key] = totals.get(key, 0) + value
    return ", ".join(f"{k}={v}" for k, v in totals.items() if v) or "-"


def runs_page(page: Any) -> None:
    rows = [
        (r.run_id, when(r.started_at), r.trigger, r.status, f"{r.seconds:g}s", _counts(r))
        for r in page.items
    ]
    print_table(("id", "started (UTC)", "trigger", "status", "took", "counts"), rows)
    more(page.next_before)


def audit_page(page: Any) -> None:
    rows = [(e.id, when(e.id), e.kind, e.who, json.dumps(e.what)) for e in page.items]
    print_table(("id", "at (UTC)", "kind", "who", "what"), rows)
    more(page.next_before)


def hold_placed(shown: Any) -> None:
    change = shown.report
    hold = change.hold
    if change.changed:
        print(f"snapshot {hold.snapshot_id} is held as {hold.name!r}")
    else:
        print(f"snapshot {hold.snapshot_id} was already held as {hold.name!r}; nothing changed")


def hold_removed(shown: Any) -> None:
    hold = shown.report.hold
    print(f"removed hold {hold.name!r} (snapshot {hold.snapshot_id})")


def holds(shown: Any) -> None:
    if not shown.report:
        print("no retention holds")
        return
    rows = [
        (h.name, h.snapshot_id, when(h.created_at, zone=True), h.created_by, h.note)
        for h in shown.report
    ]
    print_table(("name", "snapshot", "created", "by", "note"), rows)


def _fields(fields: dict[str, Any]) -> str:
    from slatelake import POLICY_FIELDS

    return ", ".join(f"{k}={POLICY_FIELDS[k].show(v)}" for k, v in fields.items())


def policy_set(row: Any) -> None:
    print(f"policy for the {row.scope.label}: {_fields(row.fields)}")


def policy_unset(row: Any) -> None:
    if row.fields:
        print(f"policy for the {row.scope.label} now: {_fields(row.fields)}")
    else:
        print(f"no policy left for the {row.scope.label}")


def policy_view(view: Any) -> None:
    """The stored rows, then every table's resolved policy."""
    state = "enabled" if view.lake["enabled"] else "disabled (nothing runs from the policy)"
    print(f"lake policy {state}")
    stored = [(r.scope.label, _fields(r.fields)) for r in view.rows]
    print_table(("scope", "fields set"), stored or [("(none)", "")])
    print()
    fields = list(view.lake.values)
    rows = [("(lake)", *(view.lake.to_dict()[f]["shown"] for f in fields))]
    for (schema, table), resolved in sorted(view.tables.items()):
        shown = resolved.to_dict()
        rows.append((f"{schema}.{table}", *(shown[f]["shown"] for f in fields)))
    print_table(("resolved", *fields), rows)


def lease(shown: Any) -> None:
    record = shown.report
    if record is None:
        print("no maintenance lease was ever written")
    else:
        print(record.describe() + (" (free)" if not record.held() else ""))


def lease_broken(shown: Any) -> None:
    print(shown.report.detail)
