"""slatelake: DuckLake catalogs kept in SlateDB on object storage.

``slatelake.connect(url, data_path=None, read_only=False, ...)`` opens a
session that works like a DuckDB connection (``sql``, ``execute``,
``register``, transactions) with the lake attached as a real DuckLake;
duckdb is imported only when it is called. The errors a caller catches are
exported here, each saying whether retrying can help (``retryable``), and
``retry(fn)`` re-runs a callable on ``ConflictError``. Layers, each
importing only those before it: ``store`` <- ``log`` <- ``catalog`` <-
``ducklake`` <- ``maintenance``. See docs/architecture.md.
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
    MaintenanceConfigError,
    MergeIncompleteError,
    MisconfigurationError,
    NotFoundError,
    OperationLimitError,
    PermissionDeniedError,
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

if TYPE_CHECKING:
    import duckdb

    from slatelake.maintenance.session import MaintainedSession as Session

__version__ = "0.1.0"


def connect(
    lake_url: str,
    data_path: str | None = None,
    read_only: bool = False,
    alias: str = "lake",
    options: dict[str, str] | None = None,
    on_pass: Any = None,
    connection: duckdb.DuckDBPyConnection | None = None,
    snapshot_version: int | None = None,
    snapshot_time: datetime | str | None = None,
) -> Session:
    """Open a session on the lake at ``lake_url`` (``s3://bucket/prefix``,
    ``file:///path`` or a local path), attached as DuckLake catalog ``alias``
    and made the default. With ``data_path`` an empty root becomes a new lake.

    ``options``: the ``MAINTENANCE_*`` settings, checked here;
    ``session.maintenance()`` runs a pass with them. ``connection``: your own
    DuckDB connection to attach the lake to (the session then owns and closes
    it). ``snapshot_version``/``snapshot_time``: a read-only session at that
    snapshot, as DuckLake's ATTACH options."""
    from slatelake.maintenance.session import MaintainedSession

    return MaintainedSession(
        lake_url,
        data_path=data_path,
        read_only=read_only,
        alias=alias,
        options=options,
        on_pass=on_pass,
        connection=connection,
        snapshot_version=snapshot_version,
        snapshot_time=snapshot_time,
    )


def __getattr__(name: str) -> Any:
    """``slatelake.Session``, imported (with duckdb) only when asked for."""
    if name == "Session":
        from slatelake.maintenance.session import MaintainedSession

        return MaintainedSession
    raise AttributeError(f"module 'slatelake' has no attribute {name!r}")


__all__ = [
    "AlreadyRunningError",
    "AmbiguousWriteError",
    "CommitLockBusyError",
    "ConflictError",
    "CorruptionError",
    "FencedError",
    "FormatError",
    "HeldSnapshotError",
    "LeaseLiveError",
    "MaintenanceConfigError",
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
    "retry",
]
