"""Lake health from the catalog alone: what maintenance would find, before it runs.

``health(lake)`` reads DuckLake's metadata tables (never a data file, never a
listing of the data path) and reports,
per live table, its data and delete files, small files, deleted rows and
inlined rows waiting for a flush; lake-wide, its snapshots, the bytes only
history keeps, the files already scheduled for deletion, and an estimate of
what a pass with ``HealthPolicy`` (the seed's defaults) would do. It writes
nothing, so a read-only session will do. The report's types are in
``health_report``.

The cost is at most four set-based queries whatever the number of tables:
one lists the inlined tables that exist, one counts them all (a UNION ALL),
one aggregates every table's files, one the lake-wide figures; a fifth
names the live schemas and tables when a schema or table policy row sets a
target file size. Names found in the catalog reach SQL only through
``ident``; values are bound.

Health must load the catalog: its figures are about every live file, so
every slot past the newest image (or the store's fold cursor) is replayed,
one GET each. Given a URL it loads no more than that: the committed catalog
as a session's open builds it (the newest usable image plus the tail after
it, else the store plus the tail; ``ducklake/opening.py``) in a plain DuckDB
connection, and queries it there. No DuckLake is attached, so neither
DuckLake's working copy of the catalog (a second copy) nor its extensions
are made or loaded. Given a session, it queries the session's own copy.

What the catalog cannot say is said, not guessed: DuckLake drops a file's
size when it schedules the file for deletion (expiry, or a delete file it
replaces), so scheduled files are counted and their bytes are None.

A file is small under its table's target file size: the ``HealthPolicy``'s
when it gives one, else the lake policy's ``target_file_size`` for the table
(``policy.target_file_sizes``, enabled or not, so a policy can be
previewed before it is switched on; the threshold trigger counts through
health), else DuckLake's own ``target_file_size`` option (table, then
schema, then lake scope), else its built-in default. The policy costs no
query unless a schema or table row sets a size (then one, for the names its
rows are bound to); a DuckDB ``SET ducklake_target_file_size`` on some other
connection is invisible here.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime

import duckdb

from slatelake.catalog import registry
from slatelake.catalog.holds import HOLDS_KEY, held_snapshots
from slatelake.catalog.lake import Lake
from slatelake.ducklake.commit_flow import META_DB
from slatelake.ducklake.duck_state import DuckState
from slatelake.ducklake.extensions import base_config, skip_absent_pandas_probe
from slatelake.ducklake.opening import open_base, work_dir
from slatelake.ducklake.session import Session
from slatelake.ducklake.sql import ident, run
from slatelake.ducklake.tables import meta_tables
from slatelake.errors import MisconfigurationError, NotFoundError
from slatelake.maintenance import policy as lake_policy
from slatelake.maintenance.health_report import (
    HealthPolicy,
    LakeHealth,
    ReclaimEstimate,
    TableHealth,
    ratio,
)
from slatelake.maintenance.holds import held
from slatelake.maintenance.policy_keys import LiveNames
from slatelake.store.db import store_exists
from slatelake.store.location import LakeLocation

# DuckLakeCatalog::DEFAULT_TARGET_FILE_SIZE (1 << 29 bytes, 512 MiB) in the
# pinned extension (ducklake d8a1881e, src/include/storage/ducklake_catalog.hpp).
DUCKLAKE_DEFAULT_TARGET_FILE_SIZE = 1 << 29
SCHEDULED_BYTES_NOTE = (
    "bytes of files scheduled for deletion are unknown: DuckLake drops a file's "
    "catalog row, and its size with it, when it schedules the file for deletion"
)


def health(
    lake: str | Session, policy: HealthPolicy | None = None, now: datetime | None = None
) -> LakeHealth:
    """The lake's health at its head. ``lake``: a URL (a read-only session is
    opened and closed; NotFoundError names a URL with no lake) or an open
    session, used as is (brought to the head first unless a transaction is
    open). ``now`` (timezone-aware; default the clock) dates the ages and
    the policy's windows. A damaged policy record raises CorruptionError, as
    it does for a pass: which files are small is not guessed."""
    policy = policy or HealthPolicy()
    if now is None:
        now = datetime.now(UTC)
    elif now.tzinfo is None or now.utcoffset() is None:
        raise MisconfigurationError(f"now={now!r}: expected a timezone-aware datetime")
    if isinstance(lake, Session):
        return _health(lake, policy, now)
    if not store_exists(LakeLocation.parse(lake)):
        raise NotFoundError(f"no slatelake lake at {lake}; check the URL")
    with _committed_catalog(lake) as catalog:
        held_ids = sorted(held_snapshots(catalog.lake.read_sys(catalog.state, HOLDS_KEY)))
        rows = lake_policy.decode_rows(catalog.lake.read_sys(catalog.state, lake_policy.POLICY_KEY))
        return _report(catalog.con, lake, held_ids, policy, now, rows)


def _cursor(session: Session) -> duckdb.DuckDBPyConnection:
    """A connection of its own on the session's DuckDB: the caller's pending
    result and transaction stay untouched."""
    return session.con.cursor()


@dataclass(frozen=True)
class _Catalog:
    """The committed catalog at the log's head in DuckDB, read-only, with
    the lake handle that read it."""

    lake: Lake
    con: duckdb.DuckDBPyConnection
    state: DuckState


@contextmanager
def _committed_catalog(url: str) -> Iterator[_Catalog]:
    """The catalog at the log's head as a session's open builds its base
    (``open_base``: the newest image and the tail after it, else the store),
    brought fully up to date, and nothing more: no DuckLake attached. The
    reader lease, the connection and the work directory go at the end."""
    workdir = work_dir()
    try:
        with Lake.open(url, read_only=True, seen=True) as lake:
            con = _connection()
            try:
                # named as DuckLake's copy is in a session, so one set of
                # queries reads either; nothing else is attached to this one
                state = open_base(lake, con, META_DB, workdir)
                if state.is_empty():  # as a read-only session refuses it
                    raise NotFoundError(
                        f"{url} has no DuckLake catalog yet; connect with a data path"
                    )
                state.settle()  # the tail's change sets, all in the tables read
                yield _Catalog(lake, con, state)
            finally:
                con.close()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _connection() -> duckdb.DuckDBPyConnection:
    """DuckDB with what a session's connection sets that reading the catalog
    needs (nothing autoloaded, its spill directory and memory limit), but no
    extension: health reads tables only, and the image, if any, is fetched
    by the object store client, so neither DuckLake nor httpfs is loaded
    (their signature checks cost a cold process about 0.1 s)."""
    skip_absent_pandas_probe()
    return duckdb.connect(config=base_config())


def _health(session: Session, policy: HealthPolicy, now: datetime) -> LakeHealth:
    if not session.in_transaction:
        session.refresh()
    rows = lake_policy.decode_rows(session.lake.read_sys(session.state, lake_policy.POLICY_KEY))
    con = _cursor(session)
    try:
        return _report(con, session.url, sorted(held(session)), policy, now, rows)
    finally:
        con.close()


def _report(
    con: duckdb.DuckDBPyConnection,
    url: str,
    held_ids: list[int],
    policy: HealthPolicy,
    now: datetime,
    policy_rows: list[lake_policy.PolicyRow],
) -> LakeHealth:
    """The report from the DuckLake tables in ``META_DB`` on ``con``, as of
    ``now``, with the lake's policy ``policy_rows`` as stored."""
    inlined_rows, inlined_deletes = inlined_counts(con)
    targets = TargetSizes(policy.target_file_size)
    if policy.target_file_size is None:
        targets = TargetSizes.of(policy_rows, lambda: live_names(con))
    tables = _tables(con, policy, targets, inlined_rows, inlined_deletes)
    lake_row = _lake(con, policy, now, held_ids)
    head, snapshots, oldest_epoch, expire, kept_by_holds, hist_files, hist_bytes = lake_row[:7]
    sched, sched_due, frees_files, frees_bytes = lake_row[7:]
    estimate = ReclaimEstimate(
        expire_snapshots=expire,
        expire_kept_by_holds=kept_by_holds,
        expire_frees_files=frees_files,
        expire_frees_bytes=frees_bytes,
        cleanup_files=sched_due,
        cleanup_bytes=0 if sched_due == 0 else None,
        flush_rows=sum(t.inlined_rows for t in tables),
        merge_candidate_files=sum(t.merge_candidate_files for t in tables),
        merge_threshold_tables=sum(1 for t in tables if t.merge_threshold_reached),
        rewrite_files=sum(t.rewrite_files for t in tables),
        rewrite_dead_bytes=sum(t.rewrite_dead_bytes for t in tables),
    )
    oldest = None if oldest_epoch is None else datetime.fromtimestamp(oldest_epoch, UTC)
    return LakeHealth(
        lake=url,
        generated_at=now.astimezone(UTC).isoformat(),
        head_snapshot=head,
        snapshots=snapshots,
        oldest_snapshot_at=None if oldest is None else oldest.isoformat(),
        oldest_snapshot_age_s=None if oldest is None else (now - oldest).total_seconds(),
        history_files=hist_files,
        history_bytes=hist_bytes,
        scheduled_files=sched,
        scheduled_bytes=0 if sched == 0 else None,
        policy=policy,
        estimate=estimate,
        tables=tuple(tables),
        notes=(SCHEDULED_BYTES_NOTE,) if sched else (),
    )


