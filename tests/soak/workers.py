"""The soak's child processes: ``python -m tests.soak.workers ROLE ...``.

- ``setup LAKE DATA WRITERS``: create the lake, one table shared by every
  writer and one table per writer, print the snapshot they exist from;
- ``writer LAKE JOURNAL STOP INDEX SEED``: commit until STOP exists, to its
  own table and to the shared one: Parquet inserts of a few thousand rows,
  small inlined inserts, transactions (``session.transaction()``) that
  insert into both, and deletes of its own earlier rows in its own table,
  journaling every operation (``journal.py``). Everything but the deletes
  only appends: DuckLake commits it beside any other commit, so a conflict
  raised on it is journaled as a finding;
- ``reader LAKE OUT STOP SINCE SEED``: time-travel reads of retained
  snapshots (read-only), counting rows and distinct ids;
- ``maintainer LAKE DATA OUT STOP INTERVAL OPTIONS``: the maintenance Lambda's
  handler, invoked in this process as EventBridge's rule would, every
  INTERVAL seconds;
- ``pinner LAKE OUT STOP SINCE INDEX [VIA]``: a pinned reader (``pinner``): once
  writes have landed, connects with ``pin=True`` at the head S, records what
  S reads (every table's row count and checksum) and the files S reads, then
  re-reads S (VIA ``sql``, the default, or ``con``: ``read_pinned``)
  until STOP, or until the driver asks it to close (a file
  ``close-OUT-stem`` beside STOP), or is killed by the driver.

Every role stops when STOP exists or when the driver that started it is gone,
and reports its own peak RSS. Nothing here catches more than it records: an
error is journaled with its type, and the session is reopened when it may be
unusable.
"""

from __future__ import annotations

import json
import os
import random
import re
import resource
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tests.soak.doubled import read_at, twin_delete_files
from tests.soak.journal import (
    ACK,
    AMBIGUOUS,
    ID_SPAN,
    REFUSED,
    SHARED,
    Journal,
    Operation,
    Ranges,
    WriterExit,
    lake_tables,
    own_table,
    soak_tables,
)

ROOT = Path(__file__).resolve().parents[2]
FUNCTION_DIR = ROOT / "functions" / "maintenance"
COLUMNS = "id BIGINT, writer INTEGER, op BIGINT, payload VARCHAR"
# Operation mix of a writer (weights) and its pause between operations (seconds).
MIX = {"parquet": 4, "inline": 3, "txn": 2, "delete": 2}
PAUSE_S = 0.15
# The chance that a single-statement insert goes to the shared table, not the writer's own.
SHARED_SHARE = 0.5


def peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


