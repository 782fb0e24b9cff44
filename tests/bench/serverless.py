"""A new user's serverless deployment on moto S3, with nothing resident.

Run from the repository root (not part of the test suite)::

    python -m tests.bench.serverless [--quick] [--rounds 20] [--out PATH] [--keep]

A lake on moto's S3 (``slatelake init LAKE --data-path DATA``), a shared table
and one table per writer, the lake's policy enabled (a scheduled pass runs
only on such a lake). No ``slatelake hold`` runs: the store is kept up by
the fold function alone, as in a deployment of the SAM template. Each round:

1. 3 writer processes (``sys.executable``, fresh each round) make 9 commits
   each, 1 to 3 rows at a time into their own table and the shared one (a
   transaction into both), and 2 one-row DELETEs of their own rows; every
   acknowledged operation is journaled (the oracle's input);
2. the pass function: the handler module imported as Lambda imports it, in
   this process for the whole run (one warm container), invoked with the
   schedule's constant input (``OPTIONS``) and a 900 s context;
3. every ``FOLD_EVERY`` rounds the fold function: the same module, action
   ``fold``, a 240 s context (the fold function's timeout);
4. the backlog (``maintenance.backlog_of``) and a fresh process's open: it
   times ``slatelake.connect(lake)`` and a first ``SELECT count(*)`` from
   after its imports, and from its spawn (the median of OPEN_SAMPLES
   processes); the first then reads every table's ids for the oracle
   (untimed): every acknowledged row present exactly once. The slots each
   phase wrote are read and sorted (snapshot, commit-lock take, record).

Goals, reported (a missed timing goal is not a failure; a failed oracle
exits 1): the last round's open <= 1.3x round 1's; unfolded slots never
above the slots of two fold intervals (2 rounds' writer commits plus what
the passes between two folds wrote, measured: see ``slot_bound``); every
store merge a pass submitted done within two fold invocations; 0 rows lost
or doubled. The last stdout line is the figures as JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tests.bench.common import REPO, Moto, log, median, write_result

FUNCTION_DIR = REPO / "functions" / "maintenance"
WRITERS = 3
COMMITS = 9  # per writer per round
FOLD_EVERY = 2  # rounds
SHARED = "shared"
PASS_TIMEOUT_S = 900.0  # the pass function's Timeout (template.yaml)
FOLD_TIMEOUT_S = 240.0  # the fold function's
MEMORY_MB = 1769  # the pass function's MemorySize (template.yaml)
FOLD_MEMORY_MB = 1024  # the fold function's
OPEN_GOAL = 1.3  # the last round's open over round 1's
MERGE_GOAL_FOLDS = 2
OPEN_SAMPLES = 3  # fresh processes a round; the median is the figure
OPTIONS = {
    "MAINTENANCE_TABLE_BATCHES": "true",
    "MAINTENANCE_FLUSH_INLINED_DATA": "true",
    "MAINTENANCE_MERGE_ADJACENT_FILES": "true",
    "MAINTENANCE_COMPACT_STORE": "true",
}
COLUMNS = "id BIGINT, writer INTEGER, round INTEGER, payload VARCHAR"
CONFLICT_TRIES = 5


def own_table(writer: int) -> str:
    return f"w{writer}"


def row_id(round_no: int, writer: int, commit: int, k: int = 0) -> int:
    return round_no * 100_000 + writer * 10_000 + commit * 100 + k + 1


# -- child roles ---------------------------------------------------------------


def setup(lake: str) -> None:
    """The tables and the lake's policy (a lake created by ``slatelake init``)."""
    import slatelake
    from slatelake import maintenance

    with slatelake.connect(lake) as s, s.transaction():
        for table in [SHARED, *(own_table(w) for w in range(WRITERS))]:
            s.sql(f"CREATE TABLE {table} ({COLUMNS})")
    maintenance.set_policy(lake, {"enabled": "true"}, by="bench")


