"""A lake handle: one URL, every verb, grouped the way a user thinks of them.

``slatelake.open(url)`` returns a ``LakeHandle``; its namespaces hold the
verbs (``lake.maintenance.run(request)``, ``lake.holds.protect(...)``,
``lake.policy.set(...)``, ``lake.store.census()``, ``lake.images.write()``,
``lake.restore_points.create(...)``)
and ``lake.connect()`` opens a session. The CLI and the Lambda call only
this and the facade's types, so every surface reaches the lake one way. A
handle holds no connection and no store: each verb opens what it needs
and closes it, so a handle is cheap to make, safe to share between threads
and never stale. Imports are deferred to the call, so ``--help`` and a
Lambda cold start pay only for the verbs they use.
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import duckdb

    from slatelake.catalog.borrowed import BorrowedFiles
    from slatelake.catalog.holds import Hold
    from slatelake.catalog.lake import LogSummary
    from slatelake.ducklake.image_writer import ImageWrite
    from slatelake.ducklake.transfer import ExportReport
    from slatelake.log.restore_points import RestorePoint
    from slatelake.maintenance.api import PolicyView
    from slatelake.maintenance.backlog import Backlog
    from slatelake.maintenance.backup import BackupReport
    from slatelake.maintenance.borrowed import BorrowedRelease
    from slatelake.maintenance.cadence import CadenceCheck
    from slatelake.maintenance.fanout_records import BatchOrder, BatchResult, PassPlan
    from slatelake.maintenance.flight import BreakResult, LeaseRecord
    from slatelake.maintenance.fold import FoldRequest, FoldTurn
    from slatelake.maintenance.fsck import FsckReport
    from slatelake.maintenance.health_report import HealthPolicy, LakeHealth
    from slatelake.maintenance.history import AuditEntry, Page
    from slatelake.maintenance.holds import HoldChange
    from slatelake.maintenance.pins import ReaderPin
    from slatelake.maintenance.policy import PolicyRow
    from slatelake.maintenance.progress import Sink
    from slatelake.maintenance.report import PassReport, StatusWindow
    from slatelake.maintenance.request import PassRequest
    from slatelake.maintenance.restore_points import PointChange, RestoreReport
    from slatelake.maintenance.session import LakeSession
    from slatelake.maintenance.threshold import ThresholdReport
    from slatelake.store.census import StoreCensus
    from slatelake.store.merge import CompactStoreReport

Deadline = Callable[[], float]


@dataclass(frozen=True)
class Maintenance:
    """The pass and what it leaves behind: its runs, its lease, the fold."""

    lake: LakeHandle

    def run(
        self,
        request: PassRequest | None = None,
        *,
        deadline: Deadline | None = None,
        stop: threading.Event | None = None,
        on_progress: Sink | None = None,
        session: LakeSession | None = None,
        parallel: int | None = None,
    ) -> PassReport:
        """Run one pass as ``request`` asks (None: every configured step,
        manual trigger) and return its report. ``deadline`` returns the
        seconds left to work; ``stop`` ends the pass at the next step or
        table boundary; ``on_progress`` receives each progress event.
        ``session``: an open session on this lake to run it on (a warm
        container's), else one is opened for the pass and closed after.
        ``parallel``: fan the pass out, its table batches in that many
        worker processes (maintenance/fanout.py); None: one process."""
        from slatelake.maintenance.api import run_request
        from slatelake.maintenance.request import PassRequest

        if parallel is not None:
            from slatelake.maintenance.fanout_run import run_parallel

            return run_parallel(
                self._on(session),
                request or PassRequest(),
                workers=parallel,
                data_path=self.lake.data_path,
                deadline=deadline,
                stop=stop,
                on_progress=on_progress,
            )
        return run_request(
            self._on(session),
            request or PassRequest(),
            data_path=self.lake.data_path,
            deadline=deadline,
            stop=stop,
            on_progress=on_progress,
        )

    def plan(
        self,
        request: PassRequest | None = None,
        *,
        batch_tables: int | None = None,
        deadline: Deadline | None = None,
        on_progress: Sink | None = None,
        session: LakeSession | None = None,
    ) -> PassPlan:
        """The first phase of a fanned-out pass: take the lease for the run,
        expire, and cut the tables into batches of ``batch_tables``
        (default 20) for ``batch``; ``finish`` ends the run."""
        from slatelake.maintenance import fanout_run
        from slatelake.maintenance.request import PassRequest

        return fanout_run.plan(
            self._on(session),
            request or PassRequest(),
            data_path=self.lake.data_path,
            batch_tables=batch_tables or fanout_run.DEFAULT_BATCH_TABLES,
            deadline=deadline,
            on_progress=on_progress,
        )

    def batch(
        self,
        order: BatchOrder,
        *,
        deadline: Deadline | None = None,
        on_progress: Sink | None = None,
        session: LakeSession | None = None,
    ) -> BatchResult:
        """Flush, merge and rewrite one planned batch's tables under the run's lease."""
        from slatelake.maintenance import fanout_run

        return fanout_run.batch(
            self._on(session), order, deadline=deadline, on_progress=on_progress
        )

    def finish(
        self,
        plan: PassPlan,
        results: Iterable[BatchResult],
        *,
        deadline: Deadline | None = None,
        on_progress: Sink | None = None,
        session: LakeSession | None = None,
    ) -> PassReport:
        """Sum the batches, clean up when every one finished, record the run
        once and give its lease back."""
        from slatelake.maintenance import fanout_run

        return fanout_run.finish(
            self._on(session), plan, list(results), deadline=deadline, on_progress=on_progress
        )

    def fsck(self, *, record: bool = True, session: LakeSession | None = None) -> FsckReport:
        """Check the catalog against its files and its own records
        (maintenance/fsck.py); nothing is repaired. ``record`` keeps the
        summary, which orphan deletion reads (it refuses while referenced
        files are missing)."""
        from slatelake.maintenance.api import fsck

        return fsck(self._on(session), record=record)

    def threshold(
        self,
        *,
        wait_s: float = 0.0,
        deadline: Deadline | None = None,
        stop: threading.Event | None = None,
        on_progress: Sink | None = None,
        by: str | None = None,
        session: LakeSession | None = None,
    ) -> ThresholdReport:
        """A run of flush, merge and rewrite for each table its policy finds
        due; ``wait_s``: how long each run waits for a pass already running."""
        from slatelake.maintenance.api import run_threshold

        return run_threshold(
            self._on(session),
            wait_s=wait_s,
            deadline=deadline,
            stop=stop,
            on_progress=on_progress,
            by=by,
        )

    def status(self) -> StatusWindow:
        """The last passes, newest first (one record; no catalog loaded)."""
        from slatelake.maintenance.api import status

        return status(self.lake.url)

    def runs(self, *, limit: object = 20, before: object = None) -> Page[PassReport]:
        """A page of the run history, newest first."""
        from slatelake.maintenance.api import runs

        return runs(self.lake.url, limit=limit, before=before)

    def audit(self, *, limit: object = 50, before: object = None) -> Page[AuditEntry]:
        """A page of the audit log (policy changes, holds, manual runs), newest first."""
        from slatelake.maintenance.api import audit_log

        return audit_log(self.lake.url, limit=limit, before=before)

    def health(self, policy: HealthPolicy | None = None, now: datetime | None = None) -> LakeHealth:
        """What maintenance would find to do, table by table (catalog reads only)."""
        from slatelake.maintenance.health import health

        self.lake.require()
        return health(self.lake.url, policy, now)

    def backup(
        self,
        *,
        options: Mapping[str, object] | None = None,
        wait_s: float = 0.0,
        deadline: Deadline | None = None,
        on_progress: Sink | None = None,
        by: str | None = None,
        session: LakeSession | None = None,
    ) -> BackupReport:
        """Before a backup: a pass (with ``options``), fold, image, manifest."""
        from slatelake.maintenance.backup import backup

        return backup(
            self._on(session),
            options=options,
            wait_s=wait_s,
            deadline=deadline,
            on_progress=on_progress,
            by=by,
        )

    def _on(self, session: LakeSession | None) -> Any:
        """The session to work on, if it is one on this lake; else the URL."""
        if session is None:
            return self.lake.url
        if session.url != self.lake.url:
            from slatelake.errors import MisconfigurationError

            raise MisconfigurationError(
                f"the session is on {session.url}, not {self.lake.url}; open a handle on its lake"
            )
        return session

    def fold(
        self,
        request: FoldRequest | None = None,
        *,
        deadline: Deadline | None = None,
        on_progress: Sink | None = None,
    ) -> FoldTurn:
        """One holder turn: fold the log, write an image when due, execute merges."""
        from slatelake.maintenance.fold import fold_turn

        return fold_turn(self.lake.url, request, deadline=deadline, on_progress=on_progress)

    def due(self, now: float | None = None) -> CadenceCheck:
        """Whether a scheduled pass is due under the lake's policy ``cron``
        (read-only; the policy and status records, no catalog)."""
        from slatelake.maintenance.api import scheduled_due

        return scheduled_due(self.lake.url, now=now)

    def backlog(self) -> Backlog:
        """How far the fold is behind the log (slots, bytes, age)."""
        from slatelake.maintenance.backlog import backlog_of

        return backlog_of(self.lake.url)

    def lease(self) -> LeaseRecord | None:
        """The pass lease as stored, or None when no pass holds one."""
        from slatelake.maintenance.api import pass_lease

        return pass_lease(self.lake.url)

    def pins(self) -> list[ReaderPin]:
        """Live readers' snapshot pins (their leases only; nothing written)."""
        from slatelake.maintenance.api import reader_pins

        return reader_pins(self.lake.url)

    def break_lease(self) -> BreakResult:
        """End a pass lease whose owner stopped beating; LeaseLiveError if it beats."""
        from slatelake.maintenance.api import break_lease

        return break_lease(self.lake.url)


@dataclass(frozen=True)
class Holds:
    """Retention holds: snapshots expiry keeps, by name."""

    lake: LakeHandle

    def protect(
        self, snapshot_id: object, name: object, *, note: object = None, by: str | None = None
    ) -> HoldChange:
        from slatelake.maintenance.api import protect

        return protect(self.lake.url, snapshot_id, name, note=note, by=by)

    def unprotect(self, name: object, *, by: str | None = None) -> HoldChange:
        from slatelake.maintenance.api import unprotect

        return unprotect(self.lake.url, name, by=by)

    def list(self) -> builtins.list[Hold]:
        from slatelake.maintenance.api import retention_holds

        return retention_holds(self.lake.url)


@dataclass(frozen=True)
class RestorePoints:
    """Restore points: the lake as it was at one moment (every snapshot, every
    row), kept with every file it reads until deleted or its TTL lapses;
    ``restore`` lays it down as a new lake (maintenance/restore_points.py)."""

    lake: LakeHandle

    def create(
        self,
        name: object = None,
        *,
        ttl: object = None,
        by: str | None = None,
        wait_s: float | None = None,
    ) -> PointChange:
        """Make a restore point of the lake's head named ``name`` (default:
        ``rp-<UTC time>``), kept for ``ttl`` (a duration such as ``30d``;
        None: until deleted). Waits up to ``wait_s`` (default 60 s) for a
        running pass to end."""
        from slatelake.maintenance import restore_points

        return restore_points.create(
            self.lake.url,
            name,
            ttl,
            by=by,
            wait_s=restore_points.DEFAULT_WAIT_S if wait_s is None else wait_s,
        )

    def check_name(self, name: object) -> str:
        """``name`` as given when it can name a restore point, else
        MisconfigurationError saying why (nothing is read)."""
        from slatelake.log.restore_points import check_name

        return check_name(name)

    def check_ttl(self, ttl: object) -> float | None:
        """``ttl`` in seconds when it can be a restore point's TTL (a duration,
        at most ten years; None: none), else MisconfigurationError."""
        from slatelake.maintenance.restore_points import parse_ttl

        return parse_ttl(ttl)

    def list(self) -> builtins.list[RestorePoint]:
        """Every restore point, oldest first, lapsed ones included."""
        from slatelake.maintenance.restore_points import points

        return points(self.lake.url)

    def delete(self, name: object) -> PointChange:
        """Delete a restore point: the next passes reclaim what only it kept."""
        from slatelake.maintenance.restore_points import delete

        return delete(self.lake.url, name)

    def restore(
        self, name: object, to: str, *, copy_data: str | None = None, share_data: bool = False
    ) -> RestoreReport:
        """Lay down a new lake at ``to`` (which must be empty) from restore
        point ``name``; ``copy_data``: an empty data path to copy its files
        to, or ``share_data=True``: borrow them where they are (safe only
        while one of the two lakes writes). One of the two is required."""
        from slatelake.maintenance.restore_points import restore

        return restore(self.lake.url, name, to, copy_data=copy_data, share_data=share_data)


@dataclass(frozen=True)
class Policy:
    """The lake's maintenance policy, at lake, schema or table scope."""

    lake: LakeHandle

    def set(
        self,
        fields: Mapping[str, object],
        *,
        schema: str | None = None,
        table: str | None = None,
        by: str | None = None,
    ) -> PolicyRow:
        from slatelake.maintenance.api import set_policy

        return set_policy(self.lake.url, fields, schema=schema, table=table, by=by)

    def unset(
        self,
        fields: Iterable[str] | None = None,
        *,
        schema: str | None = None,
        table: str | None = None,
        by: str | None = None,
    ) -> PolicyRow:
        from slatelake.maintenance.api import unset_policy

        return unset_policy(self.lake.url, fields, schema=schema, table=table, by=by)

    def show(self) -> PolicyView:
        from slatelake.maintenance.api import policies

        return policies(self.lake.url)


@dataclass(frozen=True)
class Store:
    """The SlateDB store under the lake: what it weighs, and its merges."""

    lake: LakeHandle

    def census(self, *, live: bool = False, objects: bool = True) -> StoreCensus:
        from slatelake.maintenance.api import census

        self.lake.require()
        return census(self.lake.url, live=live, objects=objects)

    def compact(
        self,
        *,
        subspace: str | None = None,
        wait_s: float | None = None,
        require_completed: bool = False,
        should_stop: Callable[[], str | None] | None = None,
    ) -> CompactStoreReport:
        """Submit full merges for the holder's compactor; see ``compact_store``."""
        from slatelake.maintenance.api import compact_store

        self.lake.require()
        return compact_store(
            self.lake.url,
            subspace=subspace,
            wait_s=wait_s,
            require_completed=require_completed,
            should_stop=should_stop,
        )


@dataclass(frozen=True)
class Borrowed:
    """Files an import left where they were: never deleted until released."""

    lake: LakeHandle

    def list(self) -> BorrowedFiles:
        from slatelake.catalog.lake import Lake
        from slatelake.maintenance.borrowed import borrowed_at_head

        self.lake.require()
        with Lake.open(self.lake.url, read_only=True) as handle:
            return borrowed_at_head(handle)

    def release(
        self, paths: Iterable[str] | None = None, *, everything: bool = False, by: str | None = None
    ) -> BorrowedRelease:
        from slatelake.maintenance.borrowed import release_borrowed

        return release_borrowed(self.lake.url, paths, everything=everything, by=by)


@dataclass(frozen=True)
class Images:
    """Catalog images: DuckDB files a session (or stock DuckDB) opens from."""

    lake: LakeHandle

    def write(self) -> ImageWrite:
        from slatelake.admin import write_image

        return write_image(self.lake.url)

    def newest(self) -> Any:
        """The newest valid image and the ATTACH that opens it read-only."""
        from slatelake.admin import newest_image

        return newest_image(self.lake.url)


class LakeHandle:
    """One lake, by URL (``s3://bucket/prefix``, ``file:///path``, a local
    path, ``memory://name``); ``data_path`` is where a new lake's Parquet
    files go. Nothing is opened until a verb is called."""

    def __init__(self, url: str, data_path: str | None = None) -> None:
        from slatelake.ducklake.guard import data_location, resolve_data_path
        from slatelake.store.location import LakeLocation

        self.url = LakeLocation.parse(url).url
        # resolved and checked now (a relative path against this directory, as
        # a session resolves it), so a later chdir moves nothing
        if data_path is not None:
            data_path = resolve_data_path(self.url, data_path)  # '' is none given
        if data_path is not None:
            data_location(data_path)
        self.data_path = data_path
        self.maintenance = Maintenance(self)
        self.holds = Holds(self)
        self.restore_points = RestorePoints(self)
        self.policy = Policy(self)
        self.store = Store(self)
        self.borrowed = Borrowed(self)
        self.images = Images(self)

    def __repr__(self) -> str:
        return f"LakeHandle({self.url!r})"

    def exists(self) -> bool:
        """Whether a slatelake store is there (one read)."""
        from slatelake.maintenance.api import lake_exists

        return lake_exists(self.url)

    def require(self) -> None:
        """NotFoundError naming the URL unless a lake is there."""
        from slatelake.errors import NotFoundError

        if not self.exists():
            raise NotFoundError(f"no slatelake lake at {self.url}; check the URL")

    def create(self, *, encrypted: bool = False) -> int | None:
        """Make the lake (with DuckLake's catalog when the handle has a data
        path; ``encrypted``: its data files encrypted, DuckLake's ENCRYPTED);
        refused when one is there. Returns the head snapshot id."""
        from slatelake.admin import create

        return create(self.url, self.data_path, encrypted=encrypted)

    def connect(
        self,
        *,
        read_only: bool | None = None,
        alias: str = "lake",
        options: dict[str, str] | None = None,
        on_pass: Callable[[PassReport], None] | None = None,
        connection: duckdb.DuckDBPyConnection | None = None,
        snapshot_version: int | None = None,
        snapshot_time: datetime | str | None = None,
        pin: bool = False,
        encrypted: bool = False,
    ) -> LakeSession:
        """A session on the lake, attached as DuckLake catalog ``alias``;
        ``options`` the ``MAINTENANCE_*`` settings its scheduler and
        ``session.maintenance()`` run with, ``on_pass`` called with each
        scheduled pass's report; ``pin``: keep the snapshot it reads at open."""
        from slatelake import connect

        return connect(
            self.url,
            data_path=self.data_path,
            read_only=read_only,
            alias=alias,
            options=options,
            on_pass=on_pass,
            connection=connection,
            snapshot_version=snapshot_version,
            snapshot_time=snapshot_time,
            pin=pin,
            encrypted=encrypted,
        )

    def log_summary(self) -> LogSummary:
        """Head, fold cursor and what the log retains (read-only)."""
        from slatelake.admin import log_summary

        return log_summary(self.url)

    def export(self, path: str) -> ExportReport:
        """The catalog as a stock DuckLake catalog file (DuckDB or SQLite)."""
        from slatelake.admin import export_catalog

        return export_catalog(self.url, path)


def open_lake(url: str, data_path: str | None = None) -> LakeHandle:
    """A handle on the lake at ``url`` (checked and spelled canonically now;
    nothing is read until a verb is called)."""
    return LakeHandle(url, data_path)
