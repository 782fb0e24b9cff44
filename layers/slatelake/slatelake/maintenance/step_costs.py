"""The facts a pass's price depends on, read from the lake and its catalog,
and each planned step turned into an ``Estimate`` (pricing.py has the model).

A dry run prices what it planned; a pass with a budget prices each table's
share before it calls it. Both read the same facts here: the commit-log
tail an open replays (one LIST), the status window's size, the live reader
leases (one LIST), and from the catalog each table's column count and bytes
per row, the sizes of its files and of their delete files. Nothing here
writes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import duckdb

from slatelake.catalog import registry
from slatelake.catalog.state import SYS_FOLD, decode_fold
from slatelake.ducklake.catalog_files import path_resolver
from slatelake.ducklake.commit_flow import META_DB
from slatelake.ducklake.session import Session
from slatelake.ducklake.sql import ident
from slatelake.errors import SlatelakeError
from slatelake.log.images import ImageBook
from slatelake.log.leases import READERS_DIR
from slatelake.maintenance import pricing
from slatelake.maintenance import report as rpt
from slatelake.maintenance.pricing import Estimate, LakeFacts, TableWork
from slatelake.maintenance.steps import EXPIRE_BATCH

log = logging.getLogger("slatelake.maintenance")


@dataclass(frozen=True)
class TableShape:
    """One table's figures the Parquet work is sized from."""

    columns: int = 1
    row_bytes: float = 16.0  # live data bytes per row
    deleted_file_bytes: float = 0.0  # mean size of a live data file with deletes
    delete_file_bytes: float = 0.0  # mean size of a live delete file
    deleted_share: float = 0.0  # rows deleted in the live files with deletes