def plan(writer: int, round_no: int) -> list[dict[str, Any]]:
    """The writer's 9 commits: each a list of (table, id) inserts, or deletes."""
    own = own_table(writer)

    def ins(commit: int, table: str, rows: int = 1) -> dict[str, Any]:
        return {
            "kind": "insert",
            "rows": [[table, row_id(round_no, writer, commit, k)] for k in range(rows)],
        }

    # Round 1 deletes its own first row; later rounds the 3-row insert's first of the round before.
    early = row_id(round_no - 1, writer, 2) if round_no > 1 else row_id(round_no, writer, 0)
    ops = [
        ins(0, own),
        ins(1, SHARED),
        ins(2, own, 3),
        ins(3, SHARED),
        {"kind": "delete", "rows": [[own, early]]},
        ins(5, own),
        {
            "kind": "txn",
            "rows": [[own, row_id(round_no, writer, 6)], [SHARED, row_id(round_no, writer, 6, 1)]],
        },
        ins(7, SHARED),
        {"kind": "delete", "rows": [[own, row_id(round_no, writer, 5)]]},
    ]
    assert len(ops) == COMMITS
    return ops


def _apply(session: Any, op: dict[str, Any], writer: int, round_no: int) -> None:
    def insert(table: str, ids: list[int]) -> None:
        values = ", ".join(f"({i}, {writer}, {round_no}, 'r{round_no}-w{writer}-{i}')" for i in ids)
        session.sql(f"INSERT INTO {table} VALUES {values}")

    if op["kind"] == "delete":
        for table, i in op["rows"]:
            session.sql(f"DELETE FROM {table} WHERE id = {i}")
    elif op["kind"] == "txn":
        with session.transaction():
            for table, i in op["rows"]:
                insert(table, [i])
    else:
        insert(op["rows"][0][0], [i for _, i in op["rows"]])


def writer(lake: str, journal: str, index: int, round_no: int) -> None:
    """Commit the plan, journaling each operation's fate: ``ack``, ``refused``
    (a conflict CONFLICT_TRIES times: nothing landed) or ``ambiguous``."""
    import slatelake

    session = slatelake.connect(lake)
    with open(journal, "a", encoding="utf-8") as out:
        for op in plan(index, round_no):
            fate, error, t0, attempts = "refused", None, time.monotonic(), 0
            while attempts < CONFLICT_TRIES:
                attempts += 1
                try:
                    _apply(session, op, index, round_no)
                    fate = "ack"
                    break
                except slatelake.ConflictError as exc:
                    error = f"{type(exc).__name__}: {str(exc)[:300]}"
                except Exception as exc:  # unknown outcome: may have landed
                    fate, error = "ambiguous", f"{type(exc).__name__}: {str(exc)[:300]}"
                    with contextlib.suppress(Exception):
                        session.close()
                    session = slatelake.connect(lake)
                    break
            doc = {**op, "writer": index, "round": round_no, "fate": fate, "attempts": attempts}
            doc |= {"seconds": round(time.monotonic() - t0, 3), "error": error}
            out.write(json.dumps(doc) + "\n")
            out.flush()
    session.close()


_OPEN_CHILD = """
import json, os, sys, time
t_import = time.monotonic()
import slatelake
imported_s = time.monotonic() - t_import
t0 = time.monotonic()
s = slatelake.connect({lake!r})
connect_s = time.monotonic() - t0
n = s.sql("SELECT count(*) FROM {shared}").fetchone()[0]
open_s = time.monotonic() - t0
since_spawn_s = time.time() - {spawned!r}
ids = {{t: [r[0] for r in s.sql("SELECT id FROM " + t).fetchall()] for t in {tables!r}}}
s.close()
print("RESULT " + json.dumps({{"imported_s": imported_s, "connect_s": connect_s,
    "open_s": open_s, "since_spawn_s": since_spawn_s, "count": n, "ids": ids}}), flush=True)
os._exit(0)
"""