@dataclass(frozen=True)
class TargetSizes:
    """The target file sizes set above DuckLake's own option: ``every`` for
    all tables (a caller's ``HealthPolicy``, or a policy set on the lake
    only), else ``by_table`` (table id -> bytes, None for ``auto``: that
    table falls through to DuckLake's option)."""

    every: int | None = None
    by_table: dict[int, int | None] = field(default_factory=dict)

    @classmethod
    def of(cls, rows: list[lake_policy.PolicyRow], live: Callable[[], LiveNames]) -> TargetSizes:
        """What the lake's policy ``rows`` set (``policy.target_file_sizes``);
        ``live`` is asked only when a schema or table row makes tables differ."""
        every, by_table = lake_policy.target_file_sizes(rows, live)
        return cls(every, by_table)

    def params(self) -> list[object]:
        """The bound parameters of ``table_targets_sql``, in its order."""
        return [
            self.every,
            list(self.by_table),
            list(self.by_table.values()),
            DUCKLAKE_DEFAULT_TARGET_FILE_SIZE,
        ]


def live_names(con: duckdb.DuckDBPyConnection) -> LiveNames:
    """The live schemas and tables in ``META_DB`` on ``con``, by DuckLake id
    (what ``policy_keys.live_names`` reads from a session), in one query."""
    rows = run(
        con,
        f"""
        SELECT 0, schema_id, NULL, schema_name FROM {ident(META_DB)}.ducklake_schema
        WHERE end_snapshot IS NULL
        UNION ALL
        SELECT 1, table_id, schema_id, table_name FROM {ident(META_DB)}.ducklake_table
        WHERE end_snapshot IS NULL
        """,
    ).fetchall()
    return LiveNames(
        {int(i): str(n) for kind, i, _, n in rows if kind == 0},
        {int(i): (int(s), str(n)) for kind, i, s, n in rows if kind == 1},
    )


