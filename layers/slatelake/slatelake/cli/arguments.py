"""argparse converters for what a shell hands the CLI, parsed at the edge.

A value refused here ends the command before any lake is opened, created or
written: argparse prints its usage line and one error line naming the
argument and the value, and exits 2. Every verb that takes a lake takes it
through ``add_lake`` (so a malformed LAKE exits 2 on every verb, checked by
the same parser ``slatelake.open`` uses), and every time flag through
``duration``-based converters (``slatelake.durations``, the one grammar).
A converter returns the value as given unless it says otherwise (the verbs
pass it on unchanged); it only decides whether it is usable. Heavy modules
(slatedb, duckdb) are imported only when a value is checked.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from slatelake import MisconfigurationError
from slatelake.cli.common import Handler

if TYPE_CHECKING:
    from slatelake import LakeHandle

# What every duration flag's help ends with: the grammar, in one spelling.
DURATION_WORDS = "a duration: 90s, 5m, 1h30m, 7d or bare seconds"
DEFAULT_MARGIN_S = 30.0  # fold and hold: folded slots kept before truncation
# The facade checks a data path only together with a lake; this one is never
# read or written (a handle opens nothing until a verb runs).
_NO_LAKE = "memory://slatelake-cli-argument-check"


def lake_url(text: str) -> str:
    """A lake URL ``slatelake.open`` takes (file:///abs, memory://name,
    s3://bucket/prefix); the text as given."""
    import slatelake

    try:
        slatelake.open(text)
    except MisconfigurationError as exc:  # names the URL and what is wrong with it
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def add_lake(p: argparse.ArgumentParser, help_: str = "lake URL") -> None:
    """The LAKE positional: the one way a verb takes a lake."""
    p.add_argument("lake", metavar="LAKE", type=lake_url, help=help_)


def lake_verb(sub: Any, name: str, func: Handler, help_: str) -> argparse.ArgumentParser:
    """A subcommand whose first argument is LAKE (``add_lake``)."""
    p = sub.add_parser(name, help=help_, description=help_)
    p.set_defaults(func=func)
    add_lake(p)
    return p


def open_lake(args: argparse.Namespace, data_path: str | None = None) -> LakeHandle:
    """The handle on the verb's LAKE (checked at parse, so this never refuses
    it); the handle resolves a relative ``data_path`` (``lake_data_path``) as a
    session does: against the current directory, refused for an S3 lake."""
    import slatelake

    return slatelake.open(args.lake, data_path)  # the handle resolves it


def data_path(text: str) -> str:
    """A data path the overlap guard can compare (absolute path or URL)."""
    from slatelake.admin import check_data_location

    try:
        check_data_location(text)
    except MisconfigurationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def lake_data_path(text: str) -> str:
    """A lake's own data path (``init``, ``maintain`` for a new lake): an
    absolute path, a URL, or, as DuckLake takes it, a path relative to the
    current directory, which ``open_lake`` resolves once LAKE is known (an S3
    lake refuses it). Checked here as it would resolve; returned as given."""
    from slatelake.admin import resolve_data_path

    if text == "":
        raise argparse.ArgumentTypeError(
            "data path '': empty (DuckLake reads it as none given); name a directory "
            "(absolute, or relative to the current one) or a URL such as s3://bucket/data"
        )
    try:
        resolved = resolve_data_path(_NO_LAKE, text)
    except MisconfigurationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if resolved is not None:
        data_path(resolved)
    return text


def wait_seconds(text: str) -> float:
    """A wait in the one duration grammar (``30``, ``90s``, ``2m``), zero or
    more, at most a year (a timer past that overflows)."""
    return _duration(text, allow_zero=True)


def timeout_seconds(text: str) -> float:
    """A timeout or an interval in the one duration grammar, above zero."""
    return _duration(text, allow_zero=False)


def _duration(text: str, allow_zero: bool) -> float:
    from slatelake.durations import parse_duration

    try:
        return parse_duration("", text, allow_zero=allow_zero)
    except MisconfigurationError as exc:  # argparse names the flag; the value leads
        raise argparse.ArgumentTypeError(str(exc).removeprefix("=")) from None


def catalog_text(text: str) -> str:
    """A table, column or index name, or a value to look up: UTF-8 text (a
    lone surrogate is what Python makes of argv bytes that are not UTF-8, and
    neither DuckDB nor the catalog can hold it), without NUL."""
    from slatelake import show_input

    if "\x00" in text or any(0xD800 <= ord(ch) <= 0xDFFF for ch in text):
        raise argparse.ArgumentTypeError(
            f"{show_input(text)}: not UTF-8 text without NUL; respell it"
        )
    return text


def snapshot_id(text: str) -> int:
    """A snapshot id: digits only (``42``); the library checks its range."""
    from slatelake import show_input

    if not (text.isascii() and text.isdigit()):
        raise argparse.ArgumentTypeError(
            f"snapshot id {show_input(text)}: expected digits only (e.g. 42)"
        )
    return int(text)


def page_limit(text: str) -> int:
    """A page size, as ``PageRequest`` (the Lambda's parser too) takes it."""
    from slatelake import PageRequest

    try:
        return PageRequest(limit=text).limit  # type: ignore[arg-type]
    except MisconfigurationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def page_before(text: str) -> int:
    """A ``next_before`` id from a previous page, as ``PageRequest`` takes it."""
    from slatelake import PageRequest

    try:
        before = PageRequest(before=text).before  # type: ignore[arg-type]
    except MisconfigurationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    assert before is not None
    return before


def count(what: str, least: int = 0) -> Callable[[str], int]:
    """A converter for a whole number of ``what``, ``least`` or more (ASCII
    digits, at most 12 of them)."""

    def convert(text: str) -> int:
        from slatelake import show_input

        if not (text.isascii() and text.isdigit()) or len(text) > 12 or int(text) < least:
            raise argparse.ArgumentTypeError(
                f"{show_input(text)}: expected a count of {what}, {least} or more"
            )
        return int(text)

    return convert


def add_json(p: argparse.ArgumentParser, help_: str = "print the report as JSON") -> None:
    """``--json``: print the report's document (``cli/output.py``) instead of text."""
    p.add_argument("--json", action="store_true", help=help_)


def add_margin(p: argparse.ArgumentParser) -> None:
    """``--margin``: how long folded slots are kept before truncation (fold, hold)."""
    p.add_argument(
        "--margin",
        type=wait_seconds,
        default=DEFAULT_MARGIN_S,
        metavar="DURATION",
        help=f"keep folded slots at least this long before truncating (default "
        f"{DEFAULT_MARGIN_S:g}s); {DURATION_WORDS}",
    )


def add_deadline(p: argparse.ArgumentParser, help_: str) -> None:
    """``--deadline DURATION`` (above zero; default none), read by ``deadline_of``."""
    p.add_argument(
        "--deadline",
        type=timeout_seconds,
        default=None,
        metavar="DURATION",
        help=f"{help_}; {DURATION_WORDS}",
    )


def deadline_of(seconds: float | None) -> Callable[[], float] | None:
    """The seconds left until ``seconds`` from now, as the handle's verbs take
    a ``deadline``; None without a deadline."""
    if seconds is None:
        return None
    ends_at = time.monotonic() + seconds
    return lambda: ends_at - time.monotonic()
