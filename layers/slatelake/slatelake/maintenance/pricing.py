"""What a pass costs: the object-store requests and bytes it makes, priced.

A dry run prices each step it plans, and a pass with a budget
(``MAINTENANCE_BUDGET_BYTES``, ``MAINTENANCE_BUDGET_REQUESTS``) keeps the same
running estimate to stop between tables: both use this one model, so the
budget a pass spends is the figure its dry run printed.

Why a model and not a meter: the requests a pass makes go through three
clients (SlateDB's object store, obstore, DuckDB's httpfs), two of them
outside Python, and a dry run must say what a pass would make before any is
made. The model follows what the pass does, request by request, as measured
on S3 (moto, through a counting proxy: tests/faults/counting.py) on a churned
40-table lake:

- opening the lake: one GET per commit-log slot past the fold cursor (or past
  the newest image, plus one GET of the image), a few LISTs and GETs of the
  store, the log and the images;
- the pass's lease, reader lease and run record at the start, the status
  record, releases and sweeps' reads at the end; a heartbeat per step (a
  LIST, a PUT of the next lease generation, a DELETE of the last);
- every DuckLake commit the pass makes: a LIST of the log and a PUT of the
  change set's slot, sized from what the commit changes (snapshots expired,
  files replaced and created); a pass alone on the lake takes no commit lock
  (statement_flow.py), and one that meets another writer adds a PUT of the
  lock's slot per commit while it is contended, which is not priced;
- the Parquet work: a flush PUTs a file per table; merge and rewrite GET
  each file they read (footer, then columns: two ranged GETs a file, four
  with a delete file) and PUT each file they write;
- cleanup HEADs (priced as GETs) then DELETEs each file; orphan deletion
  LISTs the data path (1,000 keys a page) and DELETEs what it finds;
- the pass's length: SlateDB's reader polls the store's manifest each second
  and the pass lease beats every 5 s, so each step adds the polls and beats
  its estimated seconds (in-region S3 latencies, below) bring.

The sizes of change-set slots and of new Parquet files are estimates
(constants below, fitted on the measured lake); counts of requests follow
the plan exactly wherever the plan knows the work.

The price table is prices.py's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

from slatelake.maintenance.prices import KINDS, Prices


@dataclass
class Estimate:
    """Requests by kind, bytes moved (GET bodies read, PUT bodies written),
    files and bytes deleted, and seconds of work (for the Lambda's GB-seconds)."""

    list: int = 0
    get: int = 0
    put: int = 0
    delete: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    files_to_delete: int = 0
    bytes_to_delete: int = 0
    seconds: float = 0.0

    def __add__(self, other: Estimate) -> Estimate:
        return Estimate(
            **{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)}
        )

    @property
    def requests(self) -> int:
        return self.list + self.get + self.put + self.delete

    @property
    def bytes_moved(self) -> int:
        """What a byte budget counts: bytes read and written."""
        return self.bytes_read + self.bytes_written

    def usd(self, prices: Prices) -> float:
        per = {
            "list": prices.list_per_1000,
            "get": prices.get_per_1000,
            "put": prices.put_per_1000,
            "delete": prices.delete_per_1000,
        }
        requests = sum(getattr(self, k) * v / 1000 for k, v in per.items())
        compute = self.seconds * prices.lambda_memory_mb / 1024 * prices.lambda_gb_second
        return requests + compute

    def to_dict(self, prices: Prices) -> dict[str, Any]:
        return {
            "requests": {kind: getattr(self, kind.lower()) for kind in KINDS},
            "bytes_read": self.bytes_read,
            "bytes_written": self.bytes_written,
            "files_to_delete": self.files_to_delete,
            "bytes_to_delete": self.bytes_to_delete,
            "seconds": round(self.seconds, 3),
            "usd": round(self.usd(prices), 8),
        }