class Stop:
    """STOP exists, or the driver that started this process is gone. A role
    says it is up with ``ready`` (a file beside STOP): the driver's clock
    starts when every role is, so a slow start does not eat the run."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)
        self.parent = os.getppid()

    def ready(self) -> None:
        (self.path.parent / f"ready-{os.getpid()}").touch()

    def __call__(self) -> bool:
        return self.path.exists() or os.getppid() != self.parent

    def wait(self, seconds: float) -> bool:
        end = time.monotonic() + seconds
        while not self():
            left = end - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(0.2, left))
        return True


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc)[:300]}"


def _says_conflict(exc: BaseException) -> bool:
    return "conflict" in str(exc).lower()


# -- setup ---------------------------------------------------------------------


def setup(lake: str, data: str, writers: int) -> None:
    import slatelake
    from slatelake import maintenance
    from slatelake.ducklake.sql import ident

    with slatelake.connect(lake, data_path=data) as session:
        with session.transaction():
            for table in soak_tables(writers):
                session.sql(f"CREATE TABLE {ident(table)} ({COLUMNS})")
        # the team's opt-in: a deployed schedule expires and deletes only on a
        # lake whose policy is enabled (the pass's options still set the windows)
        maintenance.set_policy(session, {"enabled": True}, by="soak")
        print(json.dumps({"since": session.state.head.snapshot_id}))


# -- writer --------------------------------------------------------------------


class Planner:
    """Picks each operation and its row ids; keeps the live rows (acknowledged,
    not deleted) of the writer's own table so deletes only ever target
    those. The shared table is only ever appended to."""

    def __init__(self, index: int, rng: random.Random) -> None:
        self.index = index
        self.rng = rng
        self.own = own_table(index)
        self.next_id = (index + 1) * ID_SPAN
        self.live: dict[str, list[tuple[int, int]]] = {self.own: []}

    def _ids(self, n: int) -> tuple[int, int]:
        lo = self.next_id
        self.next_id += n
        return lo, lo + n

    def _take(self, table: str, most: int) -> tuple[int, int] | None:
        """Remove a random stretch of up to ``most`` live ids of ``table`` from the pool."""
        pool = self.live.get(table, [])
        if not pool:
            return None
        at = self.rng.randrange(len(pool))
        lo, hi = pool.pop(at)
        n = self.rng.randint(1, min(most, hi - lo))
        a = self.rng.randint(lo, hi - n)
        pool.extend(span for span in ((lo, a), (a + n, hi)) if span[0] < span[1])
        return a, a + n

    def next(self, op: int) -> Operation:
        kind = self.rng.choices(list(MIX), weights=list(MIX.values()))[0]
        ins: Ranges = {}
        dels: Ranges = {}
        if kind == "delete":
            span = self._take(self.own, 500)
            if span is None:
                kind = "inline"
            else:
                dels[self.own] = [span]
        target = SHARED if self.rng.random() < SHARED_SHARE else self.own
        if kind == "parquet":
            ins[target] = [self._ids(self.rng.randint(1000, 4000))]
        elif kind == "inline":
            ins[target] = [self._ids(self.rng.randint(1, 5))]
        elif kind == "txn":  # two or three INSERTs, into both tables
            ins[self.own] = [self._ids(self.rng.randint(200, 1500))]
            ins[SHARED] = [self._ids(self.rng.randint(1, 3))]
            if self.rng.random() < 0.5:
                ins[SHARED].append(self._ids(self.rng.randint(200, 1500)))
        return Operation(op, kind, ins, dels)

    def settle(self, op: Operation) -> None:
        """Acknowledged inserts join the pool; a refused delete's rows return
        to it (they are still live); an ambiguous one's never do."""
        if op.fate == ACK:
            self.live[self.own].extend(op.inserts.get(self.own, []))
        elif op.fate == REFUSED:
            self.live[self.own].extend(op.deletes.get(self.own, []))


def _apply(session: Any, op: Operation, writer: int) -> None:
    from slatelake.ducklake.sql import ident

    payload = f"w{writer}-op{op.op}"
    for table, spans in op.inserts.items():
        for lo, hi in spans:
            session.sql(
                f"INSERT INTO {ident(table)} SELECT i, ?, ?, ? FROM range(?, ?) r(i)",
                [writer, op.op, payload, lo, hi],
            )
    for table, spans in op.deletes.items():
        for lo, hi in spans:
            session.sql(f"DELETE FROM {ident(table)} WHERE id >= ? AND id < ?", [lo, hi])


def _open(lake: str, stop: Stop, read_only: bool = False) -> Any | None:
    """A session, retried every second through store trouble until STOP."""
    import slatelake

    while not stop():
        try:
            return slatelake.connect(lake, read_only=read_only)
        except Exception as exc:
            print(f"connect failed: {_error(exc)}", file=sys.stderr, flush=True)
            stop.wait(1.0)
    return None


def _close(session: Any) -> None:
    try:
        session.close()
    except Exception as exc:
        print(f"close failed: {_error(exc)}", file=sys.stderr, flush=True)


_SAME_KEYS = re.compile(r"commit log slot (\d+): txn \S+ changed the same keys")