def table_targets_sql() -> str:
    """The CTEs ``live_tables``, ``opts``, ``policy_targets`` and ``targets``:
    every live table with its target file size, bound by
    ``TargetSizes.params()``: the size for every table unless NULL, else the
    table's own (table ids and sizes as two lists; a NULL size or a table
    not listed falls through), else DuckLake's ``target_file_size`` option
    (table > schema > lake), else DuckLake's default."""
    return f"""live_tables AS (
        SELECT t.table_id, t.schema_id, s.schema_name, t.table_name
        FROM {ident(META_DB)}.ducklake_table t
        JOIN {ident(META_DB)}.ducklake_schema s
          ON s.schema_id = t.schema_id AND s.end_snapshot IS NULL
        WHERE t.end_snapshot IS NULL
    ), opts AS (
        SELECT scope, scope_id, TRY_CAST(value AS BIGINT) AS v
        FROM {ident(META_DB)}.ducklake_metadata WHERE key = 'target_file_size'
    ), every_target AS (
        SELECT CAST(? AS BIGINT) AS v
    ), policy_targets AS (
        SELECT unnest(CAST(? AS BIGINT[])) AS table_id, unnest(CAST(? AS BIGINT[])) AS v
    ), targets AS (
        SELECT lt.*, COALESCE(
            (SELECT v FROM every_target),
            (SELECT max(v) FROM policy_targets WHERE table_id = lt.table_id),
            (SELECT max(v) FROM opts WHERE scope = 'table' AND scope_id = lt.table_id),
            (SELECT max(v) FROM opts WHERE scope = 'schema' AND scope_id = lt.schema_id),
            (SELECT max(v) FROM opts WHERE scope IS NULL),
            CAST(? AS BIGINT)) AS target
        FROM live_tables lt
    )"""