# -- the model's constants (bytes as measured on the 40-table churn lake) -----
LOCK_SLOT_BYTES = 250  # the commit lock's slot
LEASE_BYTES = 240  # one pass-lease generation
COMMIT_BASE_BYTES = 400  # a change set's slot with no rows in it
EXPIRE_BASE_BYTES = 1200  # an expiry batch's change set, plus per snapshot:
EXPIRE_SNAPSHOT_BYTES = 8
FLUSH_COMMIT_BYTES = 330  # a flush's change set, plus per column (statistics rows):
FLUSH_COLUMN_BYTES = 125
MERGE_INPUT_BYTES = 130  # a merge's change set per file replaced, per file created:
MERGE_OUTPUT_BYTES = 185
REWRITE_INPUT_BYTES = 250  # a rewrite's per file read, per file written:
REWRITE_OUTPUT_BYTES = 300
UNSCHEDULE_PATH_BYTES = 18  # cleanup's commit, per path taken off the schedule
PARQUET_BASE_BYTES = 250  # a small Parquet file's magic and footer, plus per column:
PARQUET_COLUMN_BYTES = 200
# Ranged reads take a file's footer twice (its length, then the footer with
# the columns): a file read costs about this much more than its size.
PARQUET_READ_FACTOR = 1.1
# A merged file keeps time travel (row ids, snapshot ids): bytes per input file.
MERGE_KEPT_BYTES = 73
START_SLOT_BYTES = 600  # the run record written `running`
END_SLOT_BYTES = 4400  # the status record and run history of one pass, plus the window
# Two GETs (footer, then columns) per Parquet file read; a delete file doubles it.
GETS_PER_FILE = 2
# A listing page.
LIST_PAGE = 1000
# Seconds per request and per byte, for the Lambda's GB-seconds (loopback-free S3 in-region).
SECONDS_PER_REQUEST = 0.02
SECONDS_PER_BYTE = 1 / 50e6


# While the pass's session lives, SlateDB's reader polls the store's manifest
# every second (two GETs), and the pass lease beats every 5 s (a LIST, a PUT,
# a DELETE): requests that follow the pass's length, not its work.
MANIFEST_POLL_S = 1.0
MANIFEST_POLL_BYTES = 700
LEASE_BEAT_S = 5.0


def timed(est: Estimate) -> Estimate:
    """``est`` with its seconds of work filled in from its requests and bytes."""
    est.seconds = est.requests * SECONDS_PER_REQUEST + est.bytes_moved * SECONDS_PER_BYTE
    return est


def stepped(est: Estimate) -> Estimate:
    """A whole step (or the pass's fixed part): its seconds, and the store's
    manifest polls and lease beats that many seconds bring."""
    est = timed(est)
    polls = int(est.seconds / MANIFEST_POLL_S)
    beats = int(est.seconds / LEASE_BEAT_S)
    more = Estimate(
        list=beats,
        get=2 * polls,
        put=beats,
        delete=beats,
        bytes_read=MANIFEST_POLL_BYTES * polls,
        bytes_written=LEASE_BYTES * beats,
    )
    return timed(est + more)


@dataclass(frozen=True)
class LakeFacts:
    """What the pass's fixed costs depend on, read by the dry run."""

    tail_slots: int = 0  # commit-log slots an open replays
    tail_bytes: int = 0
    image_bytes: int | None = None  # the newest image an open starts from (None: the store)
    readers: int = 1  # live reader leases (the pass's own included)
    status_bytes: int = 0  # the status window's stored size
    data_objects: int = 0  # objects under the data path (orphan deletion lists them)


def commit(change_bytes: int, lock: bool = False) -> Estimate:
    """One DuckLake commit through the log: a LIST of the log's tail and the
    change set's slot (``lock``: the commit lock's slot before it)."""
    puts = 2 if lock else 1
    written = change_bytes + (LOCK_SLOT_BYTES if lock else 0)
    return Estimate(list=1, put=puts, bytes_written=written)


