"""The soak's oracle: open the lake fresh and hold it to the writers' journals.

Run in a process of its own, with the store reached directly (no fault
proxy): ``python -m tests.soak.check LAKE WORKDIR SINCE [--allow-conflicts]``
prints one JSON object. Per table of the lake (the shared one and each
writer's own):

- ``lost``: ids of acknowledged inserts absent now (an acknowledged or
  ambiguous delete of them excuses the absence);
- ``doubled``: ids present more than once;
- ``refused_present``: ids of refused inserts present;
- ``undeleted``: ids an acknowledged delete removed, present;
- ``phantom``: ids present that no writer ever tried to insert.

Then every retained snapshot (from SINCE, where the tables exist) is read
whole with time travel: it must read, show no id twice, and show no refused
or phantom id. The journals are loaded into DuckDB (in the session's own
``memory`` database) so the comparison is joins, not Python sets.

From the journals alone: ``conflicts_nonconflicting``, the conflicts raised
to writers on work that only appended (DuckLake commits such work beside any
commit that did not delete from its table, so each is a finding), with
samples of their messages; ``conflicts_ducklake_rule``, appends DuckLake
itself refused over such a delete (counted, as stock refuses them too).

Pinned readers (``workers.pinner``, what became of each in
``pins-plan.json``): every pin that ended before the soak did (closed, or
killed and its lease lapsed) must have been reclaimed by the passes after it
(``check_pins``): its snapshot gone from the catalog's snapshots, and every
file it read that no snapshot still in the catalog reads gone from storage
(one scheduled for deletion within the last few passes before the stop is
``pending``, not a finding). ``pins_missing``: a pinned reader that never
pinned, or died without being killed.

``violations`` names every non-zero finding; ``allow_conflicts`` reports
conflicts on non-conflicting work without making them one.
"""

from __future__ import annotations

import csv
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from slatelake.ducklake.catalog_files import files_at
from slatelake.ducklake.commit_flow import META_DB
from slatelake.ducklake.sql import ident
from tests.soak.journal import AMBIGUOUS, Operation, lake_tables, read_journal, tally_conflicts

MEM = "memory"
# Samples of what went wrong, kept verbatim, per kind of finding.
SAMPLES = 5
# Findings that fail the soak when non-zero.
VIOLATIONS = (
    "lost",
    "doubled",
    "refused_present",
    "undeleted",
    "phantom",
    "snapshots_unreadable",
    "snapshot_doubled",
    "snapshot_refused",
    "snapshot_phantom",
    "conflicts_nonconflicting",
    "fsck_damage",
    "pins_unreclaimed",
    "pins_missing",
)
# fsck's kinds that are damage; the others (stranded rows) the next pass sweeps.
FSCK_DAMAGE = ("missing_file", "size_mismatch", "scheduled_while_referenced", "image_ahead")


def load_operations(workdir: Path) -> list[Operation]:
    ops: list[Operation] = []
    for path in sorted(workdir.glob("writer-*.jsonl")):
        ops.extend(read_journal(path)[0])
    return ops


def _mem(kind: str, table: str) -> str:
    """The oracle's own table of ``kind`` for lake table ``table``, quoted."""
    return f"{MEM}.{ident(f'soak_{kind}_{table}')}"


def _lake(table: str) -> str:
    return f"lake.{ident(table)}"


def _write_ranges(ops: list[Operation], path: Path) -> int:
    """The journal as (tbl, lo, hi, action, fate) rows for DuckDB to read."""
    n = 0
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["tbl", "lo", "hi", "action", "fate"])
        for op in ops:
            for action, ranges in (("insert", op.inserts), ("delete", op.deletes)):
                for table, spans in ranges.items():
                    for lo, hi in spans:
                        out.writerow([table, lo, hi, action, op.fate or AMBIGUOUS])
                        n += 1
    return n