def inlined_counts(con: duckdb.DuckDBPyConnection) -> tuple[dict[int, int], dict[int, int]]:
    """Inlined rows waiting per table id, and inlined deletions per data file
    id: the inlined tables that exist, listed whole (``meta_tables``: the
    metadata database is hidden from DuckDB's listings), and of the data
    ones those ``ducklake_inlined_data_tables`` registers; one query counts
    them all."""
    registered = {
        str(name): int(tid)
        for tid, name in con.execute(
            f"SELECT table_id, table_name FROM {ident(META_DB)}.ducklake_inlined_data_tables"
        ).fetchall()
    }
    listed = [
        (inline.ids[0], inline.row_kind, inline.name)
        for inline in (registry.inline_table(n) for n in sorted(meta_tables(con, META_DB)))
        if inline is not None
    ]
    listed = [
        (registered[name] if kind == registry.INLINE_ROW_KIND else tid, kind, name)
        for tid, kind, name in listed
        if kind != registry.INLINE_ROW_KIND or name in registered
    ]
    parts = [
        f"SELECT 0 AS kind, {int(tid)} AS id, count(*) AS n "
        f"FROM {ident(META_DB)}.{ident(name)} WHERE end_snapshot IS NULL"
        for tid, kind, name in listed
        if kind == registry.INLINE_ROW_KIND
    ] + [
        f"SELECT 1 AS kind, file_id AS id, count(*) AS n "
        f"FROM {ident(META_DB)}.{ident(name)} GROUP BY file_id"
        for _, kind, name in listed
        if kind == registry.INLINE_DELETE_ROW_KIND
    ]
    rows: tuple[dict[int, int], dict[int, int]] = ({}, {})
    if parts:
        for kind, key, n in con.execute(" UNION ALL ".join(parts)).fetchall():
            rows[kind][int(key)] = rows[kind].get(int(key), 0) + int(n)
    return rows


