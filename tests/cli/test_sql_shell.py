"""`slatelake sql`'s shell as DuckDB's shell users expect it.

Piped input (in-process) for what each dot command prints, in the words and
layouts of DuckDB 1.5's shell; a real terminal (a pty around a real process)
for the banner, whole-statement history, completion and errors. Every lake
is a real one in tmp_path.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import select
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest

import slatelake
from slatelake.cli import EXIT_ERROR, main
from slatelake.cli.sql_complete import Completer, Names
from slatelake.cli.sql_dot import NAMES
from slatelake.cli.sql_history import HISTORY_FILE, entries
from slatelake.cli.sql_shell import CONTINUATION, PROMPT
from tests.conftest import subprocess_env

SETUP = """\
CREATE TABLE flights (id INTEGER, origin VARCHAR, departure_time TIMESTAMP);
INSERT INTO flights VALUES (1, 'OSL', TIMESTAMP '2024-01-02 03:04:05'), (22, 'BGO', NULL);
CREATE VIEW oslo AS SELECT * FROM flights WHERE origin = 'OSL';
"""
Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def lake(tmp_path: Path) -> str:
    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path}/data/") as session:
        session.sql(SETUP)
    return url


@pytest.fixture
def shell(lake: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Run:
    """The shell on ``lake`` reading ``stdin`` from a pipe: (exit status, stdout, stderr)."""

    def call(stdin: str, *argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        code = main(["sql", lake, *argv])
        out, err = capsys.readouterr()
        return code, out, err

    return call


# -- dot commands, piped ------------------------------------------------------------
def test_dot_schema_prints_the_create_statement(shell: Run) -> None:
    code, out, err = shell(".schema\n.schema fl%\n.schema main.osl*\n.schema nothing\n")
    assert (code, err) == (0, "")
    table = (
        "CREATE TABLE flights(id INTEGER DEFAULT(NULL), origin VARCHAR DEFAULT(NULL), "
        "departure_time TIMESTAMP DEFAULT(NULL));"
    )
    lines = out.splitlines()
    assert lines[0] == table and lines[1].startswith("CREATE VIEW oslo AS SELECT")
    assert lines[2:] == [table, lines[1]]  # LIKE on the name; GLOB on schema.name; no match


def test_dot_tables_lists_tables_and_views_matching_a_pattern(shell: Run) -> None:
    code, out, err = shell(".mode list\n.tables\n.tables fl%\n.tab osl\n")
    assert (code, err) == (0, "")
    assert out == "name\nflights\noslo\nname\nflights\nname\n"


def test_dot_databases_names_the_lake_and_hides_the_sessions_own_catalogs(
    shell: Run, lake: str
) -> None:
    code, out, err = shell(".databases\n")
    assert (code, err) == (0, "")
    assert out == f"lake: {lake}\nmemory: (memory)\n"


def test_dot_databases_names_an_attached_lake_by_its_url(
    shell: Run, lake: str, tmp_path: Path
) -> None:
    other = (tmp_path / "other").as_uri()
    with slatelake.connect(other, data_path=f"{tmp_path}/other_data/") as made:
        made.sql("CREATE TABLE u AS SELECT 1 AS i")
    code, out, err = shell(f"ATTACH 'slatelake:{other}' AS other (READ_ONLY);\n.databases\n")
    assert (code, err) == (0, "")
    assert out.splitlines()[-3:] == [
        f"lake: {lake}",
        "memory: (memory)",
        f"other: {other} (read-only)",
    ]


def test_dot_mode_box_draws_duckdbs_box(shell: Run) -> None:
    code, out, err = shell(
        ".mode\n.mode box\n.mode\nSELECT id, origin, 'a\nb' AS note FROM flights;\n"
    )
    assert (code, err) == (0, "")
    assert out == (
        "current output mode: duckbox\n"
        "current output mode: box\n"
        "┌────┬────────┬──────┐\n"
        "│ id │ origin │ note │\n"
        "├────┼────────┼──────┤\n"
        "│ 1  │ OSL    │ a\\nb │\n"
        "│ 22 │ BGO    │ a\\nb │\n"
        "└────┴────────┴──────┘\n"
    )


@pytest.mark.parametrize(
    ("mode", "printed"),
    [
        (
            "table",
            "+----+---------------------+\n"
            "| id |   departure_time    |\n"
            "+----+---------------------+\n"
            "| 1  | 2024-01-02 03:04:05 |\n"
            "| 22 | NULL                |\n"
            "+----+---------------------+\n",
        ),
        (
            "column",
            "id  departure_time     \n"
            "--  -------------------\n"
            "1   2024-01-02 03:04:05\n"
            "22  NULL               \n",
        ),
        (
            "line",
            "   id = 1\ndeparture_time = 2024-01-02 03:04:05\n\n"
            "   id = 22\ndeparture_time = NULL\n",
        ),
        ("list", "id|departure_time\n1|2024-01-02 03:04:05\n22|NULL\n"),
        ("tabs", "id\tdeparture_time\n1\t2024-01-02 03:04:05\n22\tNULL\n"),
        ("quote", "'id','departure_time'\n1,'2024-01-02 03:04:05'\n22,NULL\n"),
        (
            "jsonlines",
            '{"id":1,"departure_time":"2024-01-02 03:04:05"}\n{"id":22,"departure_time":null}\n',
        ),
        ("trash", ""),
    ],
)
def test_dot_mode_prints_duckdbs_other_modes(shell: Run, mode: str, printed: str) -> None:
    code, out, err = shell(f".mode {mode}\nSELECT id, departure_time FROM flights ORDER BY id;\n")
    assert (code, err) == (0, "")
    if mode == "line":  # names right-aligned to the longest
        printed = printed.replace("   id", "            id")
    assert out == printed


def test_dot_mode_refuses_an_unknown_mode_in_duckdbs_words(shell: Run) -> None:
    code, out, err = shell(".mode bogus\n.mode\n")
    assert code == EXIT_ERROR and out == "current output mode: duckbox\n"
    assert err == (
        "Error: mode should be one of: box column csv duckbox json jsonlines line list "
        "markdown quote table tabs trash\n"
    )


def test_dot_timer_prints_duckdbs_run_time_line(shell: Run) -> None:
    code, out, err = shell(".mode csv\n.timer on\nSELECT 1 AS one;\n.timer off\nSELECT 2 AS two;\n")
    assert (code, err) == (0, "")
    assert re.fullmatch(
        r"one\n1\nRun Time \(s\): real \d+\.\d{3} user \d+\.\d{6} sys \d+\.\d{6}\ntwo\n2\n", out
    ), out


def test_dot_maxrows_limits_the_duckbox_as_duckdb_does(shell: Run) -> None:
    query = "SELECT range AS n FROM range(30)"
    code, out, err = shell(f".maxrows\n.maxrows 4\n{query};\n.maxrows 0\n.maxrows\n")
    assert (code, err) == (0, "")
    plain = io.StringIO()
    with_stdout, sys.stdout = sys.stdout, plain
    try:
        duckdb.sql(query).show(max_rows=4)
    finally:
        sys.stdout = with_stdout
    assert out == (
        "current max rows: DuckDB default\n"
        + plain.getvalue()
        + "current max rows: DuckDB default\n"
    )
    assert "30 rows" in out and "(4 shown)" in out


def test_dot_output_sends_results_to_a_file_until_stdout(shell: Run, tmp_path: Path) -> None:
    target = tmp_path / "out.csv"
    code, out, err = shell(
        f".mode csv\n.output {target}\nSELECT 1 AS a;\n.schema oslo\n.output\nSELECT 2 AS b;\n"
    )
    assert (code, err) == (0, "")
    assert out == "b\n2\n"
    written = target.read_text()
    assert written.startswith("a\n1\nCREATE VIEW oslo AS SELECT")


def test_a_duckbox_written_to_a_file_elides_nothing(shell: Run, tmp_path: Path) -> None:
    target = tmp_path / "all.txt"
    code, out, err = shell(f".output {target}\nSELECT range AS n FROM range(100);\n")
    assert (code, out, err) == (0, "", "")
    written = target.read_text()
    assert "│    99 │" in written and "shown" not in written


def test_dot_once_sends_only_the_next_result_to_a_file(shell: Run, tmp_path: Path) -> None:
    target = tmp_path / "once.txt"
    code, out, err = shell(f".mode list\n.once '{target}'\nSELECT 1 AS a;\nSELECT 2 AS b;\n")
    assert (code, err) == (0, "")
    assert target.read_text() == "a\n1\n" and out == "b\n2\n"
    code, _, err = shell(f".output {tmp_path / 'no' / 'such' / 'dir'}\n")
    assert code == EXIT_ERROR and err == f'Error: cannot open "{tmp_path}/no/such/dir"\n'


def test_dot_output_feeds_a_command_through_a_pipe(shell: Run, tmp_path: Path) -> None:
    target = tmp_path / "piped.txt"
    code, out, err = shell(
        f".mode list\n.output '|tr a-z A-Z > {target}'\nSELECT 'x' AS a;\n.output\n"
    )
    assert (code, out, err) == (0, "", "")
    assert target.read_text() == "A\nX\n"
    code, _, err = shell(".once --bom out.txt\n")
    assert code == EXIT_ERROR and err.startswith('ERROR: unknown option: "--bom".')


def test_dot_headers_and_nullvalue_change_the_text_modes(shell: Run) -> None:
    code, out, err = shell(
        ".mode list\n.headers off\n.nullvalue -\n"
        "SELECT id, departure_time FROM flights ORDER BY id;\n"
        ".mode csv\nSELECT NULL AS n;\n.headers on\n.mode quote\nSELECT NULL AS n;\n"
    )
    assert (code, err) == (0, "")
    assert out == "1|2024-01-02 03:04:05\n22|-\n-\n'n'\nNULL\n"


def test_dot_read_runs_a_file_of_statements_and_dot_commands(shell: Run, tmp_path: Path) -> None:
    script = tmp_path / "script.sql"
    script.write_text(
        ".mode list\nSELECT 'read'\n  AS source;\nSELECT * FROM nope;\nSELECT 3 AS c;\n"
    )
    code, out, err = shell(f".read {script}\nSELECT 'after' AS x;\n.read {tmp_path}/none.sql\n")
    assert code == EXIT_ERROR  # the failed statement inside, and the missing file
    assert out == "source\nread\nc\n3\nx\nafter\n"
    assert err.splitlines() == [
        "Catalog Error: Table with name nope does not exist!",
        f'Error: cannot open "{tmp_path}/none.sql"',
    ]


def test_dot_help_lists_every_command(shell: Run) -> None:
    code, out, err = shell(".help\n.help mo\n")
    assert (code, err) == (0, "")
    names = [line.split()[0] for line in out.splitlines() if line.startswith(".")]
    assert names[:15] == [
        ".databases", ".exit", ".headers", ".help", ".maxrows", ".maxwidth", ".mode",
        ".nullvalue", ".once", ".output", ".quit", ".read", ".schema", ".tables", ".timer",
    ]  # fmt: skip
    assert ".timer on|off        Turn SQL timer on or off" in out
    assert names[15:] == [".mode"] and "  markdown\n" in out


def test_dot_quit_and_exit_end_the_shell(shell: Run) -> None:
    assert shell(".mode csv\nSELECT 1 AS a;\n.quit\nSELECT 2 AS b;\n")[:2] == (0, "a\n1\n")
    assert shell(".exit 3\nSELECT 2 AS b;\n")[:2] == (3, "")
    assert shell("SELECT * FROM nope;\n.exit\n")[0] == EXIT_ERROR


def test_an_unknown_or_misused_dot_command_is_refused_in_duckdbs_words(shell: Run) -> None:
    code, out, err = shell(".tabels\n.timer\n.mode csv\nSELECT 1 AS still;\n")
    assert code == EXIT_ERROR and out == "still\n1\n"
    assert err == (
        "Unknown Command Error: Unrecognized command 'tabels'\n\n"
        'Did you mean: ".tables"\n'
        "Run '.help' for more information.\n"
        "Invalid Command Error: Invalid usage of command '.timer'\n\n"
        "Usage: '.timer on|off'\n"
    )


# -- errors and output, piped -------------------------------------------------------
def test_a_missing_table_names_no_internal_catalog_and_the_shell_reads_on(shell: Run) -> None:
    code, out, err = shell(
        ".mode csv\nSELECT * FROM nope;\nSELECT * FROM lake.nope;\nSELECT * FROM flight;\n"
        "SELECT 1 AS after;\n"
    )
    assert code == EXIT_ERROR and out == "after\n1\n"
    first, second, *rest = err.split("Catalog Error: ")[1:]
    # DuckDB hints at pg_catalog.pg_enum here; a hint at the user's own names stays
    assert first == "Table with name nope does not exist!\n"
    assert second in ("Table with name nope does not exist!\n", _hint("nope", "oslo"))
    assert rest == [_hint("flight", "flights")]
    assert "pg_" not in err and "__slatelake" not in err


def _hint(missing: str, meant: str) -> str:
    return f'Table with name {missing} does not exist!\nDid you mean "{meant}"?\n'


def test_piped_input_gets_no_banner_and_no_python_reprs(shell: Run) -> None:
    code, out, err = shell(".mode line\nSELECT departure_time, [1, 2] AS l FROM flights LIMIT 1;\n")
    assert (code, err) == (0, "")
    assert out == "departure_time = 2024-01-02 03:04:05\n             l = [1, 2]\n"
    assert "datetime" not in out and "slatelake " not in out


def test_history_file_lines_join_into_whole_statements() -> None:
    text = "SELECT 1\n  + 1;\n.mode csv\n\nSELECT ';'\n; SELECT 2;\n-- half\nSELECT\n"
    assert entries(text) == [
        "SELECT 1\n  + 1;",
        ".mode csv",
        "SELECT ';'\n; SELECT 2;",
        "-- half\nSELECT",
    ]


# -- on a terminal --------------------------------------------------------------------
class Terminal:
    """`slatelake sql LAKE` on a pseudo-terminal, HOME in tmp_path."""

    def __init__(self, lake: str, home: Path, *argv: str) -> None:
        import fcntl
        import pty
        import struct
        import termios

        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
        env = dict(subprocess_env(), HOME=str(home), TERM="dumb", INPUTRC=os.devnull)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "slatelake.cli", "sql", lake, *argv],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            close_fds=True,
        )
        os.close(slave)
        self.master = master
        self.seen = ""
        self.wait_for(PROMPT)

    def read(self) -> None:
        ready, _, _ = select.select([self.master], [], [], 0.1)
        if ready:
            with contextlib.suppress(OSError):  # OSError: the process ended
                self.seen += os.read(self.master, 65536).decode(errors="replace")

    def wait_for(self, text: str, after: int = 0, timeout: float = 60) -> str:
        """Everything since ``after`` once ``text`` shows there."""
        end = time.monotonic() + timeout
        while text not in self.seen[after:]:
            assert time.monotonic() < end, f"no {text!r} in {self.seen[after:]!r}"
            self.read()
        return self.seen[after:].replace("\r\n", "\n")

    def type(self, keys: str, until: str = PROMPT) -> str:
        """Type ``keys``; what the terminal shows until the next prompt."""
        start = len(self.seen)
        os.write(self.master, keys.encode())
        return self.wait_for(until, start)

    def end(self) -> int:
        os.write(self.master, b"\x04")  # Ctrl-D
        deadline = time.monotonic() + 60
        while self.proc.poll() is None and time.monotonic() < deadline:
            self.read()
        os.close(self.master)
        return self.proc.wait(timeout=10)


pty_only = pytest.mark.skipif(sys.platform == "win32", reason="needs a pty")


@pty_only
def test_the_banner_names_the_lake_and_its_head_snapshot(lake: str, tmp_path: Path) -> None:
    term = Terminal(lake, tmp_path)
    banner = term.seen.replace("\r\n", "\n").split(PROMPT)[0]
    assert term.end() == 0
    first, second, third, fourth = banner.splitlines()
    assert first == f"slatelake {slatelake.__version__} (DuckDB {duckdb.__version__})"
    assert second == f"lake {lake}, attached as lake"
    # CREATE TABLE, INSERT and CREATE VIEW after the lake's first snapshot
    assert re.fullmatch(
        r"head: snapshot 3, committed \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ, commit-log slot \d+", third
    ), third
    assert fourth == 'Enter ".help" for usage hints.'


@pty_only
def test_a_multi_line_statement_is_one_history_entry(lake: str, tmp_path: Path) -> None:
    term = Terminal(lake, tmp_path, "--csv")
    term.type("SELECT 'multi'\n", until=CONTINUATION)
    assert "multi" in term.type("  AS word;\n")
    term.type(".mode list\n")
    assert term.end() == 0
    saved = (tmp_path / HISTORY_FILE).read_text()
    assert saved == "SELECT 'multi'\n  AS word;\n.mode list\n"
    assert entries(saved) == ["SELECT 'multi'\n  AS word;", ".mode list"]
    # the next shell recalls the statement whole: Ctrl-P twice (past .mode list)
    term = Terminal(lake, tmp_path, "--csv")
    shown = term.type("\x10\x10\n")
    assert "word\nmulti\n" in shown
    assert term.end() == 0
    again = entries((tmp_path / HISTORY_FILE).read_text())
    assert again == ["SELECT 'multi'\n  AS word;", ".mode list", "SELECT 'multi'\n  AS word;"]


@pty_only
def test_tab_completes_table_and_column_names_and_dot_commands(lake: str, tmp_path: Path) -> None:
    term = Terminal(lake, tmp_path, "--csv")
    shown = term.type("SELECT departure_t\t FROM fligh\t WHERE id = 1;\n")
    assert "SELECT departure_time" in shown and "FROM flights" in shown
    assert "departure_time\n2024-01-02 03:04:05\n" in shown
    shown = term.type(".sche\tflights\n")
    assert ".schema flights" in shown and "CREATE TABLE flights(id INTEGER" in shown
    assert term.end() == 0


@pty_only
def test_an_error_on_a_terminal_is_duckdbs_and_the_shell_reads_on(
    lake: str, tmp_path: Path
) -> None:
    term = Terminal(lake, tmp_path, "--csv")
    shown = term.type("SELECT * FROM nope;\n")
    assert "Catalog Error: Table with name nope does not exist!" in shown
    assert "Did you mean" not in shown and "Traceback" not in shown
    assert "still\nhere\n" in term.type("SELECT 'here' AS still;\n")
    assert term.end() == EXIT_ERROR


def test_completion_offers_keywords_names_and_no_internal_catalog(lake: str) -> None:
    with slatelake.connect(lake) as session:
        names = Names(session)
        complete = Completer(names, NAMES, lambda: "", statement_started=lambda: False)
        assert complete.candidates("sel", "sel") == ["select"]
        assert complete.candidates("SEL", "SEL") == ["SELECT"]
        assert "departure_time" in complete.candidates("SELECT dep", "dep")
        assert complete.candidates("FROM lake.fl", "lake.fl") == ["lake.flights"]
        assert complete.candidates("FROM main.os", "main.os") == ["main.oslo"]
        assert complete.candidates("SELECT flights.or", "flights.or") == ["flights.origin"]
        assert complete.candidates(".ti", ".ti") == [".timer"]
        assert complete.candidates("SELECT __", "__") == []
        assert not [c for c in complete.candidates("FROM ", "") if "slatelake" in c]
        session.sql("CREATE TABLE zebras (x INTEGER)")
        names.forget()  # the shell forgets after every statement
        assert complete.candidates("FROM zeb", "zeb") == ["zebras"]
