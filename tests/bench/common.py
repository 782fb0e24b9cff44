"""What every benchmark records about the run: when, on what, with which pins."""

from __future__ import annotations

import datetime as dt
import os
import platform
from typing import Any


def run_header(ducklake_extension: str) -> dict[str, Any]:
    import duckdb
    import slatedb

    return {
        "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
        },
        "versions": {
            "duckdb": duckdb.__version__,
            "slatedb": getattr(slatedb, "__version__", "0.17 (pinned)"),
            "ducklake_extension": ducklake_extension,
        },
    }