def _tables(
    con: duckdb.DuckDBPyConnection,
    policy: HealthPolicy,
    targets: TargetSizes,
    inlined_rows: dict[int, int],
    inlined_deletes: dict[int, int],
) -> list[TableHealth]:
    """Every live table's figures in one query (the inlined counts bound as
    lists). Deleted rows of a data file are its live delete file's count plus
    its inlined deletions, as DuckLake's rewrite counts them; merge
    candidates mirror its merge's choice."""
    sql = f"""
    WITH {table_targets_sql()}, inl_rows AS (
        SELECT unnest(CAST(? AS BIGINT[])) AS table_id, unnest(CAST(? AS BIGINT[])) AS n
    ), inl_del AS (
        SELECT unnest(CAST(? AS BIGINT[])) AS file_id, unnest(CAST(? AS BIGINT[])) AS n
    ), live_del AS (
        SELECT data_file_id, count(*) AS files, sum(file_size_bytes) AS bytes,
               arg_max(delete_count, begin_snapshot) AS rows
        FROM {ident(META_DB)}.ducklake_delete_file WHERE end_snapshot IS NULL GROUP BY data_file_id
    ), any_del AS (
        SELECT DISTINCT data_file_id FROM {ident(META_DB)}.ducklake_delete_file
    ), parts AS (
        SELECT data_file_id, list(partition_value ORDER BY partition_key_index) AS vals
        FROM {ident(META_DB)}.ducklake_file_partition_value GROUP BY data_file_id
    ), files AS (
        SELECT d.table_id, d.data_file_id, d.record_count, d.file_size_bytes, d.partition_id,
               tg.target, p.vals,
               COALESCE(ld.files, 0) AS del_files, COALESCE(ld.bytes, 0) AS del_bytes,
               COALESCE(ld.rows, 0) + COALESCE(il.n, 0) AS deleted,
               ad.data_file_id IS NULL AND il.n IS NULL AS no_deletes,
               (SELECT max(sv.schema_version) FROM {ident(META_DB)}.ducklake_schema_versions sv
                WHERE sv.table_id = d.table_id AND sv.begin_snapshot <= d.begin_snapshot)
                   AS schema_version
        FROM {ident(META_DB)}.ducklake_data_file d
        JOIN targets tg ON tg.table_id = d.table_id
        LEFT JOIN live_del ld ON ld.data_file_id = d.data_file_id
        LEFT JOIN any_del ad ON ad.data_file_id = d.data_file_id
        LEFT JOIN inl_del il ON il.file_id = d.data_file_id
        LEFT JOIN parts p ON p.data_file_id = d.data_file_id
        WHERE d.end_snapshot IS NULL
    ), per_table AS (
        SELECT table_id, count(*) AS data_files, sum(file_size_bytes) AS data_bytes,
               sum(record_count) AS rows,
               count(*) FILTER (WHERE file_size_bytes < target) AS small_files,
               sum(del_files) AS delete_files, sum(del_bytes) AS delete_bytes,
               sum(deleted) AS deleted_rows,
               count(*) FILTER (WHERE rewrite) AS rewrite_files,
               sum(CAST(round(file_size_bytes * deleted / record_count) AS BIGINT) + del_bytes)
                   FILTER (WHERE rewrite) AS rewrite_dead_bytes
        FROM (SELECT *, deleted > 0 AND record_count > 0
                        AND deleted / record_count >= CAST(? AS DOUBLE) AS rewrite FROM files)
        GROUP BY table_id
    ), merge AS (
        SELECT table_id, sum(n) AS n FROM (
            SELECT table_id, count(*) AS n FROM files
            WHERE no_deletes AND file_size_bytes < target
            GROUP BY table_id, schema_version, partition_id, vals HAVING count(*) >= 2)
        GROUP BY table_id
    )
    SELECT tg.schema_name, tg.table_name, tg.table_id, tg.target,
           COALESCE(pt.data_files, 0), COALESCE(pt.data_bytes, 0), COALESCE(pt.rows, 0),
           COALESCE(pt.small_files, 0), COALESCE(pt.delete_files, 0),
           COALESCE(pt.delete_bytes, 0), COALESCE(pt.deleted_rows, 0),
           COALESCE(ir.n, 0), COALESCE(m.n, 0), COALESCE(pt.rewrite_files, 0),
           COALESCE(pt.rewrite_dead_bytes, 0)
    FROM targets tg
    LEFT JOIN per_table pt ON pt.table_id = tg.table_id
    LEFT JOIN inl_rows ir ON ir.table_id = tg.table_id
    LEFT JOIN merge m ON m.table_id = tg.table_id
    ORDER BY tg.schema_name, tg.table_name, tg.table_id
    """
    params = [
        *targets.params(),
        list(inlined_rows),
        list(inlined_rows.values()),
        list(inlined_deletes),
        list(inlined_deletes.values()),
        float(policy.rewrite_delete_threshold),
    ]
    out = []
    for schema, table, *figures in run(con, sql, params).fetchall():
        tid, target, files, nbytes, rows, small, *rest = (int(v) for v in figures)
        dfiles, dbytes, deleted, inlined, merge, rewrite, dead = rest
        out.append(
            TableHealth(
                schema=schema,
                table=table,
                table_id=tid,
                target_file_size=target,
                data_files=files,
                data_bytes=nbytes,
                rows=rows,
                small_files=small,
                avg_file_bytes=ratio(nbytes, files),
                delete_files=dfiles,
                delete_bytes=dbytes,
                deleted_rows=deleted,
                deleted_fraction=ratio(deleted, rows),
                inlined_rows=inlined,
                merge_candidate_files=merge,
                merge_threshold_reached=small >= policy.small_file_min_count,
                rewrite_files=rewrite,
                rewrite_dead_bytes=dead,
            )
        )
    return out


