"""CloudWatch metrics (EMF) for a pass: the names template.yaml's dashboard
and alarms read.

The namespace and the ``service`` dimension are Powertools' own settings
(``POWERTOOLS_METRICS_NAMESPACE``, ``POWERTOOLS_SERVICE_NAME``, set once in
template.yaml). Pass-level metrics carry the ``Lake`` dimension; step-level
ones carry ``Lake`` and ``Step`` so one dashboard widget can chart every
step. A count a step reports (``snapshots_expired``,
``index_entries_reclaimed``...) becomes the metric of the same name in
CamelCase (``SnapshotsExpired``). Every pass invocation, skipped or not,
puts one ``PassRuns`` datum (0 when skipped), so a period with none means
the schedule stopped invoking: that alarm treats missing data as breaching.
"""

from __future__ import annotations

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit, single_metric

from slatelake import Backlog, FoldTurn, PassReport, PassStatus, StepStatus, ThresholdReport

# Pass level
PASS_RUNS = "PassRuns"
PASS_FAILED = "PassFailed"
PASS_SKIPPED = "PassSkipped"
# A pass that ended partial: the retention fail-safe skipped deletion, or work is pending
PASS_PARTIAL = "PassPartial"
# An event naming a lake or data path the stack does not maintain (refused)
LAKE_REFUSED = "LakeRefused"
WORK_PENDING = "WorkPending"
PASS_DURATION = "PassDuration"
# Bytes a pass reclaimed: from the catalog (before less after), from storage (deleted)
CATALOG_BYTES_RECLAIMED = "CatalogBytesReclaimed"
BYTES_DELETED = "BytesDeleted"
RSS_HIGH_WATER = "RssHighWater"
# The threshold action: tables due a run, and the runs made
FSCK_FINDINGS = "FsckFindings"
THRESHOLD_DUE = "ThresholdDue"
THRESHOLD_RUNS = "ThresholdRuns"
# The compact_store action (merges submitted outside a pass)
STORE_MERGE_PENDING = "StoreMergePending"
STORE_MERGE_FAILED = "StoreMergeFailed"
# The fold function (a holder for one invocation): per turn
FOLD_RUNS = "FoldRuns"
FOLD_FAILED = "FoldFailed"
FOLD_SKIPPED = "FoldSkipped"
FOLD_PARTIAL = "FoldPartial"
FOLD_DURATION = "FoldDuration"
SLOTS_FOLDED = "SlotsFolded"
SLOTS_TRUNCATED = "SlotsTruncated"
IMAGES_WRITTEN = "ImagesWritten"
IMAGE_FAILED = "ImageFailed"
STORE_MERGES_COMPLETED = "StoreMergesCompleted"
# The backlog, after every pass and every fold
UNFOLDED_SLOTS = "UnfoldedSlots"
LOG_BYTES = "LogBytes"
OLDEST_UNFOLDED_AGE = "OldestUnfoldedAgeSeconds"
IMAGE_LAG_SLOTS = "ImageLagSlots"
STORE_MERGES_PENDING = "StoreMergesPending"
# The backup action
BACKUP_RUNS = "BackupRuns"
BACKUP_FAILED = "BackupFailed"
# Step level (dimension Step)
STEP_DURATION = "StepDuration"
STEP_FAILED = "StepFailed"
STEP_RAN = "StepRan"
UNCONFIGURED = "unconfigured"  # the Lake dimension of a function with no lake set


def metric_name(count: str) -> str:
    return "".join(part.capitalize() for part in count.split("_"))


