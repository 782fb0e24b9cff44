"""Loading DuckDB extensions from their PyPI wheels; nothing downloads.

The ``duckdb-extension-*`` wheels ship the binary under
``<package>/extensions/v<version>/<name>.duckdb_extension``. A wheel built for
another DuckDB version is refused with a message naming both versions.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from urllib.parse import urlparse

import duckdb

from slatelake.errors import MisconfigurationError

EXTENSIONS = ("ducklake", "httpfs")
TEMP_DIRECTORY_ENV = "SLATELAKE_DUCKDB_TEMP_DIRECTORY"


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
    config = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}
    # Where DuckDB spills; in Lambda the working directory is read-only.
    spill = os.environ.get(TEMP_DIRECTORY_ENV)
    if spill:
        config["temp_directory"] = spill
    con = duckdb.connect(config=config)
    for name in EXTENSIONS:
        con.execute(f"LOAD '{extension_path(name)}'")
    configure_s3(con)
    return con


def configure_s3(con: duckdb.DuckDBPyConnection) -> None:
    """An httpfs S3 secret from the environment (Lambda role variables, or moto's
    endpoint in tests). Without AWS_ACCESS_KEY_ID, httpfs keeps its own chain."""
    env = os.environ
    if not env.get("AWS_ACCESS_KEY_ID"):
        return
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1"
    parts = [
        "TYPE S3",
        f"KEY_ID '{env['AWS_ACCESS_KEY_ID']}'",
        f"SECRET '{env.get('AWS_SECRET_ACCESS_KEY', '')}'",
        f"REGION '{region}'",
    ]
    if env.get("AWS_SESSION_TOKEN"):
        parts.append(f"SESSION_TOKEN '{env['AWS_SESSION_TOKEN']}'")
    endpoint = env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
    if endpoint:
        url = urlparse(endpoint)
        parts += [
            f"ENDPOINT '{url.netloc}'",
            "URL_STYLE 'path'",
            f"USE_SSL {'true' if url.scheme == 'https' else 'false'}",
        ]
    con.execute(f"CREATE OR REPLACE SECRET slatelake_s3 ({', '.join(parts)})")
