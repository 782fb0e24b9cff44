"""``slatelake demo``: a local lake end to end, no cloud account.

Part 1, DuckLake and maintenance: churn a lake (several tables, many small
commits, deletes, a dropped table) through sessions (every transaction a
commit-log slot), index a column and drop another index, run a configured
maintenance pass with progress on (its sweep reclaims the dropped index's
entries), and print its report, the status window and a store census.
Part 2, the race: two DuckLake sessions commit inserts into a second lake at
once with no folder running; then fold, and compare materializations.
"""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

from slatelake.catalog.folder import Folder
from slatelake.catalog.lake import Lake
from slatelake.errors import MisconfigurationError
from slatelake.store.census import store_census

DEMO_OPTIONS = {
    "MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN": "1 second",
    "MAINTENANCE_FLUSH_INLINED_DATA": "true",
    "MAINTENANCE_MERGE_ADJACENT_FILES": "true",
    "MAINTENANCE_REWRITE_DATA_FILES_DELETE_THRESHOLD": "0.1",
    "MAINTENANCE_CLEANUP_OLD_FILES_CLEANUP_ALL": "true",
    "MAINTENANCE_DELETE_ORPHANED_FILES_CLEANUP_ALL": "true",
    # the demo's lake is its own: no writer runs beside the pass (live ones
    # are spared whatever the age: their leases say when they began)
    "MAINTENANCE_ORPHAN_AGE_FLOOR_OVERRIDE": "true",
    "MAINTENANCE_TABLE_BATCHES": "true",
    "MAINTENANCE_PROGRESS": "true",
}


def _ducklake_part(root: Path, tables: int = 4, commits: int = 12) -> None:
    import slatelake

    url = (root / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{root}/data/") as session:
        for t in range(tables):
            session.sql(f"CREATE TABLE trips_{t} (id INTEGER, city VARCHAR, km DOUBLE)")
            for c in range(commits):
                lo = c * 100
                session.sql(
                    f"INSERT INTO trips_{t} SELECT i, ['Oslo', 'Lyon', 'Porto'][i % 3 + 1],"
                    f" i * 1.5 FROM range({lo}, {lo + 100}) r(i)"
                )
            session.sql(f"INSERT INTO trips_{t} VALUES (-1, 'Turku', 3.0)")  # inlined
            session.sql(f"DELETE FROM trips_{t} WHERE id % 10 = 0")
        session.sql("CREATE TABLE scratch AS SELECT * FROM range(100) r(i)")
        session.sql("DROP TABLE scratch")
        rows = sum(
            session.sql(f"SELECT count(*) FROM trips_{t}").fetchone()[0] for t in range(tables)
        )
        session.create_index("trips_0", "id")
        found = session.lookup("trips_0", "id", 42)
        session.create_index("trips_1", "city", name="trips_1_city_idx")
        session.drop_index("trips_1_city_idx")  # its entries wait for the sweep
        print(f"indexed trips_0.id (lookup id=42: {found}); dropped an index on trips_1.city")
        print(
            f"churned lake {url}: {tables} tables, {rows} rows, head snapshot "
            f"{session.state.head.snapshot_id}"
        )
    time.sleep(1.1)  # let the demo's 1-second retention cover the churn
    with slatelake.connect(url, options=DEMO_OPTIONS) as session:
        report = session.maintenance()
        after = sum(
            session.sql(f"SELECT count(*) FROM trips_{t}").fetchone()[0] for t in range(tables)
        )
        print(f"maintenance pass ({report.trigger}), work_pending={report.work_pending}:")
        for step in report.steps:
            print(f"  {step.step:<22} {step.status:<8} {step.detail}")
        print(f"rows after the pass: {after} ({'unchanged' if after == rows else 'CHANGED'})")
    with slatelake.connect(url, read_only=True) as reader:
        window = reader.maintenance_status()
    print(f"status window ({len(window)} pass): newest started_at={window[0].started_at}")
    census = store_census(url)
    print("store census (manifest only; the folder has not folded this lake yet):")
    for row in census.rows():
        if row["bytes"] or row["l0_ssts"]:
            print(f"  {row['subspace']:<9} {row['bytes']:>8} bytes, {row['l0_ssts']} L0 SSTs")
    if census.objects is not None:
        total = census.objects["total"]
        print(f"  objects: {total['objects']} ({total['bytes']} bytes) under the lake root")


def _race_part(root: Path, commits: int) -> None:
    """Two DuckLake sessions (each its own DuckDB and lake handle) insert into
    the same lake at once, one row per commit; a lost race is retried."""
    import slatelake

    url = (root / "race").as_uri()
    with slatelake.connect(url, data_path=f"{root}/race-data/") as session:
        session.sql("CREATE TABLE events (writer INTEGER, n INTEGER)")
    lost: list[int] = []

    def writer(who: int) -> None:
        races = 0
        with slatelake.connect(url) as own:
            for n in range(commits):
                while True:
                    try:
                        own.sql("INSERT INTO events VALUES (?, ?)", params=[who, n])
                        break
                    except slatelake.ConflictError:
                        races += 1
        lost.append(races)

    threads = [threading.Thread(target=writer, args=(who,)) for who in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with slatelake.connect(url, read_only=True) as reader:
        rows, distinct = reader.sql(
            "SELECT count(*), count(DISTINCT (writer, n)) FROM events"
        ).fetchone()
    print(
        f"two sessions committed {2 * commits} inserts, {sum(lost)} lost races retried; "
        f"{rows} rows, {distinct} distinct"
    )
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


DEMO_MARK = ".slatelake-demo"


def prepare_directory(directory: str) -> Path:
    """An empty directory for the demo. A previous demo's (it carries
    ``DEMO_MARK``) is wiped; anything else that holds files is refused, so a
    mistyped path never deletes someone's data."""
    root = Path(directory).resolve()
    if root.exists() and not root.is_dir():
        raise MisconfigurationError(f"demo directory {str(root)!r} is a file; name a directory")
    if root.is_dir() and any(root.iterdir()):
        if not (root / DEMO_MARK).is_file():
            raise MisconfigurationError(
                f"demo directory {str(root)!r} is not empty and was not made by "
                "`slatelake demo`; name a new or empty directory"
            )
        shutil.rmtree(root)
    root.mkdir(parents=True, exist_ok=True)
    (root / DEMO_MARK).write_text("made by `slatelake demo`; the next demo run wipes it\n")
    return root


def run_demo(directory: str, commits: int = 20) -> None:
    root = prepare_directory(directory)
    t0 = time.perf_counter()
    _ducklake_part(root)
    _race_part(root, commits)
    print(f"done in {time.perf_counter() - t0:.2f}s")
