"""The soak's figures, gathered from what its roles left in the work directory.

Writers' journals (commits, conflicts — those on non-conflicting work apart
—, refusals, ambiguous outcomes, rows), the maintainer's pass log (each
Lambda answer: passes run, deferred — left work pending —, failed, skipped,
per-step outcomes and what each step did: snapshots expired, rows flushed,
files merged and deleted, snapshots kept by reader pins), the readers' and
the pinned readers' counters,
and each role's own peak RSS (merged into ``peaks``, which the driver also
fills from /proc while the roles run).
"""

from __future__ import annotations

import json
import re
import statistics
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tests.soak.journal import (
    ACK,
    AMBIGUOUS,
    REFUSED,
    SHARED,
    Operation,
    read_journal,
    tally_conflicts,
)

# Kept verbatim in the figures, at most this many of each kind.
SAMPLES = 10
_IDS = re.compile(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}|\d+")


def reason(error: str) -> str:
    """An error's kind, without the numbers and ids that make each one unique."""
    text = error.removeprefix("ConflictError: Transaction conflict - ")
    return _IDS.sub("N", re.split(r"[;(]", text, maxsplit=1)[0]).strip()[:120]


def peak(peaks: dict[str, float], role: str, mb: float) -> None:
    peaks[role] = max(peaks.get(role, 0.0), mb)


def cpu_by_role(children: Iterable[Any]) -> dict[str, float]:
    """CPU seconds each role's processes used (a restarted holder's summed):
    on a machine the soak saturates, where the time went."""
    out: Counter[str] = Counter()
    for child in children:
        out[child.role] += child.cpu_s
    return {role: round(s, 1) for role, s in sorted(out.items())}


def request_area(method: str, key: str) -> str:
    """A request's method and the folder it names, three levels at most, a
    level with a digit in it written ``*`` (slots, ULIDs, dates)."""
    folders = key.split("/")[:-1] if method != "LIST" else key.rstrip("/").split("/")
    kept = ["*" if any(c.isdigit() for c in part) else part for part in folders[:3]]
    return f"{method} {'/'.join(kept) or '.'}"


def request_areas(trace: Iterable[tuple[str, str]]) -> dict[str, int]:
    """The S3 requests the roles made, by method and folder, most first."""
    areas = Counter(request_area(method, key) for method, key in trace)
    return dict(areas.most_common())


def writes(workdir: Path, peaks: dict[str, float]) -> dict[str, Any]:
    fates: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    tables: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    acked: list[float] = []
    conflicts = rows = reconnects = 0
    every: list[Operation] = []
    by_writer: dict[str, int] = {}
    for path in sorted(workdir.glob("writer-*.jsonl")):
        ops, done = read_journal(path)
        every.extend(ops)
        by_writer[path.stem.removeprefix("writer-")] = sum(op.fate == ACK for op in ops)
        for op in ops:
            fates[op.fate] += 1
            if op.fate == ACK:
                kinds[op.kind] += 1
                touched = {*op.inserts, *op.deletes}
                tables.update({"shared" if t == SHARED else "own" for t in touched})
                rows += op.rows_inserted
                acked.append(op.seconds)
            elif op.error is not None:
                reasons[f"{op.fate}: {reason(op.error)}"] += 1
            conflicts += op.conflict
        if done is not None:
            reconnects += done.reconnects
            peak(peaks, "writer", done.rss_mb)
    return {
        "commits": fates[ACK],
        "conflicts": conflicts,
        "refused": fates[REFUSED],
        "ambiguous": fates[AMBIGUOUS],
        "rows_acknowledged": rows,
        "commits_by_kind": dict(kinds),
        "commits_by_table": dict(tables),  # commits that wrote the shared table, and own ones
        "commits_by_writer": by_writer,  # a writer that never wins a race shows here
        "commit_seconds": _spread(acked),
        "refusal_reasons": dict(reasons.most_common(SAMPLES)),
        "writer_reconnects": reconnects,
        **tally_conflicts(every),
    }


def _spread(values: list[float]) -> dict[str, float]:
    """Median, 95th percentile and maximum, in seconds."""
    if len(values) < 2:
        only = round(values[0], 3) if values else 0.0
        return {"p50": only, "p95": only, "max": only}
    cuts = statistics.quantiles(values, n=20)
    return {"p50": round(cuts[9], 3), "p95": round(cuts[18], 3), "max": round(max(values), 3)}


