"""The fault matrix's lake: built once on moto, restored per case, and judged
by an oracle of what was acknowledged.

The base lake holds work for every operation the matrix faults: unfolded
slots (the fold), small adjacent Parquet files, deletes and inlined rows (the
pass steps), files scheduled for deletion and a stray file (cleanup and
orphans), a dropped index's entries (the sweep) and a sorted run in
``current`` (the store merge). Its contents at every snapshot are recorded as
digests (row count and a sum of row hashes, so a doubled or lost row shows),
and each case starts from a byte copy of it at the same keys, since the
catalog records its data path.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import boto3
import duckdb

import slatelake
from slatelake.catalog.folder import Folder
from slatelake.ducklake.session import Session
from slatelake.maintenance.runner import run_pass
from slatelake.store.census import CensusRequest, store_census
from slatelake.store.location import LakeLocation

TABLES = ("a", "b")
_HASHED = {"a": "hash(id, v)", "b": "hash(id)"}
Digest = tuple[int, int]  # (rows, sum of row hashes)
# The options of the pass every case ends with (RFC 0021: all six DuckLake steps).
RFC_OPTIONS = {
    "MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN": "1 second",
    "MAINTENANCE_FLUSH_INLINED_DATA": "true",
    "MAINTENANCE_MERGE_ADJACENT_FILES": "true",
    "MAINTENANCE_REWRITE_DATA_FILES_DELETE_THRESHOLD": "0.01",
    "MAINTENANCE_CLEANUP_OLD_FILES_CLEANUP_ALL": "true",
    "MAINTENANCE_DELETE_ORPHANED_FILES_CLEANUP_ALL": "true",
    "MAINTENANCE_ORPHAN_AGE_FLOOR_OVERRIDE": "true",
}


@dataclass(frozen=True)
class CaseRows:
    """Rows an operation adds (the commit's): ids ``lo`` to ``hi - 1`` in ``table``."""

    table: str
    lo: int
    hi: int

    def digest(self) -> Digest:
        row = duckdb.sql(
            f"SELECT count(*), coalesce(sum({_HASHED[self.table]}), 0)::HUGEINT "
            f"FROM (SELECT i::INTEGER AS id, 'case' AS v FROM range({self.lo}, {self.hi}) r(i))"
        ).fetchone()
        return int(row[0]), int(row[1])

    def sql(self) -> str:
        if self.table == "a":
            return f"INSERT INTO a SELECT i, 'case' FROM range({self.lo}, {self.hi}) r(i)"
        return f"INSERT INTO b SELECT i FROM range({self.lo}, {self.hi}) r(i)"


@dataclass
class BaseLake:
    """Where the base lake lives and what it held at each snapshot."""

    url: str
    data_path: str
    bucket: str
    pristine: str  # a bucket holding the base lake's objects at the same keys
    snapshots: dict[int, dict[str, Digest | None]] = field(default_factory=dict)
    final: dict[str, Digest] = field(default_factory=dict)


def digest(session: Session, table: str, version: int | None = None) -> Digest | None:
    at = f" AT (VERSION => {int(version)})" if version is not None else ""
    try:
        row = session.sql(
            f"SELECT count(*), coalesce(sum({_HASHED[table]}), 0)::HUGEINT FROM {table}{at}"
        ).fetchone()
    except duckdb.CatalogException:
        return None  # the table did not exist at that snapshot
    return int(row[0]), int(row[1])


def snapshot_ids(session: Session) -> list[int]:
    return [r[0] for r in session.sql("SELECT snapshot_id FROM lake.snapshots()").fetchall()]


def build_base(url: str, data_path: str) -> None:
    """The churn every operation finds work in (see the module docstring)."""
    with slatelake.connect(url, data_path=data_path) as s:
        s.sql("CREATE TABLE a (id INTEGER, v VARCHAR)")
        s.sql("CREATE TABLE b (id INTEGER)")
        s.sql("CREATE TABLE gone (id INTEGER)")
        s.sql("INSERT INTO gone SELECT * FROM range(40)")
        # Fold insert by insert until SlateDB's compactor (100 ms poll) has
        # written a sorted run for `current`: what a store merge takes.
        folder = Folder(LakeLocation.parse(url), margin_s=0)
        try:
            deadline = time.monotonic() + 60
            for i in range(100):
                s.sql(f"INSERT INTO a SELECT i, 'v' || i FROM range({i * 40}, {i * 40 + 40}) r(i)")
                folder.fold_once()
                if i >= 3:
                    time.sleep(0.3)
                    census = store_census(url, CensusRequest(list_objects=False))
                    if census.row("current").sorted_runs:
                        break
                assert time.monotonic() < deadline, "the base lake never got a sorted run"
            s.create_index("a", "id", name="by_id")
            s.drop_index("by_id")  # its entries are what the sweep reclaims
            folder.fold_once()
        finally:
            folder.close()
        s.sql("DROP TABLE gone")
        s.sql("DELETE FROM a WHERE id % 7 = 0")
    expire_only = {  # every snapshot so far: older than now, no window to wait out
        "MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN": datetime.now(UTC).strftime(
            "%Y-%m-%d %H:%M:%S.%f+00"
        ),
        "MAINTENANCE_SWEEP_INDEXES": "false",  # the dropped index stays for the sweep
    }
    with slatelake.connect(url, options=expire_only) as s:
        report = run_pass(s, s.options, wait_s=30)  # schedules the dropped table's files
        assert report.step("expire_snapshots").status == "ran", report.step("expire_snapshots")
        # Left unfolded: the fold's work, and history the retained snapshots read.
        for i in range(3):
            lo = 10_000 + i * 30
            s.sql(f"INSERT INTO a SELECT i, 'w' || i FROM range({lo}, {lo + 30}) r(i)")
        s.sql("INSERT INTO b VALUES (1), (2), (3)")  # inlined
        s.sql("INSERT INTO b SELECT * FROM range(10, 60)")
        s.sql("DELETE FROM a WHERE id BETWEEN 10000 AND 10010")
        s.sql("INSERT INTO b VALUES (4)")


def record(base: BaseLake) -> None:
    """Digests of every table at every snapshot the base lake retains."""
    with Session(base.url, read_only=True) as s:
        for sid in snapshot_ids(s):
            base.snapshots[sid] = {t: digest(s, t, sid) for t in TABLES}
        base.final = {t: digest(s, t) for t in TABLES}  # type: ignore[misc]


def stray_file(base: BaseLake) -> None:
    """A Parquet file no snapshot knows: what delete_orphaned_files removes."""
    bucket, _, prefix = base.data_path[len("s3://") :].partition("/")
    s3 = boto3.client("s3")
    s3.put_object(Bucket=bucket, Key=f"{prefix}main/a/stray-orphan.parquet", Body=b"PAR1")


def _listing(s3: Any, bucket: str) -> dict[str, str]:
    """key -> ETag of every object in ``bucket``."""
    found: dict[str, str] = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        found.update((o["Key"], o["ETag"]) for o in page.get("Contents", []))
    return found


def copy_bucket(source: str, target: str, endpoint: str) -> int:
    """Make ``target`` hold exactly ``source``'s objects: delete what is new,
    copy back what changed or went (server-side). Returns the objects touched."""
    s3 = boto3.client("s3", endpoint_url=endpoint)
    want, have = _listing(s3, source), _listing(s3, target)
    stale = [k for k in have if k not in want]
    for i in range(0, len(stale), 1000):
        chunk = [{"Key": k} for k in stale[i : i + 1000]]
        s3.delete_objects(Bucket=target, Delete={"Objects": chunk})
    changed = [k for k, etag in want.items() if have.get(k) != etag]
    for key in changed:
        s3.copy_object(Bucket=target, Key=key, CopySource={"Bucket": source, "Key": key})
    return len(stale) + len(changed)


def _plus(a: dict[str, Digest], rows: CaseRows) -> dict[str, Digest]:
    more = rows.digest()
    out = dict(a)
    out[rows.table] = (a[rows.table][0] + more[0], a[rows.table][1] + more[1])
    return out


def time_travel(session: Session, tables_at: dict[int, tuple[str, ...]]) -> dict[int, dict]:
    """Digests of ``tables_at[snapshot]`` at each snapshot, in one statement."""
    parts = [
        f"SELECT {int(sid)}, '{t}', count(*), coalesce(sum({_HASHED[t]}), 0)::HUGEINT "
        f"FROM {t} AT (VERSION => {int(sid)})"
        for sid, tables in tables_at.items()
        for t in tables
    ]
    out: dict[int, dict[str, Digest | None]] = {s: dict.fromkeys(TABLES) for s in tables_at}
    if parts:
        for sid, table, rows, hashed in session.sql(" UNION ALL ".join(parts)).fetchall():
            out[sid][table] = (int(rows), int(hashed))
    return out


def check_oracle(base: BaseLake, session: Session, rows: CaseRows | None, present: str) -> dict:
    """Check what a freshly opened lake holds against what was acknowledged.

    ``present``: the case's rows must be there exactly once (``once``), not at
    all (``absent``), or either (``either``: an ambiguous outcome). The base
    rows are always there exactly once; every retained snapshot reads in full
    (time travel), a base snapshot as recorded, a newer one as the base's
    final contents with or without the case's rows as allowed."""
    allowed = [base.final] if present in ("absent", "either") or rows is None else []
    if rows is not None and present in ("once", "either"):
        allowed.append(_plus(base.final, rows))
    now = {t: digest(session, t) for t in TABLES}
    assert now in allowed, f"lake holds {now}; acknowledged commits allow {allowed}"
    retained = snapshot_ids(session)
    assert retained, "no snapshot is retained"
    tables_at = {
        sid: tuple(t for t, d in base.snapshots[sid].items() if d is not None)
        if sid in base.snapshots
        else TABLES
        for sid in retained
    }
    for sid, got in time_travel(session, tables_at).items():
        want = [base.snapshots[sid]] if sid in base.snapshots else [base.final, now]
        assert got in want, f"snapshot {sid} reads {got}; expected one of {want}"
    return now


def check_lake(base: BaseLake, rows: CaseRows | None, present: str, fold: bool) -> None:
    """The end of every case, with the faults gone: (a fold completes, when
    asked,) the oracle holds on a fresh session, a pass with the RFC options
    completes on it, and the pass changes no row."""
    if fold:
        folder = Folder(LakeLocation.parse(base.url), margin_s=0)
        try:
            folder.fold_once()
        finally:
            folder.close()
    with slatelake.connect(base.url, options=RFC_OPTIONS) as s:
        contents = check_oracle(base, s, rows, present)
        report = run_pass(s, s.options, wait_s=1)  # a lease left held is a finding, not a wait
        failed = [(st.step, st.detail) for st in report.steps if st.status == "failed"]
        assert not failed and report.lease_lost is None, f"the pass after the fault: {failed}"
        after = {t: digest(s, t) for t in TABLES}
    assert after == contents, f"the pass changed the contents: {contents} -> {after}"