_REFERENCE = """
import time
t0 = time.monotonic()
import duckdb
duckdb.connect().sql("SELECT sum(i * i) FROM range(3000000) t(i)").fetchone()
print(time.monotonic() - t0, flush=True)
"""


def reference(env: dict[str, str]) -> float:
    """The machine's state beside each open (it is shared): a fresh process's
    ``import duckdb`` and a fixed query, no lake, no moto."""
    proc = subprocess.run(
        [sys.executable, "-c", _REFERENCE], env=env, capture_output=True, text=True, check=True
    )
    return float(proc.stdout.split()[-1])


def fresh_open(lake: str, env: dict[str, str]) -> dict[str, Any]:
    tables = [SHARED, *(own_table(w) for w in range(WRITERS))]
    spawned = time.time()
    code = _OPEN_CHILD.format(lake=lake, shared=SHARED, spawned=spawned, tables=tables)
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=False
    )
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    if proc.returncode != 0 or line is None:
        raise SystemExit(f"the fresh open failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(line.removeprefix("RESULT "))


# -- the oracle ----------------------------------------------------------------


def oracle(ops: list[dict[str, Any]], ids: dict[str, list[int]]) -> dict[str, int]:
    """Acknowledged inserts present exactly once, acknowledged deletes absent,
    nothing present that no writer tried (an ambiguous one may be either)."""
    acked, maybe, deleted, maybe_deleted = set(), set(), set(), set()
    for op in ops:
        rows = {(t, i) for t, i in op["rows"]}
        if op["kind"] == "delete":
            (deleted if op["fate"] == "ack" else maybe_deleted).update(rows)
        elif op["fate"] == "ack":
            acked |= rows
        elif op["fate"] == "ambiguous":
            maybe |= rows
    present = Counter((t, i) for t, values in ids.items() for i in values)
    live = acked - deleted - maybe_deleted
    return {
        "acknowledged_rows": len(acked),
        "present_rows": sum(present.values()),
        "lost": len(live - set(present)),
        "doubled": sum(1 for n in present.values() if n > 1),
        "undeleted": len((deleted & acked) & set(present)),
        "phantom": len(set(present) - acked - maybe),
    }


def oracle_ok(check: dict[str, int]) -> bool:
    return not (check["lost"] or check["doubled"] or check["undeleted"] or check["phantom"])


# -- the Lambda, in this process -------------------------------------------------


class Container:
    """The handler module imported as Lambda imports it; one warm container."""

    def __init__(self, lake: str, data: str, workdir: Path) -> None:
        from tests.functions.conftest import powertools_env, template

        os.environ.update(powertools_env())
        # The fold function's own settings, as the template deploys them (its
        # compactor poll; its image cadence parameters' defaults).
        doc = template()
        fold_env = doc["Resources"]["FoldFunction"]["Properties"]["Environment"]["Variables"]
        os.environ.update(
            {
                k: v
                for k, v in fold_env.items()
                if isinstance(v, str) and k.startswith("SLATELAKE_COMPACTOR")
            }
        )
        params = doc["Parameters"]
        os.environ["SLATELAKE_IMAGE_EVERY_SLOTS"] = str(params["ImageEverySlots"]["Default"])
        os.environ["SLATELAKE_IMAGE_MAX_AGE"] = str(params["ImageMaxAge"]["Default"])
        os.environ.update(
            SLATELAKE_LAKE=lake,
            SLATELAKE_DATA_PATH=data,
            AWS_LAMBDA_FUNCTION_MEMORY_SIZE=str(MEMORY_MB),
        )
        sys.path.insert(0, str(FUNCTION_DIR))
        import app

        self.app = app
        self.log = (workdir / "handler.log").open("a", encoding="utf-8")
        app.logger.registered_handler.setStream(self.log)

    def invoke(
        self, event: dict[str, Any], timeout_s: float, memory_mb: int = MEMORY_MB
    ) -> tuple[dict[str, Any], float]:
        from tests.functions.conftest import FakeContext

        context = FakeContext(remaining_s=timeout_s, memory_limit_in_mb=memory_mb)
        emf = io.StringIO()  # Powertools prints its metrics to stdout
        t0 = time.monotonic()
        try:
            with contextlib.redirect_stdout(emf):
                answer = self.app.handler(event, context)
        except Exception as exc:  # a failed scheduled tick raises, as Lambda sees it
            answer = {"ok": False, "error": {"type": type(exc).__name__, "message": str(exc)}}
        seconds = time.monotonic() - t0
        self.log.write(emf.getvalue())
        self.log.write(json.dumps({"bench_answer": answer}, default=str) + "\n")
        self.log.flush()
        return answer, seconds


# -- the run ---------------------------------------------------------------------


def slot_kinds(lake: str, after: int, upto: int) -> dict[str, int]:
    """What the slots ``(after, upto]`` hold: ``lock`` (a commit-lock take and
    nothing else), ``snapshot`` (mints a DuckLake snapshot), ``record`` (any
    other head-preserving change: a lock given back alone, a status record)."""
    from slatelake.log.slots import SlotLog
    from slatelake.store.location import location_of

    slots, kinds = SlotLog(location_of(lake)), Counter[str]()
    for seq in range(after + 1, upto + 1):
        sets = slots.read(seq) or []
        if any(cs.mints_snapshot for cs in sets):
            kinds["snapshot"] += 1
        elif sets and all(cs.changes_made == "commit_lock" and cs.puts for cs in sets):
            kinds["lock"] += 1
        else:
            kinds["record"] += 1
    return dict(kinds)


def slot_bound(interval: dict[str, Any]) -> int:
    """The most unfolded slots one fold interval may leave: its rounds' writer
    commits (one slot each) plus the slots its passes wrote (measured around
    each pass, which runs alone), plus setup's slots in the first interval."""
    return FOLD_EVERY * WRITERS * COMMITS + interval["pass_slots"] + interval["setup_slots"]


def run_round(
    r: int, lake: str, data: str, env: dict[str, str], work: Path, c: Container, st: dict[str, Any]
) -> dict[str, Any]:
    from slatelake import maintenance
    from slatelake.store.merge import merges_in_flight

    row: dict[str, Any] = {"round": r}
    last = maintenance.backlog_of(lake).last_slot
    journal = work / f"round-{r:02d}.jsonl"
    t0 = time.monotonic()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.bench.serverless",
                "writer",
                lake,
                str(journal),
                str(w),
                str(r),
            ],
            cwd=REPO,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=(work / f"writer-{r:02d}-{w}.err").open("w"),
        )
        for w in range(WRITERS)
    ]
    row["writer_exits"] = [p.wait() for p in procs]
    row["writers_s"] = round(time.monotonic() - t0, 2)
    ops = [json.loads(x) for x in journal.read_text().splitlines()] if journal.exists() else []
    st["ops"].extend(ops)
    row["acked"] = sum(1 for op in ops if op["fate"] == "ack")
    row["not_acked"] = [op for op in ops if op["fate"] != "ack"]
    row["conflict_retries"] = sum(op["attempts"] - 1 for op in ops)
    st["commits"] += row["acked"]
    after_writers = maintenance.backlog_of(lake)
    row["writer_slots"] = after_writers.last_slot - last
    row["writer_slot_kinds"] = slot_kinds(lake, last, after_writers.last_slot)
    row["unfolded_after_writers"] = after_writers.unfolded_slots

    event = {"trigger": "scheduled", "action": "maintenance", "lake": lake, "data_path": data}
    answer, row["pass_s"] = c.invoke({**event, "options": OPTIONS}, PASS_TIMEOUT_S)
    report = answer.get("result") or {}
    row["pass_ok"] = answer.get("ok") and "skipped" not in answer
    row["pass_error"] = answer.get("error") or answer.get("skipped")
    row["pass_report_s"] = report.get("seconds")
    row["pass_work_pending"] = report.get("work_pending")
    row["pass_steps"] = {
        s["step"]: f"{s['status']} {s['seconds'] or 0:.2f}s: {s['detail'][:160]}"
        for s in report.get("steps", [])
    }
    after_pass = maintenance.backlog_of(lake)
    row["pass_slots"] = after_pass.last_slot - after_writers.last_slot
    row["pass_slot_kinds"] = slot_kinds(lake, after_writers.last_slot, after_pass.last_slot)
    row["unfolded_before_fold"] = after_pass.unfolded_slots
    row["merges_pending_after_pass"] = after_pass.store_merges_pending
    for m in merges_in_flight(lake):
        st["merges"].setdefault(
            m.compaction_id, {"subspace": m.subspace, "round": r, "folds": st["folds"]}
        )
    interval = st["interval"]
    interval["pass_slots"] += row["pass_slots"]
    interval["writer_lock_slots"] += row["writer_slot_kinds"].get("lock", 0)
    interval["peak_unfolded"] = max(interval["peak_unfolded"], after_pass.unfolded_slots)

    row["fold_s"] = None
    if r % FOLD_EVERY == 0:
        fold(c, lake, st, row)
    b = maintenance.backlog_of(lake)
    row |= {
        "unfolded": b.unfolded_slots,
        "log_bytes": b.log_bytes,
        "image_lag": b.image_lag_slots,
        "image_seq": b.image_seq,
        "merges_pending": b.store_merges_pending,
        "commits": st["commits"],
    }
    opens = [fresh_open(lake, env) for _ in range(OPEN_SAMPLES)]
    row["open_samples_s"] = [round(o["open_s"], 3) for o in opens]
    for key in ("open_s", "since_spawn_s", "connect_s", "imported_s"):
        row[key if key == "open_s" else f"open_{key}"] = median([o[key] for o in opens])
    row["loadavg_1m"] = os.getloadavg()[0]
    row["ref_s"] = median([reference(env) for _ in range(OPEN_SAMPLES)])
    opened = opens[0]
    row["oracle"] = oracle(st["ops"], opened.pop("ids"))
    return row