def passes(workdir: Path, peaks: dict[str, float]) -> dict[str, Any]:
    """A pass is run when the Lambda answered with a report; deferred when
    that report left work pending (a step deferred tables after conflicts,
    or stopped); failed when a step failed, the lease was lost, or the
    invocation answered with an error; skipped when another pass held the lease."""
    path = workdir / "passes.jsonl"
    counts: Counter[str] = Counter()
    steps: dict[str, Counter[str]] = {}
    did: dict[str, Counter[str]] = {}
    errors: list[str] = []
    seconds: list[float] = []
    lines = path.read_text().splitlines() if path.exists() else []
    for line in lines:
        doc = json.loads(line)
        if doc["t"] == "exit":
            peak(peaks, "maintainer", doc["rss_mb"])
            continue
        answer = doc["answer"]
        if not answer.get("ok"):
            counts["failed"] += 1
            err = answer.get("error") or {}
            errors.append(f"invocation: {err.get('type')}: {str(err.get('message'))[:300]}")
            continue
        report = answer.get("result")
        if report is None:
            counts["skipped"] += 1
            continue
        counts["run"] += 1
        seconds.append(doc["seconds"])
        counts["deferred"] += bool(report["work_pending"])
        failed = report.get("lease_lost") is not None
        for step in report["steps"]:
            steps.setdefault(step["step"], Counter())[step["status"]] += 1
            did.setdefault(step["step"], Counter()).update(step.get("counts") or {})
            if step["status"] == "failed":
                failed = True
                errors.append(f"{step['step']}: {step['detail'][:300]}")
        counts["failed"] += failed
    return {
        "passes_run": counts["run"],
        "passes_deferred": counts["deferred"],
        "passes_failed": counts["failed"],
        "passes_skipped": counts["skipped"],
        "pass_seconds_max": max(seconds, default=0.0),
        "pass_steps": {k: dict(v) for k, v in steps.items()},
        "pass_counts": {k: dict(v) for k, v in did.items() if v},
        "snapshots_expired": did.get("expire_snapshots", Counter())["snapshots_expired"],
        "pass_errors": errors[:SAMPLES],
    }


def reads(workdir: Path, peaks: dict[str, float]) -> dict[str, Any]:
    totals: Counter[str] = Counter()
    samples: list[str] = []
    doubled: list[str] = []
    twins: list[str] = []
    for path in sorted(workdir.glob("reader-*.json")):
        doc = json.loads(path.read_text())
        for key in ("reads", "expired", "failed", "doubled_reads"):
            totals[key] += doc[key]
        samples.extend(doc["samples"])
        doubled.extend(doc.get("doubled_samples", []))
        twins.extend(doc.get("twin_samples", []))
        peak(peaks, "reader", doc["rss_mb"])
    return {
        "reads": totals["reads"],
        "reads_expired": totals["expired"],
        "read_failures": totals["failed"],
        "reads_doubled": totals["doubled_reads"],
        "read_failure_samples": samples[:SAMPLES],
        "doubled_read_samples": doubled[:SAMPLES],
        "twin_delete_file_samples": twins[:SAMPLES],
    }


def corruption(workdir: Path) -> dict[str, Any]:
    """Lines of any role's log naming a CorruptionError. The proxy injects
    no damage, so each is a finding: a forked log (two committers each
    winning one slot) left the holder restarting on it while writers fell
    back to slow opens, and no journal oracle would say why."""
    lines = [
        f"{path.name}: {line.strip()}"
        for path in sorted(workdir.glob("*.log"))
        for line in path.read_text(errors="replace").splitlines()
        if "CorruptionError" in line
    ]
    return {"corruption_reports": len(lines), "corruption_samples": lines[:SAMPLES]}


