"""The soak: concurrent committers, a holder, passes and readers, then the oracle.

``bash scripts/soak [--minutes M] [--writers N] [--readers R] [--s3]
[--fault-rate F] [--seed S] [--pass-interval SEC] [--retention SEC]
[--pinned-readers K] [--pin-check] [--allow-conflicts] [--dir DIR] [--keep]``

For M minutes: N writer processes commit (``workers.writer``), each to a
table of its own and to one table all share, a holder (``slatelake hold``)
folds and truncates, the maintenance Lambda's handler runs a pass every 30 s
in a process of its own (expiry, flush of inlined data, merge, rewrite of
deletes, cleanup of old files and orphans, the sweep and the store merge),
and R readers read retained snapshots with time travel. ``--retention SEC``
sets the passes' windows: snapshots expire SEC seconds old and their files go
SEC seconds after (default: two intervals, and one).

K pinned readers (``--pinned-readers``, ``workers.pinner``) each pin the head
S once writes have landed (``connect(..., snapshot_version=S, pin=True)``),
record what S reads (each table's count and checksum) and the files S reads
(``catalog_files.files_at``), and re-read S for the whole soak, counting
mismatches and errors. Pinned reader 0 runs with a 5-second reader lease
(``SLATELAKE_READER_LEASE_TTL``) and is killed with SIGKILL partway
(``PIN_KILL_AT`` of the run, earlier when the run is short, so passes have
time to reclaim after its lease lapses); pinned reader 1 closes cleanly later
(``PIN_CLOSE_AT``); the others read until the end. The oracle then holds
every pin that ended to its reclaim: S gone from the catalog's snapshots and
every file S read that no snapshot still in the catalog reads gone from
storage (``check.check_pins``). They read through the session's DuckDB
connection (the catalog copy of the session's last statement, as a long
statement or a lazy relation reads: the harder case, since a merge may have
replaced what that copy names); ``--pinned-via sql`` reads through
``session.sql`` instead. ``--pin-check`` is the issue-46 set-up:
``--pinned-readers 2 --pass-interval 3 --retention 1`` (each unless given).
With ``--s3`` the
lake is on moto's S3 server (started here, on loopback) and every role
reaches it through the fault proxy (``tests/faults/proxy.py``) failing a
fraction F of requests (500, 503, a connection dropped before or after
forwarding, a delay). A holder that exits is restarted, as a supervisor
would.

Besides the oracle's verdict the figures say where the machine's time went:
each role's CPU seconds (``cpu_seconds``, from /proc while it ran) and, on
S3, every request the roles made by method and folder (``requests``,
``requests_by_area``). On a machine the soak saturates, commits a minute
follow the host more than the code; these two tell a slower library (more
CPU or requests per commit) from a slower host (the same per commit).

Then everything stops, and ``check.py`` opens the lake fresh, with no proxy,
and holds it to the writers' journals. The last two lines on stdout are a
line of figures for people and one JSON object. Exit status: 0 when the
oracle found nothing; 1 when it found lost, doubled, refused-but-present,
undeleted or phantom rows, an unreadable or wrong retained snapshot, a
reader's read that saw an id twice or a data file with two delete files
live at one snapshot, or a
ConflictError raised to a writer on work that only appended, other than
DuckLake's own refusal of an insert over a delete (``conflicts_nonconflicting``;
``--allow-conflicts`` reports those without failing); 2 when the soak could
not run or check (or committed nothing, so proved nothing). The work
directory (journals, every role's log) is removed on success unless
``--keep``, and kept, and named, otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import S3_ENV, start_moto_server, subprocess_env
from tests.soak import figures

ROOT = Path(__file__).resolve().parents[2]
FAULT_KINDS = ("500", "503", "drop_before", "drop_after", "delay")
STOP_GRACE_S = {"writer": 120.0, "reader": 60.0, "maintainer": 600.0}
HOLDER_RESTART_S = 2.0
READY_TIMEOUT_S = 300.0
STOP_GRACE_S["pinner"] = 60.0
# Pinned readers: reader 0 is killed at this fraction of the run, with this
# reader lease life; reader 1 closes at this fraction (both earlier when the
# run is too short for the passes to reclaim after them).
PIN_KILL_AT, PIN_CLOSE_AT = 0.35, 0.5
PIN_KILLED_TTL = "5s"
PIN_KILLED_TTL_S = 5.0
PIN_CHECK = {"pinned_readers": 2, "pass_interval": 3.0, "retention": 1.0}


@dataclass(frozen=True)
class Settings:
    minutes: float
    writers: int
    readers: int
    s3: bool
    fault_rate: float
    seed: int
    pass_interval: float
    workdir: Path
    keep: bool
    allow_conflicts: bool = False
    pinned_readers: int = 0
    retention: float | None = None  # seconds; None: two intervals (files: one)
    pinned_via: str = "con"  # how pinned readers read their session: workers.read_pinned

    def pin_mode(self, index: int) -> str:
        """What becomes of pinned reader ``index``: killed, closed or held."""
        return {0: "killed", 1: "closed"}.get(index, "held")

    def reclaim_s(self) -> float:
        """How long passes get to reclaim an ended pin: its snapshot expires
        at the first pass after, its files go at a pass after that (the
        cleanup window past), with a pass's own time and a spare one."""
        cleanup = self.retention if self.retention is not None else self.pass_interval
        return 4 * self.pass_interval + cleanup + 5.0

    def pin_schedule(self) -> dict[str, float]:
        """Seconds into the run at which pinned reader 0 is killed and 1 closes."""
        run = self.minutes * 60
        kill = max(0.0, min(PIN_KILL_AT * run, run - PIN_KILLED_TTL_S - self.reclaim_s()))
        close = max(0.0, min(PIN_CLOSE_AT * run, run - self.reclaim_s()))
        return {"kill": kill, "close": close}

    def maintenance_options(self) -> dict[str, str]:
        """Every step on, with windows that make each do work within a few
        passes and leave time travel and in-flight writes alone: snapshots
        expire after two intervals (a 10-minute run expires most of its
        history, and the oracle, which runs after the last pass and reads
        every snapshot expiry left, still has the last two or three
        intervals' to read), their files go one interval later (DuckLake
        schedules a file for deletion only once no retained snapshot needs
        it), and orphans go at 5 seconds, far below the age floor (with its
        override): an uncommitted Parquet file of a writer is an orphan for as
        long as its write runs, and only the writers' lease marks keep it
        (maintenance/delete_boundary.py)."""
        s = self.pass_interval
        expire = self.retention if self.retention is not None else 2 * s
        cleanup = self.retention if self.retention is not None else s
        return {
            "MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN": f"{expire:g} seconds",
            "MAINTENANCE_FLUSH_INLINED_DATA": "true",
            "MAINTENANCE_MERGE_ADJACENT_FILES": "true",
            "MAINTENANCE_REWRITE_DATA_FILES_DELETE_THRESHOLD": "0.1",
            "MAINTENANCE_CLEANUP_OLD_FILES_OLDER_THAN": f"{cleanup:g} seconds",
            "MAINTENANCE_DELETE_ORPHANED_FILES_OLDER_THAN": "5 seconds",
            "MAINTENANCE_ORPHAN_AGE_FLOOR_OVERRIDE": "true",
            "MAINTENANCE_TABLE_BATCHES": "true",
            "MAINTENANCE_COMPACT_STORE": "true",
            "MAINTENANCE_COMPACT_STORE_TIMEOUT": "10s",
        }


