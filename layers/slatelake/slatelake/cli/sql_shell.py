"""``slatelake sql``'s interactive shell, modelled on DuckDB's.

Reads standard input until its end, ``.quit`` or ``.exit``; runs each
complete input (a ``;`` outside strings and comments ends it) through
``sql_run``, statement by statement, and reports a failure in DuckDB's words
without stopping (exit 1 at the end). On a terminal: a banner naming the
lake and its head snapshot, prompts, line editing, a history of whole
statements and completion (``sql_history``, ``sql_complete``). Dot commands
are ``sql_dot``'s.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from slatelake import SlatelakeError
from slatelake.cli import sql_dot
from slatelake.cli.common import EXIT_ERROR
from slatelake.cli.sql_complete import Completer, Names, honest_hint
from slatelake.cli.sql_history import HISTORY_FILE, History, line_editing
from slatelake.cli.sql_output import Output
from slatelake.cli.sql_run import one_line, ran
from slatelake.cli.sql_split import Statement, blank, complete, split

__all__ = ["CONTINUATION", "HISTORY_FILE", "PROMPT", "Shell", "shell"]

PROMPT, CONTINUATION = "slatelake> ", "      ...> "
READ_DEPTH = 25  # .read inside .read, at most this deep
# the lake's newest snapshot, for the banner (parameter: the lake's alias)
_HEAD = (
    "SELECT snapshot_id, snapshot_time FROM ducklake_snapshots(?) ORDER BY snapshot_id DESC LIMIT 1"
)


class Shell:
    """One shell's state: the session, how results print, the timer, where
    output goes, the statement being typed."""

    def __init__(self, session: Any, output: Output, interactive: bool) -> None:
        self.session = session
        self.output = output
        self.interactive = interactive
        self.names = Names(session)
        self.history = History()
        self.timer = False
        self.status = 0
        self.buffer: list[str] = []  # lines of the statement being typed
        self._file: TextIO | None = None  # an .output or .once file
        self._pipe: subprocess.Popen[str] | None = None  # or command
        self._once = 0  # commands until a .once file closes, as DuckDB counts them
        self._depth = 0  # of .read
        self._mark = 0  # the history's length before this statement's first line

    # -- what dot commands use -----------------------------------------------------
    def write(self, text: str) -> None:
        self.output.out.write(text)
        self.output.out.flush()

    def error(self, text: str) -> None:
        sql_dot.write_error(text)

    def redirect(self, target: str, once: bool) -> bool:
        """Send results to ``target`` (a file, ``|command``, ``stdout`` or
        ``stderr``), for the next command only with ``once``. Errors stay on
        stderr."""
        self._close()
        if target in ("stdout", "stderr"):
            self.output.stream = None if target == "stdout" else sys.stderr
        elif target.startswith("|"):
            try:
                self._pipe = subprocess.Popen(  # the user's own command, as DuckDB's shell runs it
                    target[1:], shell=True, stdin=subprocess.PIPE, text=True, encoding="utf-8"
                )
            except OSError:
                self.error(f"Error: cannot open pipe {sql_dot.quoted(target[1:])}")
                return False
            self.output.stream = self._pipe.stdin
        else:
            try:
                self._file = Path(os.path.expanduser(target)).open("w", encoding="utf-8")  # noqa: SIM115 - open until .output changes
            except OSError:
                self.error(f"Error: cannot open {sql_dot.quoted(target)}")
                return False
            self.output.stream, self.output.whole = self._file, True
        self._once = 2 if once else 0  # this .once, then the next command
        return True

    def _close(self) -> None:
        """Back to standard output: close the file, or end the pipe's command."""
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
        if self._pipe is not None:
            with contextlib.suppress(OSError):
                if self._pipe.stdin is not None:
                    self._pipe.stdin.close()
            self._pipe.wait()
        self._file, self._pipe = None, None
        self.output.stream, self.output.whole = None, False

    def run_query(self, query: str, params: list[Any]) -> bool:
        """A query of the shell's own (``.tables``), printed as a result."""
        statement = Statement(query, 1)
        return ran(self.session, statement, self.output, self.failure, params)

    def read_file(self, path: str) -> sql_dot.Done:
        """``.read``: every line of a file as if typed (dot commands too)."""
        try:
            text = Path(os.path.expanduser(path)).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            self.error(f"Error: cannot open {sql_dot.quoted(path)}")
            return sql_dot.Done.FAIL
        if self._depth >= READ_DEPTH:
            self.error(
                f"Error: .read nested deeper than {READ_DEPTH} files at {sql_dot.quoted(path)}"
            )
            return sql_dot.Done.FAIL
        outer, self.buffer = self.buffer, []
        self._depth += 1
        failed = self.status
        self.status = 0
        try:
            for line in text.splitlines():
                if not self.feed(line, remember=False):
                    return sql_dot.Done.EXIT
            self.finish()
        finally:
            self._depth -= 1
            self.buffer = outer
            ok = self.status == 0
            self.status = failed or self.status
        return sql_dot.Done.OK if ok else sql_dot.Done.FAIL

    # -- input ---------------------------------------------------------------------
    def feed(self, line: str, remember: bool = True) -> bool:
        """One line of input; False when the shell should end (``.quit``)."""
        if not self.buffer and line.startswith("."):
            if remember:
                self.history.add(line, since=self._mark)
            done = sql_dot.run(self, line)
            if done is sql_dot.Done.FAIL:
                self.status = EXIT_ERROR
            self._command_done()
            return done is not sql_dot.Done.EXIT
        if not self.buffer and blank(line):
            return True
        self.buffer.append(line)
        text = "\n".join(self.buffer)
        if complete(text):
            self.buffer = []
            if remember:
                self.history.add(text, since=self._mark)
            self.run_sql(text)
        return True

    def mark(self) -> None:
        """A new statement begins: its lines' history entries start here."""
        self._mark = self.history.mark()

    def finish(self) -> None:
        """Input ended: run what was typed after the last ``;``, if anything."""
        text, self.buffer = "\n".join(self.buffer), []
        if text and not blank(text):
            self.run_sql(text)

    def run_sql(self, text: str) -> bool:
        """The statements of one input in order; a failure skips the rest."""
        ok = True
        for statement in split(text):
            started, used = time.perf_counter(), os.times()
            ok = ran(self.session, statement, self.output, self.failure)
            self.names.forget()  # a statement may have made or dropped names
            if self.timer:
                self._time(started, used)
            if not ok:
                self.status = EXIT_ERROR
                break
        self._command_done()
        return ok

    def _time(self, started: float, used: os.times_result) -> None:
        """DuckDB's timer line, on standard output."""
        now = os.times()
        real = time.perf_counter() - started
        sys.stdout.write(
            f"Run Time (s): real {real:.3f} user {now.user - used.user:f} "
            f"sys {now.system - used.system:f}\n"
        )
        sys.stdout.flush()

    def _command_done(self) -> None:
        if self._once:
            self._once -= 1
            if not self._once:
                self._close()

    def failure(self, exc: BaseException) -> str:
        """An error as DuckDB's shell prints it: DuckDB's whole message, less
        a hint at something the user never made; slatelake's behind its type."""
        import duckdb

        if isinstance(exc, SlatelakeError) or not isinstance(exc, duckdb.Error):
            return one_line(exc)
        return honest_hint(str(exc).strip("\n"), self.names)

    def close(self) -> None:
        self._close()


