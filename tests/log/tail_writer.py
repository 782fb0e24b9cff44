"""A writer process for the log's stress tests: commits INSERT-shaped change
sets to a lake until a deadline, re-validating after each lost race.

``python -m tests.log.tail_writer URL TABLE_ID SECONDS`` prints the number of
commits it landed."""

from __future__ import annotations

import os
import sys
import time

from slatelake.catalog.lake import Lake
from slatelake.errors import ConflictError
from tests.catalog.synthetic import commit_changes


def commit_until(url: str, table_id: int, seconds: float) -> int:
    deadline = time.monotonic() + seconds
    done = 0
    with Lake.open(url) as lake:
        state = lake.materialize()
        while time.monotonic() < deadline:
            try:
                lake.commit(
                    state,
                    commit_changes(state, table_id, message=f"{table_id}:{done}"),
                    mints_snapshot=True,
                    changes_made=f"inserted_into_table:{table_id}:{done}",
                )
                done += 1
            except ConflictError:
                lake.refresh(state)
    return done


if __name__ == "__main__":
    print(commit_until(sys.argv[1], int(sys.argv[2]), float(sys.argv[3])))
    sys.stdout.flush()
    os._exit(0)  # native threads can abort the interpreter's teardown (see tests/catalog)
