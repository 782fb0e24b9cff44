"""``slatelake`` command line. Each subcommand is one call into the library.

Exit status: 0 success, 1 a slatelake error (message on stderr), 2 usage or a
misconfigured option, 3 fenced (a newer folder took over), 4 ``maintain``: a
step failed or the pass lost its lease, 5 ``lease break``: refused, the
owner's heartbeat is fresh.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from slatelake.cli import index, lake, lease, maintain, store
from slatelake.cli.common import EXIT_ERROR, EXIT_FENCED, EXIT_USAGE
from slatelake.cli.lease import EXIT_LEASE_LIVE
from slatelake.cli.maintain import EXIT_STEP_FAILED
from slatelake.errors import FencedError, SlatelakeError

__all__ = [
    "EXIT_ERROR",
    "EXIT_FENCED",
    "EXIT_LEASE_LIVE",
    "EXIT_STEP_FAILED",
    "EXIT_USAGE",
    "build_parser",
    "main",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="slatelake",
        description="DuckLake catalogs kept in SlateDB on object storage. A LAKE is a URL: "
        "file:///abs/path, memory://name or s3://bucket/prefix (S3 reads AWS_REGION, "
        "credentials and AWS_ENDPOINT_URL from the environment).",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (lake, maintain, store, index, lease):
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from slatelake.maintenance.options import MaintenanceConfigError

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except MaintenanceConfigError as exc:
        print(f"slatelake {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except FencedError as exc:
        print(f"slatelake {args.command}: fenced: {exc}", file=sys.stderr)
        return EXIT_FENCED
    except SlatelakeError as exc:
        print(f"slatelake {args.command}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