def fold(c: Container, lake: str, st: dict[str, Any], row: dict[str, Any] | None) -> dict[str, Any]:
    """One fold invocation; settles the merges tracked and closes the interval."""
    from slatelake.store.merge import merges_in_flight

    answer, seconds = c.invoke(
        {"trigger": "scheduled", "action": "fold", "lake": lake}, FOLD_TIMEOUT_S, FOLD_MEMORY_MB
    )
    st["folds"] += 1
    turn = answer.get("result") or {}
    in_flight = {m.compaction_id for m in merges_in_flight(lake)}
    for cid, m in st["merges"].items():
        if "done_after_folds" in m:
            continue
        if cid not in in_flight:
            m["done_after_folds"] = st["folds"] - m["folds"]
        m["pending_after_folds"] = st["folds"] - m["folds"]
    summary = {
        "fold_s": round(seconds, 2),
        "fold_ok": bool(answer.get("ok")) and turn.get("status") == "folded",
        "fold_status": turn.get("status") or answer.get("error"),
        "fold_reason": turn.get("reason"),
        "fold_slots": turn.get("slots_folded"),
        "fold_truncated": turn.get("truncated"),
        "fold_image": (turn.get("image") or {}).get("seq"),
        "fold_merges": [
            turn.get("merges_completed"),
            turn.get("merges_pending"),
            turn.get("merges_failed"),
        ],
        "merges_pending_after_fold": len(in_flight),
    }
    if row is not None:
        row |= summary
        st["intervals"].append(st["interval"])
        st["interval"] = {
            "pass_slots": 0,
            "setup_slots": 0,
            "peak_unfolded": 0,
            "writer_lock_slots": 0,
        }
    return summary


