"""``slatelake demo``: a local lake end to end, no cloud account.

Part 1, DuckLake: create a lake with a data path, run DuckLake SQL through a
session (every transaction a commit-log slot), read it back from a fresh
read-only session. Part 2, the substrate: two committers race commits into a
second lake with no folder running; then fold, and compare materializations.
"""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

from slatelake.catalog.folder import Folder
from slatelake.catalog.lake import Lake
from slatelake.catalog.synthetic import commit_inserts, genesis_changes


def _ducklake_part(root: Path) -> None:
    from slatelake.ducklake.session import connect

    url = (root / "lake").as_uri()
    with connect(url, data_path=f"{root}/data/") as session:
        session.sql("CREATE TABLE trips (id INTEGER, city VARCHAR, km DOUBLE)")
        session.sql(
            "INSERT INTO trips SELECT i, ['Oslo', 'Lyon', 'Porto'][i % 3 + 1], "
            "i * 1.5 FROM range(1000) r(i)"
        )
        session.sql("INSERT INTO trips VALUES (1000, 'Turku', 3.0)")  # inlined
        with session.transaction():
            session.sql("UPDATE trips SET km = km * 2 WHERE city = 'Lyon'")
            session.sql("DELETE FROM trips WHERE id < 10")
        print(
            f"DuckLake lake {url}: head snapshot {session.state.head.snapshot_id}, "
            f"{len(list(session.lake.log.list_after(0)))} commit-log slots"
        )
    with connect(url, read_only=True) as reader:
        for city, n, km in reader.sql(
            "SELECT city, count(*), round(sum(km), 1) FROM trips GROUP BY 1 ORDER BY 1"
        ).fetchall():
            print(f"  {city:<6} {n:>4} trips {km:>10} km")
        snaps = reader.sql("SELECT snapshot_id, changes FROM lake.snapshots()").fetchall()
        for snap, changes in snaps:
            print(f"  snapshot {snap}: {changes}")


def _substrate_part(root: Path, commits: int) -> None:
    url = (root / "race").as_uri()
    with Lake.create(url) as lake:
        state = lake.materialize()
        lake.commit(state, genesis_changes(), mints_snapshot=True, changes_made="created_schema")
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
        location = lake.location
    folder = Folder(location, margin_s=0)
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


def run_demo(directory: str, commits: int = 50) -> None:
    root = Path(directory).resolve()
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    t0 = time.perf_counter()
    _ducklake_part(root)
    _substrate_part(root, commits)
    print(f"done in {time.perf_counter() - t0:.2f}s")
