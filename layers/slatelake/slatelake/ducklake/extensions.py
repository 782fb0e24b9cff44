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

DuckDB checks an extension's signature on every LOAD into a new database,
hashing the whole file: about 0.25 s per session for ducklake and httpfs,
paid again by every session a process opens. A process checks each file once:
its first database loads it with the check on, and later databases load the
same file (same inode, size and mtime) with unsigned loading allowed only
for those LOADs, then switched off, which DuckDB cannot undo while the
database runs, so no SQL can load an unchecked extension afterwards.
"""

from __future__ import annotations

import importlib.util
import math
import os
import re
import sys
from pathlib import Path
from urllib.parse import urlparse

import duckdb

from slatelake.ducklake.sql import ident, literal
from slatelake.errors import MisconfigurationError
from slatelake.store.db import store_timeout_s

EXTENSIONS = ("ducklake", "httpfs")
TEMP_DIRECTORY_ENV = "SLATELAKE_DUCKDB_TEMP_DIRECTORY"
MEMORY_LIMIT_ENV = "SLATELAKE_DUCKDB_MEMORY_LIMIT"
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*(?:[KMGT]i?B|B)", re.IGNORECASE)
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


# Extension files whose signature DuckDB checked in this process, by identity.
_checked: set[tuple[str, int, int, int, int]] = set()


def _identity(path: Path) -> tuple[str, int, int, int, int]:
    st = path.stat()
    return str(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def base_config() -> dict[str, str | bool | int | float | list[str]]:
    """What every DuckDB slatelake opens is configured with: nothing
    installed or autoloaded (offline), the spill directory (in Lambda the
    working directory is read-only) and the memory limit."""
    config: dict[str, str | bool | int | float | list[str]] = {
        "autoinstall_known_extensions": False,
        "autoload_known_extensions": False,
    }
    spill = os.environ.get(TEMP_DIRECTORY_ENV)
    if spill:
        config["temp_directory"] = spill
    limit = memory_limit()
    if limit is not None:
        config["memory_limit"] = limit
    return config


def connect() -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with autoinstall/autoload off and our extensions loaded."""
    skip_absent_pandas_probe()
    paths = [extension_path(name) for name in EXTENSIONS]
    identities = [_identity(path) for path in paths]
    checked = all(identity in _checked for identity in identities)
    config = base_config()
    config["allow_unsigned_extensions"] = checked
    con = duckdb.connect(config=config)
    try:
        _load(con, paths)
        if checked:
            con.execute("SET GLOBAL allow_unsigned_extensions = false")
        else:  # these LOADs checked each signature
            _checked.update(identities)
        return _configure(con)
    except BaseException:
        con.close()
        raise


def memory_limit() -> str | None:
    """``SLATELAKE_DUCKDB_MEMORY_LIMIT`` (a DuckDB size, e.g. ``512MiB``), or None.

    DuckDB's own default is 80% of the host's memory, and DuckLake keeps a
    schema and statistics entry per snapshot in DuckDB's object cache, which
    is evicted only when that limit is reached: a long pass or a warm Lambda
    container grows with every commit until then. A limit bounds it (and
    spills big merges to the temp directory instead).
    """
    raw = os.environ.get(MEMORY_LIMIT_ENV, "").strip()
    if not raw:
        return None
    size = _SIZE.fullmatch(raw)
    if size is None or float(size.group(1)) <= 0:
        raise MisconfigurationError(
            f"{MEMORY_LIMIT_ENV}={raw[:40]!r}: expected a size such as 512MiB or 2GB "
            "(B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)"
        )
    return raw


def prepare(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """Load our extensions into a caller's own connection from the wheels
    (its configuration decides the signature check), clear the credentials
    httpfs mirrored, set the S3 secret."""
    skip_absent_pandas_probe()
    _load(con, [extension_path(name) for name in EXTENSIONS])
    return _configure(con, own=False)


def _load(con: duckdb.DuckDBPyConnection, paths: list[Path]) -> None:
    for path in paths:
        con.execute(f"LOAD {literal(str(path))}")


def _configure(con: duckdb.DuckDBPyConnection, own: bool = True) -> duckdb.DuckDBPyConnection:
    for setting in MIRRORED_CREDENTIALS:
        con.execute(f"RESET GLOBAL {ident(setting)}")
    configure_s3(con)
    if own:  # a caller's connection keeps the HTTP settings its owner chose
        bound_http_requests(con)
    return con


def bound_http_requests(con: duckdb.DuckDBPyConnection) -> None:
    """httpfs's requests get the store's deadline (``SLATELAKE_STORE_TIMEOUT_S``,
    whole seconds, at least one; each try of a request) instead of httpfs's
    own 30 s, so a data-file request the store holds fails like every other
    store call."""
    seconds = max(1, math.ceil(store_timeout_s()))
    con.execute(f"SET GLOBAL http_timeout = {int(seconds)}")


def skip_absent_pandas_probe() -> None:
    """DuckDB's Python binding tries ``import pandas`` on every execute with
    parameters; when pandas is not installed each try is a failed import that
    walks ``sys.path`` (about 1 ms). Our own statements bind none (``sql.run``),
    but a caller's may, and a value with no literal still is. Recording the
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
