"""slatelake: DuckLake catalogs kept in SlateDB on object storage.

Layers, each importing only those before it: ``store`` (SlateDB, keyspace,
values) <- ``log`` (commit-log slots, replay, leases) <- ``catalog`` (DuckLake
rows, materialization, the folder) <- ``ducklake`` (DuckDB + DuckLake over a
materialized catalog). See DESIGN.md.

``slatelake.connect(url, data_path=None, read_only=False)`` opens a session;
duckdb is imported only when it is called. The errors it raises are exported
here (``slatelake.errors``); each says whether retrying can help (``retryable``).
"""

from typing import Any

from slatelake.errors import (
    AlreadyRunningError,
    AmbiguousWriteError,
    ConflictError,
    CorruptionError,
    FencedError,
    FormatError,
    LeaseLiveError,
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

__version__ = "0.1.0"


def connect(
    lake_url: str,
    data_path: str | None = None,
    read_only: bool = False,
    alias: str = "lake",
    options: dict[str, str] | None = None,
    on_pass: Any = None,
    connection: Any = None,
    snapshot_version: int | None = None,
    snapshot_time: Any = None,
) -> Any:
    """Open a DuckLake session on a slatelake lake. ``options`` are the
    ``MAINTENANCE_*`` settings, validated here; ``session.maintenance()`` runs a pass.
    ``connection``: a DuckDB connection to attach the lake to (the session owns it).
    ``snapshot_version``/``snapshot_time``: a read-only session at that snapshot."""
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


__all__ = [
    "AlreadyRunningError",
    "AmbiguousWriteError",
    "ConflictError",
    "CorruptionError",
    "FencedError",
    "FormatError",
    "LeaseLiveError",
    "MisconfigurationError",
    "NotFoundError",
    "OperationLimitError",
    "PermissionDeniedError",
    "ReadOnlyError",
    "SlatelakeError",
    "StaleViewError",
    "StepFailed",
    "StoreError",
    "StoreTimeoutError",
    "StoreUnavailableError",
    "UnsupportedError",
    "connect",
]