HEADER = (
    f"{'round':>5} {'commits':>7} {'unfolded':>9} {'log KB':>7} {'open s':>7} {'spawn s':>7} "
    f"{'img lag':>7} {'merges':>6} {'pass s':>7} {'fold s':>7} {'ref s':>5} {'load':>5}  oracle"
)


def format_row(row: dict[str, Any]) -> str:
    o = row["oracle"]
    verdict = f"{o['lost']} lost, {o['doubled']} doubled"
    if o["undeleted"] or o["phantom"]:
        verdict += f", {o['undeleted']} undeleted, {o['phantom']} phantom"
    fold_s = f"{row['fold_s']:.1f}" if row["fold_s"] is not None else "-"
    unfolded = (
        f"{row['unfolded_before_fold']}>{row['unfolded']}"
        if row["fold_s"] is not None
        else str(row["unfolded"])
    )
    merges = (
        f"{row['merges_pending_after_pass']}>{row['merges_pending']}"
        if row["fold_s"] is not None
        else str(row["merges_pending"])
    )
    notes = []
    if not row["pass_ok"]:
        notes.append(f"pass: {row['pass_error']}")
    if row["fold_s"] is not None and not row["fold_ok"]:
        notes.append(f"fold: {row['fold_status']} {row['fold_reason'] or ''}".strip())
    if row["not_acked"]:
        notes.append(f"{len(row['not_acked'])} not acknowledged")
    if any(row["writer_exits"]):
        notes.append(f"writer exits {row['writer_exits']}")
    return (
        f"{row['round']:>5} {row['commits']:>7} {unfolded:>9} {row['log_bytes'] / 1024:>7.1f} "
        f"{row['open_s']:>7.2f} {row['open_since_spawn_s']:>7.2f} {row['image_lag']:>7} "
        f"{merges:>6} {row['pass_s']:>7.1f} {fold_s:>7} {row['ref_s']:>5.2f} "
        f"{row['loadavg_1m']:>5.1f}  {verdict}" + (f"  [{'; '.join(notes)}]" if notes else "")
    )


