"""One maintenance pass: steps 1-6 in the RFC's order, then 7, 7b, 7c and 8.

Every surface (Python, CLI, the scheduler thread, the Lambda) calls
``run_pass``, so they run the same code in the same order and produce the
same report. Abort semantics: a failed step outside table deferral marks the
later DuckLake steps skipped, naming it; steps 7-8 are independent of them.
Single flight holds in the process (a lock on the canonical lake URL) and
across processes (a lease in the bucket, renewed by a heartbeat thread). The
commit lock the pass takes names that lease, so a pass that died holding it
(SIGKILL, a lost host) blocks commits only until its lease is taken over or
released, not for the lock's own TTL. A stop request (``stop``: the CLI sets
it on SIGTERM or SIGINT) ends the pass at its next step or table boundary,
like the deadline: the status is recorded and the lease released. A
pass whose lease another process took stops at its next boundary, reports
``lease_lost`` and writes nothing more, not even its status record. The
report is appended to the durable status window; a window that does not
decode is rewritten (with a warning), never left to block every later record.
A pass refuses to run on a connection inside an explicit transaction, however
it was opened (``session.transaction()`` or a raw ``BEGIN``).

A run's life is in the run history (``record_start``): ``running`` once the
pass holds its lease (one head-preserving commit, which also records any
dead pass's entry ``failed``), the lease's heartbeat naming the step it is
at (beaten at each step's start), then rewritten with how it ended, the
status window appended and the run audited (``run.<trigger>``, with its
counters) in one commit at its end. A pass that raises is recorded
``failed`` with the error before the error reaches its caller.

A scoped run (``RunScope``, steps.py) does only the operations asked, on
one table if asked: the steps left out are reported skipped, saying why,
and so are the sweeps and the store merge. A dry run (dry_run.py) plans the
same steps and writes nothing: no lease, no status record, no slot; a
read-only session will do.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import duckdb

from slatelake.ducklake.session import Session
from slatelake.errors import (
    AlreadyRunningError,
    MisconfigurationError,
    NotFoundError,
    ReadOnlyError,
    SlatelakeError,
    StepFailed,
)
from slatelake.maintenance import holds, pricing
from slatelake.maintenance import report as rpt
from slatelake.maintenance.dry_run import Planner
from slatelake.maintenance.flight import PassLease, process_lock
from slatelake.maintenance.options import DUCKLAKE_STEPS, STEPS, MaintenanceOptions, StepConfig
from slatelake.maintenance.policy import lake_enabled, rows_at_head
from slatelake.maintenance.policy_plan import describe, plan
from slatelake.maintenance.prices import DEFAULT_PRICES, Prices
from slatelake.maintenance.pricing import Budget, Estimate
from slatelake.maintenance.progress import Progress, Sink
from slatelake.maintenance.report import FAILED, RAN, SKIPPED, PassReport
from slatelake.maintenance.run_record import STATUS_ATTEMPTS, record_pass, record_start
from slatelake.maintenance.scope import RunScope
from slatelake.maintenance.steps import EXPIRE_BATCH, StepOutcome, Steps, TableName
from slatelake.maintenance.store_step import run_compact_store
from slatelake.maintenance.sweep_steps import run_sweep_steps

log = logging.getLogger("slatelake.maintenance")
CLEANUP_STEPS = ("cleanup_old_files", "delete_orphaned_files")
PER_TABLE_STEPS = ("flush_inlined_data", "merge_adjacent_files", "rewrite_data_files")


def run_pass(
    session: Session,
    options: MaintenanceOptions,
    trigger: str = "manual",
    wait_s: float = 0.0,
    stop: threading.Event | None = None,
    deadline: Callable[[], float] | None = None,
    on_progress: Sink | None = None,
    scope: RunScope | None = None,
    dry_run: bool = False,
    by: str | None = None,
    prices: Prices = DEFAULT_PRICES,
) -> PassReport:
    """Run one pass. ``wait_s``: how long to wait for a running pass (manual
    triggers wait; scheduled ticks pass 0 and skip). ``deadline`` returns the
    seconds left to work (the Lambda's remaining time less its reserve for
    reporting); at zero the pass stops between steps and tables and leaves
    work pending. ``scope``: the operations and table a manual run asked
    for; ``dry_run``: plan only, taking neither the lock nor the lease, each
    step priced at ``prices`` (pricing.py)."""
    scope = scope or RunScope()
    progress = Progress(options.progress, sink=on_progress)
    stopping = stop or threading.Event()

    def make(lease: PassLease | None) -> PassRun:
        return PassRun(
            session, options, trigger, stopping, deadline, progress, lease, scope, by, prices=prices
        )

    if dry_run:
        refuse_in_transaction(session)
        require_table(session, scope)
        return make(None).run()
    refuse_unless_autocommit(session)
    require_table(session, scope)
    lock = process_lock(session.lake.location.url)
    acquired = lock.acquire(timeout=wait_s) if wait_s > 0 else lock.acquire(blocking=False)
    if not acquired:
        raise AlreadyRunningError("maintenance already running on this lake in this process")
    try:
        lease = PassLease(session.lake.location, client=session.lake.log.client)
        queued = time.monotonic()
        lease.acquire(wait_s, stop=stopping)
        commit_lock = session.commit_lock
        try:
            lease.start_heartbeat()
            if commit_lock is not None:  # a lock this pass leaves behind dies with its lease
                commit_lock.lease = lease.ref
            running = make(lease)
            if wait_s > 0:
                running.report.queued_s = round(time.monotonic() - queued, 3)
            try:
                return running.run()
            except Exception as exc:
                running.record_raised(exc)
                raise
        finally:
            if commit_lock is not None:
                commit_lock.lease = None
            lease.release()
    finally:
        lock.release()


def require_table(session: Session, scope: RunScope) -> None:
    """A table-scoped run names a live table of the lake, or nothing runs."""
    if scope.table is None:
        return
    session.refresh()
    if not session.catalog_has(*scope.table):
        raise NotFoundError(
            f"no table {scope.table_name} in the lake at {session.url}; a bare name means "
            "schema main (SHOW ALL TABLES lists them)"
        )


def refuse_in_transaction(session: Session) -> None:
    if session.in_transaction or in_explicit_transaction(session.con):
        raise MisconfigurationError(
            "maintenance refuses to run inside an explicit transaction; commit or roll back first"
        )


def refuse_unless_autocommit(session: Session) -> None:
    """The pass runs only on a read-write connection in autocommit: inside a
    caller's transaction its commits would share the caller's fate (a
    ROLLBACK undoing the status record) or wait on the caller."""
    if session.read_only:
        raise ReadOnlyError("a read-only session never runs maintenance; reconnect read-write")
    refuse_in_transaction(session)


def in_explicit_transaction(con: Any) -> bool:
    """Whether ``con`` is inside a transaction it opened with BEGIN (through
    ``Session.sql`` too). DuckDB keeps one transaction id for every statement
    of an explicit transaction and gives each autocommit statement its own; an
    aborted transaction refuses the probe outright."""
    probe = "SELECT current_transaction_id()"
    try:
        first = con.execute(probe).fetchone()[0]
        second = con.execute(probe).fetchone()[0]
    except duckdb.TransactionException:  # "current transaction is aborted"
        return True
    return bool(first == second)


# Steps that lose history or files: on a schedule, only under an enabled policy.
DELETING_STEPS = ("expire_snapshots", "cleanup_old_files", "delete_orphaned_files")


@dataclass
class Flow:
    """What one step leaves the next: the step (or table batch) that failed,
    which stops every later DuckLake step, and the tables deferred after
    conflicts, which hold back cleanup until a complete pass."""

    failed: str | None = None
    deferred: set[TableName] = field(default_factory=set)


class PassRun:
    def __init__(
        self,
        session: Session,
        options: MaintenanceOptions,
        trigger: str,
        stop: threading.Event,
        deadline: Callable[[], float] | None,
        progress: Progress,
        lease: PassLease | None,
        scope: RunScope,
        by: str | None = None,
        report: PassReport | None = None,
        prices: Prices = DEFAULT_PRICES,
    ) -> None:
        """``lease`` None: a dry run, which plans instead of running.
        ``report``: the run's report so far (a fanned-out pass's finish).
        ``prices``: what a dry run's estimate is priced at."""
        self.session = session
        self.options = options
        self.stop = stop
        self.deadline = deadline
        self.progress = progress
        self.lease = lease
        self.scope = scope
        self.report = report or PassReport(
            trigger=trigger,
            operations=None if scope.operations is None else list(scope.operations),
            table=scope.table_name,
            plan=None if lease is not None else rpt.DryRunPlan(),
            by=by,
        )
        self.steps = Steps(session, stop, self.progress, self._out_of_time)
        self.steps.only = scope.table
        plan = self.report.plan
        self.prices = prices
        self.planner = None if plan is None else Planner(session, self.steps, plan, prices)
        # A real pass's budget and its running estimate (None: unbounded).
        self.budget: Budget | None = None
        if lease is not None and options.budgeted:
            self.budget = Budget(options.budget_bytes, options.budget_requests)
            self.steps.admit = self._admit
        self._table_costs: dict[str, Estimate] = {}  # the running step's tables, priced
        self._blocked: tuple[str | None] | None = None  # the fail-safe's answer, once asked
        self._gated: set[str] = set()  # deleting steps a schedule may not run here
        self.catalog_before: int | None = None  # the catalog's bytes when the pass began

    @property
    def gated(self) -> set[str]:
        """Deleting steps a schedule may not run on this lake (no enabled policy)."""
        return self._gated

    def _out_of_time(self) -> str | None:
        """Checked at every step, table and batch boundary."""
        if self.lease is not None and self.lease.lost is not None:
            return "the pass lost its maintenance lease"
        if self.stop.is_set():
            return "shutdown requested"
        if self.deadline is not None and self.deadline() <= 0:
            return "the invocation deadline is near"
        return None

    def _apply_policy(self) -> None:
        """The lake's maintenance policy under the invocation's options
        (policy_plan.py); a lake without an enabled policy runs them alone,
        except that a schedule never expires or deletes on it (double
        opt-in: a deployed schedule's options tune steps, never switch the
        policy on; ``deletes_need_policy`` marks such options)."""
        self.session.refresh()
        rows = rows_at_head(self.session)
        if not lake_enabled(rows):
            if self.options.deletes_need_policy:
                self._gated = {s for s in DELETING_STEPS if self.options.steps[s].enabled}
            return
        planned = plan(rows, self.options, self.steps.tables())
        self.options = planned.options
        self.steps.per_table = planned.per_table
        if planned.policy is not None:
            self.report.policy = describe(planned.policy)
            shown = ", ".join(f"{k}={v}" for k, v in self.report.policy.items())
            self.progress(f"lake policy applies: {shown}")

    def run(self) -> PassReport:
        """The whole pass in this process: every step, then its end."""
        self.begin()
        self.run_steps(DUCKLAKE_STEPS, Flow())
        return self.end()

    def begin(self, record: bool = True) -> None:
        """Say the pass starts, record its run ``running`` (``record``: the
        first phase of a run only), apply the lake's policy."""
        what = " dry run" if self.planner is not None else ""
        scoped = f", {self._scope_text()}" if self.scope.scoped else ""
        self.progress(f"pass{what} start ({self.report.trigger}{scoped})")
        if self.budget is not None and record:  # priced before the run record adds a slot
            self.budget.spend(self._pricer().overhead(self.scope.left_out_of_sweeps() is None))
        if record and self.lease is not None:
            record_start(self.session, self.report, self.lease, attempts=STATUS_ATTEMPTS)
        self.prepare()
        if self.planner is None and self.catalog_before is None:
            self.catalog_before = self._catalog_bytes()

    def prepare(self) -> None:
        """The lake's policy, and whether this pass flushes: what every phase
        of a pass decides alike before its steps."""
        self._apply_policy()
        flush = self.options.steps["flush_inlined_data"]
        self.steps.may_flush = flush.enabled and self.scope.left_out("flush_inlined_data") is None
        if self.planner is not None:  # merge and rewrite per table, as _run_step decides
            per_table = self.options.table_batches or self.options.budgeted
            self.planner.costs.per_table = per_table or bool(self.steps.per_table)

    def run_steps(self, steps: tuple[str, ...], flow: Flow) -> None:
        """Run ``steps`` (DuckLake's, in the RFC's order) or say why not; a
        failure or a deferred table carries over in ``flow`` to later steps."""
        report = self.report
        for step in steps:
            cfg = self.options.steps[step]
            left_out = self.scope.left_out(step)
            if left_out is not None:
                report.add(step, SKIPPED, left_out)
                continue
            if not cfg.enabled:
                named = self.scope.operations is not None
                why = "; named in the operations, but no option or policy enables it"
                report.add(step, SKIPPED, "not configured" + (why if named else ""))
                continue
            if step in self._gated:
                report.add(
                    step,
                    SKIPPED,
                    "the lake's policy is not enabled, and a deployed schedule never expires or "
                    "deletes on such a lake; `slatelake policy set LAKE --enabled` switches it on",
                )
                continue
            if flow.failed is not None:
                report.add(step, SKIPPED, f"not attempted because {flow.failed} failed")
                continue
            reason = self._out_of_time()
            if reason is not None:
                report.add(step, SKIPPED, f"not attempted: {reason}; left for the next pass")
                report.work_pending = True
                continue
            if step in CLEANUP_STEPS and (blocked := self._cleanup_blocked()) is not None:
                report.add(step, SKIPPED, f"retention fail-safe: {blocked}")
                report.partial_reason = f"{step} skipped by the retention fail-safe: {blocked}"
                continue
            if self.budget is not None and (spent := self.budget.spent_out()) is not None:
                report.add(step, SKIPPED, f"not attempted: {spent}; left for the next pass")
                report.work_pending = True
                continue
            if step in CLEANUP_STEPS and flow.deferred:
                names = ", ".join(f"{s}.{t}" for s, t in sorted(flow.deferred))
                report.add(step, SKIPPED, f"waits for a complete pass; deferred tables: {names}")
                report.work_pending = True
                continue
            self._one_step(step, flow)

    def _one_step(self, step: str, flow: Flow) -> None:
        report = self.report
        cfg = self.options.steps[step]
        self._at(step)
        self.progress(f"step {step} start")
        t0 = time.monotonic()
        try:
            if self.planner is not None:
                outcome = self.planner(step, cfg)
            else:
                self._price_tables(step, cfg)
                outcome = self._run_step(step, flow.deferred)
                self._spend(step, outcome)
        except StepFailed as exc:
            report.add(step, FAILED, str(exc))
            report.work_pending = report.work_pending or exc.pending
            flow.failed = step
        except Exception as exc:  # DuckLake rejected it, or the log refused it
            report.add(step, FAILED, f"{type(exc).__name__}: {exc}")
            report.work_pending = True
            flow.failed = step
        else:
            status = FAILED if outcome.failed_tables else RAN
            report.add(step, status, outcome.detail, outcome.counts, dry_run=outcome.dry_run)
            report.work_pending = report.work_pending or outcome.pending
            flow.deferred.update(outcome.failed_tables)
        report.steps[-1].seconds = round(time.monotonic() - t0, 3)
        self.progress(
            f"step {step} end after {time.monotonic() - t0:.2f}s: "
            f"{report.steps[-1].status} ({report.steps[-1].detail})"
        )

    def end(self) -> PassReport:
        """The sweeps and the store merge, then the run's record (none for a
        dry run, nor for a pass that lost its lease)."""
        report = self.report
        if self.planner is not None:
            self._estimate_total()
            self.planner.close()
        self._sweeps_and_store_merge()
        self.progress(f"pass end: work_pending={report.work_pending}")
        report.seconds = round(max(0.0, time.time() - report.started_at / 1e6), 3)
        report.rss_hwm_mb = round(max(report.rss_hwm_mb, self.progress.high_water), 1)
        if self.lease is None:
            return report  # a dry run records nothing
        if self.lease.lost is not None:
            report.lease_lost = self.lease.lost
            report.work_pending = True
            log.warning("maintenance pass stopped, status not recorded: %s", report.lease_lost)
            return report
        self._reclaimed(self.catalog_before)
        record_pass(self.session, report)
        return report

    def _at(self, step: str) -> None:
        """The pass starts ``step``: its lease beats now, naming it."""
        if self.lease is not None:
            self.lease.note_step(step)

    def record_raised(self, exc: Exception) -> None:
        """The pass raised: record it ``failed`` with the error (unless its
        lease was lost: then it writes nothing), best effort."""
        if self.lease is None or self.lease.lost is not None:
            return
        self.report.failed_reason = f"the pass raised {type(exc).__name__}: {exc}"
        self.report.seconds = round(max(0.0, time.time() - self.report.started_at / 1e6), 3)
        self.report.rss_hwm_mb = round(self.progress.high_water, 1)
        record_pass(self.session, self.report)

    def _catalog_bytes(self) -> int | None:
        """The catalog's file bytes at the head (None: not readable now)."""
        try:
            self.session.refresh()
            return self.session.catalog_file_bytes()
        except (SlatelakeError, duckdb.Error) as exc:
            log.warning("catalog bytes not read: %s", exc)
            return None

    def _reclaimed(self, catalog_before: int | None) -> None:
        """Bytes the pass reclaimed: the catalog's before less after, and the
        bytes the deleting steps removed from storage."""
        after = None if catalog_before is None else self._catalog_bytes()
        if catalog_before is not None and after is not None:
            self.report.catalog_bytes_reclaimed = catalog_before - after
        deleted = [
            s.counts["bytes_deleted"] for s in self.report.steps if "bytes_deleted" in s.counts
        ]
        self.report.bytes_deleted = sum(deleted) if deleted else None

    def _scope_text(self) -> str:
        ops = "all" if self.scope.operations is None else ",".join(self.scope.operations)
        table = f", table {self.scope.table_name}" if self.scope.table else ""
        return f"operations {ops}{table}"

    def _sweeps_and_store_merge(self) -> None:
        """Steps 7, 7b, 7c and 8, unless the run is scoped (a manual scoped
        run does only what it asked) or a dry run (they have none)."""
        why = self.scope.left_out_of_sweeps()
        if why is None and self.planner is not None:
            why = "not planned: the sweeps and the store merge have no dry run"
        if why is not None:
            for step in STEPS[len(DUCKLAKE_STEPS) :]:
                self.report.add(step, SKIPPED, why, dry_run=self.planner is not None)
            return
        opts, report = self.options, self.report
        self._at("sweep")
        run_sweep_steps(self.session, opts, self.progress, report, self._out_of_time)
        self._at("compact_store")
        run_compact_store(self.session, opts, self.progress, report, self._out_of_time)

    def _cleanup_blocked(self) -> str | None:
        """The retention fail-safe, asked once per pass before the first
        deleting step; holds that cannot be read block deletion too."""
        if self._blocked is None:
            try:
                self.session.refresh()
                self._blocked = (holds.cleanup_blocked(self.session),)
            except SlatelakeError as exc:
                self._blocked = (f"the retention holds could not be checked ({exc})",)
        return self._blocked[0]

    def _run_step(self, step: str, deferred: set[TableName]) -> StepOutcome:
        cfg = self.options.steps[step]
        if step == "expire_snapshots":
            return self.steps.expire_snapshots(cfg)
        if step == "flush_inlined_data":
            return self.steps.flush_inlined_data(cfg, deferred)
        if step in ("merge_adjacent_files", "rewrite_data_files"):
            # a budget stops between tables, so it calls DuckLake per table
            per_table = self.options.table_batches or bool(deferred) or self.budget is not None
            return self.steps.compact(step, cfg, per_table, deferred)
        return self.steps.cleanup(step, cfg)

    # -- the price (pricing.py): a dry run's estimate, a real pass's budget -------
    def _pricer(self) -> Planner:
        """A planner on a plan of its own: what a step's tables would cost now."""
        return Planner(self.session, self.steps, rpt.DryRunPlan(), self.prices, per_table=True)

    def _price_tables(self, step: str, cfg: StepConfig) -> None:
        """Under a budget: each table's share of a per-table step, priced on
        the catalog as it stands now (after the steps before it ran), and the
        step's own fixed part spent before its first table."""
        self._table_costs = {}
        if self.budget is None or step not in PER_TABLE_STEPS:
            return
        pricer = self._pricer()
        try:
            pricer(step, cfg)
            if step == "flush_inlined_data":
                fixed = pricer.costs.flush([])
            else:
                fixed = pricer.costs.compact([], guarded=step == "rewrite_data_files")
            self.budget.spend(fixed)
        finally:
            pricer.close()
        self._table_costs = {w.table: w.estimate for w in pricer.works.get(step, [])}

    def _admit(self, step: str, table: TableName) -> str | None:
        """Whether the budget takes ``table``'s share of ``step`` (steps.py asks
        between tables); None: go on, the share counted as spent."""
        cost = self._table_costs.get(f"{table[0]}.{table[1]}")
        if self.budget is None or cost is None or not (cost.requests or cost.bytes_moved):
            return None
        return self.budget.admit(cost)

    def _spend(self, step: str, outcome: StepOutcome) -> None:
        """A lake-wide step's estimate from what it did (a per-table step's
        tables were counted as admitted, its fixed part before it); priced
        without reading the lake again (one reader lease, one listing page)."""
        if self.budget is None or step in PER_TABLE_STEPS:
            return
        counts, facts = outcome.counts, pricing.LakeFacts()
        expired, deleted = counts.get("snapshots_expired", 0), counts.get("files_deleted", 0)
        if step == "expire_snapshots":
            spent = pricing.expire(expired, EXPIRE_BATCH, facts)
        elif step == "cleanup_old_files":
            spent = pricing.cleanup(deleted, counts.get("bytes_deleted", 0))
        else:
            spent = pricing.orphans(deleted, 0, facts)
        self.budget.spend(spent, worked=expired + deleted > 0)

    def _estimate_total(self) -> None:
        """A dry run's estimate for the whole pass: its steps' (each in its
        plan entry), the pass's fixed costs, the total, and the prices."""
        assert self.planner is not None
        sweeps = self.scope.left_out_of_sweeps() is None
        fixed = self.planner.overhead(sweeps)
        total = fixed
        for estimate in self.planner.estimates.values():
            total = total + estimate
        self.report.estimate = {
            "prices": self.prices.to_dict(),
            "fixed": fixed.to_dict(self.prices),
            "total": total.to_dict(self.prices),
        }
