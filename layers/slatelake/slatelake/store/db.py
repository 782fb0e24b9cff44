"""Opening the SlateDB store in its three modes, behind sync facades.

- writer: only the folder. Opening it fences any older writer; a fenced
  writer's next call raises FencedError. WAL off: the commit log is the WAL,
  so nothing is durable until ``flush``.
- reader: a ``DbReader`` following the latest manifest. Fences nothing and
  writes nothing (no checkpoint); every committer reads through one.
- admin: manifests and compactions, for census and store merges.

Every handle is registered with the one-byte SubspaceExtractor, so each
subspace is its own segment. Every call has a deadline and every failure a
type (see ``_bindings`` and ``objects.translate``, which reads SlateDB's error
text the way it reads obstore's and names the request that failed): SlateDB's
own retries are bounded, so a 403 or a missing bucket surfaces in seconds, and
a store that never answers costs one deadline. Knows nothing about DuckLake.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from slatedb.uniffi import (
    AdminBuilder,
    CheckpointOptions,
    CompactionSpec,
    CompactionStatus,
    DbBuilder,
    DbReaderBuilder,
    DurabilityLevel,
    Error,
    FlushOptions,
    FlushType,
    KeyRange,
    PrefixExtractor,
    ReaderMode,
    ReaderOptions,
    ScanOptions,
    Settings,
    SourceId,
    WriteBatch,
)

from slatelake.durations import env_duration, parse_duration
from slatelake.errors import (
    CorruptionError,
    FencedError,
    PermissionDeniedError,
    StoreError,
    StoreTimeoutError,
    StoreUnavailableError,
)
from slatelake.store import _bindings
from slatelake.store.location import LakeLocation
from slatelake.store.objects import ObjectClient, read_fault, translate
from slatelake.store.refusal import SLATEDB_DIRS, refused_under

# Re-exported: the store's deadline knobs, for callers above this layer.
STORE_TIMEOUT_ENV = _bindings.STORE_TIMEOUT_ENV
store_timeout_s = _bindings.store_timeout_s
deadline = _bindings.deadline

EXTRACTOR_NAME = "slatelake.subspace.v1"
# The holder's compactor poll interval (a SlateDB duration such as "5s" or
# "200ms"); unset, SlateDB's default. Store merges poll at a cadence derived
# from it, so the writer and every submitter read the same variable.
COMPACTOR_POLL_ENV = "SLATELAKE_COMPACTOR_POLL_INTERVAL"
SCAN_BATCH = 10_000
# Bulk scans read ahead: the default fetches one block per request.
_BULK = ScanOptions(
    durability_filter=DurabilityLevel.MEMORY,
    dirty=False,
    read_ahead_bytes=16 << 20,
    cache_blocks=False,
    max_fetch_tasks=8,
)
_ALL = KeyRange(start=None, start_inclusive=True, end=None, end_inclusive=False)
_RETRY_KEYS = (
    "object_store_max_retries",
    "compactor_options.object_store_max_retries",
    "garbage_collector_options.object_store_max_retries",
)


class SubspaceExtractor(PrefixExtractor):
    """Segment = first key byte. Its name is stable: changing it re-segments."""

    def name(self) -> str:
        return EXTRACTOR_NAME

    def prefix_len(self, target: Any) -> int | None:
        key = target.key if target.is_point() else target.prefix
        return 1 if len(key) >= 1 else None


def _translate(exc: BaseException, what: str, location: LakeLocation) -> BaseException:
    """SlateDB's error as a typed slatelake one; ``exc`` itself when it is not
    SlateDB's (a bug of ours stays visible as what it is)."""
    if isinstance(exc, Error.Closed) and "FENCED" in str(getattr(exc, "reason", "")).upper():
        return FencedError(f"{what}: a newer folder holds the store writer; this one stops")
    if isinstance(exc, Error) and "fenced" in str(exc).lower():
        return FencedError(f"{what}: a newer folder holds the store writer; this one stops")
    if isinstance(exc, Error.Data):
        return CorruptionError(
            f"{what}: SlateDB found damaged data ({read_fault(exc, location).cause}); an "
            "object of the store was changed outside slatelake"
        )
    if isinstance(exc, Error):
        return translate(what, location, exc)
    if isinstance(exc, _bindings.LiftError):
        return StoreError(f"{what}: SlateDB's answer could not be read ({exc})")
    return exc