def goals(rows: list[dict[str, Any]], st: dict[str, Any]) -> dict[str, Any]:
    first, last = rows[0]["open_s"], rows[-1]["open_s"]
    intervals = st["intervals"] + ([st["interval"]] if st["interval"]["peak_unfolded"] else [])
    bounds = [
        {
            "bound": slot_bound(i),
            "peak_unfolded": i["peak_unfolded"],
            "pass_slots": i["pass_slots"],
            "setup_slots": i["setup_slots"],
            "writer_lock_slots": i["writer_lock_slots"],
        }
        for i in intervals
    ]
    merges = st["merges"]
    late = {
        cid: m
        for cid, m in merges.items()
        if m.get("done_after_folds", 0) > MERGE_GOAL_FOLDS
        or ("done_after_folds" not in m and m.get("pending_after_folds", 0) >= MERGE_GOAL_FOLDS)
    }
    undecided = [
        cid for cid, m in merges.items() if "done_after_folds" not in m and cid not in late
    ]
    final = rows[-1]["oracle"]
    return {
        "open": {
            "round_1_s": first,
            "last_s": last,
            "ratio": last / first,
            "held": last <= OPEN_GOAL * first,
            "image_lag": [rows[0]["image_lag"], rows[-1]["image_lag"]],
            "ref_s": [rows[0]["ref_s"], rows[-1]["ref_s"]],
            "max_s": max(r["open_s"] for r in rows),
        },
        "unfolded": {
            "intervals": bounds,
            "held": all(b["peak_unfolded"] <= b["bound"] for b in bounds),
            # The same, the writers' commit-lock slots counted too: whether the fold kept up.
            "held_with_lock_slots": all(
                b["peak_unfolded"] <= b["bound"] + b["writer_lock_slots"] for b in bounds
            ),
        },
        "merges": {
            "submitted": len(merges),
            "done_after_folds": sorted(
                m["done_after_folds"] for m in merges.values() if "done_after_folds" in m
            ),
            "late": late,
            "undecided": len(undecided),
            "held": not late and not undecided,
        },
        "oracle": {**final, "held": all(oracle_ok(r["oracle"]) for r in rows)},
    }