def banner(session: Any) -> str:
    """What the shell says first on a terminal: slatelake and DuckDB's
    versions, the lake, its head snapshot (time in ISO 8601 UTC) and slot."""
    import duckdb

    from slatelake import __version__

    mode = " (read-only)" if getattr(session, "read_only", False) else ""
    lines = [f"slatelake {__version__} (DuckDB {duckdb.__version__})"]
    lines.append(f"lake {session.url}, attached as {session.alias}{mode}")
    try:
        row = session.sql(_HEAD, [session.alias]).fetchone()
    except (duckdb.Error, Exception):  # noqa: BLE001 - a banner never stops the shell
        row = None
    slot = f"commit-log slot {session.last_seq}"
    if row is None:
        lines.append(f"head: no snapshot yet, {slot}")
    else:
        snapshot, at = row
        lines.append(f"head: snapshot {snapshot}, committed {iso_utc(at)}, {slot}")
    lines.append('Enter ".help" for usage hints.')
    return "\n".join(lines)


def iso_utc(at: Any) -> str:
    """A timestamp as ISO 8601 UTC to the second (``2026-01-02T03:04:05Z``)."""
    if not isinstance(at, dt.datetime):
        return str(at)
    if at.tzinfo is None:
        at = at.replace(tzinfo=dt.UTC)
    return at.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def shell(session: Any, output: Output) -> int:
    """Read statements until end of input (Ctrl-D), ``.quit`` or ``.exit``.
    Banner, prompts, line editing and completion only on a terminal; piped
    input runs silently. Exit 1 when any statement or dot command failed
    (``.exit CODE``: CODE)."""
    interactive = sys.stdin.isatty()
    state = Shell(session, output, interactive)
    if not interactive:
        try:
            _read_eval_print(state)
        finally:
            state.close()
        return state.status
    if sys.stdout.isatty():  # not into a file the user's typing is captured in
        print(banner(session), flush=True)
    completer = Completer(
        state.names, sql_dot.NAMES, _line_buffer, statement_started=lambda: bool(state.buffer)
    )
    try:
        with line_editing(completer) as history:
            state.history = history
            _read_eval_print(state)
    finally:
        state.close()
    print()
    return state.status


def _line_buffer() -> str:
    import readline

    return str(readline.get_line_buffer())


def _read_eval_print(state: Shell) -> None:
    while True:
        prompt = (CONTINUATION if state.buffer else PROMPT) if state.interactive else ""
        if not state.buffer:
            state.mark()
        try:
            line = input(prompt)
        except EOFError:
            break
        except KeyboardInterrupt:
            if not state.interactive:
                raise
            print()
            state.buffer = []  # Ctrl-C drops the statement being typed
            continue
        if not state.feed(line):
            return
    state.finish()
