"""Running ``slatelake sql``'s statements: one at a time, a script to its first failure.

Each statement runs by itself through ``Session.sql`` (so each autocommits)
and prints through ``Output``; a failure becomes one line naming the
statement (``run_scripts``) or the error as DuckDB's shell prints it
(``sql_shell``). duckdb is
imported only when a function runs.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from slatelake import FencedError, SlatelakeError
from slatelake.cli.common import EXIT_ERROR
from slatelake.cli.sql_output import Output
from slatelake.cli.sql_split import Statement, split

COMMAND, STDIN = "-c", "stdin"  # Script.source for a -c argument and for `-f -`


@dataclass(frozen=True)
class Script:
    """SQL to run and where it came from: a file path, ``stdin`` or ``-c``."""

    source: str
    text: str


def run_statement(session: Any, statement: Statement, output: Output, params: Any = None) -> None:
    """Run one statement and print its result (a lazy read runs as it prints)."""
    result = session.sql(statement.text, params)
    if result is not None and not _nothing_to_show(statement, result):
        output.show(result)


def ran(
    session: Any,
    statement: Statement,
    output: Output,
    failed: Callable[[BaseException], str],
    params: Any = None,
) -> bool:
    """Run one statement; a DuckDB or slatelake error is printed on stderr as
    ``failed`` words it and False returned. A fenced store ends the whole
    run: raised."""
    import duckdb

    try:
        run_statement(session, statement, output, params)
    except FencedError:
        raise
    except (duckdb.Error, SlatelakeError) as exc:
        sys.stdout.flush()
        output.out.flush()
        print(failed(exc), file=sys.stderr, flush=True)
        return False
    return True


def _nothing_to_show(statement: Statement, relation: Any) -> bool:
    """DuckDB's answer to a statement without a result set of its own (CREATE,
    DROP): an empty "Count" or "Success". A query's empty result still prints."""
    import duckdb

    if relation.columns not in (["Count"], ["Success"]):
        return False
    kinds = {s.type for s in duckdb.extract_statements(statement.text)}
    return duckdb.StatementType.SELECT not in kinds and relation.limit(1).fetchone() is None


def one_line(exc: BaseException) -> str:
    """An error as one line: DuckDB's message up to its ``LINE n:`` excerpt
    (it names its own kind, "Catalog Error: ..."); slatelake's behind its type."""
    import duckdb

    kept: list[str] = []
    for line in str(exc).splitlines():
        if line.startswith("LINE "):
            break
        if line.strip():
            kept.append(line.strip())
    text = " ".join(kept) or type(exc).__name__
    plain = isinstance(exc, duckdb.Error) and not isinstance(exc, SlatelakeError)
    return text if plain else f"{type(exc).__name__}: {text}"


def _named(said: str, exc: BaseException) -> str:
    return said + one_line(exc)


def run_scripts(session: Any, scripts: Sequence[Script], output: Output) -> int:
    """Every statement of every script in order; stop at the first failure."""
    commands = sum(s.source == COMMAND for s in scripts)
    number = seen = 0
    for script in scripts:
        where = script.source
        if where == COMMAND:
            seen += 1
            where = f"-c #{seen}" if commands > 1 else COMMAND
        for statement in split(script.text):
            number += 1
            said = (
                f"slatelake sql: statement {number} at {where} line {statement.line} "
                f'("{statement.first_line}") failed: '
            )
            if not ran(session, statement, output, functools.partial(_named, said)):
                return EXIT_ERROR
    return 0
