"""What ``status``, ``runs``, ``audit_log`` and ``health`` cost as the unfolded log grows.

Issue 41, item 5: with nobody folding, every slot since the fold cursor is
read by each of these reads, so their cost grows with the backlog. This
bench makes a lake with a DuckLake catalog (a few tables, one pass recorded,
one policy change audited), folds it, then adds unfolded slots (INSERTs from
a session, no ``Folder.fold_once``; the last of each batch is a recorded
pass, so a status record sits in the backlog) and at each backlog size times
each read and counts what it did: slot GETs, slots fully decoded (every put
built into a change set), slots decoded for a few keys only, catalog rows
loaded from the store and change sets applied to a catalog.
Every read is checked against the pass recorded last (it must be there).

    .venv/bin/python tests/bench/status_reads.py [--sizes 0,200,1000] [--runs 3] [--s3] [--json]

``--s3`` runs on moto's S3 server (tests/moto_server.py) as well as a local
file lake. moto answers a GET in about 1.5 ms and serves them one after the
other, so it shows how many requests a read makes, not how well it overlaps
them; ``--latency-ms 20`` (with ``--s3``) also measures through a proxy
(tests/faults/proxy.py) that holds every slot GET that long first, closer to
S3's own first-byte latency.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the repository root on the path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import slatelake
from slatelake import maintenance
from slatelake.catalog.folder import Folder
from slatelake.maintenance.health import health as lake_health
from slatelake.store.location import LakeLocation

TABLES = 3
FLUSH = {"MAINTENANCE_FLUSH_INLINED_DATA": "true"}
READS = ("status", "runs", "audit", "health")


@dataclass
class Point:
    """One read at one backlog size: its median wall time and what it did."""

    read: str
    unfolded: int
    median_ms: float
    counts: dict[str, int] = field(default_factory=dict)


@contextlib.contextmanager
def counting() -> Iterator[Counter[str]]:
    """Count, while the block runs, the work a read does per slot: slot GETs,
    full envelope decodes, keyed decodes (``log.changeset.decode_keys``, where
    present: only some keys' writes kept), catalog rows loaded from the store,
    change sets applied to a catalog. Patches module attributes and restores them after."""
    from slatelake.catalog import state as catalog_state
    from slatelake.ducklake import duck_state
    from slatelake.log import changeset, replay, slots
    from slatelake.store import db, objects

    seen: Counter[str] = Counter()
    saved: list[tuple[Any, str, Any]] = []

    def wrap(owner: Any, name: str, count: Callable[..., None]) -> None:
        original = getattr(owner, name, None)
        if original is None:
            return
        saved.append((owner, name, original))

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            count(*args, **kwargs)
            return original(*args, **kwargs)

        setattr(owner, name, wrapper)

    def get(_client: Any, path: str) -> None:
        seen["slot_gets" if "/commits/" in f"/{path}" else "other_gets"] += 1

    def rows(_reader: Any, _prefix: bytes, *_: Any, **__: Any) -> None:
        seen["store_scans"] += 1

    wrap(objects.ObjectClient, "get", get)
    wrap(objects.ObjectClient, "list", lambda *_a, **_k: seen.update(["lists"]))
    for module in (replay, slots, changeset):
        wrap(module, "decode_envelope", lambda *_a, **_k: seen.update(["full_decodes"]))
    for module in (replay, changeset):
        wrap(module, "decode_keys", lambda *_a, **_k: seen.update(["keyed_decodes"]))
    wrap(db.StoreReader, "scan_prefix_batches", rows)
    wrap(
        catalog_state.CatalogState,
        "load",
        lambda _s, pairs: seen.update({"catalog_rows_loaded": len(pairs)}),
    )
    wrap(catalog_state.CatalogState, "apply", lambda *_a, **_k: seen.update(["catalog_applies"]))
    wrap(
        duck_state.DuckState,
        "apply_tail",
        lambda _s, tail: seen.update({"catalog_applies": len(list(tail))}),
    )
    try:
        yield seen
    finally:
        for owner, name, original in reversed(saved):
            setattr(owner, name, original)


def _read(name: str, url: str) -> Any:
    if name == "status":
        return maintenance.status(url)
    if name == "runs":
        return maintenance.runs(url, limit=20)
    if name == "audit":
        return maintenance.audit_log(url, limit=20)
    return lake_health(url)


def _check(name: str, result: Any, expected_run: int | None) -> None:
    """The newest pass (recorded in an unfolded slot) is in what the read says."""
    if name == "status":
        assert result[0].run_id == expected_run, (result[0].run_id, expected_run)
    elif name == "runs":
        assert result.items[0].run_id == expected_run, (result.items[0].run_id, expected_run)
    elif name == "audit":
        assert result.items, "the audit entry recorded at setup is gone"
    else:
        assert len(result.tables) == TABLES, result.tables


def measure_point(url: str, unfolded: int, runs: int, expected_run: int | None) -> list[Point]:
    points = []
    for name in READS:
        with counting() as seen:  # one counted read, then the timed ones
            _check(name, _read(name, url), expected_run)
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            _read(name, url)
            times.append((time.perf_counter() - t0) * 1000)
        points.append(Point(name, unfolded, round(statistics.median(times), 1), dict(seen)))
    return points


def _commit_backlog(url: str, slots: int, start: int) -> int | None:
    """``slots`` unfolded slots: INSERTs round-robin over the tables, the
    last a recorded pass (a status record in the backlog). Returns its run id."""
    if slots == 0:
        return None
    with slatelake.connect(url) as session:
        for i in range(slots - 1):
            session.sql(f"INSERT INTO t{i % TABLES} VALUES ({start + i}, 'row {start + i}')")
        report = maintenance.run(session, FLUSH)
    return report.run_id


def make_lake(url: str, data_path: str) -> int | None:
    """A lake with a catalog, a recorded pass and an audited policy change, all folded."""
    with slatelake.connect(url, data_path=data_path) as session:
        for t in range(TABLES):
            session.sql(f"CREATE TABLE t{t} (id INTEGER, v VARCHAR)")
            session.sql(f"INSERT INTO t{t} SELECT r, 'x' || r FROM range(50) r(r)")
        run_id = maintenance.run(session, FLUSH).run_id
    maintenance.set_policy(url, {"retention": "14d"}, by="bench")
    folder = Folder(LakeLocation.parse(url))
    try:
        while folder.fold_once(truncate=False).slots:
            pass
    finally:
        folder.close()
    return run_id


@contextlib.contextmanager
def _endpoint(url: str | None) -> Iterator[None]:
    """S3 requests go to ``url`` while the block runs (None: unchanged)."""
    import os

    if url is None:
        yield
        return
    saved = os.environ["AWS_ENDPOINT_URL"]
    os.environ["AWS_ENDPOINT_URL"] = url
    try:
        yield
    finally:
        os.environ["AWS_ENDPOINT_URL"] = saved


def bench(
    url: str, data_path: str, sizes: list[int], runs: int, slow_endpoint: str | None = None
) -> dict[str, list[Point]]:
    """Each read at each backlog size; with ``slow_endpoint``, also through it."""
    expected = make_lake(url, data_path)
    points: dict[str, list[Point]] = {"direct": [], "slow": []}
    have = 0
    for size in sizes:
        newest = _commit_backlog(url, size - have, have)
        expected = newest if newest is not None else expected
        have = size
        for how, endpoint in (("direct", None), ("slow", slow_endpoint)):
            if how == "slow" and endpoint is None:
                continue
            with _endpoint(endpoint):
                got = measure_point(url, have, runs, expected)
            for p in got:
                print(
                    f"  {how:6s} N={p.unfolded:5d} {p.read:7s} {p.median_ms:8.1f} ms  {p.counts}",
                    flush=True,
                )
            points[how] += got
    return points


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="0,200,1000", help="unfolded slots, ascending")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--s3", action="store_true", help="also on moto's S3 server")
    parser.add_argument(
        "--latency-ms",
        type=float,
        default=0.0,
        help="with --s3: also with slot GETs held this long",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sizes = sorted({int(s) for s in args.sizes.split(",")})
    out: dict[str, list[dict[str, Any]]] = {}
    root = Path(tempfile.mkdtemp(prefix="slatelake-bench-status-"))
    try:
        print("local file lake", flush=True)
        points = bench((root / "lake").as_uri(), f"{root / 'data'}/", sizes, args.runs)
        out["file"] = [p.__dict__ for p in points["direct"]]
        if args.s3:
            from tests.bench.common import Moto
            from tests.faults.proxy import FaultProxy, FaultRule

            moto = Moto()
            proxy = None
            try:
                if args.latency_ms > 0:
                    proxy = FaultProxy(upstream=moto.endpoint).start()
                    proxy.add(
                        FaultRule(
                            method="GET",
                            prefix="commits/",
                            kind="delay",
                            times=None,
                            delay_s=args.latency_ms / 1000,
                        )
                    )
                bucket = moto.bucket("status-reads")
                print("moto S3", flush=True)
                points = bench(
                    f"s3://{bucket}/lake",
                    f"s3://{bucket}/data/",
                    sizes,
                    args.runs,
                    None if proxy is None else proxy.url,
                )
                out["s3"] = [p.__dict__ for p in points["direct"]]
                if proxy is not None:
                    out[f"s3_{args.latency_ms:g}ms"] = [p.__dict__ for p in points["slow"]]
            finally:
                if proxy is not None:
                    proxy.stop()
                moto.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if args.json:
        print(json.dumps(out))


if __name__ == "__main__":
    main()
