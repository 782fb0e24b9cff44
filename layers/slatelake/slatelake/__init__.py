"""slatelake: DuckLake catalogs kept in SlateDB on object storage.

Layers, each importing only those before it: ``store`` (SlateDB, keyspace,
values) <- ``log`` (commit-log slots, replay, leases) <- ``catalog`` (DuckLake
rows, materialization, the folder). See DESIGN.md.
"""

from slatelake.errors import (
    ConflictError,
    CorruptionError,
    FencedError,
    FormatError,
    MisconfigurationError,
    NotFoundError,
    OperationLimitError,
    ReadOnlyError,
    SlatelakeError,
    UnsupportedError,
)

__version__ = "0.1.0"

__all__ = [
    "ConflictError",
    "CorruptionError",
    "FencedError",
    "FormatError",
    "MisconfigurationError",
    "NotFoundError",
    "OperationLimitError",
    "ReadOnlyError",
    "SlatelakeError",
    "UnsupportedError",
]
