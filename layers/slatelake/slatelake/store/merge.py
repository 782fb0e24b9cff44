"""The store merge (RFC 0021 step 8): submit full-tree merges, wait, report.

A target is the whole store or one subspace; each subspace is one SlateDB
segment. The plan for a tree makes every sorted run a source and the lowest
run id the destination, so the merge is bottom-inclusive and superseded
versions and tombstones drop rather than move. L0 is never a source: flushes
continue during the merge, and a tree with no sorted runs is skipped with the
reason (the size-tiered scheduler has not fired there yet).

Submission goes through the admin API: no writer is opened and nothing is
fenced, so any read-write handle -- a committer, the Lambda -- may submit.
Execution belongs to the compactor serving the store, which in slatelake is
the long-lived holder (``slatelake hold``); with none running, a merge waits
in the compactions record and is reported ``pending``, never cancelled. A tree
already being merged is adopted (waited on), not skipped and not submitted
twice. The merge touches no catalog key: the head stamp does not move, no
snapshot is minted, a materialization before and after is identical.
A read-only handle refuses with ReadOnlyError.

SlateDB mints a submitted merge's id (a ULID) from the submitter's clock
before it reads the compactions record, keeps it across its own conflict
retries, and the record refuses a new job older than its newest one
("invalid clock tick, must be monotonic"). So a job minted later by anyone
else -- the holder's scheduler, another pass, the Lambda -- that lands first
refuses the submit, having written nothing. Such a refusal is submitted
again (a fresh id from a later clock), a bounded number of times; a record
whose newest job is far ahead of this clock is clock skew, reported as such.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from slatelake.errors import MisconfigurationError, ReadOnlyError
from slatelake.store.census import physical_by_subspace
from slatelake.store.db import (
    StoreAdmin,
    active_merge_of,
    compactor_poll_interval_s,
    full_tree_spec,
    is_terminal,
    open_admin,
    outcome_of_status,
)
from slatelake.store.keys import Subspace
from slatelake.store.location import LakeLocation, Located, location_of

if TYPE_CHECKING:
    from collections.abc import Callable

COMPLETED, FAILED, PENDING, SKIPPED = "completed", "failed", "pending", "skipped"
# Worst first: the overall outcome is the worst of the trees'.
_SEVERITY = (FAILED, PENDING, COMPLETED, SKIPPED)
MIN_POLL_S = 0.05
# A tree as planned: (sorted-run id, its SST view ids) per run.
Tree = tuple[tuple[int, tuple[str, ...]], ...]
# A submit refused because the record holds a newer job: tries in all, and the
# longest this clock waits to pass that job's (a wider gap is clock skew).
SUBMIT_ATTEMPTS = 4
MAX_CLOCK_WAIT_S = 2.0
_BEHIND_RECORD = re.compile(r"invalid clock tick.*?last_tick=\W*(\d+)")


@dataclass(frozen=True)
class CompactStoreRequest:
    """Which trees to merge and how long to wait.

    ``subspace``: None merges every subspace holding sorted runs; a name or
    Subspace merges that one. ``wait_s``: None returns as soon as the merges
    are submitted; otherwise wait up to that many seconds for them to commit.
    """

    subspace: Subspace | str | None = None
    wait_s: float | None = None

    def target(self) -> tuple[Subspace, ...]:
        if self.subspace is None:
            return tuple(Subspace)
        if isinstance(self.subspace, Subspace):
            return (self.subspace,)
        try:
            return (Subspace.from_label(self.subspace),)
        except ValueError as exc:
            raise MisconfigurationError(f"subspace {self.subspace!r}: {exc}") from None


@dataclass
class SubspaceMerge:
    """One tree's outcome: completed, failed, pending or skipped, with why."""

    subspace: str
    outcome: str
    reason: str = ""
    bytes_before: int = 0
    bytes_after: int | None = None
    sorted_runs_before: int = 0
    sorted_runs_after: int | None = None
    compaction_id: str | None = None
    adopted: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "subspace": self.subspace,
            "outcome": self.outcome,
            "reason": self.reason,
            "bytes_before": self.bytes_before,
            "bytes_after": self.bytes_after,
            "sorted_runs_before": self.sorted_runs_before,
            "sorted_runs_after": self.sorted_runs_after,
            "compaction_id": self.compaction_id,
            "adopted": self.adopted,
        }