def _slot_winner(session: Any, message: str) -> str:
    """What the slot a commit lost to holds (read at once, before the fold
    truncates it): each change set's txn, what it made, and its key kinds."""
    match = _SAME_KEYS.search(message)
    if match is None:
        return ""
    try:
        sets = session.lake.log.read(int(match.group(1))) or []
    except Exception as exc:  # noqa: BLE001 - a diagnostic
        return f"unreadable ({_error(exc)})"
    return "; ".join(
        f"txn {cs.txn_id} snapshot={cs.mints_snapshot} {cs.changes_made!r} "
        f"puts {sorted({k[:2].hex() for k, _ in cs.puts})} "
        f"deletes {sorted({k[:2].hex() for k in cs.deletes})} ranges {len(cs.ranges)}"
        for cs in sets
    )


def record_failure(op: Operation, exc: Exception, session: Any = None) -> bool:
    """Set ``op``'s fate from the error its commit raised, with the message;
    True when the session may be unusable (the writer reopens it).

    A ConflictError is a refusal and a conflict. So is DuckLake's own
    conflict had it reached the writer untranslated (a TransactionException
    saying so). Any other DuckDB error failed the statement before anything
    reached the log; anything else leaves the outcome unknown."""
    import duckdb

    from slatelake.errors import ConflictError

    op.error = _error(exc)
    if isinstance(exc, ConflictError):
        op.fate, op.conflict = REFUSED, True
        if session is not None and (held := _slot_winner(session, str(exc))):
            op.error += f" [the slot held: {held}]"
        return False
    if isinstance(exc, duckdb.Error):
        op.fate = REFUSED
        op.conflict = isinstance(exc, duckdb.TransactionException) and _says_conflict(exc)
        return False
    op.fate = AMBIGUOUS
    return True


def writer(lake: str, journal_path: str, stop_path: str, index: int, seed: int) -> None:
    stop = Stop(stop_path)
    rng = random.Random(seed)
    planner = Planner(index, rng)
    journal = Journal(Path(journal_path))
    done = WriterExit()
    errors: Counter[str] = Counter()
    session = None
    n = 0
    while not stop():
        if session is None:
            session = _open(lake, stop)
            if session is None:
                break
            stop.ready()
        op = planner.next(n)
        journal.intent(op)
        t0 = time.monotonic()
        try:
            if op.kind == "txn":
                with session.transaction():
                    _apply(session, op, index)
            else:
                _apply(session, op, index)
            op.fate = ACK
        except Exception as exc:
            if record_failure(op, exc, session):
                _close(session)
                session = None
                done.reconnects += 1
        if op.error is not None:
            errors[op.error.split(":", 1)[0]] += 1
        op.seconds = time.monotonic() - t0
        journal.outcome(op)
        planner.settle(op)
        n += 1
        stop.wait(rng.uniform(0, PAUSE_S))
    if session is not None:
        _close(session)
    done.rss_mb, done.errors = peak_rss_mb(), dict(errors)
    journal.exit(done)
    journal.close()


# -- reader --------------------------------------------------------------------


@dataclass
class ReaderStats:
    reads: int = 0
    expired: int = 0  # the snapshot was expired while it was read (benign)
    failed: int = 0  # a retained snapshot failed to read
    doubled_reads: int = 0  # a read that saw one id twice
    reconnects: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    samples: list[str] = field(default_factory=list)  # the first few failures, verbatim
    doubled_samples: list[str] = field(default_factory=list)  # the first few doubled reads
    # data files with two delete files live at one snapshot (DuckLake keeps one)
    twin_samples: list[str] = field(default_factory=list)
    rss_mb: float = 0.0


def _snapshots(session: Any, since: int) -> list[int]:
    rows = session.sql("SELECT snapshot_id FROM lake.snapshots() ORDER BY 1").fetchall()
    return [r[0] for r in rows if r[0] >= since]


