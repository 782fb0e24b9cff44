"""The store census: what a lake's store weighs, subspace by subspace.

The default census reads one manifest through the admin API (no writer, no
reader, nothing fenced): every subspace is its own SlateDB segment, so the
manifest's per-segment L0 and sorted-run sizes are a per-subspace census that
costs the same few object reads whatever the store holds. Every subspace the
keyspace defines gets a row, written or not, plus ``unknown`` for segments
whose prefix byte is not ours (reported, never dropped or refused).

Two optional legs. Object totals (on by default): one paginated listing of
the lake root, summed by kind (log slots, manifest, SST, WAL, other); the
only part whose cost grows with the store, and the only part allowed to fail
on its own -- a listing the credentials refuse leaves the totals absent and
the rest intact. The live leg (opt-in): a read-only scan of every subspace
counting live keys and their encoded bytes, ``current`` split into entity
records and the file-deletion schedule. It reads every key, which is why it
is opt-in. Both legs read; neither writes, so the census serves read-only
handles. Knows no key layout beyond the subspace and kind bytes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from slatelake.errors import NotFoundError
from slatelake.store.db import StoreReader, open_admin, open_reader
from slatelake.store.keys import Subspace, subspace_label
from slatelake.store.location import (
    COMMITS_DIR,
    STORE_DIR,
    TRUNCATION_MARK,
    LakeLocation,
    Located,
    location_of,
)
from slatelake.store.objects import ObjectClient

UNKNOWN = "unknown"
SUBSPACE_NAMES = (*(s.label for s in Subspace), UNKNOWN)
OBJECT_KINDS = ("log", "manifest", "sst", "wal", "other")
# current's kind byte for DuckLake's file-deletion schedule (RFC 0007 gcfile);
# the catalog's registry assigns it (a test pins that the two agree).
SCHEDULED_DELETION_KIND = 17
# The live leg's reader must not poll the manifest while it scans.
_LIVE_POLL_MS = 3_600_000


@dataclass(frozen=True)
class CensusRequest:
    """What to measure. ``count_live_entries`` adds the scanning leg (a full
    read of the store); ``list_objects`` the object totals (one listing)."""

    count_live_entries: bool = False
    list_objects: bool = True


@dataclass(frozen=True)
class LiveCount:
    """Live keys and their encoded bytes (key + value) in one subspace.
    ``split`` breaks ``current`` down by record kind; None elsewhere."""

    keys: int
    bytes: int
    split: dict[str, dict[str, int]] | None = None


@dataclass(frozen=True)
class SubspaceCensus:
    """One subspace's physical figures from the manifest, and the live leg."""

    subspace: str
    bytes: int
    l0_ssts: int
    sorted_runs: int
    sorted_run_ssts: int
    live: LiveCount | None = None
    # For ``unknown``: the foreign prefix bytes found, so a report can name them.
    prefixes: tuple[int, ...] = ()


@dataclass(frozen=True)
class StoreCensus:
    """A census of one manifest version. ``objects`` is the totals by kind
    ({kind: {"objects": n, "bytes": b}} plus "total"), None when not listed or
    refused; ``objects_error`` then says why."""

    manifest_id: int
    subspaces: list[SubspaceCensus]
    objects: dict[str, dict[str, int]] | None = None
    objects_error: str | None = None
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def row(self, subspace: str) -> SubspaceCensus:
        return next(s for s in self.subspaces if s.subspace == subspace)

    @property
    def sst_bytes(self) -> int:
        return sum(s.bytes for s in self.subspaces)

    def to_dict(self) -> dict[str, Any]:
        """What ``slatelake census --json`` prints and the Lambda answers:
        the manifest, one row per subspace, the object totals (or why they
        are absent) and notes."""
        return {
            "manifest_id": self.manifest_id,
            "subspaces": self.rows(),
            "objects": self.objects,
            "objects_error": self.objects_error,
            "seconds": round(self.seconds, 3),
            "notes": list(self.notes),
        }

    def rows(self) -> list[dict[str, Any]]:
        """One row per subspace. Live columns are null, not zero, when the
        live leg did not run; ``live_split`` is non-null only on ``current``
        when it did."""
        return [
            {
                "subspace": s.subspace,
                "bytes": s.bytes,
                "l0_ssts": s.l0_ssts,
                "sorted_runs": s.sorted_runs,
                "sorted_run_ssts": s.sorted_run_ssts,
                "manifest_id": self.manifest_id,
                "live_keys": None if s.live is None else s.live.keys,
                "live_bytes": None if s.live is None else s.live.bytes,
                "live_split": None if s.live is None else s.live.split,
            }
            for s in self.subspaces
        ]


def store_census(
    target: Located | LakeLocation | str, request: CensusRequest | None = None
) -> StoreCensus:
    """Measure a lake's store. ``target`` is a lake handle (read-only or not), a
    location or a lake URL. Writes nothing; raises NotFoundError when no store
    exists there."""
    request = request or CensusRequest()
    location = location_of(target)
    t0 = time.perf_counter()
    manifest = open_admin(location).read_manifest()
    if manifest is None:
        raise NotFoundError(f"no slatelake store at {location.url}; nothing to measure")
    physical = physical_by_subspace(manifest)
    live: dict[str, LiveCount] | None = None
    if request.count_live_entries:
        foreign = physical[UNKNOWN]["prefixes"]
        live = count_live(location, tuple(foreign))
    subspaces = [
        SubspaceCensus(
            subspace=name,
            bytes=physical[name]["bytes"],
            l0_ssts=physical[name]["l0_ssts"],
            sorted_runs=physical[name]["sorted_runs"],
            sorted_run_ssts=physical[name]["sorted_run_ssts"],
            live=None if live is None else live[name],
            prefixes=tuple(physical[name]["prefixes"]) if name == UNKNOWN else (),
        )
        for name in SUBSPACE_NAMES
    ]
    objects = error = None
    if request.list_objects:
        objects, error = object_totals(location)
    return StoreCensus(
        manifest_id=int(manifest.id),
        subspaces=subspaces,
        objects=objects,
        objects_error=error,
        seconds=time.perf_counter() - t0,
    )


