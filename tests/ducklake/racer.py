"""Child-process drivers for the session race and crash tests."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from slatelake.errors import ConflictError


def _wait(path: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited too long for {path}")
        time.sleep(0.02)


def race(url: str, role: str, flags: str, mode: str) -> None:
    """Both roles open a transaction on the same head; 'late' commits after
    'early' landed. ``append``: both insert into t. ``drop``: early drops t."""
    from slatelake.ducklake.session import connect

    flag = Path(flags)
    value = 1 if role == "early" else 2
    outcome = {"role": role}
    early_sql = "DROP TABLE t" if mode == "drop" else f"INSERT INTO t VALUES ({value}, '{role}')"
    with connect(url) as session:
        try:
            with session.transaction():
                if role == "early":
                    session.sql(early_sql)
                else:
                    session.sql(f"INSERT INTO t VALUES ({value}, '{role}')")
                (flag / f"{role}-written").touch()
                if role == "early":
                    _wait(flag / "late-written")
                else:
                    _wait(flag / "early-committed")
            outcome["first_try"] = "committed"
        except ConflictError as exc:
            outcome["first_try"] = "conflict"
            outcome["message"] = str(exc)
        finally:
            if role == "early":
                (flag / "early-committed").touch()
    print(json.dumps(outcome))


def crash_before_slot(url: str) -> None:
    """Write Parquet through DuckLake, then die before the commit wins its slot."""
    from slatelake.catalog.lake import Lake
    from slatelake.ducklake.session import connect

    def die(*args: object, **kwargs: object) -> None:
        os._exit(9)

    session = connect(url)
    Lake.commit_change_set = die  # type: ignore[method-assign]  # every commit passes here
    session.sql("INSERT INTO t SELECT i, 'crash' FROM range(1000) r(i)")
    os._exit(0)  # not reached


if __name__ == "__main__":
    if sys.argv[1] == "race":
        race(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5])
    else:
        crash_before_slot(sys.argv[2])
