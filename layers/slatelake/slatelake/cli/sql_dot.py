"""``slatelake sql``'s dot commands: DuckDB's shell commands that make sense on a lake.

Each is named, used and worded as in DuckDB 1.5's shell
(``tools/shell/shell_metadata_command.cpp``): a unique prefix names a
command (``.tab`` is ``.tables``), arguments split at spaces unless quoted,
an unknown command and a wrong use get DuckDB's two error texts. Results
(``.schema``, ``.tables``, ``.databases``, ``.help``) go where query results
go (``.output``); errors go to stderr. Every query here takes its values as
parameters.
"""

from __future__ import annotations

import difflib
import enum
import shlex
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from slatelake.cli.sql_complete import INTERNAL
from slatelake.cli.sql_output import MODES

MIN_SPACING = 4  # between a command's usage and its description in .help
MODE_ALIASES = {"lines": "line", "columns": "column"}  # DuckDB accepts both spellings
# the tables and views of the current database and schema (SHOW TABLES), LIKE a pattern
_TABLES = (
    "SELECT name FROM (SELECT table_name AS name, database_name, schema_name "
    "FROM duckdb_tables() WHERE NOT internal UNION ALL SELECT view_name, database_name, "
    "schema_name FROM duckdb_views() WHERE NOT internal) WHERE database_name = "
    "current_database() AND schema_name = current_schema() AND name LIKE ? ESCAPE '\\' "
    "AND NOT starts_with(name, ?) ORDER BY name"
)
# the CREATE statements of the current database's tables and views, as DuckDB's
# .schema: parameters (internal prefix, pattern has a dot, pattern is a glob, pattern x2)
_SCHEMA = (
    "WITH named AS (SELECT CASE WHEN ? THEN lower(schema_name || '.' || name) ELSE lower(name) "
    "END AS key, name, sql FROM (SELECT table_name AS name, schema_name, database_name, sql "
    "FROM duckdb_tables() WHERE NOT internal UNION ALL SELECT view_name, schema_name, "
    "database_name, sql FROM duckdb_views() WHERE NOT internal) WHERE database_name = "
    "current_database() AND sql IS NOT NULL AND NOT starts_with(name, ?)) SELECT sql FROM "
    "named WHERE CASE WHEN ? THEN key GLOB ? ELSE key LIKE ? ESCAPE '\\' END ORDER BY name"
)
_DATABASES = (
    "SELECT database_name, path, readonly FROM duckdb_databases() "
    "WHERE NOT internal ORDER BY database_name <> current_database(), database_oid"
)


class Done(enum.Enum):
    """How a dot command ended: DuckDB's MetadataResult."""

    OK = 0
    FAIL = 1
    EXIT = 2
    USAGE = 3


@dataclass(frozen=True)
class Command:
    name: str
    usage: str
    description: str
    run: Callable[[Any, list[str]], Done]
    arguments: int | None = None  # exactly this many, or any


def _databases(shell: Any, args: list[str]) -> Done:
    """``name: where`` for each attached database; a slatelake lake (the
    session's, or one attached beside it) by its URL."""
    rows = shell.session.sql(_DATABASES).fetchall()
    for name, path, readonly in rows:
        attached = shell.session.attached_lakes.get(name)
        if name == shell.session.alias:
            where = shell.session.url
        elif attached is not None:
            where, readonly = attached.url, attached.read_only
        else:
            where = path or "(memory)"
        shell.write(f"{name}: {where}{' (read-only)' if readonly else ''}\n")
    return Done.OK


def _exit(shell: Any, args: list[str]) -> Done:
    if len(args) > 1 or (args and not args[0].lstrip("-").isdigit()):
        return Done.USAGE
    if args:
        shell.status = int(args[0])
    return Done.EXIT


def _headers(shell: Any, args: list[str]) -> Done:
    shell.output.headers = boolean(shell, args[0])
    return Done.OK


def _nullvalue(shell: Any, args: list[str]) -> Done:
    shell.output.null = args[0]
    return Done.OK


