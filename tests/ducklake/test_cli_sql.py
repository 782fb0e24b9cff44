"""`slatelake sql`: scripts, the shell, and output as DuckDB itself renders it.

Each output format is compared with what DuckDB renders for the same query on
a plain DuckDB connection holding the same rows. The CLI runs in-process
(``main``), one end-to-end run goes through a real process and pipe.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb
import pytest

import slatelake
from slatelake.cli import EXIT_ERROR, EXIT_USAGE, build_parser, main
from slatelake.cli.sql_shell import CONTINUATION, HISTORY_FILE, PROMPT
from slatelake.cli.sql_split import blank, complete, split
from tests.conftest import subprocess_env

# Every kind of value the renderers treat differently: numbers (right-aligned),
# text with the CSV and Markdown delimiters, a newline, NULLs, nested values.
SETUP = """\
CREATE TABLE t (a INTEGER, b VARCHAR, d DECIMAL(9, 2), ts TIMESTAMP, l INTEGER[],
                s STRUCT(k VARCHAR), f DOUBLE, ok BOOLEAN);
INSERT INTO t VALUES
  (1, 'x;y, "quoted" | piped', 1.50, TIMESTAMP '2024-01-02 03:04:05', [1, 2],
   {'k': 'a,b'}, 0.1, true),
  (2, NULL, NULL, NULL, [], NULL, -2.5e10, false),
  (3, 'two
lines', 3, TIMESTAMP '1999-12-31 23:59:59', [3], {'k': ''}, 0, NULL);
"""
QUERY = "SELECT * FROM t ORDER BY a"

Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Run:
    """``slatelake sql ARGS`` in-process: (exit status, stdout, stderr)."""

    def call(*argv: str, stdin: str | None = None) -> tuple[int, str, str]:
        capsys.readouterr()
        if stdin is not None:
            monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        code = main(["sql", *argv])
        out, err = capsys.readouterr()
        return code, out, err

    return call


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A lake holding SETUP's table; the tests using it only read."""
    root = tmp_path_factory.mktemp("seeded")
    url = (root / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{root}/data/") as session:
        session.sql(SETUP)
    return url


@pytest.fixture
def plain() -> Iterator[duckdb.DuckDBPyConnection]:
    """Stock DuckDB with the same rows: the renderings to match."""
    con = duckdb.connect()
    con.execute(SETUP)
    yield con
    con.close()


@pytest.fixture
def new_lake(tmp_path: Path) -> list[str]:
    """LAKE and --data-path for a lake not created yet: the first run creates it."""
    return [(tmp_path / "lake").as_uri(), "--data-path", f"{tmp_path}/data/"]


def _box(relation: duckdb.DuckDBPyRelation, **limits: int) -> str:
    """What DuckDB's Python prints for ``relation`` (``print(rel)``, ``rel.show()``)."""
    out = io.StringIO()
    sys_stdout, sys.stdout = sys.stdout, out
    try:
        relation.show(**limits)
    finally:
        sys.stdout = sys_stdout
    return out.getvalue()


# -- output formats ------------------------------------------------------------------
def test_default_output_is_the_box_duckdb_prints(
    seeded: str, plain: duckdb.DuckDBPyConnection, run: Run
) -> None:
    code, out, err = run(seeded, "-c", QUERY)
    assert (code, err) == (0, "")
    assert out == _box(plain.sql(QUERY)) == str(plain.sql(QUERY)) + "\n"
    many = "SELECT t.*, r FROM t, range(10) AS g(r) ORDER BY a, r"
    code, out, _ = run(seeded, "--max-rows", "4", "--max-width", "60", "-c", many)
    assert out == _box(plain.sql(many), max_rows=4, max_width=60)
    assert "30 rows (4 shown)" in out and "9 columns" in out


def test_csv_output_is_duckdbs_csv_writer(
    seeded: str, plain: duckdb.DuckDBPyConnection, run: Run, tmp_path: Path
) -> None:
    code, out, err = run(seeded, "--csv", "-c", QUERY)
    assert (code, err) == (0, "")
    written = tmp_path / "plain.csv"
    plain.sql(QUERY).to_csv(str(written), header=True)
    assert out == written.read_text(encoding="utf-8")
    assert out.startswith("a,b,d,ts,l,s,f,ok\n") and '"x;y, ""quoted"" | piped"' in out


def test_json_output_is_one_array_per_statement_as_duckdb_writes_it(
    seeded: str, plain: duckdb.DuckDBPyConnection, run: Run, tmp_path: Path
) -> None:
    code, out, err = run(seeded, "--json", "-c", f"{QUERY}; SELECT 42 AS n")
    assert (code, err) == (0, "")
    first, second, *rest = out.splitlines()
    assert rest == []
    written = tmp_path / "plain.json"
    plain.execute(f"COPY ({QUERY}) TO '{written}' (FORMAT json, ARRAY true)")
    assert json.loads(first) == json.loads(written.read_text(encoding="utf-8"))
    assert json.loads(first)[0]["d"] == 1.5  # a DECIMAL is a number, as DuckDB writes it
    assert json.loads(second) == [{"n": 42}]


def test_markdown_output_is_a_pipe_table_of_duckdbs_text(
    seeded: str, plain: duckdb.DuckDBPyConnection, run: Run
) -> None:
    code, out, err = run(seeded, "--markdown", "-c", f"{QUERY}; SELECT 7 AS n, 'a|b' AS s")
    assert (code, err) == (0, "")
    table, small, after = out.split("\n\n")  # a blank line after each table
    assert small == "|  n  |  s   |\n|----:|------|\n|   7 | a\\|b |" and after == ""
    header, rule, *rows = table.splitlines()
    names = [c.strip() for c in header.strip("|").split(" | ")]
    assert names == plain.sql(QUERY).columns
    widths = [len(c) for c in header.strip("|").split("|")]
    numeric = {"a", "d", "f"}  # right-aligned; the rest left
    dashes = [
        "-" * (w - 1) + ":" if n in numeric else "-" * w for n, w in zip(names, widths, strict=True)
    ]
    assert rule == "|" + "|".join(dashes) + "|"
    text = plain.sql(f"SELECT COLUMNS(*)::VARCHAR FROM ({QUERY})").fetchall()
    cells = [
        [c.strip().replace("\\|", "|").replace("<br>", "\n") for c in r.strip("|").split(" | ")]
        for r in rows
    ]
    assert cells == [["NULL" if v is None else v for v in row] for row in text]


def test_a_write_prints_duckdbs_count_and_ddl_prints_nothing(
    new_lake: list[str], run: Run, plain: duckdb.DuckDBPyConnection
) -> None:
    code, out, err = run(
        *new_lake,
        "-c",
        "CREATE TABLE w (x INTEGER); SET threads = 2; INSERT INTO w VALUES (1), (2)",
        "-c",
        "DROP TABLE IF EXISTS nothing_here",
    )
    assert (code, err) == (0, "")
    assert out == _box(plain.sql('SELECT 2::BIGINT AS "Count"'))
    out = run(new_lake[0], "--json", "-c", "UPDATE w SET x = x + 1; DELETE FROM w WHERE x = 2")[1]
    assert out == '[{"Count":2}]\n[{"Count":1}]\n'


# -- splitting -----------------------------------------------------------------------
SCRIPTS = [
    "SELECT 1; SELECT 2",
    "SELECT 'a;b' AS \"c;d\"; SELECT 2;",
    "-- a comment; with a semicolon\nSELECT 1; /* block ; */ SELECT 2;\n-- trailing ;",
    "SELECT $$ dollar ; quoted $$;;  ;SELECT E'it\\'s; fine'",
    "SELECT 'é;ü' AS x; SELECT 2",
]


@pytest.mark.parametrize("script", SCRIPTS)
def test_split_finds_the_statements_duckdb_finds(script: str) -> None:
    ours = split(script)
    theirs = duckdb.extract_statements(script)
    assert len(ours) == len(theirs)
    for mine, stock in zip(ours, theirs, strict=True):
        assert [s.query for s in duckdb.extract_statements(mine.text)] == [mine.text]
        assert mine.text in stock.query


def test_split_keeps_an_unfinished_string_for_duckdb_to_refuse() -> None:
    (statement,) = split("SELECT 1;\n  'unfinished; still")[1:]
    assert statement.line == 2 and statement.text == "'unfinished; still"
    assert split("SELECT 1; -- only a comment\n") == split("SELECT 1")


@pytest.mark.parametrize(
    ("text", "ready"),
    [
        ("SELECT 1;", True),
        ("SELECT 1; -- done", True),
        ("SELECT 1", False),
        ("SELECT 'a;", False),
        ("SELECT 'a;\nb';", True),
        ('SELECT 1 AS "x;', False),
        ("SELECT 1 /* ; */", False),
        ("SELECT 1; /* open", False),
        ("SELECT 1; 'open", False),
        ("SELECT 1; SELECT", False),
    ],
)
def test_shell_input_is_complete_at_a_semicolon_outside_strings_and_comments(
    text: str, ready: bool
) -> None:
    assert complete(text) is ready


def test_blank_is_whitespace_and_finished_comments_only() -> None:
    assert blank("  -- c\n /* d */ ") and not blank("/* open") and not blank("x")


def test_semicolons_in_strings_names_and_comments_end_no_statement(seeded: str, run: Run) -> None:
    code, out, err = run(
        seeded,
        "--json",
        "-c",
        "SELECT 'a;b' AS \"c;d\"; -- one; two\nSELECT /* ; */ count(*) AS n FROM t;",
    )
    assert (code, err) == (0, "")
    assert [json.loads(line) for line in out.splitlines()] == [[{"c;d": "a;b"}], [{"n": 3}]]


# -- a script that fails -------------------------------------------------------------
def test_script_stops_at_the_failing_statement_and_keeps_what_ran_before(
    shared_lake_url: str, tmp_path: Path, run: Run
) -> None:
    data = f"{tmp_path}/data/" if shared_lake_url.startswith("file:") else None
    data = data or shared_lake_url.replace("/lakes/", "/data/") + "/"
    script = tmp_path / "load.sql"
    script.write_text(
        "CREATE TABLE t (a INTEGER, b VARCHAR);\n"
        "INSERT INTO t VALUES (1, 'one;'), (2, 'two');\n"
        "SELECT count(*) AS n FROM t;\n"
        "INSERT INTO t\n  SELECT * FROM no_such_table;\n"
        "INSERT INTO t VALUES (3, 'never');\n",
        encoding="utf-8",
    )
    code, out, err = run(shared_lake_url, "--data-path", data, "--json", "-f", str(script))
    assert code == EXIT_ERROR
    assert [json.loads(line) for line in out.splitlines()] == [[{"Count": 2}], [{"n": 2}]]
    (line,) = err.splitlines()
    assert line.startswith(
        f'slatelake sql: statement 4 at {script} line 4 ("INSERT INTO t ...") failed: '
        "Catalog Error: Table with name no_such_table does not exist"
    )
    assert "Traceback" not in err
    with slatelake.connect(shared_lake_url, read_only=True) as fresh:
        assert fresh.sql("SELECT a, b FROM t ORDER BY a").fetchall() == [(1, "one;"), (2, "two")]


def test_failures_name_the_statement_across_several_commands(seeded: str, run: Run) -> None:
    code, out, err = run(seeded, "--json", "-c", "SELECT 1 AS x", "-c", "SELECT 2 AS y;\nSELEC 3")
    assert code == EXIT_ERROR
    assert out.splitlines() == ['[{"x":1}]', '[{"y":2}]']
    assert err.startswith('slatelake sql: statement 3 at -c #2 line 2 ("SELEC 3") failed: ')
    assert "syntax error" in err and len(err.splitlines()) == 1


def test_a_write_on_a_read_only_session_fails_as_a_typed_error(seeded: str, run: Run) -> None:
    code, _, err = run(seeded, "--read-only", "-c", "INSERT INTO t (a) VALUES (9)")
    assert code == EXIT_ERROR and "failed: ReadOnlyError: " in err and "read-only" in err
    assert json.loads(run(seeded, "--json", "-c", "SELECT count(*) AS n FROM t")[1]) == [{"n": 3}]


def test_a_missing_lake_or_script_is_a_clear_error(tmp_path: Path, run: Run) -> None:
    code, _, err = run((tmp_path / "none").as_uri(), "-c", "SELECT 1")
    assert code == EXIT_ERROR and "no slatelake lake at" in err and "Traceback" not in err
    with pytest.raises(SystemExit) as usage:
        run((tmp_path / "none").as_uri(), "-f", str(tmp_path / "nope.sql"))
    assert usage.value.code == EXIT_USAGE


def test_script_from_standard_input_with_dash(seeded: str, run: Run) -> None:
    code, out, err = run(seeded, "--csv", "-f", "-", stdin="SELECT 'a;\nb' AS s;\nSELECT 2 AS n")
    assert (code, err) == (0, "")
    assert out == 's\n"a;\nb"\nn\n2\n'


# -- the shell -----------------------------------------------------------------------
def test_shell_reads_statements_over_lines_from_stdin(new_lake: list[str], run: Run) -> None:
    stdin = (
        "CREATE TABLE t (a INTEGER,\n  b VARCHAR);\n"
        "INSERT INTO t VALUES (1, 'semi;\ncolon');\n"
        ".mode json\n"
        "SELECT b\nFROM t; SELECT * FROM nope; SELECT 'skipped';\n"
        ".tables\n"
        "SELECT 'last' AS x -- no ';' before the end of input\n"
    )
    code, out, err = run(*new_lake, stdin=stdin)
    assert code == EXIT_ERROR  # one statement failed; the shell read on
    assert PROMPT not in out  # piped input: no prompts
    lines = out.splitlines()
    assert "│ Count │" in lines  # the INSERT, in the box mode in force then
    assert lines[-3:] == ['[{"b":"semi;\\ncolon"}]', '[{"name":"t"}]', '[{"x":"last"}]']
    assert "skipped" not in out
    assert err.startswith("Catalog Error: Table with name nope does not exist")


def test_shell_dot_commands(seeded: str, run: Run) -> None:
    stdin = ".help\n.mode\n.mode bogus\n.tables\n.quit\nSELECT 'after quit';\n"
    code, out, err = run(seeded, "--csv", stdin=stdin)
    assert code == EXIT_ERROR  # the malformed .mode
    assert err == (
        "Error: mode should be one of: box column csv duckbox json jsonlines line list markdown "
        "quote table tabs trash\n"
    )
    assert ".tables" in out and out.endswith("csv\nname\nt\n") and "after quit" not in out


class _Terminal(io.StringIO):
    """Standard input that says it is a terminal; what it reads goes into
    readline's history, as input() on a real terminal puts it there."""

    def readline(self, size: int | None = -1) -> str:
        line = super().readline(size)
        if line.strip() and sys.modules.get("readline"):
            sys.modules["readline"].add_history(line.rstrip("\n"))
        return line

    def isatty(self) -> bool:
        return True


def test_interactive_shell_prompts_and_keeps_history(
    seeded: str, run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    readline = pytest.importorskip("readline")
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / HISTORY_FILE).write_text("SELECT 'from before';\n")
    readline.clear_history()
    monkeypatch.setattr(sys, "stdin", _Terminal("SELECT 41\n + 1 AS n;\n"))
    try:
        code, out, _ = run(seeded, "--csv")
        assert readline.get_history_item(1) == "SELECT 'from before';"  # loaded at the start
    finally:
        readline.clear_history()
    assert code == 0 and out == f"{PROMPT}{CONTINUATION}n\n42\n{PROMPT}\n"
    saved = (tmp_path / HISTORY_FILE).read_text().splitlines()
    assert saved[-3:] == ["SELECT 'from before';", "SELECT 41", " + 1 AS n;"]


def test_shell_without_readline_or_a_writable_home_still_runs(
    seeded: str, run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = sys.modules.get("readline")
    monkeypatch.setitem(sys.modules, "readline", None)  # `import readline` raises ImportError
    monkeypatch.setattr(sys, "stdin", _Terminal("SELECT 1 AS one;\n"))
    assert run(seeded, "--csv")[:2] == (0, f"{PROMPT}one\n1\n{PROMPT}\n")
    if real is None:
        monkeypatch.delitem(sys.modules, "readline")
    else:
        monkeypatch.setitem(sys.modules, "readline", real)
    monkeypatch.setenv("HOME", str(tmp_path / "no" / "such" / "home"))
    monkeypatch.setattr(sys, "stdin", _Terminal("SELECT 2 AS two;\n"))
    assert run(seeded, "--csv")[:2] == (0, f"{PROMPT}two\n2\n{PROMPT}\n")
    assert not (tmp_path / "no").exists()


# -- the command ---------------------------------------------------------------------
def test_help_documents_every_flag() -> None:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    parser = sub.choices["sql"]
    for action in parser._actions:
        assert action.help, action.option_strings
    text = parser.format_help()
    for flag in ("-c SQL", "--command", "-f FILE", "--file", "--csv", "--json", "--markdown"):
        assert flag in text
    assert ".slatelake_history" in text and "exit 1" in text


def test_sql_end_to_end_through_a_process_and_a_pipe(new_lake: list[str]) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "slatelake.cli", "sql", *new_lake, "--json"],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=120,
        input="CREATE TABLE t AS SELECT 'a;b' AS s;\nSELECT *\nFROM t;\n",
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == '[{"s":"a;b"}]'
