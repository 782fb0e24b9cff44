"""What every verb shares: exit statuses, the LAKE argument, option pairs,
report and table printing."""

from __future__ import annotations

import argparse
import getpass
import json
from collections.abc import Callable, Sequence
from typing import Any

EXIT_ERROR, EXIT_USAGE, EXIT_FENCED = 1, 2, 3
Handler = Callable[[argparse.Namespace], int]


def add_lake_command(sub: Any, name: str, func: Handler, help_: str) -> argparse.ArgumentParser:
    """A subcommand whose first argument is the lake URL."""
    p = sub.add_parser(name, help=help_, description=help_)
    p.set_defaults(func=func)
    p.add_argument("lake", metavar="LAKE", help="lake URL")
    return p


def caller() -> str | None:
    """Who runs the command, for the audit log: the OS user, when the uid has a name."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a bare container)
        return None


def parse_kv(pairs: list[str] | None) -> dict[str, str]:
    """``--option K=V`` pairs. A key given twice is refused, never last-wins:
    which of two values an operator meant is not ours to guess."""
    from slatelake import MaintenanceConfigError

    out: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise MaintenanceConfigError(f"--option {pair!r}: expected KEY=VALUE")
        if key in out:
            raise MaintenanceConfigError(
                f"--option {key!r} is given twice ({out[key]!r} and {value!r}); give it once"
            )
        out[key] = value
    return out


def print_report(report, as_json: bool) -> None:  # noqa: ANN001
    if as_json:
        print(json.dumps(report.to_dict()))
        return
    print(
        f"pass {report.trigger} {report.status} started_at={report.started_at} "
        f"work_pending={str(report.work_pending).lower()}"
    )
    for step in report.steps:
        print(f"  {step.step:<22} {step.status:<8} {step.detail}")
    if report.partial_reason:
        print(f"partial: {report.partial_reason}")


def print_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Aligned columns with a rule under the header; None prints as NULL."""
    cells = [list(columns)] + [["NULL" if v is None else str(v) for v in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    for n, row in enumerate(cells):
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
        if n == 0:
            print("  ".join("-" * w for w in widths))


def print_json(doc: Any) -> None:
    print(json.dumps(doc, default=str), flush=True)
