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


def race(url: str, role: str, flags: str) -> None:
    """Both roles insert from the same head; 'late' commits after 'early' landed."""
    from slatelake.ducklake.session import connect, retry

    flag = Path(flags)
    value = 1 if role == "early" else 2
    outcome = {"role": role}
    with connect(url) as session:
        try:
            with session.transaction():
                session.sql(f"INSERT INTO t VALUES ({value}, '{role}')")
                (flag / f"{role}-inserted").touch()
                if role == "early":
                    _wait(flag / "late-inserted")
                else:
                    _wait(flag / "early-committed")
            outcome["first_try"] = "committed"
        except ConflictError as exc:
            outcome["first_try"] = "conflict"
            outcome["message"] = str(exc)
            retry(lambda: session.sql(f"INSERT INTO t VALUES ({value}, '{role}')"))
            outcome["retried"] = "committed"
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
        race(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        crash_before_slot(sys.argv[2])
