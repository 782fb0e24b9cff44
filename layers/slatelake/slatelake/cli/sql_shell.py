"""``slatelake sql``'s interactive shell: prompts, line editing, dot-commands.

Reads standard input until its end or ``.quit``, runs each complete input
(a ``;`` outside strings and comments ends it) through ``sql_run``, and
reports a failure without stopping. Prompts and readline only on a terminal.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from slatelake.cli.common import EXIT_ERROR
from slatelake.cli.sql_output import MODES, Output
from slatelake.cli.sql_run import ran
from slatelake.cli.sql_split import blank, complete, split

PROMPT, CONTINUATION = "slatelake> ", "      ...> "
HISTORY_FILE = ".slatelake_history"  # in the user's home directory
HISTORY_LENGTH = 1000
DOT_HELP = """\
.tables              the tables of the current schema (SHOW TABLES)
.mode [MODE]         show or set the output: box, csv, json or markdown
.help                this list
.quit, .exit         leave (Ctrl-D too)"""


@contextlib.contextmanager
def line_editing() -> Iterator[None]:
    """The standard library's readline behind ``input()``: editing, and a
    history kept in ~/.slatelake_history. Without readline (some platforms)
    input is read unedited; a history that cannot be read or written is
    skipped, never an error."""
    try:
        import readline
    except ImportError:
        yield
        return
    try:
        path: Path | None = Path.home() / HISTORY_FILE
    except RuntimeError:  # no home directory
        path = None
    if path is not None:
        with contextlib.suppress(OSError):
            readline.read_history_file(path)
    readline.set_history_length(HISTORY_LENGTH)
    try:
        yield
    finally:
        if path is not None:
            with contextlib.suppress(OSError):
                readline.write_history_file(path)


def shell(session: Any, output: Output) -> int:
    """Read statements until end of input (Ctrl-D) or ``.quit``. Prompts and
    line editing only on a terminal; piped input runs silently. A statement
    is complete at a ``;`` outside strings and comments; the statements of one
    input run in order, and a failure skips the rest of that input. Exit 1
    when any statement failed."""
    interactive = sys.stdin.isatty()
    with line_editing() if interactive else contextlib.nullcontext():
        status = _read_eval_print(session, output, interactive)
    if interactive:
        print()
    return status


def _read_eval_print(session: Any, output: Output, interactive: bool) -> int:
    status = 0
    buffer: list[str] = []
    while True:
        try:
            line = input((CONTINUATION if buffer else PROMPT) if interactive else "")
        except EOFError:
            break
        except KeyboardInterrupt:
            if not interactive:
                raise
            print()
            buffer = []  # Ctrl-C drops the statement being typed
            continue
        if not buffer and line.startswith("."):
            done, ok = _dot_command(session, output, line)
            status = status if ok else EXIT_ERROR
            if done:
                return status
            continue
        buffer.append(line)
        if complete("\n".join(buffer)):
            status = status if _run_input(session, output, "\n".join(buffer)) else EXIT_ERROR
            buffer = []
    if buffer and not blank("\n".join(buffer)):  # input ended inside a statement
        status = status if _run_input(session, output, "\n".join(buffer)) else EXIT_ERROR
    return status


def _run_input(session: Any, output: Output, text: str) -> bool:
    return all(ran(session, statement, output, str) for statement in split(text))


def _dot_command(session: Any, output: Output, line: str) -> tuple[bool, bool]:
    """Run a shell dot-command: (leave the shell, it succeeded)."""
    name, *args = line.split()
    if name in (".quit", ".exit"):
        return True, True
    if name == ".help":
        print(DOT_HELP)
        return False, True
    if name == ".tables":
        return False, _run_input(session, output, "SHOW TABLES")
    if name == ".mode" and not args:
        print(output.mode)
        return False, True
    if name == ".mode" and len(args) == 1 and args[0] in MODES:
        output.mode = args[0]
        return False, True
    print(f"{line.strip()}: unknown or malformed; .help lists the commands", file=sys.stderr)
    return False, False
