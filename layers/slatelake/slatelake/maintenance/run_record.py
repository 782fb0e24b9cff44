"""Recording a run: its start, its end, and the runs that died.

A pass is written to the run history twice under one id: ``running`` when it
takes its lease (``record_start``: one head-preserving commit, which also
rewrites any dead run ``failed``), then how it ended (``record_pass``: the
same entry, the status window and the audit entry ``run.<trigger>`` with
the run's summed counters, in one commit). Once a pass holds the lease no
other pass is alive, so a ``running`` entry it finds is a dead run:
``dead_runs`` finds them, ``death`` says how each ended from its lease
record. "Queued" is no durable state; ``queued_s`` records the wait.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from slatelake.ducklake.session import Session
from slatelake.errors import (
    ConflictError,
    OperationLimitError,
)
from slatelake.log.changeset import ChangeSet
from slatelake.maintenance import history
from slatelake.maintenance import report as rpt
from slatelake.maintenance.commit_retry import Built, commit_with_retry
from slatelake.maintenance.flight import PassLease
from slatelake.maintenance.lease_record import BROKEN, HELD, RELEASED, LeaseRecord
from slatelake.maintenance.report import PassReport

log = logging.getLogger("slatelake.maintenance")
STATUS_ATTEMPTS = 3
# A pass's start looks at this many newest run history entries for dead runs.
LOOK_BACK = 3
RECORD_TABLES = ("sys/run_history", "sys/audit_log", "sys/maintenance_status")


def read_window(session: Session) -> rpt.StatusWindow:
    """The status window as of the session's view, newest first; ``.warning``
    says what did not decode."""
    return rpt.newest_first(session.lake.read_sys(session.state, rpt.STATUS_KEY))


def record_pass(session: Session, report: PassReport) -> None:
    """Append to sys/maintenance_status, keep the run in the run history
    (rewriting its ``running`` entry when it has one) and audit it
    (``run.<trigger>`` with its counters), as one head-preserving batch; a
    window that does not decode is rewritten from what could be read. A
    failure is logged and never changes the pass outcome."""

    def build() -> Built[None]:  # on a fresh view each attempt
        def read(key: bytes) -> bytes | None:
            return session.lake.read_sys(session.state, key)

        window = rpt.decode_window(read(rpt.STATUS_KEY))
        if window.warning is not None:
            log.warning("%s; rewriting the window with this pass", window.warning)
        report.head_snapshot_id = session.state.head.snapshot_id
        report.head_batch_seq = session.state.head.batch_seq
        report.running = False
        puts, deletes = history.run_writes(read, report)  # sets report.run_id
        more = history.run_audit_writes(read, report)
        puts, deletes = puts + more[0], deletes + more[1]
        status = (rpt.STATUS_KEY, rpt.encode_window([*window, report]))
        cs = ChangeSet(
            base=session.state.head,
            puts=(status, *puts),
            deletes=tuple(deletes),
            tables=("sys/maintenance_status", "sys/run_history", "sys/audit_log"),
            changes_made="maintenance_status",
        )

        # A run whose ``running`` entry stands rewrites that entry alone: it
        # is kept with the window under a tiny cap, never left ``running``.
        own = history.run_key(report.run_id) if report.run_id is not None else None
        keys = {key for key, _ in puts}
        rewrite = tuple(p for p in puts if p[0] == own) if history.RUNS_INDEX not in keys else ()

        def window_alone(exc: OperationLimitError) -> ChangeSet:  # a tiny change-set cap
            log.warning("run history not recorded (%s); recording the status window alone", exc)
            return replace(cs, puts=(status, *rewrite), deletes=())

        return Built(cs, None, over_limit=window_alone)

    try:
        commit_with_retry(session, build, attempts=STATUS_ATTEMPTS, under_lock=False)
    except ConflictError:
        log.warning("maintenance status not recorded after %d conflicts", STATUS_ATTEMPTS)
    except Exception as exc:
        log.warning("maintenance status not recorded: %s", exc)


# -- a run's life: running at its start, failed when it died ----------------------
# Once a pass holds the lease, no other pass is alive: a ``running`` entry it
# finds is a dead run's (SIGKILL, a lost host, a stall past the lease's TTL).
# It looks at the newest ``LOOK_BACK`` entries and the run the superseded
# lease record names, not the whole history: passes run one at a time, so a
# dead run is the newest entry when the next pass starts, unless that pass's
# own start could not be recorded either. Recording the start never stops a
# pass: a start not committed is logged, and its end adds the run as before.


@dataclass
class Pending:
    """Reads through the writes one change set has made so far, so two items
    appended to one log (two audit entries) see each other's index."""

    read: history.Read
    puts: dict[bytes, bytes] = field(default_factory=dict)
    deleted: set[bytes] = field(default_factory=set)

    def __call__(self, key: bytes) -> bytes | None:
        if key in self.puts:
            return self.puts[key]
        return None if key in self.deleted else self.read(key)

    def add(self, writes: tuple[list[tuple[bytes, bytes]], list[bytes]]) -> None:
        puts, deletes = writes
        for key, value in puts:
            self.puts[key] = value
            self.deleted.discard(key)
        for key in deletes:
            self.puts.pop(key, None)
            self.deleted.add(key)

    def change_set(self, session: Session) -> ChangeSet:
        return ChangeSet(
            base=session.state.head,
            puts=tuple(self.puts.items()),
            deletes=tuple(sorted(self.deleted)),
            tables=RECORD_TABLES,
            changes_made="maintenance_status",
        )


