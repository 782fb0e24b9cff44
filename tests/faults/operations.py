"""The operations the fault matrix injects faults into, each run against the
base lake with the proxy's rules armed at the moment the operation starts,
and what was observed: whether it was acknowledged, or what it raised.

A pass step reports a failure in its row instead of raising; its observation
takes the error class from the row's detail. The fold turn returns its report
(``FoldTurn.to_dict()``, as JSON) as the detail. An operation that does not
end within ``HANG_S`` is observed as a hang (its thread is left behind).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from slatelake import errors
from slatelake.catalog.folder import Folder
from slatelake.catalog.lake import Lake
from slatelake.catalog.sweep import SweepRequest, sweep
from slatelake.ducklake.session import Session
from slatelake.ducklake.sql import literal
from slatelake.log.leases import CLOCK_SKEW_S
from slatelake.maintenance.fold import SKIPPED, FoldRequest, FoldTurn, fold_turn
from slatelake.maintenance.options import ducklake_signatures, parse_options
from slatelake.maintenance.runner import run_pass
from slatelake.store import objects
from slatelake.store.location import LakeLocation
from slatelake.store.merge import CompactStoreRequest, compact_store
from tests.faults.lake import CaseRows

HANG_S = 60.0
_ERROR_NAME = re.compile(r"\b([A-Z]\w*(?:Error|Exception))\b")

# The pass-step operations, each a pass with that step alone (and the sweep
# off), so a rule's nth request is that step's.
STEP_OPTIONS = {
    "pass_expire": {"MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN": "1 second"},
    "pass_flush": {"MAINTENANCE_FLUSH_INLINED_DATA": "true"},
    "pass_merge": {"MAINTENANCE_MERGE_ADJACENT_FILES": "true"},
    "pass_rewrite": {"MAINTENANCE_REWRITE_DATA_FILES_DELETE_THRESHOLD": "0.01"},
    "pass_cleanup": {"MAINTENANCE_CLEANUP_OLD_FILES_CLEANUP_ALL": "true"},
    "pass_orphans": {
        "MAINTENANCE_DELETE_ORPHANED_FILES_CLEANUP_ALL": "true",
        "MAINTENANCE_ORPHAN_AGE_FLOOR_OVERRIDE": "true",
    },
}
STEP_NAMES = {
    "pass_expire": "expire_snapshots",
    "pass_flush": "flush_inlined_data",
    "pass_merge": "merge_adjacent_files",
    "pass_rewrite": "rewrite_data_files",
    "pass_cleanup": "cleanup_old_files",
    "pass_orphans": "delete_orphaned_files",
}
# Before the faults are armed: a rewrite leaves out a table whose files hold
# inlined deletions unless its pass flushes them (maintenance/rewrite_guard.py),
# and a flush in the same pass would take the rule's requests, so the base
# lake's inlined deletions are flushed first, unfaulted.
PREPARE = {"pass_rewrite": "ducklake_flush_inlined_data"}
COMMITS = ("commit", "commit_late", "commit_beside")
OPERATIONS = (*COMMITS, "fold", "fold_turn", *STEP_OPTIONS, "sweep", "store_merge")
# "commit_late": a commit whose reader lease ends within the clock-skew
# allowance, so its lease vouches for nothing and it reads the truncation mark.
# "commit_beside": a write right after a look, whose LIST runs beside it.
LATE_LEASE_S = CLOCK_SKEW_S / 2
# What a commit adds: a Parquet insert (its data file goes through httpfs).
COMMIT_ROWS = CaseRows("a", 100_000, 100_100)
# "fold_turn": one holder's turn (maintenance/fold.py), as the Lambda's fold
# action runs it: the holder lease, the fold, an image, truncation, the merge wait.
TURN_REQUEST = FoldRequest(margin_s=0, image=True)


@dataclass
class Observation:
    acked: bool  # the operation returned (a pass step: its row says it ran)
    error: str | None = None  # the class of what it raised (or the failed row named)
    detail: str = ""
    hung: bool = False
    mro: tuple[str, ...] = ()  # the raised error's class and its bases, by name

    def raised(self, name: str) -> bool:
        return self.error == name or name in self.mro


def _observe(fn: Callable[[], str], disarm: Callable[[], None]) -> Observation:
    """Run ``fn`` in a thread with a bound (its return value is the detail),
    then ``disarm`` the faults: closing handles is not part of the operation."""
    box: dict[str, object] = {}

    def run() -> None:
        try:
            box["detail"] = fn()
        except BaseException as exc:  # noqa: BLE001 - the observation is the point
            box["exc"] = exc

    thread = threading.Thread(target=run, name="fault-case", daemon=True)
    thread.start()
    thread.join(HANG_S)
    disarm()
    if thread.is_alive():
        return Observation(False, "hang", f"no answer within {HANG_S:g}s", hung=True)
    exc = box.get("exc")
    if isinstance(exc, BaseException):
        names = tuple(c.__name__ for c in type(exc).__mro__)
        return Observation(False, type(exc).__name__, f"{exc}"[:600], mro=names)
    return Observation(True, None, str(box.get("detail", "")))


def run_operation(
    operation: str, url: str, arm: Callable[[], None], disarm: Callable[[], None]
) -> Observation:
    """Run ``operation`` on the lake at ``url``: ``arm`` installs the faults
    once everything the operation needs is open, ``disarm`` removes them as
    soon as it ends."""
    if operation in COMMITS:
        with Session(url) as s:
            if operation == "commit_late":
                lease = s.lake.lease
                lease.ttl_s, lease.lease = LATE_LEASE_S, None  # rewritten now, ending soon
                lease.hold(s.state.last_seq)
            if operation == "commit_beside":
                s.sql("SELECT count(*) FROM a").fetchall()  # a look: the write then looks beside
            arm()
            return _observe(lambda: str(s.sql(COMMIT_ROWS.sql()).fetchall()), disarm)
    if operation == "fold":  # opening the writer (fencing the last one) is part of it
        folders: list[Folder] = []

        def fold() -> str:
            folders.append(Folder(LakeLocation.parse(url), margin_s=0))
            return str(folders[0].fold_once())

        arm()
        try:
            return _observe(fold, disarm)
        finally:
            for folder in folders:
                folder.close()
    if operation == "fold_turn":  # taking the holder lease and opening the writer are part of it
        arm()
        return _observe(lambda: json.dumps(fold_turn(url, TURN_REQUEST).to_dict()), disarm)
    if operation in STEP_OPTIONS:
        return _pass_step(operation, url, arm, disarm)
    if operation == "sweep":
        with Lake.open(url) as lake:
            arm()
            return _observe(lambda: sweep(lake, SweepRequest(pace_s=0)).to_dict(), disarm)
    if operation == "store_merge":
        with Lake.open(url) as lake:
            arm()
            return _failed_row(_observe(lambda: _merge_row(lake), disarm))
    raise ValueError(f"unknown operation {operation!r}")


def _pass_step(
    operation: str, url: str, arm: Callable[[], None], disarm: Callable[[], None]
) -> Observation:
    step = STEP_NAMES[operation]
    with Session(url) as s:
        raw = {**STEP_OPTIONS[operation], "MAINTENANCE_SWEEP_INDEXES": "false"}
        options = parse_options(raw, ducklake_signatures(s.con))
        if operation in PREPARE:
            s.sql(f"CALL {PREPARE[operation]}({literal(s.alias)})").fetchall()
        arm()
        return _failed_row(_observe(lambda: _run_pass_row(s, options, step), disarm))


def _failed_row(seen: Observation) -> Observation:
    """A report row that says ``failed``: observed as the error it names
    (with that class's bases, when slatelake defines it)."""
    if seen.acked and seen.detail.startswith("failed: "):
        detail = seen.detail[len("failed: ") :]
        found = _ERROR_NAME.search(detail)
        name = found.group(1) if found else "StepFailed"
        return Observation(False, name, detail, mro=_bases(name))
    return seen


def _bases(name: str) -> tuple[str, ...]:
    """The class named ``name`` in slatelake's error modules and its bases, by name."""
    for module in (errors, objects):
        cls = getattr(module, name, None)
        if isinstance(cls, type) and issubclass(cls, BaseException):
            return tuple(c.__name__ for c in cls.__mro__)
    return (name,)


def _merge_row(lake: Lake) -> str:
    """Submit the store merges (no holder runs: they stay pending)."""
    report = compact_store(lake, CompactStoreRequest())
    return f"{report.outcome}: {report.summary()}"


def _run_pass_row(session: Session, options: object, step: str) -> str:
    report = run_pass(session, options, wait_s=30)  # type: ignore[arg-type]
    row = report.step(step)
    if report.lease_lost is not None:
        return f"failed: lease lost: {report.lease_lost}"
    return f"{row.status}: {row.detail}"


def next_turn(url: str, within_s: float) -> tuple[FoldTurn, int, float]:
    """The turn after a faulted one, without faults: run again while it skips
    (a lease the faulted turn left held, or a late write of it still landing),
    for at most ``within_s`` seconds. Returns the last turn, how many turns
    skipped before it and the seconds they took."""
    t0, skipped = time.monotonic(), 0
    while True:
        turn = fold_turn(url, TURN_REQUEST)
        waited = time.monotonic() - t0
        if turn.status != SKIPPED or waited >= within_s:
            return turn, skipped, waited if skipped else 0.0
        skipped += 1
        time.sleep(0.25)
