"""Small drivers the catalog tests run in-process and in child processes."""

from __future__ import annotations

import sys

from slatelake.catalog.lake import Lake
from slatelake.catalog.synthetic import commit_changes
from slatelake.errors import ConflictError


def commit_inserts(url: str, count: int, table_id: int) -> int:
    """Land ``count`` INSERT-shaped commits, retrying lost races. Returns races lost."""
    lost = 0
    with Lake.open(url) as lake:
        state = lake.materialize()
        done = 0
        while done < count:
            try:
                lake.commit(
                    state,
                    commit_changes(state, table_id, message=f"{table_id}:{done}"),
                    mints_snapshot=True,
                    changes_made=f"inserted_into_table:{table_id}:{done}",
                )
                done += 1
            except ConflictError:
                lost += 1
                lake.refresh(state)
    return lost


if __name__ == "__main__":
    print(commit_inserts(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
