"""A stock DuckDB process: no slatelake in it, only duckdb and the extension
binaries it is given. Attaches a catalog image with DuckLake, runs queries and
prints their rows as JSON. Run as a script::

    python tests/ducklake/stock_reader.py '{"extensions": [...], "attach": "...",
                                            "queries": {...}}'

S3 credentials and the endpoint come from the environment (moto's in tests)
into a DuckDB secret this script creates itself.
"""

from __future__ import annotations

import json
import os
import sys
from urllib.parse import urlparse

import duckdb


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def main(doc: dict) -> dict:
    con = duckdb.connect(
        config={"autoinstall_known_extensions": False, "autoload_known_extensions": False}
    )
    for path in doc["extensions"]:
        con.execute(f"LOAD {_quote(path)}")
    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    if endpoint and os.environ.get("AWS_ACCESS_KEY_ID"):
        url = urlparse(endpoint)
        con.execute(
            "CREATE SECRET stock_s3 (TYPE S3, "
            f"KEY_ID {_quote(os.environ['AWS_ACCESS_KEY_ID'])}, "
            f"SECRET {_quote(os.environ['AWS_SECRET_ACCESS_KEY'])}, "
            f"REGION {_quote(os.environ.get('AWS_REGION', 'us-east-1'))}, "
            f"ENDPOINT {_quote(url.netloc)}, URL_STYLE 'path', USE_SSL false)"
        )
    con.execute(doc["attach"])
    out = {
        name: [list(r) for r in con.execute(sql).fetchall()] for name, sql in doc["queries"].items()
    }
    out["slatelake_loaded"] = any(m.split(".")[0] == "slatelake" for m in sys.modules)
    return out


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1])), default=str))