@dataclass
class Child:
    """One process the soak started; ``peak_mb`` is its VmHWM as last seen."""

    role: str
    name: str
    proc: subprocess.Popen[bytes]
    peak_mb: float = 0.0
    cpu_s: float = 0.0  # user + system CPU seconds as last seen

    def sample(self) -> None:
        try:
            text = Path(f"/proc/{self.proc.pid}/status").read_text()
            stat = Path(f"/proc/{self.proc.pid}/stat").read_text()
        except OSError:
            return
        ticks = stat.rsplit(")", 1)[1].split()[11:13]  # utime, stime (fields 14, 15)
        if len(ticks) == 2:
            self.cpu_s = max(self.cpu_s, sum(int(t) for t in ticks) / os.sysconf("SC_CLK_TCK"))
        for line in text.splitlines():
            if line.startswith("VmHWM:"):
                self.peak_mb = max(self.peak_mb, int(line.split()[1]) / 1024)


@dataclass
class Run:
    """What the soak started and saw while it ran."""

    settings: Settings
    env: dict[str, str]
    lake: str = ""
    data: str = ""
    since: int = 0
    children: list[Child] = field(default_factory=list)
    holder_restarts: int = 0
    holder_exits: list[int] = field(default_factory=list)
    # pinned reader index -> what became of it ("killed"/"closed"/"held") and when (wall clock)
    pin_events: dict[int, dict[str, Any]] = field(default_factory=dict)
    peaks: dict[str, float] = field(default_factory=dict)
    phases: dict[str, float] = field(default_factory=dict)
    _mark: float = field(default_factory=time.monotonic)

    def spawn(self, role: str, name: str, args: list[str], env: dict[str, str]) -> Child:
        log = (self.settings.workdir / f"{name}.log").open("ab")
        proc = subprocess.Popen(
            [sys.executable, *args], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
        )
        log.close()
        child = Child(role, name, proc)
        self.children.append(child)
        return child

    def worker(
        self, role: str, name: str, *args: object, env: dict[str, str] | None = None
    ) -> Child:
        argv = ["-m", "tests.soak.workers", role, *map(str, args)]
        return self.spawn(role, name, argv, {**self.env, **(env or {})})

    def holder(self) -> Child:
        args = ["-m", "slatelake.cli", "hold", self.lake, "--poll", "1"]
        return self.spawn("holder", "holder", args, self.env)

    def phase(self, name: str) -> None:
        """Seconds since the last phase ended (setup, start, run, stop, oracle)."""
        now = time.monotonic()
        self.phases[name] = round(now - self._mark, 1)
        self._mark = now

    def sample(self) -> None:
        for child in self.children:
            child.sample()
            self.peaks[child.role] = max(self.peaks.get(child.role, 0.0), child.peak_mb)