def emit_pass(metrics: Metrics, lake: str, report: PassReport) -> None:
    """A pass that reported: ``PassFailed`` when a step failed or it lost its
    lease, ``PassPartial`` when it ended partial."""
    metrics.add_dimension(name="Lake", value=lake)
    metrics.add_metric(name=PASS_RUNS, unit=MetricUnit.Count, value=1)
    metrics.add_metric(name=PASS_FAILED, unit=MetricUnit.Count, value=int(report.failed))
    metrics.add_metric(name=PASS_SKIPPED, unit=MetricUnit.Count, value=0)
    partial = int(report.status == PassStatus.PARTIAL)
    metrics.add_metric(name=PASS_PARTIAL, unit=MetricUnit.Count, value=partial)
    metrics.add_metric(name=WORK_PENDING, unit=MetricUnit.Count, value=int(report.work_pending))
    metrics.add_metric(name=PASS_DURATION, unit=MetricUnit.Seconds, value=report.seconds)
    metrics.add_metric(name=RSS_HIGH_WATER, unit=MetricUnit.Megabytes, value=report.rss_hwm_mb)
    for name, value in (
        (CATALOG_BYTES_RECLAIMED, report.catalog_bytes_reclaimed),
        (BYTES_DELETED, report.bytes_deleted),
    ):
        if value is not None:
            metrics.add_metric(name=name, unit=MetricUnit.Bytes, value=value)
    for step in report.steps:
        dims = {"Lake": lake, "Step": step.step}
        values: list[tuple[str, MetricUnit, float]] = [
            (STEP_RAN, MetricUnit.Count, int(step.status == StepStatus.RAN)),
            (STEP_FAILED, MetricUnit.Count, int(step.status == StepStatus.FAILED)),
        ]
        if step.status != StepStatus.SKIPPED:
            values.append((STEP_DURATION, MetricUnit.Seconds, step.seconds))
        values += [(metric_name(k), _unit(k), v) for k, v in step.counts.items()]
        for name, unit, value in values:
            _single(metrics, name, unit, value, dims)


def emit_threshold(metrics: Metrics, lake: str, found: ThresholdReport) -> None:
    """A threshold check: how many tables were due and run, failures, and
    each run's step counts (dimension Step, as a pass's)."""
    metrics.add_dimension(name="Lake", value=lake)
    metrics.add_metric(name=THRESHOLD_DUE, unit=MetricUnit.Count, value=len(found.due))
    metrics.add_metric(name=THRESHOLD_RUNS, unit=MetricUnit.Count, value=len(found.runs))
    metrics.add_metric(name=PASS_FAILED, unit=MetricUnit.Count, value=int(found.failed))
    for report in found.runs:
        for step in report.steps:
            for name, value in step.counts.items():
                dims = {"Lake": lake, "Step": step.step}
                _single(metrics, metric_name(name), _unit(name), value, dims)


def emit_fsck(metrics: Metrics, lake: str, findings: int) -> None:
    """An fsck: how many findings (0 on a sound lake)."""
    metrics.add_dimension(name="Lake", value=lake)
    metrics.add_metric(name=FSCK_FINDINGS, unit=MetricUnit.Count, value=findings)


def _unit(count: str) -> MetricUnit:
    """Bytes for a count that says so anywhere in its name (``bytes_deleted``,
    ``merged_bytes_after``), else Count."""
    return MetricUnit.Bytes if "bytes" in count.split("_") else MetricUnit.Count


def emit_crash(metrics: Metrics, lake: str | None) -> None:
    """A pass that raised instead of reporting, or a scheduled tick refused
    before it could start: a run and a failure."""
    metrics.add_dimension(name="Lake", value=lake or UNCONFIGURED)
    metrics.add_metric(name=PASS_RUNS, unit=MetricUnit.Count, value=1)
    metrics.add_metric(name=PASS_FAILED, unit=MetricUnit.Count, value=1)


def emit_skip(metrics: Metrics, lake: str) -> None:
    """An invocation that found a pass running: counted, never an alarm (its
    ``PassRuns`` of 0 tells the silence alarm the schedule is alive)."""
    metrics.add_dimension(name="Lake", value=lake)
    metrics.add_metric(name=PASS_RUNS, unit=MetricUnit.Count, value=0)
    metrics.add_metric(name=PASS_SKIPPED, unit=MetricUnit.Count, value=1)


def emit_refusal(metrics: Metrics, stack_lake: str | None) -> None:
    """An event for a lake this stack does not maintain, refused untouched.
    Counted against the stack's own lake: the event's text never becomes a
    dimension (it is hostile, and unbounded in number)."""
    metrics.add_dimension(name="Lake", value=stack_lake or UNCONFIGURED)
    metrics.add_metric(name=LAKE_REFUSED, unit=MetricUnit.Count, value=1)