def reader(lake: str, out_path: str, stop_path: str, since: int, seed: int) -> None:
    import duckdb

    stop = Stop(stop_path)
    rng = random.Random(seed)
    stats = ReaderStats()
    out = Path(out_path)
    session = None
    tables: list[str] = []
    while not stop():
        if session is None:
            session = _open(lake, stop, read_only=True)
            if session is None:
                break
            stop.ready()
        snap = None
        try:
            tables = tables or lake_tables(session.con)
            snaps = _snapshots(session, since)
            if snaps:
                snap = rng.choice(snaps[-20:] if rng.random() < 0.5 else snaps)
                doubled = read_at(session, lake, snap, tables, out.with_name(f"doubled-{out.stem}"))
                twins = twin_delete_files(session, out.with_name(f"twins-{out.stem}"))
                stats.twin_samples.extend(twins[: max(0, 5 - len(stats.twin_samples))])
                if doubled:
                    stats.doubled_reads += 1
                    stats.doubled_samples.extend(doubled[: max(0, 5 - len(stats.doubled_samples))])
                stats.reads += 1
        except Exception as exc:
            _classify_failure(session, snap, since, exc, stats)
            if not isinstance(exc, duckdb.Error):
                _close(session)
                session, stats.reconnects = None, stats.reconnects + 1
        if (stats.reads + stats.failed + stats.expired) % 10 == 0:
            _dump(out, stats)
        stop.wait(rng.uniform(0.2, 0.6))
    if session is not None:
        _close(session)
    _dump(out, stats)


def _classify_failure(
    session: Any, snap: int | None, since: int, exc: Exception, stats: ReaderStats
) -> None:
    """Expired under the read (benign), or a retained snapshot that failed."""
    try:
        retained = snap is None or snap in _snapshots(session, since)
    except Exception:
        retained = True
    if not retained:
        stats.expired += 1
        return
    stats.failed += 1
    kind = type(exc).__name__
    stats.errors[kind] = stats.errors.get(kind, 0) + 1
    if len(stats.samples) < 5:
        stats.samples.append(f"snapshot {snap}: {_error(exc)}")


def _dump(out: Path, stats: ReaderStats | PinnedStats) -> None:
    stats.rss_mb = peak_rss_mb()
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(stats)))
    tmp.replace(out)


# -- maintainer ------------------------------------------------------------------


def maintainer(
    lake: str, data: str, out_path: str, stop_path: str, interval: float, options: str
) -> None:
    """The Lambda's handler, called as a scheduled rule calls it, each INTERVAL s."""
    os.environ.update(
        SLATELAKE_LAKE=lake,
        SLATELAKE_DATA_PATH=data,
        # writers, passes and moto share this host's clock: the orphan window
        # needs no skew allowance, so a 5-second orphan age really is 5 s
        SLATELAKE_ORPHAN_SKEW_S="0",
        POWERTOOLS_SERVICE_NAME="slatelake-maintenance",
        POWERTOOLS_METRICS_NAMESPACE="Slatelake",
    )
    sys.path.insert(0, str(FUNCTION_DIR))
    import app  # the Lambda's own module, imported as Lambda imports it

    from tests.functions.conftest import FakeContext

    stop = Stop(stop_path)
    stop.ready()
    event = {
        "trigger": "scheduled",
        "lake": lake,
        "data_path": data,
        "options": json.loads(options),
    }
    with Path(out_path).open("a", encoding="utf-8", buffering=1) as out:
        next_at = time.monotonic() + interval
        while not stop.wait(max(0.0, next_at - time.monotonic())):
            next_at = time.monotonic() + interval
            t0 = time.monotonic()
            try:
                answer = app.handler(event, FakeContext())
            except Exception as exc:  # a failed scheduled tick raises, as Lambda would see it
                answer = {"ok": False, "error": {"type": type(exc).__name__, "message": str(exc)}}
            doc = {"t": "pass", "answer": answer, "seconds": round(time.monotonic() - t0, 3)}
            out.write(json.dumps(doc, default=str) + "\n")
        out.write(json.dumps({"t": "exit", "rss_mb": peak_rss_mb()}) + "\n")


