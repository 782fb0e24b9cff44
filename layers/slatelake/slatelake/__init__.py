"""slatelake: DuckLake catalogs kept in SlateDB on object storage.

``slatelake.open(url)`` is a handle on one lake with every verb in a
namespace (``lake.maintenance.run(PassRequest(...))``, ``lake.holds``,
``lake.policy``, ``lake.store``, ``lake.images``, ``lake.borrowed``);
``slatelake.connect(url, ...)`` (or ``lake.connect()``) opens a session that
works like a DuckDB connection with the lake attached as a real DuckLake.
The requests and reports those verbs take and return are exported here, as
are the errors a caller catches, each saying whether retrying can help
(``retryable``); ``retry(fn)`` re-runs a callable on ``ConflictError``.
Everything but the errors is imported when first used, so importing
slatelake costs no DuckDB. Layers, each importing only those before it:
``store`` <- ``log`` <- ``catalog`` <- ``ducklake`` <- ``maintenance`` <-
this facade. See docs/architecture.md.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from slatelake.errors import (
    AlreadyRunningError,
    AmbiguousWriteError,
    CommitLockBusyError,
    ConflictError,
    CorruptionError,
    FencedError,
    FormatError,
    HeldSnapshotError,
    LeaseLiveError,
    LeaseLostError,
    MaintenanceConfigError,
    MaintenanceDisabledError,
    MergeIncompleteError,
    MisconfigurationError,
    NotFoundError,
    OperationLimitError,
    PermissionDeniedError,
    PinnedSnapshotError,
    ReadOnlyError,
    SlatelakeError,
    StaleViewError,
    StepFailed,
    StoreError,
    StoreTimeoutError,
    StoreUnavailableError,
    UnsupportedError,
)
from slatelake.errors import retry_conflicts as retry
from slatelake.lazy import lazy_getattr

if TYPE_CHECKING:
    import duckdb

    from slatelake.handle import LakeHandle
    from slatelake.maintenance.session import LakeSession as Session

__version__ = "0.1.0"


def connect(
    lake_url: str,
    data_path: str | None = None,
    read_only: bool | None = None,
    alias: str = "lake",
    options: dict[str, str] | None = None,
    on_pass: Any = None,
    connection: duckdb.DuckDBPyConnection | None = None,
    snapshot_version: int | None = None,
    snapshot_time: datetime | str | None = None,
    pin: bool = False,
    encrypted: bool = False,
    write_deletion_vectors: bool = False,
    override_data_path: bool = False,
) -> Session:
    """Open a session on the lake at ``lake_url`` (``s3://bucket/prefix``,
    ``file:///path`` or a local path), attached as DuckLake catalog ``alias``
    and made the default. With ``data_path`` an empty root becomes a new lake.

    ``options``: the ``MAINTENANCE_*`` settings, checked here;
    ``session.maintenance()`` runs a pass with them. ``connection``: your own
    DuckDB connection to attach the lake to (the session then owns and closes
    it). ``snapshot_version``/``snapshot_time``: a read-only session at that
    snapshot, as DuckLake's ATTACH options. ``pin``: pin the snapshot the
    session reads at open (``session.pin()``), so expiry and cleanup keep it
    while the session lives. ``encrypted``: DuckLake's ENCRYPTED: a new lake
    writes encrypted data files (keys kept in its catalog); an existing lake
    must have been made so. ``write_deletion_vectors``: DuckLake's
    WRITE_DELETION_VECTORS: this session's deletes write puffin deletion
    vectors instead of Parquet delete files. ``override_data_path``:
    DuckLake's OVERRIDE_DATA_PATH, for a read-only session that reads the
    files from ``data_path`` instead of the catalog's (a mirror, a mount)."""
    from slatelake.maintenance.session import LakeSession

    return LakeSession(
        lake_url,
        data_path=data_path,
        read_only=read_only,
        alias=alias,
        options=options,
        on_pass=on_pass,
        connection=connection,
        snapshot_version=snapshot_version,
        snapshot_time=snapshot_time,
        pin=pin,
        encrypted=encrypted,
        write_deletion_vectors=write_deletion_vectors,
        override_data_path=override_data_path,
    )


def open(url: str, data_path: str | None = None) -> LakeHandle:  # noqa: A001
    """A handle on the lake at ``url``: every verb, in namespaces. The URL is
    checked and spelled canonically now; nothing is read until a verb runs."""
    from slatelake.handle import LakeHandle

    return LakeHandle(url, data_path)


# The verbs' request and report types, by the module that defines each;
# imported (with duckdb, for some) only when asked for.
_LAZY = {
    "Session": ("slatelake.maintenance.session", "LakeSession"),
    "LakeHandle": ("slatelake.handle", "LakeHandle"),
    "PassRequest": ("slatelake.maintenance.request", "PassRequest"),
    "Trigger": ("slatelake.maintenance.request", "Trigger"),
    "PageRequest": ("slatelake.maintenance.request", "PageRequest"),
    "MergeRequest": ("slatelake.maintenance.request", "MergeRequest"),
    "CensusRequest": ("slatelake.maintenance.request", "CensusRequest"),
    "PassReport": ("slatelake.maintenance.report", "PassReport"),
    "StepReport": ("slatelake.maintenance.report", "StepReport"),
    "PassStatus": ("slatelake.maintenance.report", "PassStatus"),
    "StepStatus": ("slatelake.maintenance.report", "StepStatus"),
    "DryRunPlan": ("slatelake.maintenance.report", "DryRunPlan"),
    "PlannedStep": ("slatelake.maintenance.report", "PlannedStep"),
    "StatusWindow": ("slatelake.maintenance.report", "StatusWindow"),
    "ThresholdReport": ("slatelake.maintenance.threshold", "ThresholdReport"),
    "PassPlan": ("slatelake.maintenance.fanout_records", "PassPlan"),
    "FsckReport": ("slatelake.maintenance.fsck", "FsckReport"),
    "BatchOrder": ("slatelake.maintenance.fanout_records", "BatchOrder"),
    "BatchResult": ("slatelake.maintenance.fanout_records", "BatchResult"),
    "Page": ("slatelake.maintenance.history", "Page"),
    "AuditEntry": ("slatelake.maintenance.history", "AuditEntry"),
    "Hold": ("slatelake.catalog.holds", "Hold"),
    "HoldChange": ("slatelake.maintenance.holds", "HoldChange"),
    "PolicyRow": ("slatelake.maintenance.policy", "PolicyRow"),
    "PolicyView": ("slatelake.maintenance.api", "PolicyView"),
    "HealthPolicy": ("slatelake.maintenance.health_report", "HealthPolicy"),
    "LakeHealth": ("slatelake.maintenance.health_report", "LakeHealth"),
    "BackupReport": ("slatelake.maintenance.backup", "BackupReport"),
    "FoldRequest": ("slatelake.maintenance.fold", "FoldRequest"),
    "FoldTurn": ("slatelake.maintenance.fold", "FoldTurn"),
    "Backlog": ("slatelake.maintenance.backlog", "Backlog"),
    "LeaseRecord": ("slatelake.maintenance.flight", "LeaseRecord"),
    "BreakResult": ("slatelake.maintenance.flight", "BreakResult"),
    "BorrowedFiles": ("slatelake.catalog.borrowed", "BorrowedFiles"),
    "BorrowedRelease": ("slatelake.maintenance.borrowed", "BorrowedRelease"),
    "StoreCensus": ("slatelake.store.census", "StoreCensus"),
    "CompactStoreReport": ("slatelake.store.merge", "CompactStoreReport"),
    "FleetRegistry": ("slatelake.maintenance.fleet", "FleetRegistry"),
    # what a surface prints or reads beside the verbs
    "show_input": ("slatelake.store.location", "show_input"),
    # caps every store call, in every thread, at a monotonic instant (a Lambda's end)
    "store_deadline": ("slatelake.store.db", "deadline"),
    "OPTION_PREFIX": ("slatelake.maintenance.options", "PREFIX"),
    "OPTION_ALIAS_PREFIX": ("slatelake.maintenance.options", "ALIAS_PREFIX"),
    "POLICY_FIELDS": ("slatelake.maintenance.policy", "FIELDS"),
    "SUBSPACES": ("slatelake.maintenance", "SUBSPACES"),
    "MEMORY_LIMIT_ENV": ("slatelake.ducklake.extensions", "MEMORY_LIMIT_ENV"),
    # the process's maintenance switch and a lake's cadence (maintenance/cadence.py)
    "MAINTENANCE_ENABLED_ENV": ("slatelake.maintenance.cadence", "ENABLED_ENV"),
    "maintenance_switch": ("slatelake.maintenance.cadence", "maintenance_switch"),
    "MaintenanceSwitch": ("slatelake.maintenance.cadence", "MaintenanceSwitch"),
    "CadenceCheck": ("slatelake.maintenance.cadence", "CadenceCheck"),
}


# A request or report type (or ``Session``), imported when first asked for.
__getattr__ = lazy_getattr("slatelake", _LAZY, globals())


__all__ = [
    "AlreadyRunningError",
    "AmbiguousWriteError",
    "CommitLockBusyError",
    "ConflictError",
    "CorruptionError",
    "FencedError",
    "FormatError",
    "HeldSnapshotError",
    "PinnedSnapshotError",
    "LeaseLiveError",
    "LeaseLostError",
    "MaintenanceConfigError",
    "MaintenanceDisabledError",
    "MergeIncompleteError",
    "MisconfigurationError",
    "NotFoundError",
    "OperationLimitError",
    "PermissionDeniedError",
    "ReadOnlyError",
    "Session",
    "SlatelakeError",
    "StaleViewError",
    "StepFailed",
    "StoreError",
    "StoreTimeoutError",
    "StoreUnavailableError",
    "UnsupportedError",
    "connect",
    "open",
    "retry",
    *sorted(set(_LAZY) - {"Session"}),
]
