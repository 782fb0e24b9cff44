"""Loading DuckDB extensions from their PyPI wheels; nothing downloads.

The ``duckdb-extension-*`` wheels ship the binary under
``<package>/extensions/v<version>/<name>.duckdb_extension``. A wheel built for
another DuckDB version is refused with a message naming both versions.

S3 credentials live in a DuckDB secret only. Loading httpfs copies
AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN from the
environment into global settings, where ``duckdb_settings()`` and
``current_setting()`` hand them to any SQL (a read-only ``slatelake sql``
included); those settings are reset right after the load. A secret's key and
token are redacted in ``duckdb_secrets()``, and DuckDB refuses to show them
unredacted (``allow_unredacted_secrets`` is off and cannot be turned on while
the database runs).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from urllib.parse import urlparse

import duckdb

from slatelake.ducklake.sql import ident, literal
from slatelake.errors import MisconfigurationError

EXTENSIONS = ("ducklake", "httpfs")
TEMP_DIRECTORY_ENV = "SLATELAKE_DUCKDB_TEMP_DIRECTORY"
# The settings httpfs fills from the environment's credentials when it loads.
MIRRORED_CREDENTIALS = ("s3_access_key_id", "s3_secret_access_key", "s3_session_token")


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
    skip_absent_pandas_probe()
    config = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}
    # Where DuckDB spills; in Lambda the working directory is read-only.
    spill = os.environ.get(TEMP_DIRECTORY_ENV)
    if spill:
        config["temp_directory"] = spill
    return prepare(duckdb.connect(config=config))


def prepare(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """Load our extensions into ``con`` from the wheels (a caller's own
    connection included), clear the credentials httpfs mirrored, set the S3 secret."""
    skip_absent_pandas_probe()
    for name in EXTENSIONS:
        con.execute(f"LOAD {literal(str(extension_path(name)))}")
    for setting in MIRRORED_CREDENTIALS:
        con.execute(f"RESET GLOBAL {ident(setting)}")
    configure_s3(con)
    return con


def skip_absent_pandas_probe() -> None:
    """DuckDB's Python binding tries ``import pandas`` on every execute with
    parameters; when pandas is not installed each try is a failed import that
    walks ``sys.path`` (about 1 ms, dozens per captured commit). Recording the
    absence once makes each try free. An installed pandas is left alone."""
    if "pandas" not in sys.modules and importlib.util.find_spec("pandas") is None:
        sys.modules["pandas"] = None  # type: ignore[assignment]


def _env(name: str, default: str = "") -> str:
    """An environment value bound for SQL. A refusal names the variable, never
    the value (it may be a secret)."""
    value = os.environ.get(name) or default
    if "\x00" in value:
        raise MisconfigurationError(f"environment variable {name} holds a NUL byte; fix its value")
    return value


def configure_s3(con: duckdb.DuckDBPyConnection) -> None:
    """The S3 secret from the environment (Lambda role variables, or moto's
    endpoint in tests); every value is a quoted literal. Without
    AWS_ACCESS_KEY_ID there is no secret and S3 is reached unsigned."""
    if not _env("AWS_ACCESS_KEY_ID"):
        return
    region = _env("AWS_REGION") or _env("AWS_DEFAULT_REGION", "us-east-1")
    parts = [
        "TYPE S3",
        f"KEY_ID {literal(_env('AWS_ACCESS_KEY_ID'))}",
        f"SECRET {literal(_env('AWS_SECRET_ACCESS_KEY'))}",
        f"REGION {literal(region)}",
    ]
    if _env("AWS_SESSION_TOKEN"):
        parts.append(f"SESSION_TOKEN {literal(_env('AWS_SESSION_TOKEN'))}")
    endpoint = _env("AWS_ENDPOINT_URL_S3") or _env("AWS_ENDPOINT_URL")
    if endpoint:
        url = urlparse(endpoint)
        parts += [
            f"ENDPOINT {literal(url.netloc)}",
            "URL_STYLE 'path'",
            f"USE_SSL {'true' if url.scheme == 'https' else 'false'}",
        ]
    con.execute(f"CREATE OR REPLACE SECRET slatelake_s3 ({', '.join(parts)})")