def pinned(workdir: Path, peaks: dict[str, float]) -> dict[str, Any]:
    """The pinned readers' counters: reads of their snapshot compared with
    what it read at pin time, mismatches and errors (a file gone is an IO
    error), with samples, and each reader's own line."""
    totals: Counter[str] = Counter()
    samples: list[str] = []
    each: list[dict[str, Any]] = []
    kept: list[int] = []
    for line in _pass_lines(workdir):
        for step in (line.get("answer", {}).get("result") or {}).get("steps", []):
            if step["step"] == "expire_snapshots":
                kept.append(int((step.get("counts") or {}).get("snapshots_kept_by_pins", 0)))
    paths = sorted(workdir.glob("pinned-*.json"), key=lambda p: int(p.stem.split("-")[1]))
    for path in paths:
        doc = json.loads(path.read_text())
        for key in ("reads", "fresh_reads", "mismatches", "errors", "fresh_open_retries"):
            totals[key] += doc[key]
        samples.extend(f"pinned {doc['index']}: {s}" for s in doc["samples"])
        peak(peaks, "pinner", doc["rss_mb"])
        each.append(
            {
                k: doc[k]
                for k in (
                    "index",
                    "snapshot",
                    "files",
                    "reads",
                    "fresh_reads",
                    "mismatches",
                    "errors",
                    "listed",
                    "pinned_at",
                    "last_read_at",
                    "closed_at",
                    "lease_gone_after_close",
                )
            }
            | {"diagnosis": doc.get("diagnosis")}
        )
    return {
        "pinned_readers_started": len(paths),
        "pinned_reads": totals["reads"],
        "pinned_fresh_reads": totals["fresh_reads"],
        "pinned_mismatches": totals["mismatches"],
        "pinned_errors": totals["errors"],
        "pinned_fresh_open_retries": totals["fresh_open_retries"],
        "pinned_error_samples": samples[:SAMPLES],
        "pinned_by_reader": each,
        "snapshots_kept_by_pins_max": max(kept, default=0),
        "passes_keeping_pins": sum(n > 0 for n in kept),
    }


def _pass_lines(workdir: Path) -> list[dict[str, Any]]:
    path = workdir / "passes.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [doc for doc in map(json.loads, lines) if doc.get("t") == "pass"]


def human_line(f: dict[str, Any]) -> str:
    """The figures in one line, for people (the JSON line follows it)."""
    rss = ", ".join(f"{role} {mb:g}" for role, mb in f.get("peak_rss_mb", {}).items())
    cpu = ", ".join(f"{role} {s:g}" for role, s in f.get("cpu_seconds", {}).items())
    requests = f"; S3 requests {f['requests']}" if f.get("requests") else ""
    where = "moto S3" if f["s3"] else "local files"
    did = f.get("pass_counts", {})
    merged = did.get("merge_adjacent_files", {}).get("files_processed", 0)
    rewritten = did.get("rewrite_data_files", {}).get("files_processed", 0)
    deleted = did.get("cleanup_old_files", {}).get("files_deleted", 0)
    orphans = did.get("delete_orphaned_files", {}).get("files_deleted", 0)
    return (
        f"soak {f['minutes']:g} min, {f['writers']} writers on {where}, fault rate "
        f"{f['fault_rate']:g}: {f['commits']} commits ({f['rows_acknowledged']} rows), "
        f"{f['conflicts']} conflicts ({f['conflicts_nonconflicting']} on non-conflicting "
        f"work, {f.get('conflicts_ducklake_rule', 0)} DuckLake's insert-over-delete rule), "
        f"{f['ambiguous']} ambiguous, {f.get('faults', 0)} faults "
        f"injected; lost {f.get('lost')}, doubled {f.get('doubled')}; passes "
        f"{f['passes_run']} run, {f['passes_deferred']} deferred, {f['passes_failed']} failed "
        f"(expired {f['snapshots_expired']} snapshots, flushed "
        f"{did.get('flush_inlined_data', {}).get('rows_flushed', 0)} rows, merged {merged} "
        f"and rewrote {rewritten} files, deleted {deleted} old and {orphans} orphaned files); "
        f"{f['reads']} reads ({f['read_failures']} failed, {f.get('reads_doubled', 0)} saw an "
        "id twice); "
        f"{f.get('snapshots_checked', 0)} snapshots checked; "
        f"{_pins_line(f)}{f.get('corruption_reports', 0)} corruption reports; holder restarts "
        f"{f['holder_restarts']}; violations {f.get('violations')}; peak RSS MB: {rss}; "
        f"CPU s: {cpu}{requests}"
    )


def _pins_line(f: dict[str, Any]) -> str:
    if not f.get("pinned_readers"):
        return ""
    return (
        f"{f['pinned_readers']} pinned readers: {f.get('pinned_reads', 0)} reads of their "
        f"snapshots ({f.get('pinned_mismatches', 0)} mismatched, {f.get('pinned_errors', 0)} "
        f"failed), at most {f.get('snapshots_kept_by_pins_max', 0)} snapshots kept by pins in "
        f"a pass, {f.get('pins_reclaimed', 0)} of {f.get('pins_ended', 0)} ended pins "
        "reclaimed; "
    )