@dataclass
class CompactStoreReport:
    merges: list[SubspaceMerge] = field(default_factory=list)
    manifest_before: int = 0
    manifest_after: int | None = None
    waited_s: float = 0.0

    @property
    def outcome(self) -> str:
        """The worst tree outcome: failed > pending > completed > skipped."""
        present = {m.outcome for m in self.merges}
        return next((o for o in _SEVERITY if o in present), SKIPPED)

    def merge(self, subspace: str) -> SubspaceMerge:
        return next(m for m in self.merges if m.subspace == subspace)

    def of(self, outcome: str) -> list[SubspaceMerge]:
        return [m for m in self.merges if m.outcome == outcome]

    def summary(self) -> str:
        """One line per the pass's ``detail``: the outcome, then each tree."""
        parts = []
        for m in self.merges:
            if m.outcome == COMPLETED:
                parts.append(
                    f"{m.subspace} {m.bytes_before}->{m.bytes_after} bytes, "
                    f"{m.sorted_runs_before}->{m.sorted_runs_after} runs"
                )
            else:
                parts.append(f"{m.subspace} {m.outcome} ({m.reason})")
        return f"{self.outcome}: " + "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """The document ``slatelake compact-store --json`` prints."""
        return {
            "outcome": self.outcome,
            "manifest_before": self.manifest_before,
            "manifest_after": self.manifest_after,
            "waited_s": round(self.waited_s, 3),
            "merges": [m.to_dict() for m in self.merges],
        }


def compact_store(
    target: Located | LakeLocation | str,
    request: CompactStoreRequest | None = None,
    should_stop: Callable[[], str | None] | None = None,
) -> CompactStoreReport:
    """Submit (or adopt) a full-tree merge per target tree and wait as asked.

    ``should_stop`` (the pass's deadline check) ends the wait early: what is
    still running is reported pending. Admin errors propagate as StoreError;
    a merge SlateDB rejects is a tree reported ``failed``."""
    location = location_of(target)
    if getattr(target, "read_only", False):
        raise ReadOnlyError(
            f"{location.url} is open read-only; a store merge is a write-path verb "
            "(reopen without read_only; the census works read-only)"
        )
    request = request or CompactStoreRequest()
    targets = request.target()
    if request.wait_s is not None and request.wait_s < 0:
        raise MisconfigurationError(f"wait of {request.wait_s}s: give a non-negative timeout")
    admin = open_admin(location)
    view = admin.read_compactor_state_view()
    manifest = view.manifest
    report = CompactStoreReport(manifest_before=int(manifest.id))
    physical = physical_by_subspace(manifest)
    segments = {bytes(s.prefix): s for s in manifest.segments}
    recent = list(view.compactions.recent_compactions) if view.compactions else []
    waiting: dict[str, SubspaceMerge] = {}
    planned: dict[str, Tree] = {}  # the tree each wait began on, by compaction id
    for sub in targets:
        row = physical[sub.label]
        merge = SubspaceMerge(
            sub.label, PENDING, bytes_before=row["bytes"], sorted_runs_before=row["sorted_runs"]
        )
        report.merges.append(merge)
        segment = segments.get(bytes((sub,)))
        if segment is None or not segment.compacted:
            merge.outcome = SKIPPED
            merge.reason = _skip_reason(segment)
            continue
        active = active_merge_of(recent, bytes((sub,)))
        if active is None:
            merge.compaction_id = _submit(admin, segment, merge)
        else:
            merge.compaction_id, merge.adopted = active.id, True
        if merge.compaction_id is not None:
            waiting[merge.compaction_id] = merge
            planned[merge.compaction_id] = _tree_signature(segment)
    foreign = sorted(physical["unknown"]["prefixes"])
    if request.subspace is None and foreign:
        report.merges.append(
            SubspaceMerge(
                "unknown",
                SKIPPED,
                reason="segments "
                + ", ".join(f"0x{b:02x}" for b in foreign)
                + " are not slatelake subspaces; a store merge leaves them alone",
                bytes_before=physical["unknown"]["bytes"],
                sorted_runs_before=physical["unknown"]["sorted_runs"],
            )
        )
    started = time.monotonic()
    if request.wait_s is not None and waiting:
        _wait(admin, waiting, planned, request.wait_s, should_stop)
    report.waited_s = time.monotonic() - started
    for merge in waiting.values():
        if merge.outcome == PENDING and not merge.reason:
            merge.reason = (
                "submitted; not waited for"
                if request.wait_s is None
                else f"still running after {report.waited_s:.1f}s; not cancelled: a later "
                "census shows the result (is a holder running? `slatelake hold` executes merges)"
            )
    if any(m.outcome == COMPLETED for m in report.merges):
        after = admin.read_manifest()
        report.manifest_after = int(after.id)
        physical_after = physical_by_subspace(after)
        for merge in report.of(COMPLETED):
            merge.bytes_after = physical_after[merge.subspace]["bytes"]
            merge.sorted_runs_after = physical_after[merge.subspace]["sorted_runs"]
    return report


def _skip_reason(segment: Any) -> str:
    if segment is None:
        return "no sorted runs: nothing written out to this subspace yet"
    return (
        f"no sorted runs: {len(segment.l0)} L0 SSTs only, which a store merge never takes; "
        "the size-tiered scheduler compacts them once the tier fills"
    )


def _submit(admin: StoreAdmin, segment: Any, merge: SubspaceMerge) -> str | None:
    """Submit the full-tree plan; on refusal, adopt a merge that raced in,
    submit again when a newer job in the record refused it (nothing was
    written), or report the tree failed. Returns the compaction id to wait on."""
    for attempt in range(1, SUBMIT_ATTEMPTS + 1):
        try:
            return str(admin.submit_compaction(full_tree_spec(segment)).id)
        except Exception as exc:
            refusal = exc
        active = _active_merge(admin, segment)
        if active is not None:
            merge.adopted = True
            return str(active.id)
        newest_ms = _newest_job_ms(refusal)
        if newest_ms is None:
            return _failed(merge, f"submit refused: {_one_line(refusal)}")
        wait_s = (newest_ms + 1) / 1000 - time.time()
        if wait_s > MAX_CLOCK_WAIT_S:
            return _failed(
                merge,
                f"submit refused: the compactions record's newest job was minted {wait_s:.1f}s "
                f"ahead of this machine's clock ({_one_line(refusal)}); sync the clocks (NTP) "
                "of the holder and of every machine that submits merges",
            )
        if attempt < SUBMIT_ATTEMPTS and wait_s > 0:
            time.sleep(wait_s)
    return _failed(
        merge,
        f"submit refused {SUBMIT_ATTEMPTS} times: each time another submitter or the holder's "
        "scheduler recorded a newer compaction between this submit's clock reading and its "
        f"write ({_one_line(refusal)}); nothing was submitted, run it again",
    )


def _failed(merge: SubspaceMerge, reason: str) -> None:
    merge.outcome, merge.reason = FAILED, reason


def _active_merge(admin: StoreAdmin, segment: Any) -> Any | None:
    view = admin.read_compactor_state_view()
    recent = list(view.compactions.recent_compactions) if view.compactions else []
    return active_merge_of(recent, bytes(segment.prefix))


def _newest_job_ms(exc: BaseException) -> int | None:
    """The record's newest job's tick (ms) when SlateDB refused a submit for a
    newer job in the record, else None. The store layer's message may
    summarize SlateDB's, so the chained original is read too."""
    seen: BaseException | None = exc
    for _ in range(4):
        if seen is None:
            return None
        match = _BEHIND_RECORD.search(str(seen))
        if match is not None:
            return int(match.group(1))
        seen = seen.__cause__ or seen.__context__
    return None


def _one_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _tree_signature(segment: Any) -> Tree:
    return tuple((int(r.id), tuple(str(v.id) for v in r.sst_views)) for r in segment.compacted)


def _committed(admin: StoreAdmin, merge: SubspaceMerge, tree: Tree) -> bool:
    """Whether a compaction no longer in the record committed: planned runs
    replaced (a source gone, or the destination rewritten). The tree exactly
    as planned is not yet a failure: the compactor may drop the job from the
    record before its manifest write shows."""
    manifest = admin.read_manifest()
    prefix = bytes((Subspace.from_label(merge.subspace),))
    segment = next((s for s in manifest.segments if bytes(s.prefix) == prefix), None)
    now = set(_tree_signature(segment)) if segment is not None else set()
    return bool(tree) and not set(tree) <= now


def _wait(
    admin: StoreAdmin,
    waiting: dict[str, SubspaceMerge],
    planned: dict[str, Tree],
    wait_s: float,
    should_stop: Callable[[], str | None] | None,
) -> None:
    """Poll each compaction until terminal or the wait ends. The cadence is
    half the compactor's own poll interval: faster learns nothing new."""
    cadence = max(MIN_POLL_S, compactor_poll_interval_s() / 2)
    deadline = time.monotonic() + wait_s
    open_ids = set(waiting)
    left: set[str] = set()  # gone from the record, the tree not (yet) changed
    reason: str | None = None
    while open_ids:
        for cid in sorted(open_ids):
            merge = waiting[cid]
            record = None if cid in left else admin.read_compaction(cid)
            if record is None:  # finished and trimmed from the compactions record
                if _committed(admin, merge, planned[cid]):
                    merge.outcome = COMPLETED
                    open_ids.discard(cid)
                else:  # the manifest may not show it yet: look again until the wait ends
                    left.add(cid)
                continue
            if is_terminal(record.status):
                merge.outcome = outcome_of_status(record.status)
                if merge.outcome == FAILED:
                    merge.reason = "the compactor reported the merge failed"
                open_ids.discard(cid)
        remaining = deadline - time.monotonic()
        reason = should_stop() if should_stop is not None and remaining > 0 else None
        if not open_ids or remaining <= 0 or reason is not None:
            break
        time.sleep(min(cadence, remaining))
    waited = wait_s - max(0.0, deadline - time.monotonic())
    for cid in sorted(open_ids & left):
        merge = waiting[cid]
        merge.outcome = FAILED
        merge.reason = (
            "the compaction left the compactions record but the manifest still showed the tree "
            f"it was planned on {waited:.1f}s into the wait; a later census shows whether it landed"
        )
    for cid in sorted(open_ids - left):
        if reason is not None:
            waiting[cid].reason = f"stopped waiting: {reason}; not cancelled"


@dataclass(frozen=True)
class MergeInFlight:
    """A merge of sorted runs the compactor has not finished: submitted,
    scheduled, running, or written and not yet in the manifest."""

    compaction_id: str
    subspace: str
    status: str


def merges_in_flight(target: Located | LakeLocation | str) -> list[MergeInFlight]:
    """What the holder's compactor still owes: one read of the compactor state
    (manifest and compactions record), no writer, nothing fenced."""
    view = open_admin(location_of(target)).read_compactor_state_view()
    recent = list(view.compactions.recent_compactions) if view.compactions else []
    out = []
    for compaction in recent:
        prefix = bytes(compaction.spec.segment) if compaction.spec.is_TIERED() else b""
        if active_merge_of([compaction], prefix) is None:
            continue
        try:
            label = Subspace(prefix[0]).label if prefix else "?"
        except ValueError:
            label = f"0x{prefix[0]:02x}"
        out.append(MergeInFlight(str(compaction.id), label, compaction.status.name.lower()))
    return out


def outcomes_of(target: Located | LakeLocation | str, compaction_ids: set[str]) -> dict[str, str]:
    """How each finished merge ended: ``failed`` when the record says so,
    else ``completed`` (a merge trimmed from the record had landed, or a
    still-recorded one says so). One read per id."""
    admin = open_admin(location_of(target))
    out = {}
    for cid in sorted(compaction_ids):
        record = admin.read_compaction(cid)
        failed = record is not None and outcome_of_status(record.status) == FAILED
        out[cid] = FAILED if failed else COMPLETED
    return out