# -- pinned reader ---------------------------------------------------------------

# A pinned reader pins once the head is this many snapshots past SINCE (the
# writers' first commits have landed), then re-reads its snapshot every
# PIN_PAUSE_S (a random part of it), opening a fresh session on it (the
# catalog at the head must still have it) every PIN_FRESH_EVERY reads.
PIN_AFTER_SNAPSHOTS = 8
PIN_STAGGER = 6  # and reader i waits i * PIN_STAGGER more, so readers pin apart
PIN_PAUSE_S = (0.2, 0.6)
PIN_FRESH_EVERY = 5
PIN_ATTEMPTS = 20


@dataclass
class PinnedStats:
    index: int
    pid: int
    snapshot: int | None = None  # S, once pinned
    reader_id: str = ""
    pinned_at: float = 0.0  # wall clock (time.time())
    pin_attempts: int = 0
    listed: bool = False  # reader_pins() showed the pin right after pinning
    files: int = 0  # data and delete files S reads (the list: pinfiles-INDEX.json)
    expected: dict[str, list[Any]] = field(default_factory=dict)  # table -> [count, checksum]
    reads: int = 0  # reads of S compared with what it read at pin time
    fresh_reads: int = 0  # of which through a fresh session opened at S
    mismatches: int = 0
    errors: int = 0
    fresh_open_retries: int = 0  # a fresh open failed on store trouble (not S gone); retried
    samples: list[str] = field(default_factory=list)  # first mismatches and errors, verbatim
    # at the first failed read: what the catalog at the head says of S and the
    # failing file, and what the pinned session's own copy reads (``_diagnose``)
    diagnosis: dict[str, Any] | None = None
    last_read_at: float = 0.0
    closed_at: float | None = None  # closed cleanly when the driver asked
    lease_gone_after_close: bool | None = None
    rss_mb: float = 0.0


def read_pinned(
    session: Any, tables: list[str], at: int | None = None, via: str = "sql"
) -> dict[str, list[Any]]:
    """Every table's row count and a checksum of its rows (at ``at`` with
    time travel, else as the session reads it). ``via`` ``sql``: through
    ``session.sql``, which brings the session's copy of the catalog up to
    date before each statement; ``con``: through ``session.con``, DuckDB's
    own connection, which reads the files the copy named at the session's
    last ``sql`` statement (as a statement, or a lazy relation, that runs
    long does): a pass's merge may have replaced S's files since by merged
    ones that serve S, and its cleanup deleted them."""
    from slatelake.ducklake.sql import ident

    run = session.sql if via == "sql" else session.con.execute

    travel = "" if at is None else f" AT (VERSION => {int(at)})"
    out: dict[str, list[Any]] = {}
    for table in tables:
        n, digest = run(
            f"SELECT count(*), coalesce(sum(hash(id, writer, op, payload)), 0)::VARCHAR "
            f"FROM lake.{ident(table)}{travel}"
        ).fetchone()
        out[table] = [int(n), str(digest)]
    return out


