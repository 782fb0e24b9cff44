"""Text layouts of what a lake weighs: its health (from the catalog), the
store's census (from SlateDB's manifest) and a store merge's outcome.

``cli/output.py`` picks one of these for a verb without ``--json``.
"""

from __future__ import annotations

from typing import Any

from slatelake.cli.text import age, name, print_table, share, size

HEALTH_COLUMNS = (
    "schema",
    "table",
    "files",
    "bytes",
    "small",
    "avg_file",
    "delete_files",
    "deleted",
    "inlined_rows",
    "merge_files",
    "rewrite_files",
)
CENSUS_COLUMNS = (
    "subspace",
    "bytes",
    "l0_ssts",
    "sorted_runs",
    "sorted_run_ssts",
    "manifest_id",
    "live_keys",
    "live_bytes",
)
MERGE_COLUMNS = (
    "subspace",
    "outcome",
    "bytes_before",
    "bytes_after",
    "runs_before",
    "runs_after",
    "reason",
)


def health(report: Any) -> None:
    """A summary, then one row per live table."""
    _health_summary(report)
    if report.tables:
        print()
        print_table(HEALTH_COLUMNS, [_table_row(t) for t in report.tables])


def _health_summary(report: Any) -> None:
    totals = report.totals
    policy, est = report.policy, report.estimate
    print(f"lake {report.lake} at {report.generated_at}")
    print(
        f"  snapshots        {report.snapshots} (head {report.head_snapshot}; oldest "
        f"{report.oldest_snapshot_at}, {age(report.oldest_snapshot_age_s)} old)"
    )
    print(
        f"  live             {totals['tables']} tables, {totals['data_files']} data files "
        f"{size(totals['data_bytes'])} (avg {size(totals['avg_file_bytes'])}), "
        f"{totals['small_files']} small; {totals['delete_files']} delete files "
        f"{size(totals['delete_bytes'])}; {totals['deleted_rows']} of {totals['rows']} rows "
        f"deleted ({share(totals['deleted_fraction'])}); {totals['inlined_rows']} inlined "
        "rows to flush"
    )
    print(
        f"  history only     {report.history_files} files {size(report.history_bytes)} "
        "(no longer live, kept by retained snapshots)"
    )
    print(
        f"  scheduled        {report.scheduled_files} files, "
        f"{size(report.scheduled_bytes)} (expired, not yet deleted)"
    )
    print(
        f"  estimate         retention {age(policy.retention)}, cleanup grace "
        f"{age(policy.cleanup_grace)}: expire {est.expire_snapshots} snapshots "
        f"({est.expire_kept_by_holds} kept by holds) freeing "
        f"{est.expire_frees_files} files {size(est.expire_frees_bytes)}; clean up "
        f"{est.cleanup_files} files {size(est.cleanup_bytes)}; flush {est.flush_rows} rows; "
        f"merge {est.merge_candidate_files} files ({est.merge_threshold_tables} tables at "
        f"{policy.small_file_min_count}+ small files); rewrite {est.rewrite_files} files "
        f"({size(est.rewrite_dead_bytes)} dead)"
    )
    for note in report.notes:
        print(f"  note: {note}")


def _table_row(t: Any) -> list[object]:
    return [
        name(t.schema),
        name(t.table),
        t.data_files,
        size(t.data_bytes),
        t.small_files,
        size(t.avg_file_bytes),
        t.delete_files,
        f"{t.deleted_rows} ({share(t.deleted_fraction)})",
        t.inlined_rows,
        t.merge_candidate_files,
        t.rewrite_files,
    ]


def _kinds(census: Any) -> list[str]:
    return [k for k in census.objects or () if k != "total"]


def census(census: Any) -> None:
    """A row per subspace, the current subspace's live split, the object totals."""
    print_table(CENSUS_COLUMNS, [[row[c] for c in CENSUS_COLUMNS] for row in census.rows()])
    current = census.row("current").live
    if current is not None and current.split is not None:
        parts = ", ".join(
            f"{k} {v['keys']} keys / {v['bytes']} bytes" for k, v in current.split.items()
        )
        print(f"current live: {parts}")
    if census.objects is None:
        print(f"objects: totals absent ({census.objects_error})")
        return
    total = census.objects["total"]
    parts = ", ".join(
        f"{k} {census.objects[k]['objects']}/{census.objects[k]['bytes']}" for k in _kinds(census)
    )
    print(
        f"objects: {total['objects']} objects, {total['bytes']} bytes "
        f"(objects/bytes by kind: {parts}); SSTs in the manifest: {census.sst_bytes} bytes"
    )


def census_objects(census: Any) -> None:
    """The object totals alone, a row per kind and the total."""
    if census.objects is None:
        print(f"object totals absent: {census.objects_error}")
        return
    print_table(
        ("kind", "objects", "bytes"),
        [
            (k, census.objects[k]["objects"], census.objects[k]["bytes"])
            for k in (*_kinds(census), "total")
        ],
    )


def compact_store(report: Any) -> None:
    """A row per subspace merge, then the outcome."""
    print_table(
        MERGE_COLUMNS,
        [
            (
                m.subspace,
                m.outcome + (" (adopted)" if m.adopted else ""),
                m.bytes_before,
                m.bytes_after,
                m.sorted_runs_before,
                m.sorted_runs_after,
                m.reason,
            )
            for m in report.merges
        ],
    )
    print(f"outcome: {report.outcome}")
