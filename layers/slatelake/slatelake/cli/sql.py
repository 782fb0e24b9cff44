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
Python prints it (DuckDB's duckbox); ``--csv`` is DuckDB's CSV writer; ``--json`` one line
per statement, an array of row objects made by DuckDB's ``to_json``;
``--markdown`` a pipe table of DuckDB's text casts. A statement with no rows
of its own (SET, BEGIN; CREATE or DROP, whose result is DuckDB's empty
"Count" or "Success") prints nothing; INSERT, UPDATE and DELETE print DuckDB's
row count. The shell's ``.mode`` offers DuckDB's other shell modes too.
duckdb is imported only when the verb runs.

This module is the verb (its arguments, reading scripts, opening the lake);
the statements are split in ``sql_split``, run in ``sql_run``, printed in
``sql_output`` (``sql_render``), and read interactively in ``sql_shell``
(``sql_dot``, ``sql_history``, ``sql_complete``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from slatelake.cli.arguments import add_lake, catalog_text
from slatelake.cli.sql_output import DEFAULT_MODE, Output
from slatelake.cli.sql_run import COMMAND, STDIN, Script, run_scripts
from slatelake.cli.sql_shell import shell


def _command(text: str) -> Script:
    return Script(COMMAND, catalog_text(text))


def _file(path: str) -> Script:
    """A script file read whole before the lake opens; ``-`` is standard input."""
    from slatelake import show_input

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
    from slatelake import show_input

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
    "(~/.slatelake_history, a statement per entry) and Tab completion of keywords, "
    "tables and columns where Python has readline, a banner naming the lake and its head "
    "snapshot on a terminal, and DuckDB's dot commands .schema .tables .databases .mode "
    ".maxrows .maxwidth .headers .nullvalue .timer .output .once .read .help .quit .exit; "
    "errors in DuckDB's words, and the shell reads on; exit 1 if any statement failed. "
    "Results print as "
    "DuckDB's Python prints a relation (DuckDB's duckbox), or in the format asked for; "
    "INSERT, UPDATE and DELETE print "
    "DuckDB's row count (Count); SET, BEGIN, CREATE and DROP print nothing."
)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "sql",
        help="Run SQL on the lake: -c, -f scripts, or an interactive shell.",
        description=DESCRIPTION,
    )
    p.set_defaults(func=_cmd_sql)
    add_lake(p)
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
    p.set_defaults(mode=DEFAULT_MODE)
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
        help="default (duckbox) output: show at most N rows, DuckDB eliding the middle ones "
        "(default: DuckDB's, 20 in DuckDB 1.5)",
    )
    p.add_argument(
        "--max-width",
        type=_positive,
        metavar="COLS",
        help="default (duckbox) output: at most COLS characters wide, DuckDB eliding columns "
        "(default: DuckDB's: the terminal's width on a terminal)",
    )