def _help(shell: Any, args: list[str]) -> Done:
    """Every command (those a pattern begins), aligned as DuckDB aligns them."""
    pattern = args[0].lstrip(".") if args else ""
    shown = [c for c in COMMANDS if c.name.startswith(pattern)]
    lhs = [f".{c.name} {c.usage}" for c in shown]
    pad = max((len(x) for x in lhs), default=0) + MIN_SPACING
    for left, command in zip(lhs, shown, strict=True):
        shell.write(left.ljust(pad) + command.description + "\n")
        if pattern and command.name == "mode":
            shell.write("".join(f"  {m}\n" for m in MODES))
    return Done.OK


def _maxrows(shell: Any, args: list[str]) -> Done:
    return _limit(shell, args, "max_rows", "max rows")


def _maxwidth(shell: Any, args: list[str]) -> Done:
    return _limit(shell, args, "max_width", "max width")


def _limit(shell: Any, args: list[str], attribute: str, label: str) -> Done:
    """Show or set a duckbox limit; 0 is DuckDB's default again."""
    if len(args) > 1 or (args and not args[0].isdigit()):
        return Done.USAGE
    if not args:
        value = getattr(shell.output, attribute)
        shell.write(f"current {label}: {value if value else 'DuckDB default'}\n")
        return Done.OK
    setattr(shell.output, attribute, int(args[0]) or None)
    return Done.OK


def _mode(shell: Any, args: list[str]) -> Done:
    if len(args) > 1:
        return Done.USAGE
    if not args:
        shell.write(f"current output mode: {shell.output.mode}\n")
        return Done.OK
    mode = MODE_ALIASES.get(args[0], args[0])
    if mode not in MODES:
        shell.error(f"Error: mode should be one of: {' '.join(MODES)}")
        return Done.FAIL
    shell.output.mode = mode
    return Done.OK


def _output(shell: Any, args: list[str]) -> Done:
    return _redirect(shell, args, once=False)


def _once(shell: Any, args: list[str]) -> Done:
    return _redirect(shell, args, once=True)


def _redirect(shell: Any, args: list[str], once: bool) -> Done:
    """Results to a file, ``|command``'s input, or back to stdout. DuckDB's
    ``-e``/``-x`` (an editor, a spreadsheet) and ``--bom`` are not offered."""
    options = [a for a in args if a.startswith("-")]
    if options:
        shell.error(f"ERROR: unknown option: {quoted(options[0])}.")
        return Done.USAGE
    if len(args) > 1:
        shell.error(f"ERROR: extra parameter: {quoted(args[1])}.")
        return Done.USAGE
    return Done.OK if shell.redirect(args[0] if args else "stdout", once) else Done.FAIL


def _quit(shell: Any, args: list[str]) -> Done:
    return Done.EXIT


def _read(shell: Any, args: list[str]) -> Done:
    return shell.read_file(args[0])


def _schema(shell: Any, args: list[str]) -> Done:
    """The CREATE statement of each table and view (LIKE or GLOB the pattern,
    ``schema.name`` when it holds a dot), each ending in ``;``."""
    if len(args) > 1:
        return Done.USAGE
    pattern = args[0] if args else "%"
    glob = any(c in pattern for c in "*?[")
    params = ["." in pattern, INTERNAL, glob, pattern, pattern]
    for (sql,) in shell.session.sql(_SCHEMA, params).fetchall():
        text = str(sql).rstrip()
        shell.write(text + ("" if text.endswith(";") else ";") + "\n")
    return Done.OK


def _tables(shell: Any, args: list[str]) -> Done:
    """The tables and views of the current schema (SHOW TABLES' names), LIKE
    a pattern, printed in the output mode."""
    if len(args) > 1:
        return Done.USAGE
    return Done.OK if shell.run_query(_TABLES, [args[0] if args else "%", INTERNAL]) else Done.FAIL


def _timer(shell: Any, args: list[str]) -> Done:
    shell.timer = boolean(shell, args[0])
    return Done.OK


def boolean(shell: Any, text: str) -> bool:
    """DuckDB's shell boolean: on/off, yes/no, a number; else no, said so."""
    if text.isdigit():
        return int(text) != 0
    if text.lower() in ("on", "yes", "true"):
        return True
    if text.lower() not in ("off", "no", "false"):
        shell.error(f'ERROR: Not a boolean value: {quoted(text)}. Assuming "no".')
    return False