def _lake(
    con: duckdb.DuckDBPyConnection, policy: HealthPolicy, now: datetime, holds: list[int]
) -> tuple:
    """Snapshots, history, the deletion schedule and what expiry would free, in
    one query. A snapshot older than the retention is expired unless it is
    the head or held (``holds``); a non-live file is freed when no kept snapshot lies in its
    [begin, end) range (and a delete file with its data file), as DuckLake's
    expiry decides."""
    epoch = now.timestamp()
    sql = f"""
    WITH snaps AS (
        SELECT snapshot_id, epoch(snapshot_time) AS taken_s FROM {ident(META_DB)}.ducklake_snapshot
    ), head AS (
        SELECT max(snapshot_id) AS id FROM snaps
    ), held AS (
        SELECT unnest(CAST(? AS BIGINT[])) AS snapshot_id
    ), kept AS (
        SELECT snapshot_id FROM snaps
        WHERE taken_s >= ? OR snapshot_id = (SELECT id FROM head)
           OR snapshot_id IN (SELECT snapshot_id FROM held)
    ), live_data AS (
        SELECT data_file_id FROM {ident(META_DB)}.ducklake_data_file WHERE end_snapshot IS NULL
    ), old_data AS (
        SELECT data_file_id, file_size_bytes, begin_snapshot, end_snapshot
        FROM {ident(META_DB)}.ducklake_data_file WHERE end_snapshot IS NOT NULL
    ), old_del AS (
        SELECT delete_file_id, data_file_id, file_size_bytes, begin_snapshot, end_snapshot
        FROM {ident(META_DB)}.ducklake_delete_file df
        WHERE end_snapshot IS NOT NULL
           OR data_file_id NOT IN (SELECT data_file_id FROM live_data)
    ), freed_data AS (
        SELECT data_file_id, file_size_bytes FROM old_data o WHERE NOT EXISTS (
            SELECT 1 FROM kept k
            WHERE k.snapshot_id >= o.begin_snapshot AND k.snapshot_id < o.end_snapshot)
    ), freed_del AS (
        SELECT file_size_bytes FROM old_del o
        WHERE o.data_file_id IN (SELECT data_file_id FROM freed_data)
           OR (o.end_snapshot IS NOT NULL AND NOT EXISTS (
               SELECT 1 FROM kept k
               WHERE k.snapshot_id >= o.begin_snapshot AND k.snapshot_id < o.end_snapshot))
    ), candidates AS (
        SELECT snapshot_id FROM snaps WHERE taken_s < ? AND snapshot_id <> (SELECT id FROM head)
    ), expired AS (
        SELECT count(*) AS n FROM candidates
        WHERE snapshot_id NOT IN (SELECT snapshot_id FROM held)
    )
    SELECT (SELECT id FROM head), (SELECT count(*) FROM snaps), (SELECT min(taken_s) FROM snaps),
           (SELECT n FROM expired),
           (SELECT count(*) FROM candidates WHERE snapshot_id IN (SELECT snapshot_id FROM held)),
           (SELECT count(*) FROM old_data) + (SELECT count(*) FROM old_del),
           COALESCE((SELECT sum(file_size_bytes) FROM old_data), 0)
               + COALESCE((SELECT sum(file_size_bytes) FROM old_del), 0),
           (SELECT count(*) FROM {ident(META_DB)}.ducklake_files_scheduled_for_deletion),
           (SELECT count(*) FROM {ident(META_DB)}.ducklake_files_scheduled_for_deletion
            WHERE epoch(schedule_start) < ?),
           CASE WHEN (SELECT n FROM expired) = 0 THEN 0 ELSE
               (SELECT count(*) FROM freed_data) + (SELECT count(*) FROM freed_del) END,
           CASE WHEN (SELECT n FROM expired) = 0 THEN 0 ELSE
               COALESCE((SELECT sum(file_size_bytes) FROM freed_data), 0)
               + COALESCE((SELECT sum(file_size_bytes) FROM freed_del), 0) END
    """
    cutoff = epoch - policy.retention
    row = run(con, sql, [holds, cutoff, cutoff, epoch - policy.cleanup_grace]).fetchone()
    assert row is not None  # an aggregate has one row
    head, snaps, oldest, *counts = row
    return (
        None if head is None else int(head),
        int(snaps),
        None if oldest is None else float(oldest),
        *(int(c) for c in counts),
    )