def heartbeat() -> Estimate:
    """A step's start: the lease beats (a LIST, the next generation, the last one deleted)."""
    return Estimate(list=1, put=1, delete=1, bytes_written=LEASE_BYTES)


def overhead(facts: LakeFacts, sweeps: bool) -> Estimate:
    """Opening the lake, the leases and run record, and the pass's end."""
    opening = Estimate(list=10, get=11 + facts.tail_slots, bytes_read=facts.tail_bytes + 3600)
    if facts.image_bytes is not None:
        opening.get += 1
        opening.bytes_read += facts.image_bytes
    start = Estimate(put=4, bytes_written=START_SLOT_BYTES + LEASE_BYTES + 100)
    end = Estimate(
        list=8,
        get=1,
        put=4,
        delete=4,
        bytes_read=250,
        bytes_written=END_SLOT_BYTES + facts.status_bytes + 3 * LEASE_BYTES,
    )
    if not sweeps:
        end.list -= 3
    return stepped(opening + start + end)


def expire(snapshots: int, batch: int, facts: LakeFacts) -> Estimate:
    """Batches of ``batch`` snapshots, each a commit; before each and after
    the last, the reader leases are read (pins)."""
    batches = math.ceil(snapshots / batch) if snapshots else 0
    est = heartbeat() + Estimate(list=1)
    for n in range(batches):
        size = min(batch, snapshots - n * batch)
        est += commit(EXPIRE_BASE_BYTES + EXPIRE_SNAPSHOT_BYTES * size)
    reads = batches + 1
    est += Estimate(list=reads, get=reads * facts.readers, bytes_read=reads * facts.readers * 80)
    return stepped(est)


@dataclass(frozen=True)
class TableWork:
    """One table's share of a per-table step: what its call reads, writes and commits."""

    table: str
    estimate: Estimate = field(default_factory=Estimate)


def parquet_bytes(columns: int, rows: int, row_bytes: float) -> int:
    """The size of a small Parquet file DuckLake writes."""
    return PARQUET_BASE_BYTES + PARQUET_COLUMN_BYTES * max(1, columns) + int(rows * row_bytes)


def flush_table(table: str, rows: int, deletions: int, columns: int, row_bytes: float) -> TableWork:
    """A flush of one table: a Parquet file of its inlined rows, a delete
    file (two columns) of its inlined deletions, and its commit."""
    est = commit(FLUSH_COMMIT_BYTES + FLUSH_COLUMN_BYTES * max(1, columns))
    if rows:
        est += Estimate(put=1, bytes_written=parquet_bytes(columns, rows, row_bytes))
    if deletions:
        est += Estimate(put=1, bytes_written=parquet_bytes(2, deletions, 8.0))
    return TableWork(table, timed(est))


def merge_table(table: str, inputs: list[int], groups: int) -> TableWork:
    """Merging ``inputs`` (their sizes) into ``groups`` files: each read, each
    output written (the inputs' bytes, and the row and snapshot ids that keep
    time travel through the merged file)."""
    read = sum(inputs)
    written = read + MERGE_KEPT_BYTES * len(inputs)
    est = Estimate(
        get=GETS_PER_FILE * len(inputs),
        bytes_read=int(read * PARQUET_READ_FACTOR),
        put=groups,
        bytes_written=written + MERGE_INPUT_BYTES * len(inputs) + MERGE_OUTPUT_BYTES * groups,
    )
    return TableWork(table, timed(est))


def rewrite_table(
    table: str, files: int, data_bytes: int, delete_bytes: int, deleted_share: float
) -> TableWork:
    """Rewriting ``files`` with deletes: each file and its delete file read,
    one file written for the table of the rows that survive."""
    live = max(PARQUET_BASE_BYTES, int(data_bytes * (1.0 - deleted_share)))
    est = Estimate(
        get=2 * GETS_PER_FILE * files,
        bytes_read=int((data_bytes + delete_bytes) * PARQUET_READ_FACTOR),
        put=1,
        bytes_written=live + REWRITE_INPUT_BYTES * files + REWRITE_OUTPUT_BYTES,
    )
    return TableWork(table, timed(est))


