"""argparse converters for what a shell hands the CLI, parsed at the edge.

A value refused here ends the command before any lake is opened, created or
written: argparse prints its usage line and one error line naming the
argument and the value, and exits 2. A converter returns the value as given
(the verbs pass it on unchanged); it only decides whether it is usable.
Heavy modules (slatedb, duckdb) are imported only when a value is checked.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from slatelake import MisconfigurationError
from slatelake.cli.common import Handler


def lake_url(text: str) -> str:
    """A lake URL slatelake can read (``maintenance.canonical_lake``)."""
    from slatelake import maintenance

    try:
        maintenance.canonical_lake(text)
    except MisconfigurationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def data_path(text: str) -> str:
    """A data path the overlap guard can compare (absolute path or URL)."""
    from slatelake import maintenance

    try:
        maintenance.canonical_data_path(text)
    except MisconfigurationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def wait_seconds(text: str) -> float:
    """A wait in the one duration grammar (``30``, ``90s``, ``2m``), zero or
    more, at most a year (a timer past that overflows)."""
    return _duration(text, allow_zero=True)


def timeout_seconds(text: str) -> float:
    """A timeout in the one duration grammar, above zero."""
    return _duration(text, allow_zero=False)


def _duration(text: str, allow_zero: bool) -> float:
    from slatelake import maintenance

    try:
        return maintenance.parse_duration("", text, allow_zero=allow_zero)
    except MisconfigurationError as exc:  # argparse names the flag; the value leads
        raise argparse.ArgumentTypeError(str(exc).removeprefix("=")) from None


def catalog_text(text: str) -> str:
    """A table, column or index name, or a value to look up: UTF-8 text (a
    lone surrogate is what Python makes of argv bytes that are not UTF-8, and
    neither DuckDB nor the catalog can hold it), without NUL."""
    from slatelake.maintenance import show_input

    if "\x00" in text or any(0xD800 <= ord(ch) <= 0xDFFF for ch in text):
        raise argparse.ArgumentTypeError(
            f"{show_input(text)}: not UTF-8 text without NUL; respell it"
        )
    return text


def lake_verb(sub: Any, name: str, func: Handler, help_: str) -> argparse.ArgumentParser:
    """A subcommand whose first argument is a lake URL, refused at parse (exit 2)
    when it is not one."""
    p = sub.add_parser(name, help=help_, description=help_)
    p.set_defaults(func=func)
    p.add_argument("lake", metavar="LAKE", type=lake_url, help="lake URL")
    return p


def add_deadline(p: argparse.ArgumentParser, help_: str) -> None:
    """``--deadline DURATION`` (above zero; default none), read by ``deadline_of``."""
    p.add_argument("--deadline", type=timeout_seconds, default=None, metavar="DURATION", help=help_)


def deadline_of(seconds: float | None) -> Callable[[], float] | None:
    """The seconds left until ``seconds`` from now, as the maintenance API's
    ``deadline`` takes it; None without a deadline."""
    if seconds is None:
        return None
    ends_at = time.monotonic() + seconds
    return lambda: ends_at - time.monotonic()
