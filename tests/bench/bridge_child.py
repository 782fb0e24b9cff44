"""The bridge benchmark's child processes: one fresh Python process per cold
open (and per session run), so "cold" means interpreter start, imports,
connect and the first query, and the peak RSS (VmHWM) is the session's own.

Run as ``python -m tests.bench.bridge_child MODE ARGS...``; prints one JSON
line. Only the standard library is imported at module level: the cold clock
starts before ``import slatelake`` / ``import duckdb``. The stock side
imports duckdb alone and LOADs the ducklake (and, for S3, httpfs) extension
binaries the parent names, as a stock user would, with an S3 secret built
from the same environment slatelake reads.

Slatelake's internals are instrumented only where they exist (the open path
is being rewritten): a wrapper that finds no attribute is skipped and listed
under ``not_instrumented``, never an error.
"""

from __future__ import annotations

import time

T0 = time.perf_counter()  # before any import below that costs anything

import json  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
from collections import Counter  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

QUERY = "SELECT count(*) FROM t"
FILES_QUERY = "SELECT count(*) FROM ducklake_list_files('lake', 't')"
MARKER = "COMMENT ON TABLE t IS 'slatelake bridge benchmark'"
# Reads one Parquet file (file stats prune the rest): the data path works on both sides.
PROBE = "SELECT v FROM t WHERE id = 17"
SLATE_ID_BASE = 1_000_000_000
STOCK_ID_BASE = 2_000_000_000
PROFILE_LINES = 22
# (module, attribute path, label): where a cold open or a statement spends its
# time. Nested calls count in both (open_state includes materialize).
COLD_PROBES = (
    ("slatelake.ducklake.extensions", "connect", "ext_load"),
    ("slatelake.catalog.lake", "Lake.open", "lake_open"),
    ("slatelake.catalog.lake", "Lake.materialize", "materialize"),
    ("slatelake.log.images", "ImageBook.list", "image_list"),
    ("slatelake.log.images", "ImageBook.fetch", "image_fetch"),
    ("slatelake.ducklake.session", "Session._open_state", "open_state"),
    ("slatelake.ducklake.opening", "_from_newest_image", "from_image"),
    ("slatelake.ducklake.session", "attach_copy", "attach_copy"),
    ("slatelake.ducklake.session", "copy_database", "copy_database"),
    ("slatelake.ducklake.session", "Session._load", "load"),
    ("slatelake.ducklake.session", "Session._attach", "attach_ducklake"),
    ("slatelake.ducklake.capture", "Capture.reset", "capture_reset"),
    ("slatelake.ducklake.session", "Session.refresh", "refresh"),
)
SESSION_PROBES = (
    ("slatelake.ducklake.session", "Session.refresh", "refresh"),
    ("slatelake.ducklake.capture", "Capture.capture", "capture"),
    ("slatelake.catalog.lake", "Lake.commit", "commit"),
)


def since_process_start_s() -> float:
    """Seconds since this process started (interpreter start included)."""
    with open("/proc/self/stat") as f:
        start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime") as f:
        uptime = float(f.read().split()[0])
    return uptime - start_ticks / os.sysconf("SC_CLK_TCK")


def vm_hwm_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