def _call(location: LakeLocation, what: str, coro: Any, timeout: float | None = None) -> Any:
    """Run one SlateDB call within its deadline; failures come out typed."""
    try:
        return _bindings.run(coro, timeout)
    except StoreTimeoutError as exc:  # name the call that ran out of time
        raise _refused(location, what) or StoreTimeoutError(f"{what}: {exc}") from None
    except Exception as exc:
        mapped = _translate(exc, what, location)
        if mapped is exc:
            raise
        if isinstance(mapped, StoreUnavailableError):
            mapped = _refused(location, what) or mapped
        raise mapped from None


def _refused(location: LakeLocation, what: str) -> PermissionDeniedError | None:
    """SlateDB retries a 403 and reports it without its status: after a call
    that got no usable answer, ask the store whether it refuses us."""
    folders = [f"{location.store_path}/{d}" for d in SLATEDB_DIRS]
    refusal = refused_under(location, folders)
    if refusal is None:
        return None
    return PermissionDeniedError(f"{what}: SlateDB got no usable answer, and {refusal}")


def _settings(overrides: dict[str, Any]) -> Any:
    settings = Settings.default()
    poll_s = env_duration(COMPACTOR_POLL_ENV, None, maximum=3600)
    if poll_s is not None:
        poll = f"{max(1, round(poll_s * 1000))}ms"  # SlateDB reads its own duration text
        for key in (
            "compactor_options.poll_interval",
            "compactor_options.worker.compactions_poll_interval",
        ):
            settings.set(key, json.dumps(poll))
    for key in _RETRY_KEYS:  # unset, SlateDB retries a failing store forever
        settings.set(key, json.dumps(_bindings.SLATEDB_MAX_RETRIES))
    for key, value in overrides.items():
        settings.set(key, json.dumps(value))
    return settings


def compactor_poll_interval_s() -> float:
    """How often the holder's compactor looks for submitted merges, in seconds:
    the environment's override, else SlateDB's default. Read, not configured
    here: a merge's poll cadence derives from it (RFC 0021, "The store merge")."""
    doc = json.loads(_settings({}).to_json_string())
    return parse_duration(
        "compactor_options.poll_interval", doc["compactor_options"]["poll_interval"]
    )