def flush_step(works: list[TableWork]) -> Estimate:
    """Flush as a whole: the tables' work, a look at the log and the store."""
    est = heartbeat() + Estimate(list=1)
    for work in works:
        est += work.estimate
    return stepped(est)


def cleanup(files: int, nbytes: int) -> Estimate:
    """Cleanup: each file HEADed (sized), then deleted; one commit takes them
    off DuckLake's schedule."""
    est = heartbeat() + Estimate(list=1, get=files, delete=files)
    est.files_to_delete, est.bytes_to_delete = files, nbytes
    if files:
        est += commit(COMMIT_BASE_BYTES + UNSCHEDULE_PATH_BYTES * files)
    return stepped(est)


def orphans(files: int, nbytes: int, facts: LakeFacts) -> Estimate:
    """Orphan deletion: the data path listed (a page per 1,000 objects), the
    reader leases read for the live writers' window, a HEAD probe, a DELETE
    per orphan."""
    pages = max(1, math.ceil(facts.data_objects / LIST_PAGE))
    est = heartbeat() + Estimate(
        list=2 + pages, get=1 + facts.readers, bytes_read=90 * facts.readers, delete=files
    )
    est.files_to_delete, est.bytes_to_delete = files, nbytes
    return stepped(est)


@dataclass
class Budget:
    """A real pass's bound (``MAINTENANCE_BUDGET_BYTES``, ``_REQUESTS``) and
    its running estimate of what it spent, by this model. The pass asks
    before each table; a table that would take the estimate over a bound
    stops the step there, and a spent budget stops the pass before its next
    step (the rest is work pending for the next pass). The pass's first
    piece of work (a table, or a lake-wide step that does something) always
    runs, whatever it costs, so every pass makes progress."""

    max_bytes: int | None = None
    max_requests: int | None = None
    spent: Estimate = field(default_factory=Estimate)
    worked: bool = False  # the pass did some work under the budget

    def over(self, more: Estimate) -> str | None:
        """Why ``more`` does not fit what is left (None: it fits)."""
        after = self.spent + more
        if self.max_bytes is not None and after.bytes_moved > self.max_bytes:
            return (
                f"MAINTENANCE_BUDGET_BYTES={self.max_bytes} would be exceeded "
                f"({self.spent.bytes_moved} bytes spent by estimate, the next needs "
                f"{more.bytes_moved})"
            )
        if self.max_requests is not None and after.requests > self.max_requests:
            return (
                f"MAINTENANCE_BUDGET_REQUESTS={self.max_requests} would be exceeded "
                f"({self.spent.requests} requests spent by estimate, the next needs "
                f"{more.requests})"
            )
        return None

    def spent_out(self) -> str | None:
        """Why no more work starts (None: some budget is left, or the pass
        has not worked yet)."""
        if not self.worked:
            return None
        if self.max_bytes is not None and self.spent.bytes_moved >= self.max_bytes:
            return f"MAINTENANCE_BUDGET_BYTES={self.max_bytes} is spent"
        if self.max_requests is not None and self.spent.requests >= self.max_requests:
            return f"MAINTENANCE_BUDGET_REQUESTS={self.max_requests} is spent"
        return None

    def admit(self, table_work: Estimate) -> str | None:
        """The next table: spent and None when it fits (or is the pass's
        first work), else why it stops the step."""
        why = self.over(table_work)
        if why is not None and self.worked:
            return why
        self.spend(table_work, worked=True)
        return None

    def spend(self, est: Estimate, worked: bool = False) -> None:
        """Count ``est`` as spent; ``worked``: it was work, not a fixed cost."""
        self.spent += est
        self.worked = self.worked or worked
