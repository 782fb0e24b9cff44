"""The six DuckLake steps, called (never reimplemented) through a session.

Each call commits through the log like any DuckLake transaction. Retry
policy: expire, flush, merge and rewrite rerun the whole call on a fresh
view after a recognized conflict, at most 3 attempts with 100 ms and 200 ms
waits (a stop request cuts the wait); cleanup and orphan deletion are never
retried; other errors are not retried. Expiry selects its snapshots with a
dry run, then expires at most 64 per transaction, oldest first, halving on
the operation-limit refusal. A dry run (expiry, cleanup, orphans) reports
what it would do, marked as such, and counts nothing as done.

A run may be scoped (``RunScope``): to some operations (the seed's names,
``OPERATIONS``) and to one table, under which the per-table steps (flush,
merge, rewrite) call only that table and the lake-wide ones do not run.

Options arrive typed (options.py parsed them at bind); every name and value
reaches SQL through ``ident``/``literal`` or as a rendered typed value. An
interval ``older_than`` is a TIMESTAMPTZ computed in UTC, so the window is
the same on every host whatever its time zone.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

import duckdb

from slatelake.ducklake.attach_options import stored_data_path
from slatelake.ducklake.guard import data_location
from slatelake.ducklake.indexes import translate_data_error
from slatelake.ducklake.request_log import FailedRequest
from slatelake.ducklake.session import Session
from slatelake.ducklake.sql import ident, literal
from slatelake.errors import (
    Backoff,
    ConflictError,
    HeldSnapshotError,
    MisconfigurationError,
    OperationLimitError,
    PermissionDeniedError,
    SlatelakeError,
    StepFailed,
    StoreError,
    StoreUnavailableError,
    retry,
)
from slatelake.maintenance import flush_rounding, fsck, reclaim
from slatelake.maintenance.delete_boundary import (
    KEPT_BY_PINS,
    DeleteBoundary,
    not_deleted,
    orphan_window,
    unschedule,
    write_window,
)
from slatelake.maintenance.expiry_choice import Keepers, choose, kept_words
from slatelake.maintenance.option_values import Instant, Interval, Value, Versions
from slatelake.maintenance.options import StepConfig
from slatelake.maintenance.rewrite_guard import LeftOut, RewriteGuard, TableName
from slatelake.store.location import LakeLocation
from slatelake.store.reachable import require_answers

T = TypeVar("T")
# A recognized conflict reruns the call: 3 attempts, waiting 100 ms then 200 ms.
RETRY_ATTEMPTS = 3
RETRY_BACKOFF = Backoff(first_s=0.1, factor=2.0, cap_s=0.2, jitter=0.0)
EXPIRE_BATCH = 64


@dataclass
class StepOutcome:
    detail: str
    pending: bool = False
    failed_tables: list[TableName] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    dry_run: bool = False  # the step only reported what it would do


def is_conflict(exc: BaseException) -> bool:
    """Ours by class (a session raises ours as DuckDB twins); DuckDB's own
    by its wording."""
    if isinstance(exc, SlatelakeError):
        return isinstance(exc, ConflictError)
    return isinstance(exc, duckdb.Error) and "conflict" in str(exc).lower()


class Steps:
    """``out_of_time`` names why work must stop now (shutdown, the invocation
    deadline) or returns None; it is checked between tables and batches so
    every finished table stays durable and the rest is left pending."""

    def __init__(
        self,
        session: Session,
        stop: threading.Event,
        log: Callable[[str], None],
        out_of_time: Callable[[], str | None] | None = None,
    ) -> None:
        self.session = session
        self.stop = stop
        self.log = log
        self.out_of_time = out_of_time or (lambda: "shutdown requested" if stop.is_set() else None)
        self.lake = session.alias
        # step -> table -> its own configuration (a lake policy that differs by table)
        self.per_table: dict[str, dict[TableName, StepConfig]] = {}
        # The one table a scoped run works on (None: every table).
        self.only: TableName | None = None
        # The tables one batch of a fanned-out pass works on (None: every
        # table): per-table calls only, never a lake-wide one.
        self.batch: frozenset[TableName] | None = None
        # Whether this pass flushes inlined data (a rewrite flushes first: rewrite_guard.py).
        self.may_flush = False
        # The data path's parsed location, kept for its object-store client.
        self._data_path: tuple[str, LakeLocation] | None = None
        # A pass's budget (runner.py): asked before each table of a per-table
        # step whether its estimated share fits; a reason stops the step there.
        self.admit: Callable[[str, TableName], str | None] | None = None

    # -- plumbing ------------------------------------------------------------
    @staticmethod
    def render(value: Value) -> str:
        """A bound option value as typed SQL. An interval older_than becomes a
        rolling window, now() less the interval, computed on UTC wall time and
        typed TIMESTAMPTZ: the host's zone never shifts it."""
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int):
            return f"CAST({literal(str(int(value)))} AS HUGEINT)"
        if isinstance(value, float):
            return f"CAST({literal(repr(float(value)))} AS DOUBLE)"
        if isinstance(value, Interval):
            window = f"CAST({literal(value.text)} AS INTERVAL)"
            return f"timezone('UTC', timezone('UTC', now()) - {window})"
        if isinstance(value, Instant):
            return f"CAST({literal(value.utc)} AS TIMESTAMPTZ)"
        if isinstance(value, Versions):
            return literal(value.text)  # the string spelling DuckLake casts itself
        raise TypeError(f"unbound option value {value!r}")

    def call(
        self,
        function: str,
        columns: tuple[str, ...],
        args: dict[str, Value],
        scope: TableName | None = None,
    ) -> list[tuple[Any, ...]]:
        sql = self.statement(function, columns, args, scope)
        return _rows(self.session.sql(sql, writes=True))

    def dry_call(
        self, function: str, columns: tuple[str, ...], args: dict[str, Value]
    ) -> list[tuple[Any, ...]]:
        """A DuckLake call with ``dry_run => true`` on a cursor of its own: the
        session's write path would take the commit lock (a slot) for any
        ``ducklake_`` call, and a dry run writes nothing."""
        sql = self.statement(function, columns, {**args, "dry_run": True})
        con = self.session.con.cursor()
        try:
            return con.execute(sql).fetchall()
        finally:
            con.close()

    def statement(
        self,
        function: str,
        columns: tuple[str, ...],
        args: dict[str, Value],
        scope: TableName | None = None,
    ) -> str:
        parts = [literal(self.lake)]
        if scope is not None and function in ("merge_adjacent_files", "rewrite_data_files"):
            parts += [literal(scope[1]), f"{ident('schema')} => {literal(scope[0])}"]
        elif scope is not None:
            parts.append(f"{ident('table_name')} => {literal(scope[1])}")
            parts.append(f"{ident('schema_name')} => {literal(scope[0])}")
        parts += [f"{ident(k)} => {self.render(v)}" for k, v in args.items()]
        select = ", ".join(ident(c) for c in columns)
        return f"SELECT {select} FROM {ident('ducklake_' + function)}({', '.join(parts)})"

    def with_retry(self, what: str, fn: Callable[[], T]) -> T:
        """``fn`` rerun on a conflict: ours (ConflictError) or DuckLake's own (a
        DuckDB error, which carries no ``retryable`` flag). A stop cuts the wait."""

        def say(attempt: int, _exc: BaseException, wait_s: float) -> None:
            self.log(f"{what}: conflict on attempt {attempt}, retrying in {wait_s * 1000:.0f} ms")

        return retry(
            fn,
            attempts=RETRY_ATTEMPTS,
            backoff=RETRY_BACKOFF,
            on=Exception,
            retry_if=is_conflict,
            between=say,
            wait=self.stop.wait,
        )

    def tables(self) -> list[TableName]:
        """The lake's live tables at the head, read from DuckLake's copy of
        the catalog: ``duckdb_tables()`` has DuckLake load every table's
        entry (45 ms a call at 40 tables), once per per-table step."""
        self.session.refresh()
        return self.session.live_tables()

    # -- the steps -------------------------------------------------------------
    def expire_snapshots(self, cfg: StepConfig) -> StepOutcome:
        """Expire what the options select less what thinning, retention holds
        and reader pins keep (expiry_choice.py), in explicit versions lists
        (DuckLake always keeps the newest snapshot itself)."""
        column = ("snapshot_id",)
        self.session.refresh()

        def candidates(args: dict[str, Value]) -> list[int]:
            # DuckLake's dry run writes nothing: on a cursor of its own, it
            # takes no commit lock (the session's write path would write a slot)
            return [r[0] for r in self.dry_call("expire_snapshots", column, args)]

        choice = choose(self.session, dict(cfg.params), candidates)
        kept = choice.counts()
        if cfg.params.get("dry_run") is True:
            return StepOutcome(
                f"would expire {len(choice.expire)} snapshots{kept_words(kept)} (dry run)",
                dry_run=True,
            )
        selected = choice.expire
        done = batches = races = 0
        size = EXPIRE_BATCH
        while done < len(selected):
            reason = self.out_of_time()
            if reason is not None:
                return StepOutcome(
                    f"expired {done} of {len(selected)} snapshots in {batches} "
                    f"batches{kept_words(kept)}; stopped: {reason}",
                    pending=True,
                    counts={"snapshots_expired": done, **kept},
                )
            batch = selected[done : done + size]
            versions: dict[str, Value] = {"versions": Versions(tuple(batch))}
            try:
                self.with_retry(
                    "expire_snapshots",
                    partial(self.call, "expire_snapshots", column, versions),
                )
            except HeldSnapshotError:
                # a hold or a pin landed after this pass read them: read them again
                races += 1
                if races >= RETRY_ATTEMPTS:
                    raise
                self.session.refresh()
                keepers = Keepers.read(self.session)
                rest = [i for i in selected[done:] if i not in keepers.held]
                kept["snapshots_kept_by_holds"] += len(selected) - done - len(rest)
                free = [i for i in rest if not keepers.pins(i)]
                kept["snapshots_kept_by_pins"] += len(rest) - len(free)
                selected = selected[:done] + free
                self.log("expire_snapshots: a hold or a reader pin landed meanwhile; re-selecting")
                continue
            except OperationLimitError as exc:
                if len(batch) == 1:
                    raise StepFailed(
                        f"snapshot {batch[0]} alone exceeds the change-set operation limit "
                        f"({exc.operations} > {exc.limit}); expired {done} of {len(selected)}"
                    ) from exc
                size = max(1, len(batch) // 2)
                self.log(
                    f"expire_snapshots: batch of {len(batch)} over the operation limit; "
                    f"halving to {size}"
                )
                continue
            done += len(batch)
            batches += 1
            self.log(
                f"expire_snapshots: batch {batches} expired {len(batch)} ({done}/{len(selected)})"
            )
        return StepOutcome(
            f"expired {done} snapshots in {batches} batches{kept_words(kept)}",
            counts={"snapshots_expired": done, **kept},
        )

    def flush_inlined_data(self, cfg: StepConfig, skip: set[TableName]) -> StepOutcome:
        """One call and commit per table. The commit removes the table's
        inlined rows by range deletes, one change-set operation per inlined
        table whatever its row count, so a flush never outgrows the cap."""
        flushed = 0
        failed: list[TableName] = []
        kept: list[TableName] = []
        tables = self.tables_for("flush_inlined_data", skip)
        for n, table in enumerate(tables):
            if (stopped := self._stopped("flush_inlined_data", n, tables)) is not None:
                return StepOutcome(
                    f"flushed {flushed} rows from {n} of {len(tables)} tables; {stopped}",
                    pending=True,
                    failed_tables=failed,
                    counts={"rows_flushed": flushed},
                )
            name = f"{table[0]}.{table[1]}"
            self.log(f"flush_inlined_data: {name}")
            try:
                rows = self.with_retry(f"flush {table[1]}", partial(self.flush_table, table))
            except Exception as exc:
                if not is_conflict(exc):
                    raise
                failed.append(table)
                self.log(f"flush_inlined_data: deferred {name} after 3 attempts")
                continue
            if rows is None:
                kept.append(table)
                self.log(f"flush_inlined_data: leaves {name} inlined: {flush_rounding.WHY}")
                continue
            flushed += sum(int(r[0]) for r in rows)
        detail = f"flushed {flushed} rows from {len(tables) - len(kept)} tables"
        if kept:
            listed = ", ".join(f"{s}.{t}" for s, t in kept)
            detail += f"; left {listed} inlined: {flush_rounding.WHY}"
        outcome = self._per_table_outcome(detail, failed)
        outcome.counts = {"rows_flushed": flushed}
        if kept:
            outcome.counts["tables_left_inlined"] = len(kept)
        return outcome

    def flush_table(self, table: TableName | None) -> list[tuple[Any, ...]] | None:
        """Flush one table's inlined rows (None: every table's), unless a flush
        would round a value (flush_rounding.py): then None, and nothing ran.
        Asked with the commit lock held on the head, so no such row can land
        between the question and the flush's commit."""
        sql = self.statement("flush_inlined_data", ("rows_flushed",), {}, table)
        result, why = self.session.run_maintenance_unless(
            sql, lambda: flush_rounding.reason(self.session, table)
        )
        if why is not None:
            return None
        return result.fetchall() if result is not None else []

    def compact(
        self, step: str, cfg: StepConfig, per_table: bool, skip: set[TableName]
    ) -> StepOutcome:
        args = dict(cfg.params)
        cols = ("files_processed", "files_created")
        capped = "max_compacted_files" in args
        self.data_path_answers(step, ("PUT",))  # its uploads take no deadline of ours
        own = self.per_table.get(step)
        guard = RewriteGuard(self, step, skip)
        if guard.left_out or not guard.lake_wide:
            per_table = True  # some tables are left out, or may not be flushed alike
        if self.batch is not None:
            guard.left_out &= self.batch  # another batch's tables are its own to report
        if not per_table and not own and self.only is None and self.batch is None:
            rows = self.with_retry(step, lambda: guard.call(cols, args, None))
            processed = sum(int(r[0]) for r in rows)
            created = sum(int(r[1]) for r in rows)
            return StepOutcome(
                f"processed {processed} files, created {created}{guard.said()}",
                pending=capped and processed > 0,
                counts={"files_processed": processed, "files_created": created},
            )
        processed = created = 0
        failed: list[TableName] = []
        tables = self.tables_for(step, skip | guard.left_out)
        for n, table in enumerate(tables):
            if (stopped := self._stopped(step, n, tables)) is not None:
                return StepOutcome(
                    f"processed {processed} files, created {created} across {n} of "
                    f"{len(tables)} tables; {stopped}",
                    pending=True,
                    failed_tables=failed,
                    counts={"files_processed": processed, "files_created": created},
                )
            self.log(f"{step}: {table[0]}.{table[1]}")
            try:
                mine = dict(own[table].params) if own else args
                capped = capped or "max_compacted_files" in mine
                rows = self.with_retry(
                    f"{step} {table[1]}",
                    partial(guard.call, cols, mine, table),
                )
            except LeftOut as why:
                guard.left_out.add(table)
                self.log(f"{step}: leaves out {table[0]}.{table[1]}: {why}")
                continue
            except Exception as exc:
                if not is_conflict(exc):
                    raise
                failed.append(table)
                self.log(f"{step}: deferred {table[0]}.{table[1]} after 3 attempts")
                continue
            processed += sum(int(r[0]) for r in rows)
            created += sum(int(r[1]) for r in rows)
        outcome = self._per_table_outcome(
            f"processed {processed} files, created {created} across {len(tables)} tables"
            f"{guard.said()}",
            failed,
        )
        outcome.pending = outcome.pending or (capped and processed > 0) or bool(guard.left_out)
        outcome.counts = {"files_processed": processed, "files_created": created}
        return outcome

    def cleanup(self, step: str, cfg: StepConfig) -> StepOutcome:
        """Cleanup or orphan deletion (never retried: external effects).
        DuckLake's dry run names the candidates (for orphans, with the window
        tightened to the oldest live writer's start); the delete boundary
        judges each; slatelake deletes what it allowed and, for cleanup,
        removes their rows from DuckLake's schedule. The files cleanup deletes
        are sized first (from the catalog's answer); orphans are not, as a
        second listing would double the step's cost."""
        params = dict(cfg.params)
        dry = params.pop("dry_run", None) is True
        orphans = step == "delete_orphaned_files"
        data_path = stored_data_path(self.session.state)
        if data_path is None:
            raise MisconfigurationError(f"{step}: the lake records no data path to delete from")
        if orphans and not dry and (refused := fsck.orphans_refused(self.session)) is not None:
            raise StepFailed(f"delete_orphaned_files refused: {refused}")
        if orphans:
            self.data_path_answers(step, ("HEAD",))  # it HEADs file after file, uncut
        lake = self.session.lake
        window = None
        if orphans:
            window = write_window(lake.location, lake.log.client, lake.lease.reader_id)
        with self.session.watch_requests() as watch:
            listed = [
                self._candidates(step, asked)
                for asked in (orphan_window(params, window) if window else [params])
            ]
        if failed := watch.failed():
            raise _unanswered(step, 0, failed)
        boundary = DeleteBoundary(self.session, data_path)
        verdicts = boundary.judge(sorted(set.intersection(*listed)))
        why = verdicts.why_spared() + (window.note() if window else "")
        if dry:
            return StepOutcome(
                f"would delete {len(verdicts.allowed)} files (dry run){why}", dry_run=True
            )
        sizes = None if orphans else self._sizes(step, verdicts.allowed)
        deleted = boundary.delete(verdicts.allowed)
        if not orphans and deleted.paths:
            unschedule(self.session, deleted.paths)
        counts = {
            "files_deleted": len(deleted.paths),
            "files_spared": verdicts.spared_count,
            "files_kept_by_pins": len(verdicts.spared.get(KEPT_BY_PINS, ())),
        }
        detail = f"deleted {len(deleted.paths)} files"
        if sizes is not None:
            counts["bytes_deleted"] = sum(sizes.get(p, 0) for p in deleted.paths)
            unsized = sum(1 for p in deleted.paths if p not in sizes)
            detail += f" ({counts['bytes_deleted']} bytes"
            detail += f"; {unsized} not sized)" if unsized else ")"
        if deleted.failed:
            raise not_deleted(step, len(deleted.paths), deleted.failed)
        return StepOutcome(detail + why, counts=counts)

    def _candidates(self, step: str, args: dict[str, Value]) -> set[str]:
        """What DuckLake's dry run of ``step`` names; a data-file request it
        could not make raises typed, as the step's own call would."""
        try:
            return {str(r[0]) for r in self.dry_call(step, ("path",), args)}
        except duckdb.IOException as exc:  # httpfs's HTTPException too
            raise translate_data_error(step, exc) or exc from None

    def _sizes(self, step: str, paths: list[str]) -> dict[str, int] | None:
        """The sizes of the files about to be deleted; None (bytes not
        counted) when they cannot be read."""
        try:
            return reclaim.file_sizes(self.session, paths)
        except duckdb.Error as exc:
            self.log(f"{step}: the files to delete were not sized ({exc})")
            return None

    def data_path_answers(self, step: str, ops: tuple[str, ...]) -> None:
        """Before a DuckLake call whose requests no deadline of ours bounds:
        the data path answers ``ops`` now, or the step fails typed without
        starting (store/reachable.py)."""
        path = stored_data_path(self.session.state)
        if path is None or not path.startswith("s3://"):
            return
        if self._data_path is None or self._data_path[0] != path:
            try:
                where = data_location(path)
            except MisconfigurationError as exc:  # DuckDB's spelling, not ours: no probe
                self.log(f"{step}: the data path is not asked first ({exc})")
                return
            self._data_path = (path, where)
        require_answers(self._data_path[1], ops, before=step)

    def tables_for(self, step: str, skip: set[TableName]) -> list[TableName]:
        """The tables a per-table step calls (the scoped one alone, if any),
        less the deferred ones and, under a policy that differs by table,
        those whose policy leaves it off."""
        own = self.per_table.get(step)
        everything = self.tables() if self.only is None else [self.only]
        if self.batch is not None:
            everything = [t for t in everything if t in self.batch]
        tables = [t for t in everything if t not in skip]
        if not own:
            return tables
        off = [t for t in tables if t in own and not own[t].enabled]
        if off:
            self.log(f"{step}: off by policy for {', '.join(f'{s}.{t}' for s, t in off)}")
        return [t for t in tables if t not in off]

    def _stopped(self, step: str, done: int, tables: list[TableName]) -> str | None:
        """Why the table loop stops before table ``done`` (None: go on): the
        deadline, a stop, or the pass's budget (which then counts the table)."""
        reason = self.out_of_time()
        if reason is None and self.admit is not None:
            reason = self.admit(step, tables[done])
        if reason is None:
            return None
        self.log(f"{step}: stopping after {done} of {len(tables)} tables: {reason}")
        return f"stopped: {reason}; the rest is left for the next pass"

    @staticmethod
    def _per_table_outcome(detail: str, failed: list[TableName]) -> StepOutcome:
        if not failed:
            return StepOutcome(detail)
        names = ", ".join(f"{s}.{t}" for s, t in failed)
        return StepOutcome(
            f"{detail}; deferred after 3 conflicts: {names}", pending=True, failed_tables=failed
        )


def _unanswered(step: str, deleted: int, failed: list[FailedRequest]) -> StoreError:
    """DuckLake went on past data-file requests that got no answer and would
    report success: the step fails naming them, typed as the store's errors are
    (all refusals: PermissionDeniedError; else StoreUnavailableError)."""
    cls = PermissionDeniedError if all(f.refused for f in failed) else StoreUnavailableError
    shown = "; ".join(str(f) for f in failed[:3])
    more = f"; and {len(failed) - 3} more" if len(failed) > 3 else ""
    return cls(
        f"{step} deleted {deleted} files, but {len(failed)} objects in the data path got no "
        f"answer ({shown}{more}): what it should have deleted among them is left for the "
        "next pass"
    )


def _rows(result: duckdb.DuckDBPyRelation | None) -> list[tuple[Any, ...]]:
    """A statement's rows (DuckDB answers a statement with no result with None)."""
    return [] if result is None else result.fetchall()