class Costs:
    """Prices the steps of one pass on ``session``'s lake (facts read once)."""

    def __init__(self, session: Session, per_table: bool) -> None:
        self.session = session
        # Whether merge and rewrite call DuckLake per table (a commit each) or
        # once for the lake (runner.py's choice: table batches, or a budget).
        self.per_table = per_table
        self._facts: LakeFacts | None = None
        self._shapes: dict[str, TableShape] | None = None
        self._sizes: dict[str, int] | None = None

    # -- the lake ---------------------------------------------------------------
    def facts(self, data_objects: int = 0) -> LakeFacts:
        """The log tail an open replays, the status window, the live leases."""
        if self._facts is None:
            self._facts = self._read_facts()
        if data_objects:
            return LakeFacts(**{**self._facts.__dict__, "data_objects": data_objects})
        return self._facts

    def _read_facts(self) -> LakeFacts:
        lake = self.session.lake
        try:
            cursor, _ = decode_fold(lake.reader().get(SYS_FOLD) or b"")
            image = None
            images = ImageBook(lake.location, lake.log.client).list()
            if images and images[0].seq >= cursor:
                image = images[0]
                cursor = image.seq
            tail = list(lake.log.list_after(cursor))
            readers = sum(1 for _ in lake.log.client.list(lake.location.path(READERS_DIR) + "/"))
            status = lake.read_sys(self.session.state, rpt.STATUS_KEY) or b""
        except (SlatelakeError, duckdb.Error) as exc:  # priced without them, said so
            log.warning("the pass's fixed costs are priced without the lake's facts: %s", exc)
            return LakeFacts()
        return LakeFacts(
            tail_slots=len(tail),
            tail_bytes=sum(s.size for s in tail),
            image_bytes=None if image is None else image.size,
            readers=max(1, readers),
            status_bytes=len(status),
            data_objects=self._catalog_objects(),
        )

    # -- the catalog ------------------------------------------------------------
    def _con(self) -> Any:
        return self.session.con.cursor()

    def _catalog_objects(self) -> int:
        """Data and delete files the catalog knows (live, historic or scheduled)."""
        sql = (
            f"SELECT (SELECT count(*) FROM {ident(META_DB)}.ducklake_data_file) + "
            f"(SELECT count(*) FROM {ident(META_DB)}.ducklake_delete_file) + "
            f"(SELECT count(*) FROM {ident(META_DB)}.ducklake_files_scheduled_for_deletion)"
        )
        con = self._con()
        try:
            return int(con.execute(sql).fetchone()[0])
        finally:
            con.close()

    def sizes(self) -> dict[str, int]:
        """Every data and delete file the catalog names, by path as cleanup
        spells it, with its recorded size."""
        if self._sizes is None:
            sql = f"""
            SELECT table_id, path, path_is_relative, file_size_bytes
            FROM {ident(META_DB)}.ducklake_data_file
            UNION ALL
            SELECT table_id, path, path_is_relative, file_size_bytes
            FROM {ident(META_DB)}.ducklake_delete_file
            """
            con = self._con()
            try:
                full = path_resolver(con)
                self._sizes = {
                    full(t, p, r): int(n or 0) for t, p, r, n in con.execute(sql).fetchall()
                }
            finally:
                con.close()
        return self._sizes

    def shapes(self) -> dict[str, TableShape]:
        """Each live table's columns, bytes per row, and file sizes with deletes."""
        if self._shapes is None:
            sql = f"""
            WITH live AS (
                SELECT s.schema_name || '.' || t.table_name AS name, t.table_id
                FROM {ident(META_DB)}.ducklake_table t
                JOIN {ident(META_DB)}.ducklake_schema s ON s.schema_id = t.schema_id
                WHERE t.end_snapshot IS NULL AND s.end_snapshot IS NULL
            ), cols AS (
                SELECT table_id, count(*) AS n FROM {ident(META_DB)}.ducklake_column
                WHERE end_snapshot IS NULL AND parent_column IS NULL GROUP BY table_id
            ), files AS (
                SELECT d.table_id, d.file_size_bytes, d.record_count,
                       del.file_size_bytes AS del_bytes, del.delete_count
                FROM {ident(META_DB)}.ducklake_data_file d
                LEFT JOIN {ident(META_DB)}.ducklake_delete_file del
                  ON del.data_file_id = d.data_file_id AND del.end_snapshot IS NULL
                WHERE d.end_snapshot IS NULL
            )
            SELECT l.name, coalesce(c.n, 1),
                   (SELECT sum(file_size_bytes) / greatest(sum(record_count), 1)
                    FROM files f WHERE f.table_id = l.table_id),
                   (SELECT avg(file_size_bytes) FROM files f
                    WHERE f.table_id = l.table_id AND f.del_bytes IS NOT NULL),
                   (SELECT avg(del_bytes) FROM files f
                    WHERE f.table_id = l.table_id AND f.del_bytes IS NOT NULL),
                   (SELECT sum(delete_count) / greatest(sum(record_count), 1) FROM files f
                    WHERE f.table_id = l.table_id AND f.del_bytes IS NOT NULL)
            FROM live l LEFT JOIN cols c ON c.table_id = l.table_id
            """
            con = self._con()
            try:
                rows = con.execute(sql).fetchall()
            finally:
                con.close()
            self._shapes = {
                str(name): TableShape(
                    int(cols),
                    float(per_row or 16.0),
                    float(data or 0.0),
                    float(dels or 0.0),
                    min(1.0, float(share or 0.0)),
                )
                for name, cols, per_row, data, dels, share in rows
            }
        return self._shapes

    def shape(self, table: str) -> TableShape:
        return self.shapes().get(table, TableShape())

    def ended_inlined(self) -> dict[str, int]:
        """Per live table (``schema.table``), its inlined rows already deleted:
        a flush writes them into its file with a delete file beside it, which
        leaves that file to rewrite, not merge."""
        parts = []
        for name in self.session.state.inline_names():
            table = registry.inline_table(name)
            if table is not None and table.row_kind == registry.INLINE_ROW_KIND:
                parts.append(
                    f"SELECT {int(table.ids[0])} AS id, count(*) AS n "
                    f"FROM {ident(META_DB)}.{ident(name)} WHERE end_snapshot IS NOT NULL"
                )
        if not parts:
            return {}
        ended = " UNION ALL ".join(parts)
        sql = f"""
        WITH ended AS ({ended})
        SELECT s.schema_name || '.' || t.table_name, sum(e.n)
        FROM ended e
        JOIN {ident(META_DB)}.ducklake_table t ON t.table_id = e.id AND t.end_snapshot IS NULL
        JOIN {ident(META_DB)}.ducklake_schema s
          ON s.schema_id = t.schema_id AND s.end_snapshot IS NULL
        GROUP BY 1 HAVING sum(e.n) > 0
        """
        con = self._con()
        try:
            return {str(name): int(n) for name, n in con.execute(sql).fetchall()}
        finally:
            con.close()

    # -- the steps --------------------------------------------------------------
    def overhead(self, sweeps: bool) -> Estimate:
        return pricing.overhead(self.facts(), sweeps)

    def expire(self, snapshots: int) -> Estimate:
        return pricing.expire(snapshots, EXPIRE_BATCH, self.facts())

    def flush_tables(self, items: list[dict[str, Any]]) -> list[TableWork]:
        """Each planned table's flush ({"table", "rows", "deletions"}; its
        inlined rows already deleted take a delete file too)."""
        works = []
        ended = self.ended_inlined() if items else {}
        for item in items:
            shape = self.shape(str(item["table"]))
            works.append(
                pricing.flush_table(
                    str(item["table"]),
                    int(item["rows"]),
                    int(item["deletions"]) + ended.get(str(item["table"]), 0),
                    shape.columns,
                    shape.row_bytes,
                )
            )
        return works

    def flushed_file_bytes(self, table: str, rows: int) -> int:
        """The size a flush of ``rows`` would give its file (what merge then reads)."""
        shape = self.shape(table)
        return pricing.parquet_bytes(shape.columns, rows, shape.row_bytes)

    def merge_tables(self, items: list[dict[str, Any]]) -> list[TableWork]:
        """Each planned table's merge ({"table", "sizes", "groups"})."""
        works = []
        for item in items:
            work = pricing.merge_table(str(item["table"]), list(item["sizes"]), int(item["groups"]))
            works.append(self._with_commit(work))
        return works

    def rewrite_tables(self, items: list[dict[str, Any]]) -> list[TableWork]:
        """Each planned table's rewrite ({"table", "files"}, and
        ``flushed_first``: a file this pass's flush writes with a delete
        file), sized from the table's files with deletes."""
        works = []
        for item in items:
            flushed = int(item.get("flushed_first", 0))
            files = int(item["files"]) - flushed
            shape = self.shape(str(item["table"]))
            data = int(files * shape.deleted_file_bytes)
            dels = int(files * shape.delete_file_bytes)
            if flushed:
                rows = int(item.get("flushed_rows", 0))
                data += self.flushed_file_bytes(str(item["table"]), rows)
                dels += pricing.parquet_bytes(2, int(item.get("flushed_ended", 0)), 8.0)
            share = shape.deleted_share if files else 0.0
            work = pricing.rewrite_table(str(item["table"]), files + flushed, data, dels, share)
            works.append(self._with_commit(work))
        return works

    def _with_commit(self, work: TableWork) -> TableWork:
        if not self.per_table:
            return work
        return TableWork(work.table, work.estimate + pricing.commit(pricing.COMMIT_BASE_BYTES))

    def compact(self, works: list[TableWork], guarded: bool = False) -> Estimate:
        """Merge or rewrite as a whole: the tables' work, the probe, the
        commits; ``guarded``: a rewrite, whose guard first looks at the log's
        tail twice (inlined deletions flushed first: rewrite_guard.py)."""
        est = pricing.heartbeat() + Estimate(put=1)  # the data path's PUT probe: empty
        if guarded:
            est.list += 2
        for work in works:
            est += work.estimate
        if works and not self.per_table:
            est += pricing.commit(pricing.COMMIT_BASE_BYTES)
        return pricing.stepped(est)

    def flush(self, works: list[TableWork]) -> Estimate:
        return pricing.flush_step(works)

    def cleanup(self, paths: list[str], more_files: int = 0, more_bytes: int = 0) -> Estimate:
        """Cleanup of ``paths`` (sized from the catalog), and ``more_files``
        the plan cannot name yet (files the pass's flush writes and its merge
        replaces)."""
        sizes = self.sizes()
        nbytes = sum(sizes.get(p, 0) for p in paths) + more_bytes
        return pricing.cleanup(len(paths) + more_files, nbytes)

    def orphans(self, paths: list[str]) -> Estimate:
        facts = self.facts()
        objects = facts.data_objects + len(paths)
        return pricing.orphans(len(paths), 0, self.facts(data_objects=objects))
