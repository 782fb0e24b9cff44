"""The maintenance API: what the CLI, the Lambda and Python callers all call.

Four verbs with typed results: ``run`` one pass (PassReport), read its
``status`` window (StatusWindow), take the store's ``census`` (StoreCensus),
``compact_store`` (CompactStoreReport); plus the pass lease (``pass_lease``)
and ``break_lease``, and retention holds (``protect``, ``unprotect``,
``retention_holds``). Each checks its inputs before it touches the lake:
options bind against the pinned DuckLake extension before a session opens,
so a refused option leaves nothing behind. ``status`` reads one sys record
and loads no catalog; ``census`` and ``compact_store`` open no DuckDB.
A policy or hold change with no ``by`` is audited as the OS user
(``history.who``), the name the CLI gives the same change.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from slatelake.catalog.holds import Hold
from slatelake.catalog.lake import Lake
from slatelake.ducklake.guard import data_location
from slatelake.ducklake.session import Session
from slatelake.errors import MergeIncompleteError, MisconfigurationError, NotFoundError
from slatelake.maintenance import cadence, flight, history, holds, pins, policy, threshold
from slatelake.maintenance import report as rpt
from slatelake.maintenance.cadence import CadenceCheck
from slatelake.maintenance.flight import BreakResult, LeaseRecord, PassLease
from slatelake.maintenance.fsck import FsckReport
from slatelake.maintenance.fsck import fsck as fsck_check
from slatelake.maintenance.history import AuditEntry, Page
from slatelake.maintenance.holds import HoldChange
from slatelake.maintenance.options import MaintenanceOptions
from slatelake.maintenance.pins import ReaderPin
from slatelake.maintenance.policy import Policy, PolicyRow
from slatelake.maintenance.prices import Prices
from slatelake.maintenance.progress import Sink
from slatelake.maintenance.report import PassReport, StatusWindow
from slatelake.maintenance.request import PassRequest, Trigger
from slatelake.maintenance.runner import run_pass
from slatelake.maintenance.threshold import ThresholdReport
from slatelake.store import merge
from slatelake.store.census import CensusRequest, StoreCensus, store_census
from slatelake.store.db import store_exists
from slatelake.store.location import LakeLocation, Located, location_of
from slatelake.store.merge import CompactStoreReport, CompactStoreRequest

log = logging.getLogger("slatelake.maintenance")
TRIGGERS = tuple(t.value for t in Trigger)

Target = str | LakeLocation | Located


def run(
    lake: str | Session,
    options: Mapping[str, object] | MaintenanceOptions | None = None,
    *,
    data_path: str | None = None,
    trigger: str = "manual",
    wait_s: float = 0.0,
    deadline: Callable[[], float] | None = None,
    stop: threading.Event | None = None,
    on_progress: Sink | None = None,
    operations: Iterable[str] | str | None = None,
    table: str | None = None,
    schema: str | None = None,
    dry_run: bool = False,
    by: str | None = None,
    prices: Prices | Mapping[str, object] | str | None = None,
) -> PassReport:
    """Run one pass (RFC 0021) and return its report: ``run_request`` with a
    ``PassRequest`` of these fields (it says what each means; ``prices``
    what a dry run's estimate is priced at)."""
    request = PassRequest(
        options=options,
        operations=operations,  # type: ignore[arg-type]  # text or names; the request parses
        table=table,
        schema=schema,
        trigger=trigger,  # type: ignore[arg-type]  # checked by the request
        wait_s=wait_s,
        dry_run=dry_run,
        by=by,
        prices=prices,
    )
    return run_request(
        lake, request, data_path=data_path, deadline=deadline, stop=stop, on_progress=on_progress
    )


def run_request(
    lake: str | Session,
    request: PassRequest,
    *,
    data_path: str | None = None,
    deadline: Callable[[], float] | None = None,
    stop: threading.Event | None = None,
    on_progress: Sink | None = None,
) -> PassReport:
    """Run the pass ``request`` asks for and return its report.

    ``lake`` is a lake URL (a session is opened for the pass and closed after;
    ``data_path`` makes an empty root a new lake) or an open session, which
    then runs the pass itself. ``request.options`` are the ``MAINTENANCE_*``
    settings (None: the session's own, else nothing configured).
    ``deadline`` returns the seconds left to work (with ``request.deadline_s``
    the sooner of the two counts); at zero the pass stops between steps and
    tables. A scoped run (``operations``, ``table``) does only the DuckLake
    steps asked for and skips the sweeps and the store merge. A dry run
    returns the plan (``report.plan``, steps marked ``dry_run``) and writes
    nothing; a URL is then opened read-only and never created.

    While ``SLATELAKE_MAINTENANCE_ENABLED`` is false every pass but a dry run
    is refused (MaintenanceConfigError naming it) before anything is opened."""
    if not request.dry_run:
        cadence.require_enabled(f"a {request.trigger} maintenance pass", dry_run_allowed=True)
    own = getattr(lake, "options", None) if isinstance(lake, Session) else None
    bound = request.bound(own if isinstance(own, MaintenanceOptions) else None)
    kwargs: dict[str, Any] = {
        "trigger": str(request.trigger),
        "wait_s": request.wait_s,
        "deadline": _sooner(deadline, request.deadline_s),
        "stop": stop,
        "on_progress": on_progress,
        "scope": request.scope,
        "dry_run": request.dry_run,
        "by": request.by,
        "prices": request.priced,
    }
    if isinstance(lake, Session):
        return run_pass(lake, bound, **kwargs)
    if request.dry_run:
        _require_lake(lake)  # a plan never creates a lake
        with Session(lake, read_only=True) as session:
            return run_pass(session, bound, **kwargs)
    with Session(lake, data_path=data_path) as session:
        return run_pass(session, bound, **kwargs)


def _sooner(
    deadline: Callable[[], float] | None, seconds: float | None
) -> Callable[[], float] | None:
    """The caller's deadline, or one ``seconds`` from now, whichever comes first."""
    if seconds is None:
        return deadline
    ends = time.monotonic() + seconds

    def left() -> float:
        mine = ends - time.monotonic()
        return mine if deadline is None else min(mine, deadline())

    return left


def run_threshold(
    lake: str | Session,
    *,
    wait_s: float = 0.0,
    deadline: Callable[[], float] | None = None,
    stop: threading.Event | None = None,
    on_progress: Sink | None = None,
    by: str | None = None,
) -> ThresholdReport:
    """The threshold trigger: find the tables with at least their policy's
    ``small_file_min_count`` files under the target size (catalog reads
    only) and give each a run of its own of flush, merge and rewrite. A lake
    without an enabled policy has none due. Refused, before anything is
    opened, while ``SLATELAKE_MAINTENANCE_ENABLED`` is false."""
    cadence.require_enabled("the threshold trigger")
    with opened_session(lake) as session:
        return threshold.run_due(
            session, wait_s=wait_s, deadline=deadline, stop=stop, on_progress=on_progress, by=by
        )


def fsck(lake: str | Session, *, record: bool = True) -> FsckReport:
    """Check the catalog against its files and its own records
    (maintenance/fsck.py) on the caller's session or one opened on the
    existing lake; ``record`` keeps the summary orphan deletion reads."""
    with opened_session(lake) as session:
        return fsck_check(session, record=record)


def status(lake: Target) -> StatusWindow:
    """The last passes, newest first, from the one status record at the log's
    head (read-only; no catalog is loaded, and each unfolded slot is read
    for that one key, ``Lake.read_sys_at_head``). ``.warning`` says what of
    the stored window could not be read; the next pass rewrites it."""
    with Lake.open(location_of(lake).url, read_only=True) as handle:
        return rpt.newest_first(handle.read_sys_at_head(rpt.STATUS_KEY))


def scheduled_due(lake: Target, *, now: float | None = None) -> CadenceCheck:
    """Whether a scheduled pass on ``lake`` is due at ``now`` (seconds since
    the epoch; None: the clock) under its policy's ``cron`` (``cadence.py``
    says when). Read-only and without the catalog: the policy and status
    records at the log's head in one read of its tail, and the run history
    only when the status window's 16 passes all began after the lake's last
    fire time (other triggers crowded the scheduled pass out of it)."""
    with Lake.open(location_of(lake).url, read_only=True) as handle:
        return cadence_of(handle, now=now)


def cadence_of(handle: Lake, *, now: float | None = None) -> CadenceCheck:
    """``scheduled_due`` on an open lake (a scheduler's session's)."""
    found = handle.read_sys_many_at_head([policy.POLICY_KEY, rpt.STATUS_KEY])
    text = policy.resolve(policy.decode_rows(found[policy.POLICY_KEY]))["cron"]
    if not text:
        return cadence.every_tick()
    cron = cadence.parse_cron(text, "policy cron")
    at = datetime.fromtimestamp(time.time() if now is None else now, UTC)
    url = handle.location.url
    last_fire, _ = cadence.lake_fires(cron, url, at)
    since_us = int(last_fire.timestamp() * 1_000_000)
    newest = _newest_scheduled(handle, rpt.newest_first(found[rpt.STATUS_KEY]), since_us)
    if newest is None:
        return cadence.decide(cron, url, at, None)
    started = datetime.fromtimestamp(newest.started_at / 1_000_000, UTC)
    return cadence.decide(cron, url, at, started, left_pending=newest.work_pending)


# Run history pages read, at most, looking for the last scheduled pass.
_HISTORY_PAGE = 100


def _newest_scheduled(handle: Lake, window: StatusWindow, since_us: int) -> PassReport | None:
    """The newest scheduled pass that began at or after ``since_us`` (µs),
    from the status window, else the run history; None when there is none
    (the passes read back to that instant were of other triggers)."""

    def pages() -> Iterator[list[PassReport]]:
        yield list(window)
        if len(window) < rpt.WINDOW:
            return  # the whole history is in the window
        before: int | None = None
        while True:
            page = history.runs(handle, _HISTORY_PAGE, before)
            yield page.items
            if page.next_before is None:
                return
            before = page.next_before

    for items in pages():
        for report in items:
            if report.started_at < since_us:
                return None
            if str(report.trigger) == Trigger.SCHEDULED:
                return report
    return None


def census(lake: Target, *, live: bool = False, objects: bool = True) -> StoreCensus:
    """What the store weighs per subspace, from its manifest; ``live`` adds a
    scan counting live keys (reads the whole store), ``objects`` the totals of
    one listing. Writes nothing, so read-only credentials do."""
    return store_census(
        location_of(lake), CensusRequest(count_live_entries=live, list_objects=objects)
    )


def compact_store(
    lake: Target,
    *,
    subspace: str | None = None,
    wait_s: float | None = None,
    require_completed: bool = False,
    should_stop: Callable[[], str | None] | None = None,
) -> CompactStoreReport:
    """Submit full-tree store merges (every subspace, or ``subspace``) for the
    holder's compactor, and wait up to ``wait_s`` for them. With
    ``require_completed`` a merge still pending or failed at the end raises
    MergeIncompleteError carrying the report."""
    if require_completed and wait_s is None:
        raise MisconfigurationError(
            "require_completed needs a wait (a timeout in seconds): without one every merge "
            "is still pending"
        )
    request = CompactStoreRequest(subspace=subspace, wait_s=wait_s)
    request.target()  # a bad subspace is refused before the store is opened
    with Lake.open(location_of(lake).url) as handle:
        report = merge.compact_store(handle, request, should_stop=should_stop)
    if require_completed and report.outcome not in (merge.COMPLETED, merge.SKIPPED):
        unfinished = ", ".join(
            f"{m.subspace} {m.outcome}"
            for m in report.merges
            if m.outcome not in (merge.COMPLETED, merge.SKIPPED)
        )
        raise MergeIncompleteError(
            f"not completed: {unfinished} (waited up to {wait_s:g}s)", report
        )
    return report


def protect(
    lake: str | Session,
    snapshot_id: object,
    name: object,
    *,
    note: object = None,
    by: str | None = None,
) -> HoldChange:
    """Place a retention hold: expiry keeps ``snapshot_id`` until the hold
    ``name`` is removed. Protecting the same snapshot under the same name
    again changes nothing (``changed`` is False). ``by``: who, for the audit
    log (None: the OS user, ``history.caller``)."""
    with opened_session(lake) as session:
        return holds.protect(session, snapshot_id, name, note=note, by=history.who(by))


def unprotect(lake: str | Session, name: object, *, by: str | None = None) -> HoldChange:
    """Remove the retention hold ``name``; NotFoundError when there is none.
    ``by``: who, for the audit log (None: the OS user)."""
    with opened_session(lake) as session:
        return holds.unprotect(session, name, by=history.who(by))


def runs(lake: Target, *, limit: object = 20, before: object = None) -> Page[PassReport]:
    """The run history, newest first (the last 1000 passes are kept): at
    most ``limit`` passes with ids below ``before``; ``next_before`` pages on.
    Read-only; no catalog is loaded, and each unfolded slot is read once
    (``Lake.read_sys_index_at_head``)."""
    history.check_limit(limit)  # refused before anything is read
    history.check_before(before)
    _require_lake(lake)
    with Lake.open(location_of(lake).url, read_only=True, seen=True) as handle:
        return history.runs(handle, limit, before)


def audit_log(lake: Target, *, limit: object = 50, before: object = None) -> Page[AuditEntry]:
    """Audit entries (policy changes, holds, manual runs), newest first."""
    history.check_limit(limit)
    history.check_before(before)
    _require_lake(lake)
    with Lake.open(location_of(lake).url, read_only=True, seen=True) as handle:
        return history.audit(handle, limit, before)


def retention_holds(lake: Target) -> list[Hold]:
    """The retention holds, by name, from one sys record at the log's head
    (read-only; no catalog is loaded)."""
    _require_lake(lake)
    with Lake.open(location_of(lake).url, read_only=True) as handle:
        return holds.holds_at_head(handle)


@dataclass(frozen=True)
class PolicyView:
    """A lake's policy rows as stored and what they resolve to: the lake's
    policy and each live table's, field by field with where each came from."""

    rows: list[PolicyRow]
    lake: Policy
    tables: dict[tuple[str, str], Policy]

    def to_dict(self) -> dict[str, Any]:
        return {
            "enabled": bool(self.lake["enabled"]),
            "rows": [r.to_dict() for r in self.rows],
            "lake": self.lake.to_dict(),
            "tables": [
                {"schema": s, "table": t, "policy": p.to_dict()}
                for (s, t), p in sorted(self.tables.items())
            ],
        }


def set_policy(
    lake: str | Session,
    fields: Mapping[str, object],
    *,
    schema: str | None = None,
    table: str | None = None,
    by: str | None = None,
) -> PolicyRow:
    """Set policy ``fields`` for the lake, a schema or a table (``table`` may
    be ``schema.table``; a bare name means schema ``main``). ``by``: who, for
    the audit log and the row's ``updated_by`` (None: the OS user)."""
    scope = policy.Scope.of(schema, table)
    policy.parse_fields(fields)  # refused before the lake is opened
    with opened_session(lake) as session:
        return policy.set_fields(session, scope, fields, history.who(by))


def unset_policy(
    lake: str | Session,
    fields: Iterable[str] | None = None,
    *,
    schema: str | None = None,
    table: str | None = None,
    by: str | None = None,
) -> PolicyRow:
    """Unset ``fields`` (None: every field) at a scope, so they fall through
    to the wider scope or the defaults again. ``by``: who, as for ``set_policy``."""
    scope = policy.Scope.of(schema, table)
    with opened_session(lake) as session:
        return policy.unset_fields(session, scope, fields, history.who(by))


def policies(lake: str | Session) -> PolicyView:
    """The policy rows and their resolution for the lake and every live table."""
    with opened_session(lake, read_only=True) as session:
        session.refresh()
        rows = policy.rows_at_head(session)
        tables = {t: policy.resolve(rows, *t) for t in session.live_tables()}
        return PolicyView(rows, policy.resolve(rows), tables)


@contextmanager
def opened_session(lake: str | Session, read_only: bool = False) -> Iterator[Session]:
    """The caller's session as is, or one opened on an existing lake and closed after."""
    if isinstance(lake, Session):
        yield lake
        return
    _require_lake(lake)
    with Session(lake, read_only=read_only) as session:
        yield session


def _require_lake(lake: Target) -> None:
    location = location_of(lake)
    if not store_exists(location):
        raise NotFoundError(f"no slatelake lake at {location.url}; check the URL")


def canonical_lake(url: str) -> str:
    """A lake URL as slatelake spells it (``..``, slashes and case normalized),
    so two spellings of one place compare equal; MisconfigurationError names
    what is wrong with one that is no lake URL."""
    return LakeLocation.parse(url).url


def canonical_data_path(path: str) -> str:
    """A data path as slatelake spells it, or MisconfigurationError."""
    return data_location(path).url


def lake_exists(lake: Target) -> bool:
    """Whether a slatelake store exists at ``lake`` (one read)."""
    return store_exists(location_of(lake))


def break_lease(lake: Target) -> BreakResult:
    """End a pass lease whose owner stopped beating (a killed pass), so the
    next pass need not wait out its TTL; LeaseLiveError when its heartbeat is
    fresh (the owner is alive)."""
    _require_lake(lake)
    return flight.break_lease(location_of(lake))


def pass_lease(lake: Target) -> LeaseRecord | None:
    """The pass lease as stored (who runs a pass, since when, until when), or
    None when no pass has one; two small reads, no lake opened."""
    return PassLease(location_of(lake)).current()


def reader_pins(lake: Target) -> list[ReaderPin]:
    """Every live reader pin, oldest snapshot first (the leases only)."""
    _require_lake(lake)
    return pins.reader_pins(location_of(lake))
