"""Loading DuckDB extensions from their PyPI wheels; nothing downloads.

The ``duckdb-extension-*`` wheels ship the binary under
``<package>/extensions/v<version>/<name>.duckdb_extension``. A wheel built for
another DuckDB version is refused with a message naming both versions.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import duckdb

from slatelake.errors import MisconfigurationError

EXTENSIONS = ("ducklake", "httpfs")


def extension_path(name: str) -> Path:
    package = f"duckdb_extension_{name}"
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise MisconfigurationError(
            f"DuckDB extension {name!r} is not installed; install the wheel "
            f"duckdb-extension-{name}=={duckdb.__version__}"
        )
    root = Path(next(iter(spec.submodule_search_locations)))
    wanted = root / "extensions" / f"v{duckdb.__version__}" / f"{name}.duckdb_extension"
    if wanted.is_file():
        return wanted
    found = sorted(p.parent.name for p in root.glob(f"extensions/*/{name}.duckdb_extension"))
    raise MisconfigurationError(
        f"DuckDB extension {name!r} wheel has {', '.join(found) or 'no binaries'}, but duckdb is "
        f"v{duckdb.__version__}; pin duckdb-extension-{name}=={duckdb.__version__}"
    )


def connect() -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with autoinstall/autoload off and our extensions loaded."""
    con = duckdb.connect(
        config={
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
        }
    )
    for name in EXTENSIONS:
        con.execute(f"LOAD '{extension_path(name)}'")
    return con
