"""The maintenance pass (RFC 0021) and the one API every surface calls.

``slatelake.maintenance.run(lake, options)`` runs one pass; ``status``,
``census``, ``compact_store``, ``pass_lease`` and ``break_lease`` are the
other verbs (``api``), with retention holds (``protect``, ``unprotect``,
``retention_holds``; ``holds``). The CLI, the Lambda and ``session.maintenance()`` all
come through here. Inside: ``options`` binds the ``MAINTENANCE_*`` settings,
``runner`` orders the steps (1-6 call DuckLake, 7/7b/7c the catalog's sweep in
``sweep_steps``, 8 the store merge in ``store_step``), ``flight`` keeps one
pass per lake (a lock in the process, a lease in the bucket), ``report`` is
what a pass says and the status window keeps.
"""

from slatelake.catalog.holds import Hold
from slatelake.ducklake.extensions import MEMORY_LIMIT_ENV
from slatelake.durations import parse_duration
from slatelake.errors import (
    AlreadyRunningError,
    LeaseLiveError,
    MaintenanceConfigError,
    MergeIncompleteError,
)
from slatelake.maintenance.api import (
    TRIGGERS,
    PolicyView,
    audit_log,
    break_lease,
    canonical_data_path,
    canonical_lake,
    census,
    compact_store,
    lake_exists,
    pass_lease,
    policies,
    protect,
    retention_holds,
    run,
    run_threshold,
    runs,
    set_policy,
    status,
    unprotect,
    unset_policy,
)
from slatelake.maintenance.backlog import Backlog, backlog_of
from slatelake.maintenance.backup import BackupReport, backup
from slatelake.maintenance.borrowed import BorrowedRelease, borrowed_files, release_borrowed
from slatelake.maintenance.flight import BreakResult, LeaseRecord
from slatelake.maintenance.fold import FoldRequest, FoldTurn, fold_turn
from slatelake.maintenance.health import health
from slatelake.maintenance.health_report import HealthPolicy, LakeHealth, TableHealth
from slatelake.maintenance.history import AuditEntry, Page, check_before, check_limit
from slatelake.maintenance.holds import HoldChange, check_snapshot_id
from slatelake.maintenance.option_values import parse_bool, value_text
from slatelake.maintenance.options import ALIAS_PREFIX, PREFIX, MaintenanceOptions, bind
from slatelake.maintenance.policy import FIELDS as POLICY_FIELDS
from slatelake.maintenance.policy import Policy, PolicyRow
from slatelake.maintenance.report import (
    FAILED,
    PARTIAL,
    RAN,
    SKIPPED,
    SUCCEEDED,
    PassReport,
    StatusWindow,
    StepReport,
)
from slatelake.maintenance.scope import OPERATIONS, RunScope, run_scope
from slatelake.maintenance.threshold import DueTable, ThresholdReport
from slatelake.store.census import StoreCensus
from slatelake.store.db import deadline as store_deadline
from slatelake.store.keys import Subspace
from slatelake.store.location import show_input
from slatelake.store.merge import CompactStoreReport

# The names ``compact_store(subspace=...)`` takes.
SUBSPACES = tuple(s.label for s in Subspace)

__all__ = [
    "BorrowedRelease",
    "borrowed_files",
    "release_borrowed",
    "Backlog",
    "backlog_of",
    "BackupReport",
    "backup",
    "FoldRequest",
    "FoldTurn",
    "fold_turn",
    "MEMORY_LIMIT_ENV",
    "run_scope",
    "RunScope",
    "OPERATIONS",
    "run_threshold",
    "ThresholdReport",
    "DueTable",
    "check_limit",
    "check_before",
    "runs",
    "audit_log",
    "Page",
    "AuditEntry",
    "unset_policy",
    "set_policy",
    "policies",
    "PolicyView",
    "PolicyRow",
    "Policy",
    "POLICY_FIELDS",
    "FAILED",
    "PARTIAL",
    "RAN",
    "SKIPPED",
    "SUCCEEDED",
    "ALIAS_PREFIX",
    "PREFIX",
    "SUBSPACES",
    "TRIGGERS",
    "AlreadyRunningError",
    "BreakResult",
    "CompactStoreReport",
    "HealthPolicy",
    "LakeHealth",
    "Hold",
    "HoldChange",
    "LeaseLiveError",
    "LeaseRecord",
    "MaintenanceConfigError",
    "MaintenanceOptions",
    "MergeIncompleteError",
    "PassReport",
    "StatusWindow",
    "StepReport",
    "StoreCensus",
    "TableHealth",
    "bind",
    "break_lease",
    "canonical_data_path",
    "canonical_lake",
    "census",
    "check_snapshot_id",
    "compact_store",
    "health",
    "lake_exists",
    "parse_bool",
    "parse_duration",
    "pass_lease",
    "protect",
    "retention_holds",
    "run",
    "show_input",
    "status",
    "store_deadline",
    "unprotect",
    "value_text",
]