def _pin_head(lake: str, stop: Stop, since: int, stats: PinnedStats) -> Any | None:
    """Once the head is PIN_AFTER_SNAPSHOTS past ``since``: a session at the
    head S with ``pin=True``. A head expired between the look and the pin
    (a 1-second retention does that) is looked up again."""
    import slatelake
    from slatelake.errors import NotFoundError

    probe = _open(lake, stop, read_only=True)
    if probe is None:
        return None
    try:
        while not stop():
            try:
                probe.refresh()
                head = probe.state.head.snapshot_id
            except Exception as exc:
                print(f"probe failed: {_error(exc)}", file=sys.stderr, flush=True)
                stop.wait(1.0)
                continue
            if head < since + PIN_AFTER_SNAPSHOTS + PIN_STAGGER * stats.index:
                stop.wait(0.5)
                continue
            stats.pin_attempts += 1
            try:
                return slatelake.connect(lake, snapshot_version=head, pin=True)
            except NotFoundError as exc:  # expired between the look and the pin
                print(f"pin of {head} refused: {_error(exc)}", file=sys.stderr, flush=True)
            except Exception as exc:
                print(f"pin of {head} failed: {_error(exc)}", file=sys.stderr, flush=True)
            if stats.pin_attempts >= PIN_ATTEMPTS:
                raise RuntimeError(f"no pin after {stats.pin_attempts} attempts (see the log)")
            stop.wait(0.5)
    finally:
        _close(probe)
    return None


def _fresh_read(lake: str, snap: int, tables: list[str], stats: PinnedStats) -> Any:
    """S read through a new session opened at it (no pin of its own): the
    catalog at the head must still have S. A store failure to open is
    retried (counted); S not found is an error (raised)."""
    import slatelake
    from slatelake.errors import NotFoundError

    for attempt in range(5):
        try:
            fresh = slatelake.connect(lake, snapshot_version=snap)
        except NotFoundError:
            raise
        except Exception as exc:
            stats.fresh_open_retries += 1
            if attempt == 4:
                raise
            print(f"fresh open failed: {_error(exc)}", file=sys.stderr, flush=True)
            time.sleep(1.0)
            continue
        try:
            return read_pinned(fresh, tables)
        finally:
            _close(fresh)
    raise AssertionError("unreachable")


def _diagnose(
    lake: str, snap: int, session: Any, files: list[str], tables: list[str], exc: Exception
) -> dict[str, Any]:
    """What is known at a pinned read's first failure: the file it names,
    whether S reads it at pin time, now in the pinned session's own copy and
    in the catalog at the head (a fresh session), whether S is still in the
    catalog, what a fresh read of S gives, and the live pins."""
    import slatelake
    from slatelake.ducklake.catalog_files import files_at
    from slatelake.maintenance.pins import reader_pins
    from slatelake.store.location import LakeLocation

    out: dict[str, Any] = {"at": time.time(), "error": _error(exc)}
    named = re.search(r'"([^"]+\.parquet)"', str(exc))
    path = named.group(1) if named else None
    out["file"] = path
    out["file_in_pin_time_files"] = path in files if path else None
    out["file_exists"] = Path(path).exists() if path and not path.startswith("s3://") else None
    try:
        with session.con.cursor() as con:
            own = files_at(con, snap)
        out["session_copy_files_at_S"] = len(own)
        out["file_in_session_copy"] = path in own if path else None
        out["session_copy_equals_pin_time"] = own == files
    except Exception as e:  # noqa: BLE001 - a diagnostic
        out["session_copy"] = _error(e)
    try:
        with slatelake.connect(lake, read_only=True) as head:
            with head.con.cursor() as con:
                now = files_at(con, snap)
                snaps = {
                    r[0] for r in con.execute("SELECT snapshot_id FROM lake.snapshots()").fetchall()
                }
            out["head_snapshot"] = head.state.head.snapshot_id
            out["S_in_catalog"] = snap in snaps
            out["head_files_at_S"] = len(now)
            out["file_in_head_files_at_S"] = path in now if path else None
            out["head_files_at_S_missing"] = [
                f for f in now if not f.startswith("s3://") and not Path(f).exists()
            ][:5]
            try:
                out["fresh_read"] = read_pinned(head, tables, at=snap)
            except Exception as e:  # noqa: BLE001
                out["fresh_read"] = _error(e)
    except Exception as e:  # noqa: BLE001
        out["head"] = _error(e)
    try:
        out["live_pins"] = [p.to_dict() for p in reader_pins(LakeLocation.parse(lake))]
    except Exception as e:  # noqa: BLE001
        out["live_pins"] = _error(e)
    return out