def _load(con: Any, ops: list[Operation], workdir: Path, tables: list[str]) -> None:
    ranges = workdir / "journal-ranges.csv"
    _write_ranges(ops, ranges)
    con.execute(
        f"CREATE TABLE {MEM}.soak_ranges AS SELECT * FROM read_csv(?, header = true, "
        "columns = {'tbl': 'VARCHAR', 'lo': 'BIGINT', 'hi': 'BIGINT', "
        "'action': 'VARCHAR', 'fate': 'VARCHAR'})",
        [str(ranges)],
    )
    con.execute(
        f"CREATE TABLE {MEM}.soak_ids AS SELECT tbl, unnest(range(lo, hi)) AS id, action, fate "
        f"FROM {MEM}.soak_ranges"
    )
    for table in tables:
        con.execute(
            f"CREATE TABLE {_mem('inserted', table)} AS SELECT id, fate FROM {MEM}.soak_ids "
            "WHERE tbl = ? AND action = 'insert'",
            [table],
        )
        con.execute(
            f"CREATE TABLE {_mem('refused', table)} AS SELECT id "
            f"FROM {_mem('inserted', table)} WHERE fate = 'refused'"
        )


def check_table(con: Any, table: str) -> dict[str, int]:
    """The final state of ``table`` against the journal."""
    con.execute(
        f"CREATE TABLE {_mem('present', table)} AS "
        f"SELECT id, count(*) AS c FROM {_lake(table)} GROUP BY id"
    )
    row = con.execute(
        f"""
        WITH j AS (SELECT id, action, fate FROM {MEM}.soak_ids WHERE tbl = ?),
        ins AS (SELECT id, fate FROM j WHERE action = 'insert'),
        gone AS (SELECT id FROM j WHERE action = 'delete' AND fate IN ('ack', 'ambiguous')),
        dack AS (SELECT id FROM j WHERE action = 'delete' AND fate = 'ack'),
        p AS (SELECT id, c FROM {_mem("present", table)})
        SELECT
          (SELECT count(*) FROM ins WHERE fate = 'ack'
             AND NOT EXISTS (SELECT 1 FROM gone WHERE gone.id = ins.id)
             AND NOT EXISTS (SELECT 1 FROM p WHERE p.id = ins.id)),
          (SELECT count(*) FROM p WHERE c > 1),
          (SELECT count(*) FROM ins JOIN p USING (id) WHERE fate = 'refused'),
          (SELECT count(*) FROM dack JOIN p USING (id)),
          (SELECT count(*) FROM p WHERE NOT EXISTS (SELECT 1 FROM ins WHERE ins.id = p.id)),
          (SELECT count(*) FROM ins JOIN p USING (id) WHERE fate = 'ambiguous'),
          (SELECT coalesce(sum(c), 0) FROM p)
        """,
        [table],
    ).fetchone()
    keys = (
        "lost",
        "doubled",
        "refused_present",
        "undeleted",
        "phantom",
        "ambiguous_present",
        "rows_present",
    )
    return dict(zip(keys, (int(v) for v in row), strict=True))


def check_snapshots(con: Any, since: int, tables: list[str]) -> dict[str, Any]:
    """Every retained snapshot read whole, each table, with time travel."""
    snaps = [
        r[0]
        for r in con.execute("SELECT snapshot_id FROM lake.snapshots() ORDER BY 1").fetchall()
        if r[0] >= since
    ]
    found: dict[str, Any] = {
        "snapshots_checked": 0,
        "snapshots_unreadable": 0,
        "snapshot_doubled": 0,
        "snapshot_refused": 0,
        "snapshot_phantom": 0,
        "snapshot_samples": [],
    }
    t0 = time.monotonic()
    for snap in snaps:
        bad: list[str] = []
        for table in tables:
            try:
                n, distinct, _, refused, phantom = con.execute(
                    f"SELECT count(*), count(DISTINCT id), sum(length(payload)), "
                    f"count(*) FILTER (WHERE id IN (SELECT id FROM {_mem('refused', table)})), "
                    f"count(*) FILTER (WHERE id NOT IN "
                    f"(SELECT id FROM {_mem('inserted', table)})) "
                    f"FROM {_lake(table)} AT (VERSION => {int(snap)})"
                ).fetchone()
            except Exception as exc:
                found["snapshots_unreadable"] += 1
                bad.append(f"{table} unreadable: {type(exc).__name__}: {str(exc)[:300]}")
                continue
            found["snapshot_doubled"] += n - distinct
            found["snapshot_refused"] += refused
            found["snapshot_phantom"] += phantom
            if n != distinct or refused or phantom:
                bad.append(f"{table}: {n - distinct} doubled, {refused} refused, {phantom} phantom")
        found["snapshots_checked"] += 1
        if bad and len(found["snapshot_samples"]) < SAMPLES:
            found["snapshot_samples"].append(f"snapshot {snap}: {'; '.join(bad)}")
    found["snapshot_seconds"] = round(time.monotonic() - t0, 1)
    return found