class _ScanMixin:
    _handle: Any
    _what: str
    location: LakeLocation

    def get(self, key: bytes) -> bytes | None:
        return _call(self.location, f"{self._what} get", self._handle.get(key))

    def scan_prefix_batches(
        self, key_prefix: bytes, start_after: bytes | None = None, batch: int = SCAN_BATCH
    ) -> Iterator[list[tuple[bytes, bytes]]]:
        """Yield lists of (key, value) under a prefix, in key order."""
        if start_after is None:
            scan = self._handle.scan_prefix_with_options(key_prefix, _ALL, _BULK)
        else:  # an absolute range: scan_prefix's subrange is relative to the prefix
            rng = KeyRange(
                start=max(start_after, key_prefix),
                start_inclusive=start_after < key_prefix,
                end=_prefix_end(key_prefix),
                end_inclusive=False,
            )
            scan = self._handle.scan_with_options(rng, _BULK)
        it = _call(self.location, f"{self._what} scan", scan)
        while True:  # one batch per call, not a retry
            rows = _call(self.location, f"{self._what} scan", it.next_batch(batch))
            if not rows:
                return
            yield [(kv.key, kv.value) for kv in rows]

    def scan_prefix(self, key_prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        for rows in self.scan_prefix_batches(key_prefix):
            yield from rows

    def seek_first(self, key_prefix: bytes, at_or_after: bytes) -> tuple[bytes, bytes] | None:
        """The first entry under prefix at or after a key: one seek, one read.

        An absolute range scan: ``scan_prefix``'s subrange is relative to the
        prefix (an absolute start is silently read as a suffix)."""
        start = max(key_prefix, at_or_after)
        rng = KeyRange(
            start=start, start_inclusive=True, end=_prefix_end(key_prefix), end_inclusive=False
        )
        it = _call(self.location, f"{self._what} seek", self._handle.scan(rng))
        kv = _call(self.location, f"{self._what} seek", it.next())
        return None if kv is None else (kv.key, kv.value)


def _prefix_end(key_prefix: bytes) -> bytes | None:
    """The first key past every key under a prefix (None: no bound)."""
    trimmed = key_prefix.rstrip(b"\xff")
    return trimmed[:-1] + bytes((trimmed[-1] + 1,)) if trimmed else None


class StoreWriter(_ScanMixin):
    """The single writer. Only the folder opens one."""

    def __init__(self, handle: Any, location: LakeLocation) -> None:
        self._handle = handle
        self._what = f"store writer {location.url}"
        self.location = location

    def write(self, puts: Iterable[tuple[bytes, bytes]], deletes: Iterable[bytes] = ()) -> None:
        """Apply puts then deletes as one atomic WriteBatch."""
        batch = WriteBatch()
        for key, value in puts:
            batch.put(key, value)
        for key in deletes:
            batch.delete(key)
        _call(self.location, f"{self._what} write", self._handle.write(batch))

    def flush(self) -> None:
        """Make everything written so far durable in L0 (the WAL is off)."""
        _call(
            self.location,
            f"{self._what} flush",
            self._handle.flush_with_options(FlushOptions(flush_type=FlushType.MEM_TABLE)),
        )

    def close(self) -> None:
        with contextlib.suppress(FencedError):
            _call(self.location, f"{self._what} close", self._handle.shutdown())


class StoreReader(_ScanMixin):
    """A DbReader following the latest manifest. Fences nothing, writes nothing."""

    def __init__(self, handle: Any, location: LakeLocation) -> None:
        self._handle = handle
        self._what = f"store reader {location.url}"
        self.location = location

    def close(self) -> None:
        _call(self.location, f"{self._what} close", self._handle.shutdown())


class StoreAdmin:
    """Manifest and compaction access. Opens no writer, fences nothing."""

    def __init__(self, handle: Any, location: LakeLocation) -> None:
        self._handle = handle
        self._what = f"store admin {location.url}"
        self.location = location

    def read_manifest(self) -> Any:
        return _call(self.location, f"{self._what} read_manifest", self._handle.read_manifest(None))

    def submit_compaction(self, spec: Any) -> Any:
        return _call(
            self.location, f"{self._what} submit_compaction", self._handle.submit_compaction(spec)
        )

    def read_compaction(self, compaction_id: str) -> Any:
        return _call(
            self.location,
            f"{self._what} read_compaction",
            self._handle.read_compaction(compaction_id, None),
        )

    def read_compactor_state_view(self) -> Any:
        return _call(
            self.location, f"{self._what} compactor state", self._handle.read_compactor_state_view()
        )

    # -- checkpoints: a manifest SlateDB's garbage collector keeps whole -------
    def create_checkpoint(self, name: str, lifetime_s: float | None) -> StoreCheckpoint:
        """A detached checkpoint of the latest manifest, named ``name``: every
        SST it names outlives later merges until it is deleted or, with a
        ``lifetime_s``, until it lapses. Fences no writer."""
        options = CheckpointOptions(
            lifetime_ms=None if lifetime_s is None else max(1, round(lifetime_s * 1000)),
            source=None,
            name=name,
        )
        made = _call(
            self.location,
            f"{self._what} create checkpoint {name!r}",
            self._handle.create_detached_checkpoint(options),
        )
        return StoreCheckpoint(str(made.id), int(made.manifest_id), name)

    def list_checkpoints(self, name: str | None = None) -> list[StoreCheckpoint]:
        """The store's checkpoints (only those named ``name`` when given)."""
        found = _call(
            self.location,
            f"{self._what} list checkpoints",
            self._handle.list_checkpoints(name),
        )
        return [
            StoreCheckpoint(
                str(c.id),
                int(c.manifest_id),
                c.name,
                None if c.expire_time_secs is None else int(c.expire_time_secs),
                int(c.create_time_secs),
            )
            for c in found
        ]

    def delete_checkpoint(self, checkpoint_id: str) -> None:
        _call(
            self.location,
            f"{self._what} delete checkpoint {checkpoint_id}",
            self._handle.delete_checkpoint(checkpoint_id),
        )

    def refresh_checkpoint(self, checkpoint_id: str, lifetime_s: float | None) -> None:
        """Give a checkpoint a new lifetime from now (None: no expiry)."""
        _call(
            self.location,
            f"{self._what} refresh checkpoint {checkpoint_id}",
            self._handle.refresh_checkpoint(
                checkpoint_id, None if lifetime_s is None else max(1, round(lifetime_s * 1000))
            ),
        )


@dataclass(frozen=True)
class StoreCheckpoint:
    """A SlateDB checkpoint: its id, the manifest it keeps, its name, when it
    lapses and when it was made (epoch seconds; no expiry: None)."""

    id: str
    manifest_id: int
    name: str | None = None
    expires_at_s: int | None = None
    created_at_s: int | None = None


# -- store merges: the SlateDB vocabulary stays here ------------------------
_IN_FLIGHT = frozenset(
    {
        CompactionStatus.SUBMITTED,
        CompactionStatus.SCHEDULED,
        CompactionStatus.RUNNING,
        CompactionStatus.COMPACTED,  # output written, not yet in the manifest
    }
)


def full_tree_spec(segment: Any) -> Any:
    """Merge every sorted run of a segment into its lowest-id run.

    Run ids are globally monotonic, so the lowest is the bottom run and the
    merge is bottom-inclusive: superseded versions and tombstones drop.
    L0 is never a source."""
    runs = [int(r.id) for r in segment.compacted]
    if not runs:
        raise ValueError("a full-tree merge needs at least one sorted run")
    return CompactionSpec.TIERED(
        bytes(segment.prefix), [SourceId.SORTED_RUN(r) for r in runs], min(runs)
    )


def active_merge_of(recent: Iterable[Any], prefix: bytes) -> Any | None:
    """An in-flight compaction already claiming sorted runs of this segment
    (the one to adopt), or None. L0-only compactions claim no run."""
    for compaction in recent:
        spec = compaction.spec
        if compaction.status not in _IN_FLIGHT or not spec.is_TIERED():
            continue
        if bytes(spec.segment) == prefix and any(s.is_SORTED_RUN() for s in spec.sources):
            return compaction
    return None


def is_terminal(status: Any) -> bool:
    return status in (CompactionStatus.COMPLETED, CompactionStatus.FAILED)


def outcome_of_status(status: Any) -> str:
    """'completed' | 'failed' for a terminal status, else 'pending'."""
    if status == CompactionStatus.COMPLETED:
        return "completed"
    if status == CompactionStatus.FAILED:
        return "failed"
    return "pending"


def open_writer(location: LakeLocation, settings: dict[str, Any] | None = None) -> StoreWriter:
    """Open the writer (fences older writers). WAL is always off."""
    _bindings.install()
    builder = DbBuilder(location.store_path, location.slatedb_store())
    builder.with_settings(_settings({**(settings or {}), "wal_enabled": False}))
    builder.with_segment_extractor(SubspaceExtractor())
    handle = _call(location, f"open store writer {location.url}", builder.build())
    return StoreWriter(handle, location)


def open_reader(location: LakeLocation, poll_interval_ms: int = 1000) -> StoreReader:
    _bindings.install()
    builder = DbReaderBuilder(location.store_path, location.slatedb_store())
    builder.with_segment_extractor(SubspaceExtractor())
    builder.with_reader_mode(ReaderMode.FOLLOW_LATEST())
    builder.with_options(
        ReaderOptions(
            manifest_poll_interval_ms=poll_interval_ms,
            checkpoint_lifetime_ms=600_000,
            max_memtable_bytes=64 << 20,
            skip_wal_replay=True,
            object_store_max_retries=_bindings.SLATEDB_MAX_RETRIES,
        )
    )
    handle = _call(location, f"open store reader {location.url}", builder.build())
    return StoreReader(handle, location)


def open_admin(location: LakeLocation) -> StoreAdmin:
    """An admin handle. SlateDB offers no retry bound for it: each call's
    deadline is the only one."""
    _bindings.install()
    handle = AdminBuilder(location.store_path, location.slatedb_store()).build()
    return StoreAdmin(handle, location)


def probe(location: LakeLocation) -> None:
    """One listing under the store path, through obstore: a missing bucket,
    refused credentials or a path the store cannot hold raise their typed
    error at once, where SlateDB would retry them until the deadline."""
    if location.scheme != "memory":
        ObjectClient(location).any_under(location.store_path + "/")


def store_exists(location: LakeLocation) -> bool:
    """True when a SlateDB database (a manifest) exists at the lake's store path."""
    probe(location)
    return open_admin(location).read_manifest() is not None
