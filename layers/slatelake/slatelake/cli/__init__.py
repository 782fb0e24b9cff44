"""``slatelake`` command line. Each subcommand is one call on the lake handle
(``slatelake.open(LAKE)``; ``slatelake.admin`` for the holder, images and
import, where the handle has no verb), taking LAKE through one argument
helper (``arguments.add_lake``) and printing through one output layer
(``output.emit``: text, or ``--json``, the report's own ``to_dict()``).

Exit status: 0 success, 1 a slatelake error (message on stderr), 2 usage or a
misconfigured option, 3 fenced (a newer folder took over), 4 ``maintain``: a
step failed or the pass lost its lease, 5 ``lease break``: refused, the
owner's heartbeat is fresh.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import logging
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from slatelake import FencedError, SlatelakeError
from slatelake.cli import (
    checkpoint,
    fleet,
    fsck,
    health,
    history,
    holds,
    image,
    index,
    lake,
    lease,
    maintain,
    policy,
    store,
    transfer,
)
from slatelake.cli.common import EXIT_ERROR, EXIT_FENCED, EXIT_USAGE
from slatelake.cli.lease import EXIT_LEASE_LIVE
from slatelake.cli.maintain import EXIT_STEP_FAILED

__all__ = [
    "EXIT_ERROR",
    "EXIT_FENCED",
    "EXIT_LEASE_LIVE",
    "EXIT_STEP_FAILED",
    "EXIT_USAGE",
    "build_parser",
    "main",
    "run",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="slatelake",
        description="DuckLake catalogs kept in SlateDB on object storage. A LAKE is a URL: "
        "file:///abs/path, memory://name or s3://bucket/prefix (S3 reads AWS_REGION, "
        "credentials and AWS_ENDPOINT_URL from the environment).",
    )
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (
        lake,
        maintain,
        history,
        policy,
        holds,
        checkpoint,
        store,
        index,
        lease,
        image,
        transfer,
        health,
        fsck,
        fleet,
    ):
        module.register(sub)
    return parser


def _version() -> str:
    """slatelake's version and the engines it is pinned to, read from the
    installed packages' metadata (nothing imported)."""
    from importlib import metadata

    from slatelake import __version__

    pinned = []
    for package in ("duckdb", "slatedb"):
        try:
            pinned.append(f"{package} {metadata.version(package)}")
        except metadata.PackageNotFoundError:
            pinned.append(f"{package} not installed")
    return f"slatelake {__version__} ({', '.join(pinned)})"


def run() -> NoReturn:
    """The ``slatelake`` command: ``main()``, then leave without native teardown.

    By the time ``main`` returns every handle is closed and the answer is
    written. What interpreter teardown still does is finalize the native
    threads of SlateDB's and DuckDB's S3 clients, which now and then aborts
    the process (SIGABRT) after it answered, turning a success into exit -6.
    So: flush output, run the atexit hooks (a scheduler finishing its pass),
    shut logging down, and exit with the command's own status.
    """
    try:
        code: object = main()
    except SystemExit as exc:  # argparse: --help, usage errors
        code = exc.code
    except BrokenPipeError:
        # the reader went away (`slatelake status --json | head`): what is left
        # to write goes nowhere, and the exit status is a SIGPIPE death's
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 128 + 13
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:
        print(code, file=sys.stderr)
        status = 1
    atexit._run_exitfuncs()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(status)


def main(argv: Sequence[str] | None = None) -> int:
    from slatelake import MaintenanceConfigError

    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        # argparse ends a trailing ``nargs="*"`` positional at the first option,
        # so `policy unset LAKE --table s.t retention` left "retention" over:
        # words after the options still belong to it (options stay refused)
        if isinstance(getattr(args, "fields", None), list) and not any(
            word.startswith("-") for word in extra
        ):
            args.fields += extra
        else:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
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
