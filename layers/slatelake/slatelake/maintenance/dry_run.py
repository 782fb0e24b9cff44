"""A dry run: the plan a pass would carry out, step by step, writing nothing.

Where DuckLake has a dry run of its own it is what answers: expiry (less
the snapshots retention holds keep, as the pass subtracts them), cleanup
and orphan deletion, each called with ``dry_run => true`` on a cursor of the
session's DuckDB (the session's write path would take the commit lock, a
slot, for any DuckLake call). The pinned extension has no dry run for flush,
merge or rewrite (``duckdb_functions()`` lists none), so those come from the
catalog: what each table's flush would write, counted as DuckLake's
``rows_flushed`` counts it (every inlined row, ended ones too; a table whose
only inlined change is deletions of file rows flushes them as a delete file
and is planned with zero rows: ``flush_rounding.waiting``); files whose
deleted share reaches the threshold (the call's, else the lake's, else
DuckLake's 0.95) from ``maintenance.health``; the files merge would
replace, by path, from one query making health's merge choice file by file
(small files without deletes, two or more sharing schema version and
partition; a test pins that the two agree). ``max_compacted_files`` caps are not modelled.

Cleanup in a real pass also deletes what the pass itself scheduled, when its
window reaches the moment it ran (``cleanup_all``, an ``older_than`` of zero
or a point in time from now on): what expiry frees (a file no longer live
with no snapshot left in its [begin, end) range once the planned snapshots
are gone, and the delete files of such a data file) and what merge replaced
(DuckLake's merge keeps time travel through the merged file, so it schedules
the files it replaced at once). The plan adds both. An ``older_than``
window counts from each call's now(), so a snapshot or file crossing it
between the dry run and the pass makes the two differ; a point in time does
not.

The file a flush writes joins merge's choice too: merge runs after flush, and
takes a table's flushed file with its other small ones (``flushed_first``;
cleanup then deletes it, ``flushed_then_merged``), though no path names it
yet.

Each planned step is priced (pricing.py's model, step_costs.py's reads):
``details["estimate"]`` holds its object-store requests by kind, bytes read
and written, files and bytes to delete, seconds and USD at the run's
prices; the runner adds the pass's fixed part and the total
(``PassReport.estimate``).

``plan`` (a ``DryRunPlan``): step -> ``PlannedStep`` (``total``, ``items``:
the first PLAN_LIMIT, ``truncated``, ``details``) with snapshot ids (expiry,
plus ``kept_by_holds``), file paths (cleanup, plus ``scheduled_by_expiry``
and ``scheduled_by_merge``; orphans) or per-table entries ({"table",
"rows", "deletions"}: flush; {"table", "files"}: rewrite; {"table", "files",
"paths"}: merge), the per-table steps with their sums (``rows`` and
``deletions``, ``files``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from slatelake.ducklake.attach_options import stored_data_path
from slatelake.ducklake.catalog_files import Resolver, path_resolver
from slatelake.ducklake.commit_flow import META_DB
from slatelake.ducklake.session import Session
from slatelake.ducklake.sql import ident, run
from slatelake.maintenance import flush_rounding
from slatelake.maintenance.delete_boundary import (
    DeleteBoundary,
    Verdicts,
    orphan_window,
    write_window,
)
from slatelake.maintenance.expiry_choice import choose, kept_words
from slatelake.maintenance.health import (
    TargetSizes,
    health,
    inlined_counts,
    table_targets_sql,
)
from slatelake.maintenance.health_report import HealthPolicy, TableHealth
from slatelake.maintenance.option_values import Instant, Interval, Value
from slatelake.maintenance.options import StepConfig
from slatelake.maintenance.prices import DEFAULT_PRICES, Prices
from slatelake.maintenance.pricing import Estimate, TableWork
from slatelake.maintenance.report import DryRunPlan, PlannedStep
from slatelake.maintenance.step_costs import Costs
from slatelake.maintenance.steps import StepOutcome, Steps, TableName

PLAN_LIMIT = 1000
# A file this pass's flush writes, in merge's groups before it exists.
FLUSHED = "(inlined rows, flushed by this pass first)"
# DuckLake's rewrite_delete_threshold when neither the call nor the lake sets
# one (the pinned extension's default).
DUCKLAKE_REWRITE_DELETE_THRESHOLD = 0.95


def bounded(items: list[Any], **extra: Any) -> PlannedStep:
    return PlannedStep(len(items), items[:PLAN_LIMIT], len(items) > PLAN_LIMIT, extra)


class Planner:
    """Plans each step of a dry run into ``plan``, in the pass's order (what
    expiry would expire is what cleanup's prediction needs)."""

    def __init__(
        self,
        session: Session,
        steps: Steps,
        plan: DryRunPlan,
        prices: Prices = DEFAULT_PRICES,
        per_table: bool = False,
    ) -> None:
        """``prices``: what each step's estimate is priced at; ``per_table``:
        whether merge and rewrite would call DuckLake per table (a commit each)."""
        self.session = session
        self.steps = steps
        self.plan = plan
        self.prices = prices
        self.costs = Costs(session, per_table)
        self.expiring: list[int] = []  # what expiry would expire
        self.merging: list[tuple[str, str]] = []  # (table, path) merge would replace
        # What the pass's flush writes (table -> rows), which its merge then
        # takes; and (table -> rows) those whose flushed file has a delete file
        # (inlined rows already deleted), which its rewrite takes instead.
        self.flushed: dict[TableName, int] = {}
        self.ended: dict[TableName, int] = {}
        # Per table: the sizes of the files merge would read and the files it writes.
        self._merge_work: dict[str, dict[str, Any]] = {}
        self._flushed_merged: list[int] = []  # sizes of flushed files merge would replace
        self.estimates: dict[str, Estimate] = {}  # step -> its estimate
        self.works: dict[str, list[TableWork]] = {}  # per-table step -> each table's share
        self._whole: dict[str, list[Any]] = {}  # step -> every entry (the plan keeps PLAN_LIMIT)
        self._con: Any = None
        self._health: dict[tuple[int | None, float], dict[TableName, TableHealth]] = {}

    def __call__(self, step: str, cfg: StepConfig) -> StepOutcome:
        """Plan ``step``, then price it (the estimate rides in its plan entry)."""
        if step == "expire_snapshots":
            outcome = self.expire(cfg)
        elif step == "flush_inlined_data":
            outcome = self.flush(cfg)
        elif step in ("merge_adjacent_files", "rewrite_data_files"):
            outcome = self.compact(step, cfg)
        else:
            outcome = self.cleanup(step, cfg)
        if step in self.plan:
            estimate = self._price(step)
            self.estimates[step] = estimate
            self.plan[step].details["estimate"] = estimate.to_dict(self.prices)
        return outcome

    def _flushed_sizes(self, item: dict[str, Any]) -> dict[str, Any]:
        """A rewrite entry with what sizes the flushed file it takes, if any."""
        if not item.get("flushed_first"):
            return item
        table = next(t for t in self.ended if _name(t) == item["table"])
        return {**item, "flushed_rows": self.flushed[table], "flushed_ended": self.ended[table]}

    def overhead(self, sweeps: bool) -> Estimate:
        """What the pass costs besides its steps (the open, leases, records)."""
        return self.costs.overhead(sweeps)

    def _price(self, step: str) -> Estimate:
        """``step``'s estimate from what was planned for it (pricing.py's model)."""
        planned = self.plan[step]
        whole = self._whole.get(step, planned.items)
        if step == "expire_snapshots":
            return self.costs.expire(len(self.expiring))
        if step == "flush_inlined_data":
            self.works[step] = self.costs.flush_tables(whole)
            return self.costs.flush(self.works[step])
        if step == "merge_adjacent_files":
            items = [{"table": t, **w} for t, w in self._merge_work.items()]
            self.works[step] = self.costs.merge_tables(items)
            return self.costs.compact(self.works[step])
        if step == "rewrite_data_files":
            sized = [self._flushed_sizes(i) for i in whole]
            self.works[step] = self.costs.rewrite_tables(sized)
            return self.costs.compact(self.works[step], guarded=True)
        if step == "delete_orphaned_files":
            return self.costs.orphans(whole)
        more = planned.details.get("flushed_then_merged", 0)
        return self.costs.cleanup(whole, more, sum(self._flushed_merged[:more]))

    def expire(self, cfg: StepConfig) -> StepOutcome:
        """What the pass would expire: the same choice (expiry_choice.py)."""
        self.session.refresh()
        args = {k: v for k, v in cfg.params.items() if k != "dry_run"}

        def candidates(given: dict[str, Value]) -> list[int]:
            rows = self.steps.dry_call("expire_snapshots", ("snapshot_id",), given)
            return [int(r[0]) for r in rows]

        choice = choose(self.session, args, candidates)
        self.expiring = choice.expire
        others = {"kept_by_pins": choice.kept_by_pins, "kept_by_thinning": choice.kept_by_thinning}
        self.plan["expire_snapshots"] = bounded(
            self.expiring,
            kept_by_holds=choice.kept_by_holds[:PLAN_LIMIT],
            **{k: v[:PLAN_LIMIT] for k, v in others.items() if v},
        )
        return _dry(f"would expire {len(self.expiring)} snapshots{kept_words(choice.counts())}")

    def flush(self, cfg: StepConfig) -> StepOutcome:
        """What each table's flush would write, counted as the pass counts
        it (``flush_rounding.waiting``): every inlined row, ended ones too,
        and the tables whose only inlined change is deletions of file rows."""
        waiting = flush_rounding.waiting(self.session, self.steps.only)
        kept = flush_rounding.rounded_by_flush(self.session, self.steps.only)
        items: list[dict[str, Any]] = [
            {"table": _name(t), "rows": waiting[t].rows, "deletions": waiting[t].deletions}
            for t in self.steps.tables_for("flush_inlined_data", set())
            if t in waiting and waiting[t].changes and t not in kept
        ]
        self.flushed = {
            t: waiting[t].rows
            for t in self.steps.tables_for("flush_inlined_data", set())
            if t in waiting and waiting[t].rows and t not in kept
        }
        ended = self.costs.ended_inlined() if self.flushed else {}
        self.ended = {t: ended[_name(t)] for t in self.flushed if _name(t) in ended}
        self._whole["flush_inlined_data"] = items
        rows = sum(i["rows"] for i in items)
        detail = f"would flush {rows} inlined rows from {len(items)} tables"
        deletions = sum(i["deletions"] for i in items)
        if deletions:
            detail += f" and {deletions} inlined deletions (as delete files)"
        extra: dict[str, Any] = {}
        if kept:
            extra["left_inlined"] = [_name(t) for t in sorted(kept)]
            detail += f"; would leave {', '.join(extra['left_inlined'])} inlined: "
            detail += flush_rounding.WHY
        self.plan["flush_inlined_data"] = bounded(items, rows=rows, deletions=deletions, **extra)
        return _dry(detail)

    def compact(self, step: str, cfg: StepConfig) -> StepOutcome:
        if step == "merge_adjacent_files":
            self.merging = self._merged_away(cfg)
            by_table: dict[str, list[str]] = {}
            for table, path in self.merging:
                by_table.setdefault(table, []).append(path)
            merged: list[dict[str, Any]] = []
            for t, work in sorted(self._merge_work.items()):
                paths = by_table.get(t, [])
                flushed = len(work["sizes"]) - len(paths)
                item: dict[str, Any] = {"table": t, "files": len(work["sizes"])}
                item["paths"] = paths[:PLAN_LIMIT]
                if flushed:
                    item["flushed_first"] = flushed
                merged.append(item)
            flushed_in = len(self._flushed_merged)
            files = len(self.merging) + flushed_in
            extra = {"flushed_first": flushed_in} if flushed_in else {}
            self.plan[step] = bounded(merged, files=files, **extra)
            also = f" ({flushed_in} of them written by this pass's flush)" if flushed_in else ""
            return _dry(f"would merge {files} files in {len(merged)} tables{also}")
        own = self.steps.per_table.get(step) or {}
        items: list[dict[str, Any]] = []
        for name in self.steps.tables_for(step, set()):
            mine = own.get(name, cfg)
            figures = self._figures(mine)
            found = figures[name].rewrite_files if name in figures else 0
            entry: dict[str, Any] = {"table": _name(name), "files": found}
            if name in self.ended and self._rewrites_flushed(name, mine):
                entry["files"] += 1  # the file this pass's flush writes, with its delete file
                entry["flushed_first"] = 1
            if entry["files"]:
                items.append(entry)
        files = sum(int(i["files"]) for i in items)
        self._whole[step] = items
        self.plan[step] = bounded(items, files=files)
        return _dry(f"would rewrite {files} files in {len(items)} tables")

    def _rewrites_flushed(self, table: TableName, cfg: StepConfig) -> bool:
        """Whether rewrite takes the file flush writes for ``table``: its
        inlined rows already deleted reach the step's threshold."""
        share = cfg.params.get("delete_threshold")
        threshold = _number(share) if share is not None else self._lake_threshold()
        return self.ended[table] >= threshold * self.flushed[table]

    def cleanup(self, step: str, cfg: StepConfig) -> StepOutcome:
        """DuckLake's dry run, through the delete boundary the pass applies
        (and, for orphans, the live writers' window), so the plan names what
        the pass would delete and counts what it would spare."""
        args = {k: v for k, v in cfg.params.items() if k != "dry_run"}
        boundary = self._boundary()
        if step == "delete_orphaned_files":
            lake = self.session.lake
            window = write_window(lake.location, lake.log.client, lake.lease.reader_id)
            listed = [
                {str(r[0]) for r in self.steps.dry_call(step, ("path",), asked)}
                for asked in orphan_window(args, window)
            ]
            found = self._judged(boundary, sorted(set.intersection(*listed)))
            self._whole[step] = found.allowed
            self.plan[step] = bounded(found.allowed, spared=found.spared_count)
            why = found.why_spared() + window.note()
            return _dry(f"would delete {len(found.allowed)} orphaned files{why}")
        paths = sorted({str(r[0]) for r in self.steps.dry_call(step, ("path",), args)})
        expired: list[str] = []
        merged: list[str] = []
        flushed_merged = 0
        if _reaches_now(args):
            expired = sorted(set(self._freed_by_expiry()) - set(paths)) if self.expiring else []
            merged = sorted({p for _, p in self.merging} - set(paths) - set(expired))
            flushed_merged = len(self._flushed_merged)
        now = self._judged(boundary, paths)
        later = self._judged(boundary, [*expired, *merged], named_ok=True)
        expired = [p for p in expired if p in set(later.allowed)]
        merged = [p for p in merged if p in set(later.allowed)]
        paths = sorted([*now.allowed, *expired, *merged])
        spared = now.spared_count + later.spared_count
        extra = {"flushed_then_merged": flushed_merged} if flushed_merged else {}
        self._whole[step] = paths
        self.plan[step] = bounded(
            paths,
            scheduled_by_expiry=len(expired),
            scheduled_by_merge=len(merged),
            spared=spared,
            **extra,
        )
        sources = ((len(expired), "expiry"), (len(merged), "merge"))
        also = [f"{n} of them scheduled by this pass's {w}" for n, w in sources if n]
        why = f"; {spared} spared by the delete boundary" if spared else ""
        return _dry(f"would delete {len(paths)} files" + "".join(f"; {a}" for a in also) + why)

    def _boundary(self) -> DeleteBoundary | None:
        path = stored_data_path(self.session.state)
        return None if path is None else DeleteBoundary(self.session, path)

    @staticmethod
    def _judged(
        boundary: DeleteBoundary | None, paths: list[str], named_ok: bool = False
    ) -> Verdicts:
        if boundary is None:
            return Verdicts(allowed=list(paths))
        return boundary.judge(paths, named_ok)

    # -- catalog reads -----------------------------------------------------------
    def _figures(self, cfg: StepConfig) -> dict[TableName, TableHealth]:
        """Each live table's health figures under a step's parameters (read
        once per distinct target size and threshold)."""
        size = cfg.params.get("max_file_size")
        share = cfg.params.get("delete_threshold")
        key = (
            None if size is None else int(_number(size)),
            _number(share) if share is not None else self._lake_threshold(),
        )
        if key not in self._health:
            policy = HealthPolicy(target_file_size=key[0], rewrite_delete_threshold=key[1])
            found = health(self.session, policy)
            self._health[key] = {(t.schema, t.table): t for t in found.tables}
        return self._health[key]

    def _lake_threshold(self) -> float:
        """The lake's own rewrite_delete_threshold (DuckLake's option), else its default."""
        row = (
            self._cursor()
            .execute(
                f"SELECT TRY_CAST(value AS DOUBLE) FROM {ident(META_DB)}.ducklake_metadata "
                "WHERE key = 'rewrite_delete_threshold' AND scope IS NULL"
            )
            .fetchone()
        )
        if row is None or row[0] is None:
            return DUCKLAKE_REWRITE_DELETE_THRESHOLD
        return min(1.0, max(0.0, float(row[0])))

    def _merged_away(self, cfg: StepConfig) -> list[tuple[str, str]]:
        """Paths of the files merge would replace: DuckLake's merge keeps time
        travel through the merged file, so it schedules what it replaced for
        deletion at once (and a cleanup reaching now deletes it in the pass)."""
        size = cfg.params.get("max_file_size")
        floor = cfg.params.get("min_file_size")
        tables = self.steps.tables_for("merge_adjacent_files", set())
        own = self.steps.per_table.get("merge_adjacent_files") or {}
        _, inlined_deletes = inlined_counts(self._cursor())
        sql = f"""
        WITH {table_targets_sql()}, parts AS (
            SELECT data_file_id, list(partition_value ORDER BY partition_key_index) AS vals
            FROM {ident(META_DB)}.ducklake_file_partition_value GROUP BY data_file_id
        ), files AS (
            SELECT tg.schema_name, tg.table_name, tg.target, d.*, p.vals,
                   (SELECT max(sv.schema_version) FROM {ident(META_DB)}.ducklake_schema_versions sv
                    WHERE sv.table_id = d.table_id AND sv.begin_snapshot <= d.begin_snapshot)
                       AS schema_version
            FROM {ident(META_DB)}.ducklake_data_file d
            JOIN targets tg ON tg.table_id = d.table_id
            LEFT JOIN parts p ON p.data_file_id = d.data_file_id
            WHERE d.end_snapshot IS NULL
              AND d.data_file_id NOT IN (
                  SELECT data_file_id FROM {ident(META_DB)}.ducklake_delete_file)
              AND NOT list_contains(CAST(? AS BIGINT[]), d.data_file_id)
        )
        SELECT schema_name, table_name, table_id, path, path_is_relative,
               target, file_size_bytes, schema_version, partition_id, vals
        FROM files
        """
        # no target above DuckLake's own: the policy's, when enabled, is the step's max_file_size
        rows = run(self._cursor(), sql, [*TargetSizes().params(), list(inlined_deletes)]).fetchall()
        groups: dict[tuple[Any, ...], list[tuple[str, int]]] = {}
        full = self._paths()
        for schema, table, tid, path, rel, target, nbytes, version, partition, vals in rows:
            path = full(tid, path, rel)
            mine = own.get((schema, table), cfg).params if own else cfg.params
            limit = mine.get("max_file_size", size) or target
            low = mine.get("min_file_size", floor) or 0
            if (schema, table) in tables and low <= nbytes < limit:
                key = (schema, table, version, partition, tuple(vals or ()))
                groups.setdefault(key, []).append((str(path), int(nbytes)))
        self._join_flushed(groups, tables)
        chosen = {k: files for k, files in groups.items() if len(files) >= 2}
        self._merge_work = {}
        self._flushed_merged = []
        for key, files in sorted(chosen.items(), key=lambda kv: str(kv[0])):
            work = self._merge_work.setdefault(f"{key[0]}.{key[1]}", {"sizes": [], "groups": 0})
            work["sizes"] += [n for _, n in files]
            work["groups"] += 1
            self._flushed_merged += [n for p, n in files if p == FLUSHED]
        return sorted(
            (f"{k[0]}.{k[1]}", p) for k, files in chosen.items() for p, _ in files if p != FLUSHED
        )

    def _join_flushed(
        self, groups: dict[tuple[Any, ...], list[tuple[str, int]]], tables: list[TableName]
    ) -> None:
        """The file this pass's flush writes for a table joins the table's
        newest unpartitioned group of small files (or nothing, when the
        table has none): merge runs after flush and takes it too."""
        for table, rows in self.flushed.items():
            if table not in tables or table in self.ended:  # with a delete file: not merged
                continue
            keys = [k for k in groups if k[:2] == table and k[3] is None]
            if keys:
                newest = max(keys, key=lambda k: k[2] or 0)
                size = self.costs.flushed_file_bytes(_name(table), rows)
                groups[newest].append((FLUSHED, size))

    def _paths(self) -> Resolver:
        return path_resolver(self._cursor())

    def _cursor(self) -> Any:
        """A connection of its own on the session's DuckDB (as health reads)."""
        if self._con is None:
            self._con = self.session.con.cursor()
        return self._con

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None

    def _freed_by_expiry(self) -> list[str]:
        """Paths of the files expiring ``self.expiring`` would schedule for
        deletion, spelled as DuckLake's cleanup spells them."""
        sql = f"""
        WITH kept AS (
            SELECT snapshot_id FROM {ident(META_DB)}.ducklake_snapshot
            WHERE NOT list_contains(CAST(? AS BIGINT[]), snapshot_id)
        ), data AS (
            SELECT data_file_id, table_id, path, path_is_relative
            FROM {ident(META_DB)}.ducklake_data_file d
            WHERE end_snapshot IS NOT NULL AND NOT EXISTS (
                SELECT 1 FROM kept k
                WHERE k.snapshot_id >= d.begin_snapshot AND k.snapshot_id < d.end_snapshot)
        ), dels AS (
            SELECT table_id, path, path_is_relative FROM {ident(META_DB)}.ducklake_delete_file d
            WHERE d.data_file_id IN (SELECT data_file_id FROM data)
               OR (d.end_snapshot IS NOT NULL AND NOT EXISTS (
                   SELECT 1 FROM kept k
                   WHERE k.snapshot_id >= d.begin_snapshot AND k.snapshot_id < d.end_snapshot))
        ), freed AS (
            SELECT table_id, path, path_is_relative FROM data
            UNION ALL SELECT * FROM dels
        )
        SELECT DISTINCT table_id, path, path_is_relative FROM freed
        """
        full = self._paths()
        rows = run(self._cursor(), sql, [self.expiring]).fetchall()
        return [full(*r) for r in rows]
        return [str(r[0]) for r in rows]


def _reaches_now(args: dict[str, Any]) -> bool:
    """Whether cleanup's window takes files scheduled during this very pass."""
    if args.get("cleanup_all") is True:
        return True
    older = args.get("older_than")
    if isinstance(older, Interval):
        return older.seconds == 0
    return isinstance(older, Instant) and _future(older)


def _future(instant: Instant) -> bool:
    try:
        return datetime.fromisoformat(instant.utc) >= datetime.now(UTC)
    except ValueError:  # a spelling Python does not read: assume it does not reach now
        return False


def _name(table: TableName) -> str:
    return f"{table[0]}.{table[1]}"


def _dry(detail: str) -> StepOutcome:
    return StepOutcome(f"{detail} (dry run)", dry_run=True)


def _number(value: Value) -> float:
    """A bound size or share (options bind them as numbers)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected a number, not {value!r}")
    return float(value)