def print_goals(g: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    o, u, m, ok = g["open"], g["unfolded"], g["merges"], g["oracle"]

    def says(held: bool) -> str:
        return "HELD" if held else "MISSED"

    print()
    print(
        f"open at the last round <= {OPEN_GOAL}x round 1: {o['last_s']:.2f}s vs "
        f"{o['round_1_s']:.2f}s ({o['ratio']:.2f}x; image lag {o['image_lag'][1]} vs "
        f"{o['image_lag'][0]} slots, reference {o['ref_s'][1]:.2f}s vs {o['ref_s'][0]:.2f}s): "
        f"{says(o['held'])}"
    )
    print(f"  the slowest open of the run: {o['max_s']:.2f}s")
    print(
        f"unfolded slots <= {FOLD_EVERY} rounds x {WRITERS * COMMITS} writer commits + the passes' "
        "own slots in the interval (measured around each pass, which runs alone; setup's "
        f"slots in the first): {says(u['held'])}"
    )
    for n, b in enumerate(u["intervals"], 1):
        print(
            f"  fold interval {n}: peak {b['peak_unfolded']} vs bound {b['bound']} "
            f"(54 + passes {b['pass_slots']} + setup {b['setup_slots']}); "
            f"writers' commit-lock slots {b['writer_lock_slots']}"
        )
    print(
        "  counting the writers' commit-lock slots too (whether the fold kept up): "
        + says(u["held_with_lock_slots"])
    )
    slots = [r["writer_slots"] for r in rows]
    kinds: Counter[str] = Counter()
    for r in rows:
        kinds.update(r["writer_slot_kinds"])
    print(
        f"  writer slots per round ({WRITERS * COMMITS} commits): min {min(slots)}, "
        f"max {max(slots)}; in all {dict(kinds)}; slots per pass: "
        f"{sorted({r['pass_slots'] for r in rows})}"
    )
    print(
        f"store merges done within {MERGE_GOAL_FOLDS} fold invocations: "
        f"{m['submitted']} submitted, "
        f"done after {m['done_after_folds']} folds, {len(m['late'])} late, "
        f"{m['undecided']} undecided: {says(m['held'])}"
    )
    print(
        f"0 rows lost or doubled: {ok['lost']} lost, {ok['doubled']} doubled, "
        f"{ok['undeleted']} undeleted, {ok['phantom']} phantom of {ok['acknowledged_rows']} "
        f"acknowledged rows: {says(ok['held'])}"
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["writer"]:
        writer(argv[1], argv[2], int(argv[3]), int(argv[4]))
        sys.stdout.flush()
        os._exit(0)  # native threads may abort interpreter teardown (tests/soak/workers.py)
    if argv[:1] == ["setup"]:
        setup(argv[1])
        os._exit(0)
    ap = argparse.ArgumentParser(
        prog="python -m tests.bench.serverless",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--quick", action="store_true", help="4 rounds")
    ap.add_argument("--rounds", type=int, help="rounds (default 20; --quick 4)")
    ap.add_argument("--out", help="JSON path (default bench-results/serverless[-quick].json)")
    ap.add_argument(
        "--keep", action="store_true", help="keep the work directory (journals, handler log)"
    )
    args = ap.parse_args(argv)
    rounds = args.rounds or (4 if args.quick else 20)
    out = Path(args.out or f"bench-results/serverless{'-quick' if args.quick else ''}.json")
    work = Path(tempfile.mkdtemp(prefix="slatelake-serverless-"))
    t_run = time.monotonic()
    moto = Moto()
    try:
        env = dict(os.environ)  # the children's: moto's S3, nothing of the Lambda's
        bucket = moto.bucket("serverless")
        lake, data = f"s3://{bucket}/lake", f"s3://{bucket}/data/"
        cli = Path(sys.executable).parent / "slatelake"
        subprocess.run(
            [str(cli), "init", lake, "--data-path", data], env=env, check=True, capture_output=True
        )
        subprocess.run(
            [sys.executable, "-m", "tests.bench.serverless", "setup", lake],
            cwd=REPO,
            env=env,
            check=True,
        )
        container = Container(lake, data, work)
        from slatelake import maintenance

        setup_slots = maintenance.backlog_of(lake).last_slot
        st: dict[str, Any] = {
            "ops": [],
            "commits": 0,
            "folds": 0,
            "merges": {},
            "intervals": [],
            "interval": {
                "pass_slots": 0,
                "setup_slots": setup_slots,
                "peak_unfolded": 0,
                "writer_lock_slots": 0,
            },
        }
        log(f"serverless: {rounds} rounds on {lake} (work {work})")
        print(
            f"serverless: {WRITERS} writers x {COMMITS} commits a round, a pass every round, "
            f"a fold every {FOLD_EVERY}"
        )
        print(HEADER, flush=True)
        rows = []
        for r in range(1, rounds + 1):
            row = run_round(r, lake, data, env, work, container, st)
            rows.append(row)
            print(format_row(row), flush=True)
        settle = []
        # The merges the last passes submitted, decided by the next scheduled folds.
        while (
            any(
                "done_after_folds" not in m and m.get("pending_after_folds", 0) < MERGE_GOAL_FOLDS
                for m in st["merges"].values()
            )
            and len(settle) < MERGE_GOAL_FOLDS
        ):
            settle.append(fold(container, lake, st, None))
        if settle:
            print(
                f"(after the last round: {len(settle)} more fold(s) to decide the last "
                f"passes' merges: {[s['fold_s'] for s in settle]} s)"
            )
        g = goals(rows, st)
        print_goals(g, rows)
        container.app.warm.release()
    finally:
        moto.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    seconds = round(time.monotonic() - t_run, 1)
    result = {
        "rounds": rounds,
        "writers": WRITERS,
        "commits_per_writer": COMMITS,
        "fold_every": FOLD_EVERY,
        "options": OPTIONS,
        "run_s": seconds,
        "rows": [
            {k: v for k, v in r.items() if k != "not_acked"} | {"not_acked": len(r["not_acked"])}
            for r in rows
        ],
        "settle_folds": settle,
        "merges": st["merges"],
        "goals": g,
    }
    with contextlib.redirect_stdout(sys.stderr):
        write_result(result, out)
    summary = {
        "rounds": rounds,
        "commits": st["commits"],
        "run_s": seconds,
        "open_s": [round(r["open_s"], 3) for r in rows],
        "open_since_spawn_s": [round(r["open_since_spawn_s"], 3) for r in rows],
        "image_lag": [r["image_lag"] for r in rows],
        "ref_s": [round(r["ref_s"], 3) for r in rows],
        "unfolded_peak": max(r["unfolded_before_fold"] for r in rows),
        "pass_s": [round(r["pass_s"], 1) for r in rows],
        "fold_s": [r["fold_s"] for r in rows if r["fold_s"] is not None],
        "goals": {k: v["held"] for k, v in g.items()},
        "lost": g["oracle"]["lost"],
        "doubled": g["oracle"]["doubled"],
    }
    print(json.dumps(summary))
    return 0 if g["oracle"]["held"] else 1


if __name__ == "__main__":
    sys.exit(main())