def _scheduled(con: Any) -> dict[str, float]:
    """Files scheduled for deletion, by path (spelled as ``files_at`` does),
    with when (epoch seconds)."""
    (root,) = con.execute(
        f"SELECT value FROM {ident(META_DB)}.ducklake_metadata "
        "WHERE key = 'data_path' AND scope IS NULL"
    ).fetchone() or ("",)
    rows = con.execute(
        f"SELECT path, path_is_relative, epoch(schedule_start) "
        f"FROM {ident(META_DB)}.ducklake_files_scheduled_for_deletion"
    ).fetchall()
    return {(f"{root}{p}" if rel else str(p)): float(at) for p, rel, at in rows}


def _present(paths: set[str]) -> set[str]:
    """Those of ``paths`` that exist on storage (local paths, or s3:// URLs
    read with boto3 at the environment's endpoint)."""
    local = {p for p in paths if not p.startswith("s3://")}
    out = {p for p in local if Path(p.removeprefix("file://")).exists()}
    buckets: dict[str, set[str]] = {}
    for p in paths - local:
        bucket, _, key = p.removeprefix("s3://").partition("/")
        buckets.setdefault(bucket, set()).add(key)
    if buckets:
        import boto3

        s3 = boto3.client("s3")
        for bucket, keys in buckets.items():
            listed: set[str] = set()
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
                listed.update(o["Key"] for o in page.get("Contents", []))
            out.update(f"s3://{bucket}/{k}" for k in keys & listed)
    return out