def physical_by_subspace(manifest: Any) -> dict[str, dict[str, Any]]:
    """Per-subspace bytes and SST counts from one manifest. A segment whose
    prefix is not a single known subspace byte (and the root tree, empty by
    construction under the extractor) counts as ``unknown``."""
    out: dict[str, dict[str, Any]] = {
        name: {"bytes": 0, "l0_ssts": 0, "sorted_runs": 0, "sorted_run_ssts": 0, "prefixes": []}
        for name in SUBSPACE_NAMES
    }
    trees = [(bytes(seg.prefix), seg.l0, seg.compacted) for seg in manifest.segments]
    if manifest.l0 or manifest.compacted:
        trees.append((b"", manifest.l0, manifest.compacted))
    for prefix, l0, runs in trees:
        name = subspace_label(prefix[0]) if len(prefix) == 1 else UNKNOWN
        row = out[name]
        row["bytes"] += sum(int(v.estimated_size_bytes) for v in l0)
        row["bytes"] += sum(int(r.estimated_size_bytes) for r in runs)
        row["l0_ssts"] += len(l0)
        row["sorted_runs"] += len(runs)
        row["sorted_run_ssts"] += sum(len(r.sst_views) for r in runs)
        if name == UNKNOWN and prefix:
            row["prefixes"].append(prefix[0])
    return out


def count_live(
    location: LakeLocation, foreign_prefixes: tuple[int, ...] = ()
) -> dict[str, LiveCount]:
    """The scanning leg: live keys and encoded bytes per subspace, through a
    fresh read-only DbReader (fences nothing, writes nothing)."""
    reader = open_reader(location, poll_interval_ms=_LIVE_POLL_MS)
    try:
        out: dict[str, LiveCount] = {}
        for sub in Subspace:
            if sub is Subspace.CURRENT:
                out[sub.label] = _count_current(reader)
            else:
                keys, size = _count_prefix(reader, bytes((sub,)))
                out[sub.label] = LiveCount(keys, size)
        keys = size = 0
        for byte in foreign_prefixes:
            k, b = _count_prefix(reader, bytes((byte,)))
            keys, size = keys + k, size + b
        out[UNKNOWN] = LiveCount(keys, size)
        return out
    finally:
        reader.close()


def _count_prefix(reader: StoreReader, prefix: bytes) -> tuple[int, int]:
    keys = size = 0
    for batch in reader.scan_prefix_batches(prefix):
        keys += len(batch)
        size += sum(len(k) + len(v) for k, v in batch)
    return keys, size


def _count_current(reader: StoreReader) -> LiveCount:
    """current, split by key kind: entity records vs the deletion schedule.
    Decides on the key's kind byte only; values are sized, never decoded."""
    split = {"entity": {"keys": 0, "bytes": 0}, "scheduled_deletion": {"keys": 0, "bytes": 0}}
    entity, gc = split["entity"], split["scheduled_deletion"]
    for batch in reader.scan_prefix_batches(bytes((Subspace.CURRENT,))):
        for key, value in batch:
            bucket = gc if len(key) > 1 and key[1] == SCHEDULED_DELETION_KIND else entity
            bucket["keys"] += 1
            bucket["bytes"] += len(key) + len(value)
    return LiveCount(
        keys=entity["keys"] + gc["keys"], bytes=entity["bytes"] + gc["bytes"], split=split
    )


def classify_object(location: LakeLocation, path: str) -> str:
    """The census kind of an object path under the lake root."""
    rel = path
    root = location.root
    if root and rel.startswith(root + "/"):
        rel = rel[len(root) + 1 :]
    if rel.startswith(COMMITS_DIR + "/") or rel == TRUNCATION_MARK:
        return "log"
    if rel.startswith(STORE_DIR + "/"):
        inner = rel[len(STORE_DIR) + 1 :]
        if inner.startswith("manifest/"):
            return "manifest"
        if inner.startswith("wal/"):
            return "wal"
        if inner.startswith("compacted/") or inner.endswith(".sst"):
            return "sst"
    return "other"


def object_totals(
    location: LakeLocation, client: ObjectClient | None = None
) -> tuple[dict[str, dict[str, int]] | None, str | None]:
    """Objects and bytes by kind from one paginated listing of the lake root,
    summing to the whole. A refused or impossible listing returns (None, why)."""
    if location.scheme == "memory":
        return None, (
            "a memory lake keeps its store and its log in separate in-process stores; "
            "the store's objects cannot be listed"
        )
    totals = {kind: {"objects": 0, "bytes": 0} for kind in (*OBJECT_KINDS, "total")}
    try:
        client = client or ObjectClient(location)
        prefix = location.root + "/" if location.root else ""
        for info in client.list(prefix):
            for kind in (classify_object(location, info.path), "total"):
                totals[kind]["objects"] += 1
                totals[kind]["bytes"] += info.size
    except Exception as exc:  # a refused listing must not fail the census
        return None, f"listing {location.url} failed ({type(exc).__name__}: {exc})"
    return totals, None
