"""What every verb shares: exit statuses, the handler type, who runs the
command, ``--option`` pairs. (The LAKE argument is ``arguments.add_lake``;
printing is ``output``.)"""

from __future__ import annotations

import argparse
import getpass
from collections.abc import Callable

EXIT_ERROR, EXIT_USAGE, EXIT_FENCED = 1, 2, 3
Handler = Callable[[argparse.Namespace], int]


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
