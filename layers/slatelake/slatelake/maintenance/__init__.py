"""The maintenance pass (RFC 0021) and the API under the lake handle.

``slatelake.open(url).maintenance`` (``slatelake/handle.py``) is how callers
reach it; this package's names remain for Python callers of the verbs
themselves (``run``, ``status``, ``census``, ``compact_store``, ...). Inside:
``request`` parses what a pass is asked, ``options`` binds the
``MAINTENANCE_*`` settings, ``runner`` orders the steps (1-6 call DuckLake,
7/7b/7c the catalog's sweep in ``sweep_steps``, 8 the store merge in
``store_step``), ``flight`` keeps one pass per lake (a lock in the process, a
lease in the bucket), ``report`` is what a pass says and the status window
keeps. Names are imported when first used, so a request is parsed without
DuckDB. ``health`` and ``backup`` are modules here: their verbs are
``health.health`` and ``backup.backup``, or the handle's.
"""

from __future__ import annotations

from slatelake.lazy import lazy_getattr
from slatelake.store.keys import Subspace

# The names ``compact_store(subspace=...)`` takes.
SUBSPACES = tuple(s.label for s in Subspace)

_LAZY: dict[str, tuple[str, str]] = {
    "ALIAS_PREFIX": ("slatelake.maintenance.options", "ALIAS_PREFIX"),
    "AlreadyRunningError": ("slatelake.errors", "AlreadyRunningError"),
    "audit_log": ("slatelake.maintenance.api", "audit_log"),
    "AuditEntry": ("slatelake.maintenance.history", "AuditEntry"),
    "Backlog": ("slatelake.maintenance.backlog", "Backlog"),
    "backlog_of": ("slatelake.maintenance.backlog", "backlog_of"),
    "BackupReport": ("slatelake.maintenance.backup", "BackupReport"),
    "bind": ("slatelake.maintenance.options", "bind"),
    "borrowed_files": ("slatelake.maintenance.borrowed", "borrowed_files"),
    "BorrowedRelease": ("slatelake.maintenance.borrowed", "BorrowedRelease"),
    "break_lease": ("slatelake.maintenance.api", "break_lease"),
    "BreakResult": ("slatelake.maintenance.flight", "BreakResult"),
    "canonical_data_path": ("slatelake.maintenance.api", "canonical_data_path"),
    "canonical_lake": ("slatelake.maintenance.api", "canonical_lake"),
    "census": ("slatelake.maintenance.api", "census"),
    "check_before": ("slatelake.maintenance.history", "check_before"),
    "check_limit": ("slatelake.maintenance.history", "check_limit"),
    "check_snapshot_id": ("slatelake.maintenance.holds", "check_snapshot_id"),
    "compact_store": ("slatelake.maintenance.api", "compact_store"),
    "CompactStoreReport": ("slatelake.store.merge", "CompactStoreReport"),
    "DueTable": ("slatelake.maintenance.threshold", "DueTable"),
    "FAILED": ("slatelake.maintenance.report", "FAILED"),
    "fold_turn": ("slatelake.maintenance.fold", "fold_turn"),
    "FoldRequest": ("slatelake.maintenance.fold", "FoldRequest"),
    "FoldTurn": ("slatelake.maintenance.fold", "FoldTurn"),
    "HealthPolicy": ("slatelake.maintenance.health_report", "HealthPolicy"),
    "Hold": ("slatelake.catalog.holds", "Hold"),
    "HoldChange": ("slatelake.maintenance.holds", "HoldChange"),
    "lake_exists": ("slatelake.maintenance.api", "lake_exists"),
    "LakeHealth": ("slatelake.maintenance.health_report", "LakeHealth"),
    "LeaseLiveError": ("slatelake.errors", "LeaseLiveError"),
    "LeaseRecord": ("slatelake.maintenance.flight", "LeaseRecord"),
    "MaintenanceConfigError": ("slatelake.errors", "MaintenanceConfigError"),
    "MaintenanceOptions": ("slatelake.maintenance.options", "MaintenanceOptions"),
    "MEMORY_LIMIT_ENV": ("slatelake.ducklake.extensions", "MEMORY_LIMIT_ENV"),
    "MergeIncompleteError": ("slatelake.errors", "MergeIncompleteError"),
    "OPERATIONS": ("slatelake.maintenance.scope", "OPERATIONS"),
    "Page": ("slatelake.maintenance.history", "Page"),
    "parse_bool": ("slatelake.maintenance.option_values", "parse_bool"),
    "parse_duration": ("slatelake.durations", "parse_duration"),
    "PARTIAL": ("slatelake.maintenance.report", "PARTIAL"),
    "pass_lease": ("slatelake.maintenance.api", "pass_lease"),
    "PassReport": ("slatelake.maintenance.report", "PassReport"),
    "policies": ("slatelake.maintenance.api", "policies"),
    "Policy": ("slatelake.maintenance.policy", "Policy"),
    "POLICY_FIELDS": ("slatelake.maintenance.policy", "FIELDS"),
    "PolicyRow": ("slatelake.maintenance.policy", "PolicyRow"),
    "PolicyView": ("slatelake.maintenance.api", "PolicyView"),
    "PREFIX": ("slatelake.maintenance.options", "PREFIX"),
    "protect": ("slatelake.maintenance.api", "protect"),
    "RAN": ("slatelake.maintenance.report", "RAN"),
    "release_borrowed": ("slatelake.maintenance.borrowed", "release_borrowed"),
    "retention_holds": ("slatelake.maintenance.api", "retention_holds"),
    "run": ("slatelake.maintenance.api", "run"),
    "run_scope": ("slatelake.maintenance.scope", "run_scope"),
    "run_threshold": ("slatelake.maintenance.api", "run_threshold"),
    "runs": ("slatelake.maintenance.api", "runs"),
    "RunScope": ("slatelake.maintenance.scope", "RunScope"),
    "set_policy": ("slatelake.maintenance.api", "set_policy"),
    "show_input": ("slatelake.store.location", "show_input"),
    "SKIPPED": ("slatelake.maintenance.report", "SKIPPED"),
    "status": ("slatelake.maintenance.api", "status"),
    "StatusWindow": ("slatelake.maintenance.report", "StatusWindow"),
    "StepReport": ("slatelake.maintenance.report", "StepReport"),
    "store_deadline": ("slatelake.store.db", "deadline"),
    "StoreCensus": ("slatelake.store.census", "StoreCensus"),
    "Subspace": ("slatelake.store.keys", "Subspace"),
    "SUCCEEDED": ("slatelake.maintenance.report", "SUCCEEDED"),
    "TableHealth": ("slatelake.maintenance.health_report", "TableHealth"),
    "ThresholdReport": ("slatelake.maintenance.threshold", "ThresholdReport"),
    "TRIGGERS": ("slatelake.maintenance.api", "TRIGGERS"),
    "unprotect": ("slatelake.maintenance.api", "unprotect"),
    "unset_policy": ("slatelake.maintenance.api", "unset_policy"),
    "value_text": ("slatelake.maintenance.option_values", "value_text"),
}


__getattr__ = lazy_getattr("slatelake.maintenance", _LAZY, globals())


__all__ = sorted([*_LAZY, "SUBSPACES"])
