"""``slatelake sql``: SQL on a lake, printed the way DuckDB prints it.

What runs: the ``-c`` texts and ``-f`` scripts in the order given or, with
neither, an interactive shell on standard input. Statements are split where
DuckDB's own tokenizer sees a ``;`` (one inside a string literal, a quoted
identifier or a comment ends nothing), and each runs by itself through
``Session.sql``, so each autocommits. A script stops at the first statement
that fails: one line on stderr names it (its number, where it starts, its
first line), the exit status is 1, and what ran before it stays committed and
was printed. The shell reports a failure and reads on (exit 1 at the end).

What prints: DuckDB renders every value. By default the relation as DuckDB's
Python prints it (box); ``--csv`` is DuckDB's CSV writer; ``--json`` one line
per statement, an array of row objects made by DuckDB's ``to_json``;
``--markdown`` a pipe table of DuckDB's text casts. A statement with no rows
of its own (SET, BEGIN; CREATE or DROP, whose result is DuckDB's empty
"Count" or "Success") prints nothing; INSERT, UPDATE and DELETE print DuckDB's
row count. duckdb is imported only when the verb runs.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slatelake import FencedError, SlatelakeError
from slatelake.cli.arguments import catalog_text, lake_url
from slatelake.cli.common import EXIT_ERROR

PROMPT, CONTINUATION = "slatelake> ", "      ...> "
HISTORY_FILE = ".slatelake_history"  # in the user's home directory
HISTORY_LENGTH = 1000
MODES = ("box", "csv", "json", "markdown")
COMMAND, STDIN = "-c", "stdin"  # Script.source for a -c argument and for `-f -`
SHOWN_CHARS = 60  # of a failed statement's first line, in its error
JSON_BATCH = 1024  # rows fetched at a time for --json
_SIGNED = ("tinyint", "smallint", "integer", "bigint", "hugeint")
# DuckDB type ids --markdown right-aligns, as DuckDB aligns them in a box
NUMERIC = frozenset((*_SIGNED, *("u" + t for t in _SIGNED), "float", "double", "decimal"))
_ROW = "__slatelake_row"  # the relation's alias in --json: the row as a STRUCT
DOT_HELP = """\
.tables              the tables of the current schema (SHOW TABLES)
.mode [MODE]         show or set the output: box, csv, json or markdown
.help                this list
.quit, .exit         leave (Ctrl-D too)"""


@dataclass(frozen=True)
class Script:
    """SQL to run and where it came from: a file path, ``stdin`` or ``-c``."""

    source: str
    text: str


@dataclass(frozen=True)
class Statement:
    """One statement of a script, without its ``;``, from its first token on."""

    text: str
    line: int  # the script's line where it starts

    @property
    def first_line(self) -> str:
        head, _, rest = self.text.partition("\n")
        head = head.rstrip()
        if len(head) > SHOWN_CHARS:
            return head[:SHOWN_CHARS] + "..."
        return head + (" ..." if rest.strip() else "")


# -- splitting, as DuckDB's tokenizer sees the text ----------------------------------
def _terminators(text: str) -> tuple[bytes, list[int], list[int]]:
    """The text's UTF-8 bytes, the byte offsets of its tokens, and of the
    tokens that are a ``;`` (DuckDB's tokenizer counts offsets in bytes and
    leaves out comments; a ``;`` inside a string or identifier is in its token)."""
    import duckdb

    data = text.encode()
    starts, ends = [], []
    for offset, kind in duckdb.tokenize(text):
        starts.append(offset)
        if kind == duckdb.token_type.operator and data[offset : offset + 1] == b";":
            ends.append(offset)
    return data, starts, ends


def blank(text: str) -> bool:
    """Nothing to run: whitespace and finished comments only. An unfinished
    string or comment is not blank (it swallows the ``;`` put after it)."""
    import duckdb

    return len(duckdb.tokenize(text + "\n;")) == 1


def complete(text: str) -> bool:
    """Whether shell input is ready to run: it has a terminating ``;`` and only
    whitespace or finished comments after the last one."""
    data, _, ends = _terminators(text)
    return bool(ends) and blank(data[ends[-1] + 1 :].decode())


def split(text: str) -> list[Statement]:
    """The statements of a script, where DuckDB's parser would split them.
    Text after the last ``;`` is a statement too unless it is blank (an
    unfinished string there reaches DuckDB, which names the fault)."""
    data, starts, ends = _terminators(text)
    terminators = set(ends)
    statements: list[Statement] = []

    def add(first: int, end: int) -> None:
        line = data.count(b"\n", 0, first) + 1
        statements.append(Statement(data[first:end].decode().rstrip(), line))

    begin, first = 0, None  # after the last ';'; the first token since
    for offset in starts:
        if offset in terminators:
            if first is not None:  # not an empty statement (';;')
                add(first, offset)
            begin, first = offset + 1, None
        elif first is None:
            first = offset
    rest = data[begin:]
    if first is None and not blank(rest.decode()):  # only an unfinished string or comment
        first = begin + len(rest) - len(rest.lstrip())
    if first is not None:
        add(first, len(data))
    return statements


# -- printing ----------------------------------------------------------------------
@dataclass
class Output:
    """How results print: ``mode`` is box, csv, json or markdown; the limits
    apply to box, which DuckDB elides past them (None: DuckDB's defaults)."""

    mode: str = "box"
    max_rows: int | None = None
    max_width: int | None = None

    def show(self, relation: Any) -> None:
        {"box": self._box, "csv": _csv, "json": _json, "markdown": _markdown}[self.mode](relation)

    def _box(self, relation: Any) -> None:
        relation.show(max_width=self.max_width, max_rows=self.max_rows)


def _csv(relation: Any) -> None:
    """DuckDB's CSV writer (header, then rows), through a private temporary file."""
    with tempfile.TemporaryDirectory(prefix="slatelake-sql-") as tmp:
        path = Path(tmp, "result.csv")
        relation.to_csv(str(path), header=True)
        with path.open(encoding="utf-8", newline="") as rendered:
            shutil.copyfileobj(rendered, sys.stdout)


def _json(relation: Any) -> None:
    """One line: a JSON array with an object per row, each made by DuckDB's
    ``to_json`` (a duplicate column name gets DuckDB's ``_1`` suffix)."""
    rows = relation.set_alias(_ROW).project(f"to_json({_ROW})")  # no view left behind
    batch = rows.fetchmany(JSON_BATCH)  # a failing query fails before anything prints
    out = sys.stdout
    out.write("[")
    sep = ""
    while batch:
        for (doc,) in batch:
            out.write(sep + doc)
            sep = ","
        batch = rows.fetchmany(JSON_BATCH)
    out.write("]\n")


def _markdown(relation: Any) -> None:
    """A GitHub pipe table of DuckDB's VARCHAR casts (NULL as ``NULL``), numbers
    right-aligned; every row, then a blank line."""
    names = [_cell(str(n)) for n in relation.columns]
    right = [t.id in NUMERIC for t in relation.types]
    rows = [
        ["NULL" if v is None else _cell(v) for v in row]
        for row in relation.project("COLUMNS(*)::VARCHAR").fetchall()
    ]
    widths = [max(3, len(n), *(len(r[i]) for r in rows)) for i, n in enumerate(names)]
    lines = ["| " + " | ".join(n.center(w) for n, w in zip(names, widths, strict=True)) + " |"]
    lines.append(
        "|"
        + "|".join("-" * (w + 1) + (":" if r else "-") for w, r in zip(widths, right, strict=True))
        + "|"
    )
    for row in rows:
        cells = (
            c.rjust(w) if r else c.ljust(w) for c, w, r in zip(row, widths, right, strict=True)
        )
        lines.append("| " + " | ".join(cells) + " |")
    print("\n".join(lines) + "\n")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\r\n", "<br>").replace("\n", "<br>")


# -- running -----------------------------------------------------------------------
def run_statement(session: Any, statement: Statement, output: Output) -> None:
    """Run one statement and print its result (a lazy read runs as it prints)."""
    result = session.sql(statement.text)
    if result is not None and not _nothing_to_show(statement, result):
        output.show(result)


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
    return text if isinstance(exc, duckdb.Error) else f"{type(exc).__name__}: {text}"


def run_scripts(session: Any, scripts: Sequence[Script], output: Output) -> int:
    """Every statement of every script in order; stop at the first failure."""
    import duckdb

    commands = sum(s.source == COMMAND for s in scripts)
    number = seen = 0
    for script in scripts:
        where = script.source
        if where == COMMAND:
            seen += 1
            where = f"-c #{seen}" if commands > 1 else COMMAND
        for statement in split(script.text):
            number += 1
            try:
                run_statement(session, statement, output)
            except FencedError:
                raise
            except (duckdb.Error, SlatelakeError) as exc:
                sys.stdout.flush()
                print(
                    f"slatelake sql: statement {number} at {where} line {statement.line} "
                    f'("{statement.first_line}") failed: {one_line(exc)}',
                    file=sys.stderr,
                    flush=True,
                )
                return EXIT_ERROR
    return 0


# -- the shell ---------------------------------------------------------------------
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
    import duckdb

    for statement in split(text):
        try:
            run_statement(session, statement, output)
        except FencedError:
            raise
        except (duckdb.Error, SlatelakeError) as exc:
            sys.stdout.flush()
            print(one_line(exc), file=sys.stderr, flush=True)
            return False
    return True


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


# -- the verb ----------------------------------------------------------------------
def _command(text: str) -> Script:
    return Script(COMMAND, catalog_text(text))


def _file(path: str) -> Script:
    """A script file read whole before the lake opens; ``-`` is standard input."""
    from slatelake.maintenance import show_input

    try:
        if path == "-":
            return Script(STDIN, catalog_text(sys.stdin.read()))
        return Script(path, catalog_text(Path(path).read_text(encoding="utf-8")))
    except OSError as exc:
        raise argparse.ArgumentTypeError(
            f"{show_input(path)}: cannot read it ({exc.strerror or exc})"
        ) from None
    except (UnicodeDecodeError, argparse.ArgumentTypeError):
        raise argparse.ArgumentTypeError(
            f"{show_input(path)}: not UTF-8 text without NUL; save it as UTF-8"
        ) from None


def _positive(text: str) -> int:
    from slatelake.maintenance import show_input

    if not (text.isascii() and text.isdigit()) or not 0 < int(text) < 2**31:
        raise argparse.ArgumentTypeError(f"{show_input(text)}: expected a number, 1 or more")
    return int(text)


def _cmd_sql(args: argparse.Namespace) -> int:
    from slatelake.admin import connect

    output = Output(args.mode, args.max_rows, args.max_width)
    with connect(args.lake, data_path=args.data_path, read_only=args.read_only) as session:
        if args.scripts:
            return run_scripts(session, args.scripts, output)
        return shell(session, output)


DESCRIPTION = (
    "Run SQL on the lake, attached as DuckLake under the alias 'lake' (the default "
    "catalog, so lake.t and t both work). -c and -f run in the order given, statement "
    "by statement (each autocommits; a ';' inside a string, quoted name or comment ends "
    "none), and stop at the first that fails: exit 1, one line on stderr naming it "
    "(number, where it starts, first line); what ran before stays committed. With "
    "neither, an interactive shell: statements end with ';', line editing and history "
    "(~/.slatelake_history) where Python has readline, dot-commands .tables .mode .help "
    ".quit; exit 1 if any statement failed. Results print as DuckDB's Python prints "
    "a relation (a box), or in the format asked for; INSERT, UPDATE and DELETE print "
    "DuckDB's row count (Count); SET, BEGIN, CREATE and DROP print nothing."
)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "sql",
        help="Run SQL on the lake: -c, -f scripts, or an interactive shell.",
        description=DESCRIPTION,
    )
    p.set_defaults(func=_cmd_sql)
    p.add_argument("lake", metavar="LAKE", type=lake_url, help="lake URL")
    p.add_argument(
        "-c",
        "--command",
        dest="scripts",
        action="append",
        type=_command,
        metavar="SQL",
        help="SQL to run: one statement or several separated by ';'; repeat for more",
    )
    p.add_argument(
        "-f",
        "--file",
        dest="scripts",
        action="append",
        type=_file,
        metavar="FILE",
        help="a UTF-8 SQL script to run ('-': standard input); repeat for more",
    )
    p.add_argument(
        "--data-path", metavar="PATH", help="data path; creates the lake when the root is empty"
    )
    p.add_argument(
        "--read-only", action="store_true", help="refuse writes; never writes a commit-log slot"
    )
    mode = p.add_mutually_exclusive_group()
    p.set_defaults(mode="box")
    mode.add_argument(
        "--csv",
        dest="mode",
        action="store_const",
        const="csv",
        help="print each result as CSV, as DuckDB's CSV writer writes it (a header line, "
        "then the rows; NULL empty)",
    )
    mode.add_argument(
        "--json",
        dest="mode",
        action="store_const",
        const="json",
        help="print each result as one line, a JSON array of row objects (values as "
        "DuckDB's to_json renders them)",
    )
    mode.add_argument(
        "--markdown",
        dest="mode",
        action="store_const",
        const="markdown",
        help="print each result as a Markdown pipe table (every row)",
    )
    p.add_argument(
        "--max-rows",
        type=_positive,
        metavar="N",
        help="default (box) output: show at most N rows, DuckDB eliding the middle ones "
        "(default: DuckDB's, 20 in DuckDB 1.5)",
    )
    p.add_argument(
        "--max-width",
        type=_positive,
        metavar="COLS",
        help="default (box) output: at most COLS characters wide, DuckDB eliding columns "
        "(default: DuckDB's: the terminal's width on a terminal)",
    )