class Probes:
    """Time spent in, and calls to, whatever of ``probes`` exists."""

    def __init__(self, probes: tuple[tuple[str, str, str], ...]) -> None:
        import importlib

        self.spent: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()
        self.missing: list[str] = []
        for module_name, path, label in probes:
            try:
                owner: Any = importlib.import_module(module_name)
                *parents, name = path.split(".")
                for part in parents:
                    owner = getattr(owner, part)
                inner = getattr(owner, name)
            except (ImportError, AttributeError):
                self.missing.append(f"{module_name}.{path}")
                continue
            setattr(owner, name, self._wrapped(inner, label))

    def _wrapped(self, inner: Callable[..., Any], label: str) -> Callable[..., Any]:
        def wrapped(*a: Any, **kw: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return inner(*a, **kw)
            finally:
                self.spent[label] += time.perf_counter() - t0
                self.calls[label] += 1

        return wrapped


class StoreCalls:
    """Object-store calls by verb and top folder (commits, images, readers...),
    counted on the ObjectClient class so every client the session makes counts.
    SlateDB's own reads go through Rust and are not seen here."""

    def __init__(self) -> None:
        from slatelake.store.objects import ObjectClient

        self.counts: Counter[str] = Counter()
        for verb in ("put_if_absent", "put", "get", "delete", "list"):
            inner = getattr(ObjectClient, verb)
            setattr(ObjectClient, verb, self._wrapped(verb, inner))

    def _wrapped(self, verb: str, inner: Callable[..., Any]) -> Callable[..., Any]:
        counts = self.counts

        def wrapped(client: Any, path: str, *a: Any, **kw: Any) -> Any:
            root = client.location.root
            rel = path[len(root) + 1 :] if root and path.startswith(root + "/") else path
            counts[f"{verb}:{rel.split('/', 1)[0]}"] += 1
            return inner(client, path, *a, **kw)

        return wrapped


# -- stock: plain duckdb ---------------------------------------------------------------------------
def stock_connect(ext_dir: dict[str, str], s3: bool) -> Any:
    """duckdb with the ducklake extension (and httpfs + an S3 secret for S3 data)
    loaded from the given binaries; nothing downloads."""
    import duckdb

    con = duckdb.connect(
        config={"autoinstall_known_extensions": False, "autoload_known_extensions": False}
    )
    con.execute(f"LOAD {_lit(ext_dir['ducklake'])}")
    if s3:
        con.execute(f"LOAD {_lit(ext_dir['httpfs'])}")
        endpoint = os.environ["AWS_ENDPOINT_URL"].split("://", 1)
        con.execute(
            "CREATE SECRET bench_s3 (TYPE S3, "
            f"KEY_ID {_lit(os.environ['AWS_ACCESS_KEY_ID'])}, "
            f"SECRET {_lit(os.environ['AWS_SECRET_ACCESS_KEY'])}, "
            f"REGION {_lit(os.environ.get('AWS_REGION', 'us-east-1'))}, "
            f"ENDPOINT {_lit(endpoint[1])}, URL_STYLE 'path', "
            f"USE_SSL {'true' if endpoint[0] == 'https' else 'false'})"
        )
    return con


def _lit(value: str) -> str:
    if "\x00" in value:
        raise SystemExit("NUL in a benchmark value")
    return "'" + value.replace("'", "''") + "'"


def stock_attach(con: Any, meta: str) -> None:
    con.execute(f"ATTACH {_lit('ducklake:' + meta)} AS lake")  # the stored data path
    con.execute("USE lake")


# -- modes -----------------------------------------------------------------------------------------
def cold_slate(url: str, profile: bool) -> dict[str, Any]:
    import slatelake

    t_import = time.perf_counter()
    probes = Probes(COLD_PROBES)
    calls = StoreCalls()
    prof = None
    if profile:
        from tests.bench.substrate import ThreadProfiles

        prof = ThreadProfiles()
        prof.__enter__()
    t1 = time.perf_counter()
    s = slatelake.connect(url)
    t2 = time.perf_counter()
    count = s.sql(QUERY).fetchone()[0]
    t3 = time.perf_counter()
    if prof is not None:
        prof.__exit__(None, None, None)
    hwm = vm_hwm_mb()
    files = s.con.execute(FILES_QUERY).fetchone()[0]
    s.close()
    out: dict[str, Any] = {
        "cold_s": (t_import - T0) + (t3 - t1),  # instrumenting is not counted
        "import_s": t_import - T0,
        "connect_s": t2 - t1,
        "query_s": t3 - t2,
        "connect_query_s": t3 - t1,
        "since_process_start_s": since_process_start_s() - (time.perf_counter() - t3),
        "vm_hwm_mb": hwm,
        "count": count,
        "files": files,
        "phases_s": dict(probes.spent),
        "phase_calls": dict(probes.calls),
        "not_instrumented": probes.missing,
        "store_calls": dict(calls.counts),
        "image_reads": probes.calls.get("image_fetch", 0),
    }
    if prof is not None:
        out["profile"] = prof.top(PROFILE_LINES)
    return out


def cold_stock(meta: str, ext: dict[str, str], s3: bool) -> dict[str, Any]:
    con = stock_connect(ext, s3)  # imports duckdb: inside the clock
    t1 = time.perf_counter()
    stock_attach(con, meta)
    t2 = time.perf_counter()
    count = con.execute(QUERY).fetchone()[0]
    t3 = time.perf_counter()
    hwm = vm_hwm_mb()
    files = con.execute(FILES_QUERY).fetchone()[0]
    con.close()
    return {
        "cold_s": t3 - T0,
        "import_and_ext_load_s": t1 - T0,
        "attach_s": t2 - t1,
        "query_s": t3 - t2,
        "connect_query_s": t3 - t1,
        "since_process_start_s": since_process_start_s() - (time.perf_counter() - t3),
        "vm_hwm_mb": hwm,
        "count": count,
        "files": files,
    }


def ext_load() -> dict[str, Any]:
    from slatelake.ducklake import extensions

    t1 = time.perf_counter()
    extensions.connect().close()
    return {"import_s": t1 - T0, "ext_load_s": time.perf_counter() - t1}


def insert_sql(ident: int) -> str:
    return f"INSERT INTO t VALUES ({ident}, 'row {ident}', {ident % 1000}.25)"


def _timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _summary(warm: list[float], ins: list[float]) -> dict[str, Any]:
    return {
        "warm_s": statistics.median(warm),
        "warm_p90_s": sorted(warm)[int(0.9 * (len(warm) - 1))],
        "insert_s": statistics.median(ins),
        "insert_mean_s": statistics.fmean(ins),
        "insert_max_s": max(ins),
    }


def session_slate(url: str, n: int) -> dict[str, Any]:
    import slatelake

    probes = Probes(SESSION_PROBES)
    calls = StoreCalls()
    s = slatelake.connect(url)
    try:
        first = s.sql(QUERY).fetchone()[0]
        spent, before = Counter(probes.spent), Counter(calls.counts)
        warm = [_timed(lambda: s.sql(QUERY).fetchone()) for _ in range(n)]
        warm_spent = probes.spent - spent
        warm_calls = calls.counts - before
        files_before = s.con.execute(FILES_QUERY).fetchone()[0]
        spent, before = Counter(probes.spent), Counter(calls.counts)
        ins = [_timed(lambda i=i: s.sql(insert_sql(SLATE_ID_BASE + i))) for i in range(n)]
        ins_spent = probes.spent - spent
        ins_calls = calls.counts - before
        files_after = s.con.execute(FILES_QUERY).fetchone()[0]
        count_after = s.sql(QUERY).fetchone()[0]
        probe = s.sql(PROBE).fetchall()
    finally:
        s.close()
    return {
        **_summary(warm, ins),
        "first_count": first,
        "warm_phases_ms": {k: v / n * 1000 for k, v in warm_spent.items()},
        "warm_store_calls": {k: v / n for k, v in warm_calls.items()},
        "insert_phases_ms": {k: v / n * 1000 for k, v in ins_spent.items()},
        "insert_store_calls": {k: v / n for k, v in ins_calls.items()},
        "insert_wrote": "parquet" if files_after - files_before == n else "inlined/other",
        "insert_rows_added": count_after - first,
        "probe_rows": [list(r) for r in probe],
        "not_instrumented": probes.missing,
        "vm_hwm_mb": vm_hwm_mb(),
    }


def session_stock(meta: str, ext: dict[str, str], s3: bool, n: int) -> dict[str, Any]:
    con = stock_connect(ext, s3)
    try:
        stock_attach(con, meta)
        first = con.execute(QUERY).fetchone()[0]
        warm = [_timed(lambda: con.execute(QUERY).fetchone()) for _ in range(n)]
        files_before = con.execute(FILES_QUERY).fetchone()[0]
        ins = [_timed(lambda i=i: con.execute(insert_sql(STOCK_ID_BASE + i))) for i in range(n)]
        files_after = con.execute(FILES_QUERY).fetchone()[0]
        count_after = con.execute(QUERY).fetchone()[0]
        probe = con.execute(PROBE).fetchall()
    finally:
        con.close()
    return {
        **_summary(warm, ins),
        "first_count": first,
        "insert_wrote": "parquet" if files_after - files_before == n else "inlined/other",
        "insert_rows_added": count_after - first,
        "probe_rows": [list(r) for r in probe],
        "vm_hwm_mb": vm_hwm_mb(),
    }


def profile_inserts(url: str, n: int) -> dict[str, Any]:
    import slatelake
    from tests.bench.substrate import ThreadProfiles

    s = slatelake.connect(url)
    try:
        s.sql(QUERY).fetchone()
        with ThreadProfiles() as prof:
            t0 = time.perf_counter()
            for i in range(n):
                s.sql(insert_sql(SLATE_ID_BASE + 500_000 + i))
            seconds = time.perf_counter() - t0
        return {"inserts": n, "seconds_profiled": seconds, "top": prof.top(PROFILE_LINES)}
    finally:
        s.close()


def import_lake(catalog: str, url: str) -> dict[str, Any]:
    """The slatelake side: ``import_catalog`` lays the stock catalog's rows down
    as folded state (fold cursor 0, an empty log)."""
    from slatelake.ducklake.transfer import import_catalog

    report = import_catalog(catalog, url)
    return {"seconds": report.seconds, "rows": report.rows, "keys": report.keys}


def mark_slate(url: str) -> dict[str, Any]:
    import slatelake

    t0 = time.perf_counter()
    with slatelake.connect(url) as s:
        t1 = time.perf_counter()
        s.sql(MARKER)
    return {"connect_s": t1 - t0, "seconds": time.perf_counter() - t0}


def mark_stock(meta: str, ext: dict[str, str], s3: bool) -> dict[str, Any]:
    con = stock_connect(ext, s3)
    stock_attach(con, meta)
    con.execute(MARKER)
    con.close()
    return {}


def main(argv: list[str]) -> int:
    mode, rest = argv[0], argv[1:]
    flags = {a for a in rest if a.startswith("--")}
    args = [a for a in rest if not a.startswith("--")]
    s3 = "--s3" in flags
    ext = json.loads(os.environ.get("BENCH_EXTENSIONS", "{}"))
    if mode == "ext":
        out = ext_load()
    elif mode == "cold-slate":
        out = cold_slate(args[0], "--profile" in flags)
    elif mode == "cold-stock":
        out = cold_stock(args[0], ext, s3)
    elif mode == "session-slate":
        out = session_slate(args[0], int(args[1]))
    elif mode == "session-stock":
        out = session_stock(args[0], ext, s3, int(args[1]))
    elif mode == "profile-inserts":
        out = profile_inserts(args[0], int(args[1]))
    elif mode == "import":
        out = import_lake(args[0], args[1])
    elif mode == "mark-slate":
        out = mark_slate(args[0])
    elif mode == "mark-stock":
        out = mark_stock(args[0], ext, s3)
    else:
        raise SystemExit(f"unknown child mode {mode}")
    print(json.dumps(out, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