def emit_store_merge(metrics: Metrics, lake: str, outcome: str) -> None:
    """The compact_store action's outcome: pending and failed merges counted."""
    metrics.add_dimension(name="Lake", value=lake)
    pending, failed = int(outcome == "pending"), int(outcome == "failed")
    metrics.add_metric(name=STORE_MERGE_PENDING, unit=MetricUnit.Count, value=pending)
    metrics.add_metric(name=STORE_MERGE_FAILED, unit=MetricUnit.Count, value=failed)


def _single(
    metrics: Metrics, name: str, unit: MetricUnit, value: float, dims: dict[str, str]
) -> None:
    with single_metric(
        name=name,
        unit=unit,
        value=value,
        namespace=metrics.namespace,
        default_dimensions=dims,
    ) as metric:
        if metrics.service:
            metric.add_dimension(name="service", value=str(metrics.service))


def emit_backlog(metrics: Metrics, lake: str, backlog: Backlog) -> None:
    """The five backlog numbers, after a pass or a fold."""
    metrics.add_dimension(name="Lake", value=lake)
    for name, unit, value in (
        (UNFOLDED_SLOTS, MetricUnit.Count, backlog.unfolded_slots),
        (LOG_BYTES, MetricUnit.Bytes, backlog.log_bytes),
        (OLDEST_UNFOLDED_AGE, MetricUnit.Seconds, backlog.oldest_unfolded_age_s),
        (IMAGE_LAG_SLOTS, MetricUnit.Count, backlog.image_lag_slots),
        (STORE_MERGES_PENDING, MetricUnit.Count, backlog.store_merges_pending),
    ):
        metrics.add_metric(name=name, unit=unit, value=value)


def emit_fold(metrics: Metrics, lake: str, turn: FoldTurn) -> None:
    """A fold turn that answered: ran (or skipped), what it did, the backlog it left."""
    skipped = turn.status == "skipped"
    metrics.add_dimension(name="Lake", value=lake)
    metrics.add_metric(name=FOLD_RUNS, unit=MetricUnit.Count, value=0 if skipped else 1)
    metrics.add_metric(name=FOLD_SKIPPED, unit=MetricUnit.Count, value=int(skipped))
    metrics.add_metric(name=FOLD_FAILED, unit=MetricUnit.Count, value=0)
    metrics.add_metric(
        name=FOLD_PARTIAL, unit=MetricUnit.Count, value=int(turn.status == "partial")
    )
    metrics.add_metric(name=FOLD_DURATION, unit=MetricUnit.Seconds, value=turn.seconds)
    for name, value in (
        (SLOTS_FOLDED, turn.slots_folded),
        (SLOTS_TRUNCATED, turn.truncated),
        (IMAGES_WRITTEN, int(turn.image is not None)),
        (IMAGE_FAILED, int(turn.image_error is not None)),
        (STORE_MERGES_COMPLETED, turn.merges_completed),
        (STORE_MERGE_FAILED, turn.merges_failed),
    ):
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)
    if turn.backlog is not None:
        emit_backlog(metrics, lake, turn.backlog)


def emit_fold_crash(metrics: Metrics, lake: str | None) -> None:
    """A fold turn that raised (a store that failed, a corrupt log)."""
    metrics.add_dimension(name="Lake", value=lake or UNCONFIGURED)
    metrics.add_metric(name=FOLD_RUNS, unit=MetricUnit.Count, value=1)
    metrics.add_metric(name=FOLD_FAILED, unit=MetricUnit.Count, value=1)


def emit_backup(metrics: Metrics, lake: str, failed: bool) -> None:
    """A backup: one run, failed or not."""
    metrics.add_dimension(name="Lake", value=lake)
    metrics.add_metric(name=BACKUP_RUNS, unit=MetricUnit.Count, value=1)
    metrics.add_metric(name=BACKUP_FAILED, unit=MetricUnit.Count, value=int(failed))