COMMANDS = (
    Command("databases", "", "List names and files of attached databases", _databases, 0),
    Command("exit", "?CODE?", "Exit this program with return-code CODE", _exit),
    Command("headers", "on|off", "Turn display of headers on or off", _headers, 1),
    Command("help", "?PATTERN?", "Show help text for PATTERN", _help),
    Command(
        "maxrows",
        "COUNT",
        "Sets the maximum number of rows for display. Only for duckbox mode.",
        _maxrows,
    ),
    Command(
        "maxwidth",
        "COUNT",
        "Sets the maximum width in characters. 0 defaults to terminal width. "
        "Only for duckbox mode.",
        _maxwidth,
    ),
    Command("mode", "MODE", "Set output mode", _mode),
    Command("nullvalue", "STRING", "Use STRING in place of NULL values", _nullvalue, 1),
    Command("once", "?FILE?", "Output for the next SQL command only to FILE", _once),
    Command("output", "?FILE?", "Send output to FILE or stdout if FILE is omitted", _output),
    Command("quit", "", "Exit this program", _quit),
    Command("read", "FILE", "Read input from FILE", _read, 1),
    Command("schema", "?PATTERN?", "Show the CREATE statements matching PATTERN", _schema),
    Command("tables", "?TABLE?", "List names of tables matching LIKE pattern TABLE", _tables),
    Command("timer", "on|off", "Turn SQL timer on or off", _timer, 1),
)
NAMES = tuple(f".{c.name}" for c in COMMANDS)


def arguments(line: str) -> list[str]:
    """A dot command's words: split at spaces, quotes kept together (an
    unbalanced quote: the rest of the line is one word, as DuckDB reads it)."""
    try:
        return shlex.split(line)
    except ValueError:
        head, _, rest = line.partition(" ")
        return [head, *([rest.strip().strip("'\"")] if rest.strip() else [])]


def find(name: str) -> Command | None:
    """The command ``name`` is, or begins uniquely."""
    exact = [c for c in COMMANDS if c.name == name]
    begun = [c for c in COMMANDS if name and c.name.startswith(name)]
    if exact:
        return exact[0]
    return begun[0] if len(begun) == 1 else None


def run(shell: Any, line: str) -> Done:
    """Run one dot command line, reporting an unknown or misused command as
    DuckDB's shell does."""
    words = arguments(line)
    if not words or words[0] == ".":
        return Done.OK
    name, args = words[0][1:], words[1:]
    command = find(name)
    if command is None:
        shell.error(unknown(name))
        return Done.FAIL
    done = Done.USAGE
    if command.arguments is None or command.arguments == len(args):
        done = _guarded(command, shell, args)
    if done is Done.USAGE:
        shell.error(
            f"Invalid Command Error: Invalid usage of command '.{name}'\n\n"
            f"Usage: '.{command.name} {command.usage}'".rstrip()
        )
        return Done.FAIL
    return done


def _guarded(command: Command, shell: Any, args: list[str]) -> Done:
    """Run a command; a query of its own that fails is reported as any
    statement's failure (a fenced store still ends the shell)."""
    import duckdb

    from slatelake import FencedError, SlatelakeError

    try:
        return command.run(shell, args)
    except FencedError:
        raise
    except (duckdb.Error, SlatelakeError) as exc:
        shell.error(shell.failure(exc))
        return Done.FAIL


def unknown(name: str) -> str:
    """DuckDB's words for a command that is none, with the nearest ones."""
    near: Sequence[str] = difflib.get_close_matches(f".{name}", NAMES, n=3, cutoff=0.75)
    hint = ("\nDid you mean: " + ", ".join(quoted(n) for n in near)) if near else ""
    said = f"Unknown Command Error: Unrecognized command {quoted(name, chr(39))}\n{hint}"
    return said + "\nRun '.help' for more information."


def quoted(text: str, mark: str = '"') -> str:
    """A name or path in a message, between quotes, as DuckDB's shell shows it."""
    return mark + text + mark


def write_error(text: str) -> None:
    sys.stdout.flush()
    print(text, file=sys.stderr, flush=True)