@dataclass
class Started:
    """What the start's commit recorded: the run's id, and the dead runs."""

    run_id: int | None
    dead: list[PassReport]


def utc(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _at_step(step: object) -> str:
    return f"during step {step}" if isinstance(step, str) and step else "before its first step"


def death(entry: PassReport, record: LeaseRecord | None) -> tuple[str, float | None]:
    """Why a ``running`` entry whose pass no longer holds the lease never
    finished, and when it was last heard of (its last heartbeat, epoch
    seconds; None: unknown). ``record``: the lease record the current pass's
    take superseded, which is the dead pass's own when nothing came between."""
    owner = entry.lease_owner
    if record is not None and owner is not None and record.owner == owner:
        if record.state == HELD:
            beat = record.heartbeat_at
            return (
                f"its heartbeat stopped at {utc(beat)} {_at_step(record.step)}; the process "
                "died (or stalled past its lease's TTL)",
                beat,
            )
        if record.state == RELEASED:
            return (
                f"it released its lease at {utc(record.heartbeat_at)} without recording how "
                "it ended (its last record could not be written)",
                record.heartbeat_at,
            )
    if record is not None and record.state == BROKEN and record.extra.get("broke_owner") == owner:
        broke_at = record.extra.get("broke_heartbeat_at")
        if isinstance(broke_at, (int, float)) and broke_at > 0:
            return (
                f"its heartbeat stopped at {utc(float(broke_at))} "
                f"{_at_step(record.extra.get('broke_step'))}; the process died, and "
                "`slatelake lease break` ended its lease",
                float(broke_at),
            )
    started = utc(entry.started_at / 1e6)
    return (
        f"its lease is gone and it never recorded how it ended (started at {started}); the "
        "process died",
        None,
    )


def dead_runs(read: history.Read, taken_over: LeaseRecord | None) -> list[PassReport]:
    """The ``running`` entries among the newest ``LOOK_BACK`` and the one
    ``taken_over`` names, each turned ``failed`` with its reason. Called
    with the lease held, so none of them is alive."""
    ids = history.run_ids(read)
    wanted = set(ids[-LOOK_BACK:])
    if taken_over is not None and taken_over.run_id in ids:
        wanted.add(taken_over.run_id)
    dead = []
    for run_id in sorted(wanted):
        entry = history.read_run(read, run_id)
        if entry is None or not entry.running:
            continue
        reason, last = death(entry, taken_over)
        ended = replace(entry, running=False, failed_reason=reason, run_id=run_id)
        if last is not None:
            ended.seconds = round(max(0.0, last - entry.started_at / 1e6), 3)
        dead.append(ended)
    return dead


def record_start(session: Session, report: PassReport, lease: PassLease, attempts: int) -> None:
    """Record ``report``'s run ``running`` (its id becomes ``report.run_id``,
    and the lease's records name it), and every dead run ``failed``, in one
    head-preserving commit. Logged, never raised: history must not stop a pass."""
    report.lease_generation, report.lease_owner = lease.generation, lease.owner

    def build() -> Built[Started]:  # on a fresh view each attempt
        def read(key: bytes) -> bytes | None:
            return session.lake.read_sys(session.state, key)

        def writes(audited: bool) -> ChangeSet:
            pending = Pending(read)
            for ended in dead:
                pending.add(history.run_writes(pending, ended))
                if audited:
                    pending.add(history.run_audit_writes(pending, ended))
            if dead and audited:
                window = rpt.decode_window(read(rpt.STATUS_KEY))
                pending.add(([(rpt.STATUS_KEY, rpt.encode_window([*window, *dead]))], []))
            entry = replace(report, running=True, run_id=None, steps=[])
            pending.add(history.run_writes(pending, entry))
            started.run_id = entry.run_id
            return pending.change_set(session)

        def entries_alone(exc: OperationLimitError) -> ChangeSet:  # a tiny change-set cap
            log.warning("dead runs recorded without their audit and window entries: %s", exc)
            return writes(audited=False)

        dead = dead_runs(read, lease.taken_over)
        started = Started(None, dead)
        return Built(writes(audited=True), started, over_limit=entries_alone)

    try:
        started = commit_with_retry(session, build, attempts=attempts, under_lock=False)
    except Exception as exc:
        log.warning("the run's start not recorded (its end adds it): %s", exc)
        return
    report.run_id = lease.run_id = started.run_id
    for ended in started.dead:
        log.warning("maintenance run %s recorded failed: %s", ended.run_id, ended.failed_reason)