def _stop(child: Child, grace_s: float, sig: int = signal.SIGTERM) -> None:
    """Wait up to ``grace_s`` for ``child`` to leave, then signal it, then kill it."""
    try:
        child.proc.wait(grace_s)
        return
    except subprocess.TimeoutExpired:
        pass
    child.proc.send_signal(sig)
    try:
        child.proc.wait(10)
    except subprocess.TimeoutExpired:
        child.proc.kill()
        child.proc.wait()


def _setup(run: Run, env: dict[str, str]) -> None:
    writers = run.settings.writers
    out = subprocess.run(
        [sys.executable, "-m", "tests.soak.workers", "setup", run.lake, run.data, str(writers)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if out.returncode != 0:
        raise RuntimeError(f"creating the lake failed:\n{out.stderr[-2000:]}")
    run.since = json.loads(out.stdout.strip().splitlines()[-1])["since"]


def _soak(run: Run, stop_file: Path) -> None:
    """Start every role, keep the holder up for the run's length, stop them all."""
    s = run.settings
    holder = run.holder()
    writers = [
        run.worker(
            "writer",
            f"writer-{i}",
            run.lake,
            s.workdir / f"writer-{i}.jsonl",
            stop_file,
            i,
            s.seed + i,
        )
        for i in range(s.writers)
    ]
    readers = [
        run.worker(
            "reader",
            f"reader-{i}",
            run.lake,
            s.workdir / f"reader-{i}.json",
            stop_file,
            run.since,
            s.seed + 1000 + i,
        )
        for i in range(s.readers)
    ]
    pinners = [
        run.worker(
            "pinner",
            f"pinned-{i}",
            run.lake,
            s.workdir / f"pinned-{i}.json",
            stop_file,
            run.since,
            i,
            s.pinned_via,
            env={"SLATELAKE_READER_LEASE_TTL": PIN_KILLED_TTL}
            if s.pin_mode(i) == "killed"
            else None,
        )
        for i in range(s.pinned_readers)
    ]
    options = json.dumps(s.maintenance_options())
    maintainer = run.worker(
        "maintainer",
        "maintainer",
        run.lake,
        run.data,
        s.workdir / "passes.jsonl",
        stop_file,
        s.pass_interval,
        options,
    )
    run.phase("setup")
    _wait_ready(run, [*writers, *readers, *pinners, maintainer], stop_file.parent)
    run.phase("start")
    start = time.monotonic()
    end = start + s.minutes * 60
    schedule = s.pin_schedule()
    while time.monotonic() < end:
        time.sleep(1.0)
        run.sample()
        _end_pins(run, pinners, time.monotonic() - start, schedule, stop_file.parent)
        if holder.proc.poll() is not None:
            run.holder_exits.append(holder.proc.returncode)
            time.sleep(HOLDER_RESTART_S)
            run.holder_restarts += 1
            holder = run.holder()
    run.phase("run")
    stop_file.touch()
    for i, child in enumerate(pinners):
        if i not in run.pin_events and child.proc.poll() is not None:
            # it left before STOP without being told to: a crash, not a pin that ended
            run.pin_events[i] = {"mode": "died", "at": time.time(), "exit": child.proc.returncode}
    for child in [*writers, *readers, *pinners, maintainer]:
        _stop(child, STOP_GRACE_S[child.role])
        run.sample()
    run.sample()
    _stop(holder, 0.0)  # the holder stops on SIGTERM, even mid-fold
    for i in range(s.pinned_readers):
        run.pin_events.setdefault(i, {"mode": "held", "at": None})
    plan = {
        "pass_interval_s": s.pass_interval,
        "cleanup_s": s.retention if s.retention is not None else s.pass_interval,
        "killed_ttl_s": PIN_KILLED_TTL_S,
        "stopped_at": time.time(),
        "pinners": {str(i): e for i, e in sorted(run.pin_events.items())},
    }
    (s.workdir / "pins-plan.json").write_text(json.dumps(plan))
    run.phase("stop")


def _end_pins(
    run: Run, pinners: list[Child], t: float, schedule: dict[str, float], where: Path
) -> None:
    """Kill pinned reader 0 (SIGKILL, no goodbye: its lease lapses at its TTL)
    and ask pinned reader 1 to close, each at its time into the run."""
    for i, child in enumerate(pinners):
        mode = run.settings.pin_mode(i)
        if i in run.pin_events or mode == "held":
            continue
        if mode == "killed" and t >= schedule["kill"]:
            if child.proc.poll() is None:
                child.proc.send_signal(signal.SIGKILL)
                child.proc.wait()
                run.pin_events[i] = {"mode": "killed", "at": time.time()}
            else:
                run.pin_events[i] = {
                    "mode": "died",
                    "at": time.time(),
                    "exit": child.proc.returncode,
                }
        elif mode == "closed" and t >= schedule["close"]:
            (where / f"close-pinned-{i}").touch()
            run.pin_events[i] = {"mode": "closed", "at": time.time()}


def _wait_ready(run: Run, roles: list[Child], where: Path) -> None:
    """Until every role said it is up; one that died first ends the soak."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while len(list(where.glob("ready-*"))) < len(roles):
        dead = [c.name for c in roles if c.proc.poll() is not None]
        if dead or time.monotonic() > deadline:
            why = f"{', '.join(dead)} exited" if dead else f"not up after {READY_TIMEOUT_S:g}s"
            raise RuntimeError(f"the soak's roles did not start: {why} (see their logs)")
        run.sample()
        time.sleep(0.2)


def _check(run: Run, env: dict[str, str]) -> dict[str, Any]:
    args = ["-m", "tests.soak.check", run.lake, str(run.settings.workdir), str(run.since)]
    if run.settings.allow_conflicts:
        args.append("--allow-conflicts")
    child = run.spawn("oracle", "oracle", args, env)
    # stdout went to the log; read the verdict (the last line) from there.
    while child.proc.poll() is None:
        run.sample()
        time.sleep(0.5)
    lines = (run.settings.workdir / "oracle.log").read_text().strip().splitlines()
    if child.proc.returncode != 0 or not lines or not lines[-1].startswith("{"):
        tail = "\n".join(lines[-30:])
        raise RuntimeError(f"the oracle failed (exit {child.proc.returncode}):\n{tail}")
    return json.loads(lines[-1])


def run_soak(settings: Settings) -> tuple[dict[str, Any], int]:
    """Run the soak; return its figures and the exit status."""
    moto = proxy = None
    env = {**subprocess_env(), **S3_ENV}
    env.pop("AWS_ENDPOINT_URL", None)
    run = Run(settings, env)
    stop_file = settings.workdir / "STOP"
    t0 = time.monotonic()
    result: dict[str, Any] = {}
    try:
        if settings.s3:
            from tests.faults.proxy import FaultProxy

            moto, endpoint = start_moto_server()
            run.children.append(Child("moto", "moto", moto))
            bucket = f"soak-{uuid.uuid4().hex[:12]}"
            import boto3

            boto3.client("s3", endpoint_url=endpoint, **_boto_env()).create_bucket(Bucket=bucket)
            run.lake, run.data = f"s3://{bucket}/lake", f"s3://{bucket}/data/"
            direct = {**env, "AWS_ENDPOINT_URL": endpoint}
            proxy = FaultProxy(upstream=endpoint, record=True).start()
            run.env = {**env, "AWS_ENDPOINT_URL": proxy.url}
        else:
            run.lake = (settings.workdir / "lake").as_uri()
            run.data = str(settings.workdir / "data") + "/"
            direct = env
        _setup(run, direct)
        if proxy is not None and settings.fault_rate > 0:
            proxy.set_random(settings.fault_rate, kinds=FAULT_KINDS, seed=settings.seed)
        _soak(run, stop_file)
        if proxy is not None:
            proxy.clear()
        result["faults"] = proxy.injected if proxy is not None else 0
        result["faults_by_kind"] = dict(Counter(k for _, _, k in proxy.log)) if proxy else {}
        if proxy is not None and proxy.trace is not None:
            result["requests"] = proxy.requests
            result["requests_by_area"] = figures.request_areas(proxy.trace)
        verdict = _check(run, direct)
        run.phase("oracle")
    except Exception as exc:
        result.update(_figures(run, None, time.monotonic() - t0))
        result["error"] = f"{type(exc).__name__}: {exc}"
        return result, 2
    finally:
        for child in run.children:
            if child.proc.poll() is None and child.role != "moto":
                _stop(child, 0.0, signal.SIGKILL)
        if proxy is not None:
            proxy.stop()
        if moto is not None:
            moto.terminate()
            moto.wait(10)
    result.update(_figures(run, verdict, time.monotonic() - t0))
    if result["violations"]:
        return result, 1
    if not result["commits"]:
        result["error"] = "no commit was acknowledged: the soak proved nothing"
        return result, 2
    return result, 0


def _boto_env() -> dict[str, str]:
    return {
        "aws_access_key_id": S3_ENV["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": S3_ENV["AWS_SECRET_ACCESS_KEY"],
        "region_name": S3_ENV["AWS_REGION"],
    }


def _figures(run: Run, verdict: dict[str, Any] | None, seconds: float) -> dict[str, Any]:
    """Everything the roles left behind, the oracle's verdict, and the settings."""
    s, peaks = run.settings, run.peaks
    out = figures.writes(s.workdir, peaks)
    if verdict is not None:
        out.update({k: v for k, v in verdict.items() if k != "seconds"})
        out["oracle_seconds"] = verdict["seconds"]
    else:
        out.update(lost=None, doubled=None, violations=None)
    out.update(figures.passes(s.workdir, peaks))
    out.update(figures.reads(s.workdir, peaks))
    out.update(figures.pinned(s.workdir, peaks))
    out.update(figures.corruption(s.workdir))
    if out.get("violations") is not None:
        for key in ("pinned_mismatches", "pinned_errors"):
            if out[key]:  # a pinned snapshot read otherwise, or not at all: the pin failed
                out["violations"][key] = out[key]
    if out["corruption_reports"]:  # a finding even where the oracle could not run
        found = out.get("violations") or {}
        out["violations"] = {**found, "corruption": out["corruption_reports"]}
    if out["reads_doubled"] and out.get("violations") is not None:
        out["violations"]["reads_doubled"] = out["reads_doubled"]  # a wrong answer, however brief
    if out["twin_delete_file_samples"] and out.get("violations") is not None:
        # two delete files live at once on a data file: time travel there reads it twice
        out["violations"]["twin_delete_files"] = len(out["twin_delete_file_samples"])
    out["holder_restarts"] = run.holder_restarts
    out["phase_seconds"] = run.phases
    out["holder_exit_codes"] = run.holder_exits
    figures.peak(peaks, "driver", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    out["peak_rss_mb"] = {role: round(mb, 1) for role, mb in sorted(peaks.items())}
    out["cpu_seconds"] = figures.cpu_by_role(run.children)
    out.update(
        minutes=s.minutes,
        writers=s.writers,
        readers=s.readers,
        s3=s.s3,
        fault_rate=s.fault_rate,
        seed=s.seed,
        pass_interval_s=s.pass_interval,
        retention_s=s.retention,
        pinned_readers=s.pinned_readers,
        pinned_via=s.pinned_via,
        allow_conflicts=s.allow_conflicts,
        seconds=round(seconds, 1),
    )
    return out


def parse_args(argv: list[str]) -> Settings:
    p = argparse.ArgumentParser(prog="scripts/soak", description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=10.0, help="how long to soak (default 10)")
    p.add_argument("--writers", type=int, default=8, help="committer processes (default 8)")
    p.add_argument("--readers", type=int, default=2, help="time-travel readers (default 2)")
    p.add_argument("--s3", action="store_true", help="on moto's S3 behind the fault proxy")
    p.add_argument(
        "--fault-rate",
        type=float,
        default=None,
        help="fraction of S3 requests to fail (default 0.01 with --s3; needs --s3)",
    )
    p.add_argument("--seed", type=int, default=None, help="random seed (default: random)")
    p.add_argument(
        "--pass-interval", type=float, default=None, help="seconds between passes (default 30)"
    )
    p.add_argument(
        "--retention",
        type=_seconds,
        default=None,
        help="seconds a snapshot is kept before a pass expires it, and its files after "
        "(e.g. 1 or 1s; default: two pass intervals, and one)",
    )
    p.add_argument(
        "--pinned-readers",
        type=int,
        default=None,
        help="readers that pin the head once writes landed and re-read it all the soak; "
        "the first is killed partway (5 s lease), the second closes partway (default 0)",
    )
    p.add_argument(
        "--pinned-via",
        choices=("sql", "con"),
        default="con",
        help="pinned readers read through session.con (default: DuckDB's connection, with the "
        "catalog copy of the session's last statement, as a lazy relation reads), or through "
        "session.sql (which refreshes first)",
    )
    p.add_argument(
        "--pin-check",
        action="store_true",
        help="issue 46's check: --pinned-readers 2 --pass-interval 3 --retention 1 "
        "(each unless given)",
    )
    p.add_argument(
        "--allow-conflicts",
        action="store_true",
        help="report ConflictErrors raised on non-conflicting work without failing the soak",
    )
    p.add_argument("--dir", type=Path, default=None, help="work directory (default: a new one)")
    p.add_argument("--keep", action="store_true", help="keep the work directory on success")
    a = p.parse_args(argv)
    for key, value in PIN_CHECK.items():
        if getattr(a, key) is None:
            setattr(a, key, value if a.pin_check else {"pass_interval": 30.0}.get(key))
    a.pinned_readers = a.pinned_readers or 0
    if a.fault_rate is not None and a.fault_rate > 0 and not a.s3:
        p.error("--fault-rate needs --s3: the fault proxy stands in front of S3")
    rate = a.fault_rate if a.fault_rate is not None else (0.01 if a.s3 else 0.0)
    if not 0 <= rate <= 1 or a.minutes <= 0 or a.writers < 1 or a.readers < 0:
        p.error("--fault-rate is in [0, 1]; --minutes > 0; --writers >= 1; --readers >= 0")
    if a.pass_interval <= 0:
        p.error("--pass-interval must be more than 0 seconds")
    if a.pinned_readers < 0 or (a.retention is not None and a.retention < 0):
        p.error("--pinned-readers >= 0; --retention >= 0 seconds")
    workdir = a.dir if a.dir is not None else Path(tempfile.mkdtemp(prefix="slatelake-soak-"))
    workdir.mkdir(parents=True, exist_ok=True)
    if any(workdir.iterdir()):
        p.error(f"--dir {workdir} is not empty; give a new or empty directory")
    seed = a.seed if a.seed is not None else random.randrange(2**31)
    return Settings(
        a.minutes,
        a.writers,
        a.readers,
        a.s3,
        rate,
        seed,
        a.pass_interval,
        workdir.resolve(),
        a.keep,
        a.allow_conflicts,
        a.pinned_readers,
        a.retention,
        a.pinned_via,
    )


def _seconds(text: str) -> float:
    """A number of seconds, with or without an ``s``: ``1``, ``1s``, ``0.5s``."""
    try:
        return float(text.strip().removesuffix("s"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected seconds, e.g. 1 or 1s") from None


def main(argv: list[str]) -> int:
    settings = parse_args(argv)
    result, status = run_soak(settings)
    if status == 0 and not settings.keep:
        shutil.rmtree(settings.workdir, ignore_errors=True)
    else:
        result["workdir"] = str(settings.workdir)
    if "error" in result:
        print(f"soak error: {result['error']}", file=sys.stderr)
    try:
        print(figures.human_line(result))
    except (KeyError, TypeError, ValueError) as exc:
        print(f"soak: no figures ({type(exc).__name__}: {exc})")
    print(json.dumps(result), flush=True)
    return status


if __name__ == "__main__":
    os.environ.pop("AWS_ENDPOINT_URL", None)
    sys.exit(main(sys.argv[1:]))