def pinner(
    lake: str, out_path: str, stop_path: str, since: int, index: int, via: str = "sql"
) -> None:
    from slatelake.ducklake.catalog_files import files_at
    from slatelake.maintenance.pins import reader_pins
    from slatelake.store.location import LakeLocation

    stop = Stop(stop_path)
    out = Path(out_path)
    close_file = stop.path.parent / f"close-{out.stem}"
    rng = random.Random(index)
    stats = PinnedStats(index, os.getpid())
    session = _pin_head(lake, stop, since, stats)
    if session is None:
        _dump(out, stats)
        return
    snap = session.pins[0].snapshot_id
    stats.snapshot, stats.reader_id, stats.pinned_at = (
        snap,
        session.lake.lease.reader_id,
        time.time(),
    )
    tables = lake_tables(session.con)
    with session.con.cursor() as con:
        files = files_at(con, snap)
    stats.files = len(files)
    out.with_name(f"pinfiles-{index}.json").write_text(json.dumps(files))
    stats.expected = read_pinned(session, tables)
    stats.listed = any(
        p.reader_id == stats.reader_id and p.snapshot_id == snap
        for p in reader_pins(LakeLocation.parse(lake))
    )
    _dump(out, stats)
    print(f"pinned snapshot {snap} ({len(files)} files): {stats.expected}", flush=True)
    stop.ready()
    attempt = 0
    while not stop() and not close_file.exists():
        attempt += 1
        fresh = attempt % PIN_FRESH_EVERY == 0
        try:
            if fresh:
                got = _fresh_read(lake, snap, tables, stats)
            else:
                got = read_pinned(session, tables, via=via)
            stats.reads += 1
            stats.fresh_reads += fresh
            if got != stats.expected:
                stats.mismatches += 1
                if len(stats.samples) < 5:
                    stats.samples.append(f"{'fresh' if fresh else 'pinned'} read of {snap}: {got}")
        except Exception as exc:
            stats.errors += 1
            if len(stats.samples) < 5:
                stats.samples.append(
                    f"{'fresh' if fresh else 'pinned'} read of {snap}: {_error(exc)}"
                )
            print(f"read of {snap} failed: {_error(exc)}", file=sys.stderr, flush=True)
            if stats.diagnosis is None:
                stats.diagnosis = _diagnose(lake, snap, session, files, tables, exc)
                print(f"diagnosis: {json.dumps(stats.diagnosis)}", file=sys.stderr, flush=True)
        stats.last_read_at = time.time()
        _dump(out, stats)
        stop.wait(rng.uniform(*PIN_PAUSE_S))
    if close_file.exists():
        _close(session)
        stats.closed_at = time.time()
        stats.lease_gone_after_close = not any(
            p.reader_id == stats.reader_id for p in reader_pins(LakeLocation.parse(lake))
        )
        print(f"closed; pin gone from the leases: {stats.lease_gone_after_close}", flush=True)
    else:
        _close(session)
    _dump(out, stats)


def main(argv: list[str]) -> None:
    role, args = argv[0], argv[1:]
    if role == "setup":
        setup(args[0], args[1], int(args[2]))
    elif role == "writer":
        writer(args[0], args[1], args[2], int(args[3]), int(args[4]))
    elif role == "reader":
        reader(args[0], args[1], args[2], int(args[3]), int(args[4]))
    elif role == "maintainer":
        maintainer(args[0], args[1], args[2], args[3], float(args[4]), args[5])
    elif role == "pinner":
        pinner(args[0], args[1], args[2], int(args[3]), int(args[4]), *args[5:6])
    else:
        raise SystemExit(f"unknown role {role!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
    # Everything is recorded. Leave without interpreter teardown: native
    # threads (SlateDB, DuckDB) occasionally abort it after all work is done
    # (see tests/ducklake/oracle.py), which would read as a crashed role.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
