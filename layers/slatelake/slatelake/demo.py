"""``slatelake demo``: the substrate end to end on a local lake.

Creates a lake, has two committers race commits into it through the log with
no folder running, folds, and prints what each step did. Fully local.
"""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

from slatelake.catalog.folder import Folder
from slatelake.catalog.lake import Lake
from slatelake.catalog.synthetic import commit_inserts, genesis_changes


def run_demo(directory: str, commits: int = 50) -> None:
    root = Path(directory).resolve()
    if root.exists():
        shutil.rmtree(root)
    url = root.as_uri()
    t0 = time.perf_counter()
    with Lake.create(url) as lake:
        state = lake.materialize()
        lake.commit(state, genesis_changes(), mints_snapshot=True, changes_made="created_schema")
    print(f"created {url} with DuckLake's initial snapshot")
    conflicts: list[int] = []
    threads = [
        threading.Thread(target=lambda t=t: conflicts.append(commit_inserts(url, commits, t)))
        for t in (1, 2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(f"two committers landed {2 * commits} commits, {sum(conflicts)} lost races retried")
    with Lake.open(url, read_only=True) as lake:
        before = lake.materialize()
    folder = Folder(Lake.open(url).location, margin_s=0)
    report = folder.fold_once()
    folder.close()
    print(
        f"folded {report.slots} slots ({report.operations} operations) in "
        f"{report.seconds:.3f}s; truncated {report.truncated}"
    )
    with Lake.open(url, read_only=True) as lake:
        after = lake.materialize()
    same = "identical" if after.same_rows(before) else "DIFFERENT"
    print(
        f"head {after.head.snapshot_id}/{after.head.batch_seq}, {after.row_count()} catalog "
        f"rows; materializations before and after folding are {same}"
    )
    print(f"done in {time.perf_counter() - t0:.2f}s")
