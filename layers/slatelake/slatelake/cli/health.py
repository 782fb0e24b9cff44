"""``health``: what maintenance would find in a lake, from its catalog alone.

One call, ``maintenance.health(lake)``, on a read-only session: no data file
is read or listed and nothing is written, so read-only credentials do. The
text form is a summary and one row per live table; ``--json`` prints
``LakeHealth.to_dict()``. The estimate uses the seed's default policy
(retention 7 days, cleanup grace 1 day, 12 small files, rewrite at 20%
deleted rows, DuckLake's own target file size).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from slatelake.cli.arguments import lake_verb
from slatelake.cli.common import print_table

COLUMNS = (
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


def _cmd_health(args: argparse.Namespace) -> int:
    from slatelake import maintenance

    report = maintenance.health(args.lake)
    if args.json:
        print(json.dumps(report.to_dict()), flush=True)
        return 0
    _print_summary(report)
    if report.tables:
        print()
        print_table(COLUMNS, [_row(t) for t in report.tables])
    return 0


def _print_summary(report: Any) -> None:
    totals = report.totals
    policy, est = report.policy, report.estimate
    age = report.oldest_snapshot_age_s
    print(f"lake {report.lake} at {report.generated_at}")
    print(
        f"  snapshots        {report.snapshots} (head {report.head_snapshot}; oldest "
        f"{report.oldest_snapshot_at}, {_age(age)} old)"
    )
    print(
        f"  live             {totals['tables']} tables, {totals['data_files']} data files "
        f"{_size(totals['data_bytes'])} (avg {_size(totals['avg_file_bytes'])}), "
        f"{totals['small_files']} small; {totals['delete_files']} delete files "
        f"{_size(totals['delete_bytes'])}; {totals['deleted_rows']} of {totals['rows']} rows "
        f"deleted ({_share(totals['deleted_fraction'])}); {totals['inlined_rows']} inlined "
        "rows to flush"
    )
    print(
        f"  history only     {report.history_files} files {_size(report.history_bytes)} "
        "(no longer live, kept by retained snapshots)"
    )
    print(
        f"  scheduled        {report.scheduled_files} files, "
        f"{_size(report.scheduled_bytes)} (expired, not yet deleted)"
    )
    print(
        f"  estimate         retention {_age(policy.retention)}, cleanup grace "
        f"{_age(policy.cleanup_grace)}: expire {est.expire_snapshots} snapshots "
        f"({est.expire_kept_by_holds} kept by holds) freeing "
        f"{est.expire_frees_files} files {_size(est.expire_frees_bytes)}; clean up "
        f"{est.cleanup_files} files {_size(est.cleanup_bytes)}; flush {est.flush_rows} rows; "
        f"merge {est.merge_candidate_files} files ({est.merge_threshold_tables} tables at "
        f"{policy.small_file_min_count}+ small files); rewrite {est.rewrite_files} files "
        f"({_size(est.rewrite_dead_bytes)} dead)"
    )
    for note in report.notes:
        print(f"  note: {note}")


def _row(t: Any) -> list[object]:
    return [
        _name(t.schema),
        _name(t.table),
        t.data_files,
        _size(t.data_bytes),
        t.small_files,
        _size(t.avg_file_bytes),
        t.delete_files,
        f"{t.deleted_rows} ({_share(t.deleted_fraction)})",
        t.inlined_rows,
        t.merge_candidate_files,
        t.rewrite_files,
    ]


def _name(text: str) -> str:
    """A catalog name as it is, unless it holds what a terminal would act on."""
    from slatelake.maintenance import show_input

    return text if text.isprintable() else show_input(text)


def _size(n: float | None) -> str:
    if n is None:
        return "unknown bytes"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"  # unreachable


def _share(fraction: float | None) -> str:
    return "-" if fraction is None else f"{fraction:.1%}"


def _age(seconds: float | None) -> str:
    """Whole seconds in the duration grammar's units, e.g. ``7d`` or ``1h5m3s``."""
    if seconds is None:
        return "-"
    rest, parts = max(0, round(seconds)), []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if rest >= size or (unit == "s" and not parts):
            parts.append(f"{rest // size}{unit}")
            rest %= size
    return "".join(parts)


def register(sub: Any) -> None:
    p = lake_verb(
        sub,
        "health",
        _cmd_health,
        "Show a lake's health from its catalog alone (read-only; no data file is "
        "listed): per table files, bytes, small files, deletes and inlined rows; "
        "lake-wide snapshots, history and scheduled bytes, and what a pass with the "
        "default policy would reclaim.",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
