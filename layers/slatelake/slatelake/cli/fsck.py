"""``fsck``: check a lake's catalog against its files and its own records.

Exit 0 when nothing was found, 4 when something was (the findings say
what), 1 on an error. Nothing is repaired; the summary is kept on the lake
(``sys/fsck``), and orphan deletion refuses to run while the last fsck found
referenced files missing or changed (maintenance/fsck.py).
"""

from __future__ import annotations

import argparse
from typing import Any

from slatelake.cli import output
from slatelake.cli.arguments import add_json, lake_verb, open_lake
from slatelake.cli.common import EXIT_ERROR, EXIT_USAGE

EXIT_FINDINGS = 4
EXIT_STATUSES = (
    f"exit status: 0 nothing found; {EXIT_ERROR} an error (no lake there, the store "
    f"refused); {EXIT_USAGE} usage; {EXIT_FINDINGS} findings (printed; the summary is kept, "
    "and orphan deletion refuses to run while referenced files are missing or changed)"
)


def _cmd_fsck(args: argparse.Namespace) -> int:
    report = open_lake(args).maintenance.fsck(record=not args.no_record)
    doc = report.to_dict()
    if args.repair_plan:
        doc["repair_plan"] = report.repair_plan()
    if args.json:
        output.print_json(doc)
        return 0 if report.ok else EXIT_FINDINGS
    print(
        f"{report.lake}: {report.files_checked} files checked in {report.seconds:.2f}s; "
        + ("nothing found" if report.ok else f"{sum(report.counts.values())} findings")
    )
    for kind, count in sorted(report.counts.items()):
        print(f"  {kind}: {count}")
    for finding in report.findings:
        print(f"  - {finding.kind}: {finding.subject}: {finding.detail}")
    if args.repair_plan:
        for step in report.repair_plan():
            print(f"  repair {step['subject']}: {step['repair']}")
    if report.orphans_blocked:
        print("  orphan deletion is refused until a clean fsck")
    return 0 if report.ok else EXIT_FINDINGS


def register(sub: Any) -> None:
    p = lake_verb(
        sub,
        "fsck",
        _cmd_fsck,
        "Check the lake: every data and delete file the catalog references exists with "
        "its recorded size; no file is scheduled for deletion twice or while referenced; no "
        "column statistics or inlined-data tables outlive what they describe; no catalog "
        "image covers slots beyond the log's head. Repairs nothing.",
    )
    p.epilog = EXIT_STATUSES
    p.add_argument(
        "--repair-plan",
        action="store_true",
        help="also say, for each finding, what would repair it (nothing is done)",
    )
    p.add_argument(
        "--no-record",
        action="store_true",
        help="do not keep the summary on the lake (orphan deletion then goes by the last "
        "recorded fsck)",
    )
    add_json(p, "print the report as JSON: lake, checked_at, files_checked, counts, findings")
