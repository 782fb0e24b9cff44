"""The six DuckLake steps, called (never reimplemented) through a session.

Each call commits through the log like any DuckLake transaction. Retry
policy: expire, flush, merge and rewrite rerun the whole call on a fresh
view after a recognized conflict, at most 3 attempts with 100 ms and 200 ms
waits (a stop request cuts the wait); cleanup and orphan deletion are never
retried; other errors are not retried. Expiry selects its snapshots with a
dry run, then expires at most 64 per transaction, oldest first, halving on
the operation-limit refusal.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import duckdb

from slatelake.ducklake.session import Session
from slatelake.errors import ConflictError, OperationLimitError
from slatelake.maintenance.options import StepConfig

T = TypeVar("T")
RETRY_WAITS = (0.1, 0.2)
EXPIRE_BATCH = 64
TableName = tuple[str, str]  # (schema, table)


class StepFailed(Exception):
    """A step could not complete; ``pending`` says whether work remains."""

    def __init__(self, message: str, pending: bool = True) -> None:
        super().__init__(message)
        self.pending = pending


@dataclass
class StepOutcome:
    detail: str
    pending: bool = False
    failed_tables: list[TableName] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)


def is_conflict(exc: BaseException) -> bool:
    if isinstance(exc, ConflictError):
        return True
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

    # -- plumbing ------------------------------------------------------------
    def render(self, name: str, value: str) -> str:
        """A parameter as SQL; an interval older_than becomes a rolling window."""
        literal = "'" + str(value).replace("'", "''") + "'"
        if name == "older_than":
            is_interval = self.session.con.execute(
                "SELECT TRY_CAST(? AS INTERVAL) IS NOT NULL", [str(value)]
            ).fetchone()[0]
            if is_interval:
                return f"now()::TIMESTAMP - INTERVAL {literal}"
        return literal

    def call(
        self, function: str, columns: str, args: dict[str, str], scope: TableName | None = None
    ) -> list[tuple[Any, ...]]:
        parts = [f"'{self.lake}'"]
        if scope is not None and function in ("merge_adjacent_files", "rewrite_data_files"):
            parts.append("'" + scope[1].replace("'", "''") + "'")
            parts.append("schema => '" + scope[0].replace("'", "''") + "'")
        elif scope is not None:
            parts.append("table_name => '" + scope[1].replace("'", "''") + "'")
            parts.append("schema_name => '" + scope[0].replace("'", "''") + "'")
        parts += [f"{k} => {v}" for k, v in args.items()]
        sql = f"SELECT {columns} FROM ducklake_{function}({', '.join(parts)})"
        return self.session.sql(sql, writes=True).fetchall()

    def with_retry(self, what: str, fn: Callable[[], T]) -> T:
        for attempt in range(1, len(RETRY_WAITS) + 2):
            try:
                return fn()
            except Exception as exc:
                if not is_conflict(exc) or attempt > len(RETRY_WAITS):
                    raise
                wait = RETRY_WAITS[attempt - 1]
                self.log(f"{what}: conflict on attempt {attempt}, retrying in {wait * 1000:.0f} ms")
                if self.stop.wait(wait):
                    raise
        raise AssertionError("unreachable")

    def tables(self) -> list[TableName]:
        rows = self.session.sql(
            "SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = ? "
            "ORDER BY 1, 2",
            [self.lake],
        ).fetchall()
        return [(s, t) for s, t in rows]

    # -- the steps -------------------------------------------------------------
    def expire_snapshots(self, cfg: StepConfig) -> StepOutcome:
        args = {k: self.render(k, v) for k, v in cfg.params.items()}
        if "versions" in args or args.get("dry_run", "'false'").strip("'").lower() == "true":
            rows = self.with_retry(
                "expire_snapshots", lambda: self.call("expire_snapshots", "snapshot_id", args)
            )
            verb = "would expire" if "dry_run" in args else "expired"
            return StepOutcome(
                f"{verb} {len(rows)} snapshots",
                counts={} if "dry_run" in args else {"snapshots_expired": len(rows)},
            )
        selected = sorted(
            r[0] for r in self.call("expire_snapshots", "snapshot_id", {**args, "dry_run": "true"})
        )
        done = batches = 0
        size = EXPIRE_BATCH
        while done < len(selected):
            reason = self.out_of_time()
            if reason is not None:
                return StepOutcome(
                    f"expired {done} of {len(selected)} snapshots in {batches} "
                    f"batches; stopped: {reason}",
                    pending=True,
                    counts={"snapshots_expired": done},
                )
            batch = selected[done : done + size]
            versions = "'[" + ",".join(str(v) for v in batch) + "]'"
            try:
                self.with_retry(
                    "expire_snapshots",
                    lambda v=versions: self.call(
                        "expire_snapshots", "snapshot_id", {"versions": v}
                    ),
                )
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
            f"expired {done} snapshots in {batches} batches", counts={"snapshots_expired": done}
        )

    def flush_inlined_data(self, cfg: StepConfig, skip: set[TableName]) -> StepOutcome:
        flushed, failed = 0, []
        tables = [t for t in self.tables() if t not in skip]
        for n, table in enumerate(tables):
            if (stopped := self._stopped("flush_inlined_data", n, tables)) is not None:
                return StepOutcome(
                    f"flushed {flushed} rows from {n} of {len(tables)} tables; {stopped}",
                    pending=True,
                    failed_tables=failed,
                    counts={"rows_flushed": flushed},
                )
            self.log(f"flush_inlined_data: {table[0]}.{table[1]}")
            try:
                rows = self.with_retry(
                    f"flush {table[1]}",
                    lambda t=table: self.call("flush_inlined_data", "rows_flushed", {}, scope=t),
                )
                flushed += sum(int(r[0]) for r in rows)
            except Exception as exc:
                if not is_conflict(exc):
                    raise
                failed.append(table)
                self.log(f"flush_inlined_data: deferred {table[0]}.{table[1]} after 3 attempts")
        outcome = self._per_table_outcome(
            f"flushed {flushed} rows from {len(tables)} tables", failed
        )
        outcome.counts = {"rows_flushed": flushed}
        return outcome

    def compact(
        self, step: str, cfg: StepConfig, per_table: bool, skip: set[TableName]
    ) -> StepOutcome:
        args = {k: self.render(k, v) for k, v in cfg.params.items()}
        cols = "files_processed, files_created"
        capped = "max_compacted_files" in args
        if not per_table:
            rows = self.with_retry(step, lambda: self.call(step, cols, args))
            processed = sum(int(r[0]) for r in rows)
            created = sum(int(r[1]) for r in rows)
            return StepOutcome(
                f"processed {processed} files, created {created}",
                pending=capped and processed > 0,
                counts={"files_processed": processed, "files_created": created},
            )
        processed = created = 0
        failed: list[TableName] = []
        tables = [t for t in self.tables() if t not in skip]
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
                rows = self.with_retry(
                    f"{step} {table[1]}", lambda t=table: self.call(step, cols, args, scope=t)
                )
            except Exception as exc:
                if not is_conflict(exc):
                    raise
                failed.append(table)
                self.log(f"{step}: deferred {table[0]}.{table[1]} after 3 attempts")
                continue
            processed += sum(int(r[0]) for r in rows)
            created += sum(int(r[1]) for r in rows)
        outcome = self._per_table_outcome(
            f"processed {processed} files, created {created} across {len(tables)} tables", failed
        )
        outcome.pending = outcome.pending or (capped and processed > 0)
        outcome.counts = {"files_processed": processed, "files_created": created}
        return outcome

    def cleanup(self, step: str, cfg: StepConfig) -> StepOutcome:
        args = {k: self.render(k, v) for k, v in cfg.params.items()}
        rows = self.call(step, "path", args)  # external effects: never retried
        dry = args.get("dry_run", "").strip("'").lower() == "true"
        verb = "would delete" if dry else "deleted"
        return StepOutcome(
            f"{verb} {len(rows)} files", counts={} if dry else {"files_deleted": len(rows)}
        )

    def _stopped(self, step: str, done: int, tables: list[TableName]) -> str | None:
        """Why the table loop stops before table ``done`` (None: go on)."""
        reason = self.out_of_time()
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
