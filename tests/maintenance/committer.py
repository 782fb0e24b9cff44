"""A child process that keeps inserting into a lake until told to stop."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from slatelake.ducklake.session import connect, retry


def main(url: str, stop_file: str) -> None:
    committed = []
    with connect(url) as session:
        i = 0
        while not Path(stop_file).exists() or i < 5:
            retry(lambda i=i: session.sql(f"INSERT INTO b VALUES ({100_000 + i})"), attempts=20)
            committed.append(100_000 + i)
            i += 1
    print(json.dumps(committed))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
