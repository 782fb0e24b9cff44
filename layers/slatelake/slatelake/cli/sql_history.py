"""``slatelake sql``'s line editing: readline, a history of whole statements, completion.

As DuckDB's shell keeps it (``tools/shell/linenoise/history.cpp``): one
history entry per statement however many lines it took (recalled whole with
the up arrow), one per dot command; the file (~/.slatelake_history) holds
the SQL as typed, and reading it back joins the lines of each statement
again where DuckDB's tokenizer says it is complete. Without readline (some
platforms) input is read unedited; a history that cannot be read or written
is skipped, never an error.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from slatelake.cli.sql_split import blank, complete

HISTORY_FILE = ".slatelake_history"  # in the user's home directory
HISTORY_LENGTH = 1000  # entries kept
_LIBEDIT = "libedit"  # macOS's readline stand-in binds keys its own way


def entries(text: str) -> list[str]:
    """The history entries of a history file's text: a dot command per line,
    a statement over as many lines as it took."""
    out: list[str] = []
    pending: list[str] = []
    for line in text.splitlines():
        if not pending and (line.startswith(".") or not line.strip()):
            if line.strip():
                out.append(line)
            continue
        pending.append(line)
        if complete("\n".join(pending)):
            out.append("\n".join(pending))
            pending = []
    if pending and not blank("\n".join(pending)):
        out.append("\n".join(pending))
    return out


class History:
    """readline's history, one entry per statement; inert without readline."""

    def __init__(self) -> None:
        self.readline: Any = None
        self.path: Path | None = None

    def mark(self) -> int:
        """Where the history stands before a statement's first line is read."""
        return 0 if self.readline is None else int(self.readline.get_current_history_length())

    def add(self, entry: str, since: int | None = None) -> None:
        """Keep a whole statement (or a dot command) as one entry, in place of
        any entries its lines got one by one since ``mark`` said ``since``."""
        entry = entry.strip("\n")
        if self.readline is None or not entry.strip():
            return
        if since is not None:
            for position in range(self.mark() - 1, since - 1, -1):
                with contextlib.suppress(ValueError):
                    self.readline.remove_history_item(position)
        length = self.readline.get_current_history_length()
        if length and self.readline.get_history_item(length) == entry:
            return  # the same again: kept once, as DuckDB does
        self.readline.add_history(entry)

    def load(self) -> None:
        if self.readline is None or self.path is None:
            return
        with contextlib.suppress(OSError, UnicodeDecodeError):
            for entry in entries(self.path.read_text(encoding="utf-8"))[-HISTORY_LENGTH:]:
                self.readline.add_history(entry)

    def save(self) -> None:
        if self.readline is None or self.path is None:
            return
        rl = self.readline
        kept = [rl.get_history_item(i) for i in range(1, rl.get_current_history_length() + 1)]
        text = "".join(f"{e}\n" for e in kept[-HISTORY_LENGTH:] if e)
        with contextlib.suppress(OSError):
            self.path.write_text(text, encoding="utf-8")


@contextlib.contextmanager
def line_editing(completer: Any = None) -> Iterator[History]:
    """The standard library's readline behind ``input()``: editing, the
    history in ~/.slatelake_history, and ``completer`` on Tab. Whatever
    readline had before (history, completer) is put back at the end."""
    history = History()
    try:
        import readline
    except ImportError:
        yield history
        return
    history.readline = readline
    with contextlib.suppress(RuntimeError):  # no home directory
        history.path = Path.home() / HISTORY_FILE
    readline.clear_history()
    history.load()
    auto = _set_auto_history(readline, False)  # entries are whole statements, added by the shell
    before = readline.get_completer()
    delims = readline.get_completer_delims()
    if completer is not None:
        readline.set_completer(completer)
        readline.set_completer_delims(" \t\n`~!@#$%^&*()-=+[{]}\\|;:'\",<>/?")  # not '.'
        if _LIBEDIT in (readline.__doc__ or ""):
            readline.parse_and_bind("bind ^I rl_complete")
        else:
            readline.parse_and_bind("tab: complete")
    try:
        yield history
    finally:
        history.save()
        readline.set_completer(before)
        readline.set_completer_delims(delims)
        _set_auto_history(readline, auto)


def _set_auto_history(readline: Any, on: bool) -> bool:
    """Turn readline's own one-entry-per-line history on or off (Python 3.6+)."""
    with contextlib.suppress(AttributeError):
        readline.set_auto_history(on)
    return True
