"""What a health report is: the policy its estimate is made under, and its figures.

``health`` (``health.py``) reads the catalog and fills these; here they are
only shapes, validated at construction and JSON-ready through ``to_dict``, so
a reader of a report (the CLI, the Lambda, the threshold trigger, a dry run)
needs nothing of how the catalog is read.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from slatelake.durations import parse_duration
from slatelake.errors import MisconfigurationError

DAY_S = 86400.0
_LONGEST = 100 * 365 * DAY_S  # a retention past a century is a typo


@dataclass(frozen=True)
class HealthPolicy:
    """The knobs an estimate depends on; defaults are the seed's. Durations are
    seconds, or text in the duration grammar (``14d``, ``12h``, ``7 days``).
    ``target_file_size`` None: DuckLake's own setting for each table, else
    its default."""

    retention: float = 7 * DAY_S
    small_file_min_count: int = 12
    rewrite_delete_threshold: float = 0.2
    cleanup_grace: float = 1 * DAY_S
    target_file_size: int | None = None

    def __post_init__(self) -> None:
        for name in ("retention", "cleanup_grace"):
            seconds = parse_duration(name, getattr(self, name), allow_zero=True, maximum=_LONGEST)
            object.__setattr__(self, name, seconds)
        count, share, size = (
            self.small_file_min_count,
            self.rewrite_delete_threshold,
            self.target_file_size,
        )
        if not _whole(count):
            raise MisconfigurationError(
                f"small_file_min_count={count!r}: expected a whole number of files, 1 or more"
            )
        if isinstance(share, bool) or not isinstance(share, int | float) or not 0 <= share <= 1:
            raise MisconfigurationError(
                f"rewrite_delete_threshold={share!r}: expected a fraction from 0 to 1"
            )
        if size is not None and not _whole(size):
            raise MisconfigurationError(
                f"target_file_size={size!r}: expected a number of bytes, 1 or more (or None "
                "for DuckLake's own setting)"
            )


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


@dataclass(frozen=True)
class TableHealth:
    """One live table at the head. ``deleted_fraction``: deleted rows over the
    rows of its live data files (None without any). The ``merge_*`` and
    ``rewrite_*`` figures are what DuckLake's merge and rewrite would pick
    under the policy: small files without deletes in groups of two or more
    sharing schema version and partition; files whose deleted share reaches
    the threshold, with the bytes their dead rows and delete files hold."""

    schema: str
    table: str
    table_id: int
    target_file_size: int
    data_files: int
    data_bytes: int
    rows: int
    small_files: int
    avg_file_bytes: float | None
    delete_files: int
    delete_bytes: int
    deleted_rows: int
    deleted_fraction: float | None
    inlined_rows: int
    merge_candidate_files: int
    merge_threshold_reached: bool
    rewrite_files: int
    rewrite_dead_bytes: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ReclaimEstimate:
    """What one pass under the policy would do, from the catalog. Expiry keeps
    the head and every held snapshot, and schedules for deletion the files
    only expired snapshots reference; cleanup deletes scheduled files older
    than the grace, so what expiry schedules goes a pass ``cleanup_grace``
    later. Merge and rewrite reclaim nothing at once: what they replace
    becomes history."""

    expire_snapshots: int
    expire_kept_by_holds: int
    expire_frees_files: int
    expire_frees_bytes: int
    cleanup_files: int
    cleanup_bytes: int | None
    flush_rows: int
    merge_candidate_files: int
    merge_threshold_tables: int
    rewrite_files: int
    rewrite_dead_bytes: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class LakeHealth:
    """The lake at its head, at ``generated_at``. ``history_*``: data and
    delete files no longer live but still referenced by retained snapshots.
    ``scheduled_*``: expired, not yet deleted (bytes unknown: ``notes``)."""

    lake: str
    generated_at: str
    head_snapshot: int | None
    snapshots: int
    oldest_snapshot_at: str | None
    oldest_snapshot_age_s: float | None
    history_files: int
    history_bytes: int
    scheduled_files: int
    scheduled_bytes: int | None
    policy: HealthPolicy
    estimate: ReclaimEstimate
    tables: tuple[TableHealth, ...] = ()
    notes: tuple[str, ...] = field(default=())

    def total(self, name: str) -> int:
        """A TableHealth count summed over the live tables."""
        return sum(getattr(t, name) for t in self.tables)

    @property
    def totals(self) -> dict[str, Any]:
        """The live tables' counts summed, their averages, and the bytes the
        catalog references (live plus history; scheduled files have no size)."""
        out: dict[str, Any] = {"tables": len(self.tables)}
        out.update((k, self.total(k)) for k in _TOTALS)
        out["avg_file_bytes"] = ratio(out["data_bytes"], out["data_files"])
        out["deleted_fraction"] = ratio(out["deleted_rows"], out["rows"])
        out["live_bytes"] = out["data_bytes"] + out["delete_bytes"]
        out["catalog_bytes"] = out["live_bytes"] + self.history_bytes
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: every field, with ``totals`` after the lake-wide figures."""
        doc = {f.name: getattr(self, f.name) for f in fields(self)}
        doc.update(
            totals=self.totals,
            policy=asdict(self.policy),
            estimate=self.estimate.to_dict(),
            tables=[t.to_dict() for t in self.tables],
            notes=list(self.notes),
        )
        return doc


_TOTALS = (
    "data_files",
    "data_bytes",
    "rows",
    "small_files",
    "delete_files",
    "delete_bytes",
    "deleted_rows",
    "inlined_rows",
)


def ratio(part: int, whole: int) -> float | None:
    """``part / whole``, or None when there is no whole (an average of nothing)."""
    return part / whole if whole > 0 else None