def check_pins(con: Any, lake: str, workdir: Path) -> dict[str, Any]:
    """Each pinned reader's pin held to its end: a pin that ended (closed, or
    killed) must have been reclaimed by the passes after it."""
    from slatelake.maintenance.pins import reader_pins
    from slatelake.store.location import LakeLocation

    found: dict[str, Any] = {
        "pins_ended": 0,
        "pins_reclaimed": 0,
        "pins_unreclaimed": 0,
        "pins_missing": 0,
        "pin_files_exclusive": 0,
        "pin_files_reclaimed": 0,
        "pin_files_pending": 0,
        "pin_reclaim": [],
    }
    plan_path = workdir / "pins-plan.json"
    plan = json.loads(plan_path.read_text()) if plan_path.exists() else {"pinners": {}}
    if not plan["pinners"]:
        return found
    snaps = [r[0] for r in con.execute("SELECT snapshot_id FROM lake.snapshots()").fetchall()]
    keep: set[str] = set()
    for snap in snaps:  # what the head, the pins still held and every retained snapshot read
        keep.update(files_at(con, snap))
    scheduled = _scheduled(con)
    # a file scheduled this recently before the stop may wait for a pass's cleanup still
    grace = plan["cleanup_s"] + 3 * plan["pass_interval_s"] + 10.0
    live = {p.reader_id for p in reader_pins(LakeLocation.parse(lake))}
    records = {
        i: json.loads(path.read_text())
        for i in plan["pinners"]
        if (path := workdir / f"pinned-{i}.json").exists()
    }
    held = {r.get("snapshot") for i, r in records.items() if plan["pinners"][i]["mode"] == "held"}
    # a pin held to the stop keeps every file it was read through, including
    # files it shares with an earlier pin: those are its, not unreclaimed
    for i in plan["pinners"]:
        if (
            plan["pinners"][i]["mode"] == "held"
            and (path := workdir / f"pinfiles-{i}.json").exists()
        ):
            keep.update(json.loads(path.read_text()))
    for index, event in sorted(plan["pinners"].items(), key=lambda kv: int(kv[0])):
        record = records.get(index, {})
        snap = record.get("snapshot")
        if snap is None or event["mode"] == "died":
            found["pins_missing"] += 1
            found["pin_reclaim"].append(
                {"index": int(index), "mode": event["mode"], "pinned": snap}
            )
            continue
        if event["mode"] == "held":  # released at the stop, after the last pass
            continue
        if snap in held:  # a reader that read to the end pins it too: nothing to reclaim
            found["pin_reclaim"].append(
                {
                    "index": int(index),
                    "mode": event["mode"],
                    "snapshot": snap,
                    "kept_by_a_held_pin": True,
                }
            )
            continue
        files = set(json.loads((workdir / f"pinfiles-{index}.json").read_text()))
        exclusive = files - keep
        present = _present(exclusive)
        pending = {p for p in present if scheduled.get(p, 0.0) > plan["stopped_at"] - grace}
        unreclaimed = sorted(present - pending)
        gone = snap not in snaps
        reclaimed = gone and not unreclaimed
        found["pins_ended"] += 1
        found["pins_reclaimed"] += reclaimed
        found["pins_unreclaimed"] += not reclaimed
        found["pin_files_exclusive"] += len(exclusive)
        found["pin_files_reclaimed"] += len(exclusive - present)
        found["pin_files_pending"] += len(pending)
        found["pin_reclaim"].append(
            {
                "index": int(index),
                "mode": event["mode"],
                "snapshot": snap,
                "ended_s_before_stop": round(plan["stopped_at"] - event["at"], 1),
                "snapshot_gone": gone,
                "lease_live": record.get("reader_id") in live,
                "files": len(files),
                "files_exclusive": len(exclusive),
                "files_reclaimed": len(exclusive - present),
                "files_pending": len(pending),
                "files_unreclaimed": len(unreclaimed),
                "unreclaimed_samples": [
                    f"{p} ({'scheduled' if p in scheduled else 'not scheduled'})"
                    for p in unreclaimed[:SAMPLES]
                ],
            }
        )
    return found


def run(lake: str, workdir: Path, since: int, allow_conflicts: bool = False) -> dict[str, Any]:
    """The verdict; ``violations`` maps each non-zero finding to its count
    (conflicts on non-conflicting work left out when ``allow_conflicts``)."""
    import slatelake

    t0 = time.monotonic()
    ops = load_operations(workdir)
    with slatelake.connect(lake, read_only=True) as session:
        con = session.con
        names = lake_tables(con)
        _load(con, ops, workdir, names)
        tables = {t: check_table(con, t) for t in names}
        result: dict[str, Any] = {"tables": tables}
        for key in next(iter(tables.values())):
            result[key] = sum(t[key] for t in tables.values())
        result.update(check_snapshots(con, since, names))
        result["head_snapshot"] = session.state.head.snapshot_id
        with session.con.cursor() as cur:
            result.update(check_pins(cur, lake, workdir))
    result.update(tally_conflicts(ops))
    checked = slatelake.open(lake).maintenance.fsck(record=False)
    result["fsck"] = {"counts": checked.counts, "files_checked": checked.files_checked}
    result["fsck_damage"] = sum(checked.counts.get(k, 0) for k in FSCK_DAMAGE)
    allowed = {"conflicts_nonconflicting"} if allow_conflicts else set()
    result["violations"] = {k: result[k] for k in VIOLATIONS if result[k] and k not in allowed}
    result["seconds"] = round(time.monotonic() - t0, 1)
    return result


if __name__ == "__main__":
    allow = "--allow-conflicts" in sys.argv[4:]
    print(json.dumps(run(sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), allow)))
    # The verdict is printed; leave without teardown (see tests/ducklake/oracle.py).
    sys.stdout.flush()
    os._exit(0)
