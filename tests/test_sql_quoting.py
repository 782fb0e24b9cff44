"""No SQL is built from an unquoted value, and hostile values run nothing.

The static check reads, with ``ast``, every module of the package from the
DuckDB bridge up (the layers below never import duckdb) and the Lambda. An
f-string is SQL when its text holds an upper-case SQL keyword or an
interpolation sits right after a quote (``'{x}'``). Every interpolation
in it must be ``ident(...)``, ``literal(...)``, ``int(...)``, a constant, or a
conditional between such; anything else must be in ``ALLOWED`` below with the
reason it cannot carry outside text. ``%``-formatting, ``.format`` and ``+``
on SQL text are refused outright. An allow-list entry nothing matches fails
too, so the list cannot rot.

The attack tests hand quotes, ``'); COPY ... TO ...; --``, NUL bytes and
newlines to every door: a data path, a table name, a lake alias, the
credentials in the environment. Nothing may execute, nothing may be written
outside, and an input that is refused is named in the error.
"""

from __future__ import annotations

import ast
import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import boto3
import pytest

from slatelake.cli import main
from slatelake.ducklake import extensions
from slatelake.ducklake.session import connect
from slatelake.errors import MisconfigurationError, SlatelakeError

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parents[1]
SCANNED = (ROOT / "layers" / "slatelake" / "slatelake", ROOT / "functions")
# Below the bridge nothing can run SQL (test_layering pins that these layers never
# import duckdb), and their text ("DELETE <key>" labels an object-store call) is not SQL.
NO_SQL_LAYERS = ("slatelake/store/", "slatelake/log/", "slatelake/catalog/")
KEYWORDS = re.compile(
    r"\b(SELECT|INSERT|UPDATE|DELETE|CREATE|DROP|ALTER|ATTACH|DETACH|COPY|CALL|LOAD|"
    r"INSTALL|SET|RESET|USE|PRAGMA|DESCRIBE|FROM|WHERE|INTO|VALUES|SECRET|DATA_PATH|"
    r"TABLE|DATABASE|BEGIN|COMMIT|ROLLBACK|CAST|LIMIT|UNION|JOIN)\b"
)
QUOTING = {"ident", "literal", "value_sql"}
# (file, function) -> why that module's own helper quotes what it builds
HELPERS: dict[tuple[str, str], str] = {
    ("slatelake/ducklake/import_paths.py", "src"): "ident() of the alias and the table",
    ("slatelake/ducklake/import_paths.py", "i64"): "CAST(ident() AS BIGINT)",
    ("slatelake/ducklake/import_check.py", "src"): "import_paths.src",
    ("slatelake/ducklake/import_check.py", "i64"): "import_paths.i64",
}
# (file, interpolated expression) -> why it carries no outside text.
ALLOWED: dict[tuple[str, str], str] = {
    # ATTACH options: each built just above from literal() or a constant
    # an error message of `slatelake sql`, not SQL: the statement's number, source and line
    ("slatelake/cli/sql_run.py", "number"): "an int",
    ("slatelake/cli/sql_run.py", "where"): "a file name or -c",
    ("slatelake/cli/sql_run.py", "statement.line"): "an int",
    ("slatelake/cli/sql_run.py", "statement.first_line"): "printed to stderr, never run",
    # an error message in DuckLake's words (its keyword DATA_PATH), raised, never run
    ("slatelake/ducklake/attach_options.py", "given"): "printed in an error, never run",
    ("slatelake/ducklake/attach_options.py", "stored"): "printed in an error, never run",
    # the pricing model's count of ended inlined rows: each part int() and ident() above
    ("slatelake/maintenance/step_costs.py", "ended"): "parts of int() ids and ident() names",
    # a write's result (results.py): the caller's own statement, run as they sent
    # it; casts to DuckDB-reported plain type names (_scalar_type) over ident() names
    ("slatelake/ducklake/results.py", "query"): "the caller's own statement",
    ("slatelake/ducklake/results.py", "t"): "_scalar_type(): letters and spaces",
    ("slatelake/ducklake/results.py", "nulls"): "CAST(NULL AS _scalar_type())",
    ("slatelake/ducklake/results.py", "names"): "ident() per column",
    ("slatelake/ducklake/results.py", "values"): "constant placeholders and casts",
    ("slatelake/ducklake/session.py", "', '.join(options)"): "literal() pieces",
    # DuckDB's table_function with a DuckLake function: one "?" per parameter
    ("slatelake/ducklake/connection_api.py", "marks"): "question-mark placeholders only",
    # CREATE SECRET parameters: each built from literal() or a constant
    ("slatelake/ducklake/extensions.py", "', '.join(parts)"): "literal() pieces",
    # an error message in DuckLake's wording, not SQL: constant words and an int id
    ("slatelake/ducklake/refused_commit.py", "_verb(min(hit_ours))"): "a constant verb",
    ("slatelake/ducklake/refused_commit.py", "table_id"): "an int parsed from digits",
    ("slatelake/ducklake/refused_commit.py", "_WORDS[min(hit_theirs)]"): "a constant phrase",
    # select lists and WHERE clauses assembled from ident() and int()
    ("slatelake/ducklake/capture.py", "where"): "ident() and int() pieces",
    ("slatelake/ducklake/capture.py", "also"): "a second where: ident() and int() pieces",
    ("slatelake/ducklake/signatures.py", "parts"): "constant aggregates over ident()",
    ("slatelake/ducklake/change_scope.py", "listed"): "int() per table id",
    ("slatelake/ducklake/capture.py", "listed"): "int() per file id",
    ("slatelake/ducklake/change_scope.py", "new"): "a comparison with an int()",
    ("slatelake/maintenance/dry_run.py", "table_targets_sql()"): "a fixed CTE built with ident()",
    ("slatelake/maintenance/rewrite_guard.py", "pending"): "a SELECT over ident() per table",
    ("slatelake/maintenance/health.py", "table_targets_sql()"): "a fixed CTE built with ident()",
    ("slatelake/ducklake/catalog_db.py", "values"): "literal()/int() per value (_value_sql)",
    # DDL and loaders: names through ident(); types are the registry's constants,
    # or stored types re-rendered by DuckDB's type parser (type_sql)
    ("slatelake/ducklake/tables.py", "', '.join(cols)"): "ident() + registry type",
    ("slatelake/ducklake/tables.py", "cols"): "ident() + type_sql()",
    ("slatelake/ducklake/tables.py", "exprs"): "ident() per column",
    ("slatelake/ducklake/tables.py", "types"): "literal() pairs",
    ("slatelake/ducklake/write_log.py", "types"): "literal() per log type",
    ("slatelake/ducklake/tables.py", "marks"): "placeholders, CAST(? AS type_sql())",
    ("slatelake/ducklake/tables.py", "spelled"): "_spelled(): value_sql() per value, cast",
    ("slatelake/ducklake/tables.py", "parts[0]"): "a value_sql()/literal() spelling or ?",
    ("slatelake/ducklake/tables.py", "epoch"): "a value_sql() spelling or ?",
    ("slatelake/ducklake/tables.py", "text"): "a value_sql() spelling or ?",
    ("slatelake/ducklake/tables.py", "self.typ"): "type_sql(): DuckDB's rendering of a parsed type",
    ("slatelake/ducklake/tables.py", "expr"): "ident(), or its CAST to a type_sql() type",
    # relations and value expressions assembled from ident() and constants
    ("slatelake/ducklake/indexes.py", "_relation(session, target)"): "ident() parts",
    ("slatelake/ducklake/indexes.py", "rel"): "_relation(): ident() parts",
    ("slatelake/ducklake/indexes.py", "_value_sql(kind, column)"): "ident() + constant",
    ("slatelake/ducklake/indexes.py", "_value_sql(defn.kind, column)"): "ident() + constant",
    ("slatelake/ducklake/indexes.py", "_INSERTED"): "a module constant",
    # the catalog in DuckDB (catalog_db.py, catalog_apply.py, capture.py, opening.py): select lists,
    # match conditions and unnest lists built from ident() over registry or
    # DuckDB-listed column names, with types from the registry or DuckDB itself
    ("slatelake/ducklake/catalog_db.py", "select"): "select_list(): ident() per column",
    ("slatelake/ducklake/catalog_db.py", "source"): "ident() parts",
    ("slatelake/ducklake/catalog_db.py", "where"): "ident() + placeholders or int() ids",
    ("slatelake/ducklake/catalog_apply.py", "select_list(spec.columns)"): "ident() per column",
    ("slatelake/ducklake/catalog_apply.py", "select"): "select_list(): ident() per column",
    ("slatelake/ducklake/catalog_apply.py", "where"): "ident() + placeholders or int() ids",
    ("slatelake/ducklake/catalog_apply.py", "lists"): "ident() + registry/DuckDB types",
    ("slatelake/ducklake/catalog_apply.py", "match"): "ident() + int() pieces",
    ("slatelake/ducklake/catalog_apply.py", "exprs"): "ident() per column",
    ("slatelake/ducklake/catalog_apply.py", "table"): "ident() parts",
    ("slatelake/ducklake/catalog_apply.py", "values"): "literal()/int() per value (values_sql)",
    ("slatelake/ducklake/capture.py", "source"): "ident() of a database name",
    ("slatelake/ducklake/capture.py", "cols"): "select_list(): ident() per column",
    ("slatelake/ducklake/table_diff.py", "cols"): "select_list(): ident() per column",
    ("slatelake/ducklake/table_diff.py", "a"): "ident() parts",
    ("slatelake/ducklake/table_diff.py", "b"): "ident() parts",
    ("slatelake/ducklake/capture_check.py", "_row_hash(table)"): "ident() per registry column",
    ("slatelake/ducklake/opening.py", "cols"): "ident() per column",
    # import: columns cast to a registry type constant or a type_sql() rendering
    ("slatelake/ducklake/transfer.py", "select"): "ident() per column + a type",
    ("slatelake/ducklake/transfer.py", "typ"): "a registry type or type_sql()",
    # not ducklake/: the demo's table suffixes and row bounds are range() counters
    ("slatelake/demo.py", "t"): "a range() counter",
    ("slatelake/demo.py", "lo"): "an int from a range() counter",
    ("slatelake/demo.py", "lo + 100"): "an int from a range() counter",
    # not ducklake/: the maintenance step call, assembled from ident() and literal()
    ("slatelake/maintenance/steps.py", "select"): "ident() per column",
    ("slatelake/maintenance/steps.py", "', '.join(parts)"): "literal()/ident()/render() pieces",
    # the delete boundary's schedule rows: int() per id, literal() per path
    ("slatelake/maintenance/delete_boundary.py", "id_list"): "str(int) per file id",
    ("slatelake/maintenance/delete_boundary.py", "name_list"): "literal() per path",
    # an error message naming a metadata database, not SQL
    ("slatelake/ducklake/statement_flow.py", "named"): "a constant database name, in an error",
    # the image record: ident() parts; a constant column name or NULL
    ("slatelake/ducklake/image_writer.py", "table"): "ident() parts",
    ("slatelake/ducklake/image_writer.py", "bound"): "a constant column name or NULL",
    # an import's checks: a count bound, and an EXISTS built from src()/ident()
    ("slatelake/ducklake/import_check.py", "SHOWN + 1"): "an int constant",
    ("slatelake/ducklake/import_check.py", "exists"): "src()/ident() pieces",
}


def _is_sql(node: ast.JoinedStr) -> bool:
    parts = node.values
    text = "".join(p.value for p in parts if isinstance(p, ast.Constant))
    if KEYWORDS.search(text):
        return True
    return any(
        isinstance(p, ast.FormattedValue)
        and i > 0
        and isinstance(parts[i - 1], ast.Constant)
        and str(parts[i - 1].value).endswith(("'", '"'))
        for i, p in enumerate(parts)
    )


def _safe(expr: ast.expr, rel: str = "") -> bool:
    if isinstance(expr, ast.Constant):
        return True
    if isinstance(expr, ast.IfExp):
        return _safe(expr.body, rel) and _safe(expr.orelse, rel)
    if isinstance(expr, ast.Call):
        func = expr.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        return name in QUOTING or name == "int" or (rel, name) in HELPERS
    return False


def sql_findings(source: str, rel: str) -> tuple[list[str], set[tuple[str, str]]]:
    """(unquoted interpolations, allow-list entries used) in one module's source."""
    found, used = [], set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.JoinedStr) and _is_sql(node):
            for part in node.values:
                if not isinstance(part, ast.FormattedValue) or _safe(part.value, rel):
                    continue
                key = (rel, ast.unparse(part.value))
                if key in ALLOWED:
                    used.add(key)
                else:
                    found.append(f"{rel}:{node.lineno}: {{{key[1]}}} in {ast.unparse(node)[:90]}")
        elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mod, ast.Add)):
            for side in (node.left, node.right):
                if isinstance(side, ast.Constant) and KEYWORDS.search(str(side.value)):
                    found.append(f"{rel}:{node.lineno}: SQL text joined with % or +")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "format"
            and isinstance(node.func.value, ast.Constant)
            and KEYWORDS.search(str(node.func.value.value))
        ):
            found.append(f"{rel}:{node.lineno}: SQL text built with .format()")
    return found, used


def test_checker_flags_quoted_and_bare_interpolation_and_passes_quoted_helpers() -> None:
    bad = [
        "f\"SELECT * FROM t WHERE name = '{x}'\"",
        'f"ATTACH {path} AS lake"',
        "f\"DATA_PATH '{self.data_path}'\"",
        "f\"KEY_ID '{env['AWS_ACCESS_KEY_ID']}'\"",
        'f"SELECT * FROM {args.table} LIMIT 0"',
        '"SELECT * FROM %s" % table',
        '"SELECT * FROM {}".format(table)',
        '"DROP TABLE " + name',
    ]
    for src in bad:
        found, _ = sql_findings(src, "probe.py")
        assert found, src
    good = [
        'f"ATTACH {literal(path)} AS {ident(alias)}"',
        'f"SELECT * FROM {sql.ident(t)} WHERE id > {int(n)}"',
        "f\"CAST(x AS {'BIGINT' if exact else 'VARCHAR'})\"",
        'f"no table named {name!r} in this lake"',  # a message, not SQL
    ]
    for src in good:
        assert sql_findings(src, "probe.py") == ([], set()), src


def test_no_sql_in_the_package_is_built_from_an_unquoted_value() -> None:
    names = {p.name for base in SCANNED for p in base.rglob("*.py")}
    assert {"session.py", "extensions.py", "app.py"} <= names  # the scan sees real files
    found, used = [], set()
    for base in SCANNED:
        for path in sorted(base.rglob("*.py")):
            rel = str(path.relative_to(base.parent))
            if rel.startswith(NO_SQL_LAYERS):
                assert "import duckdb" not in path.read_text(), rel
                continue
            f, u = sql_findings(path.read_text(), rel)
            found += f
            used |= u
    assert not found, "SQL built from unquoted values:\n" + "\n".join(found)
    assert not set(ALLOWED) - used, f"stale allow-list entries: {sorted(set(ALLOWED) - used)}"


# -- attacks -------------------------------------------------------------------
def _copy_attack(target: Path | str) -> str:
    return f"x'); COPY (SELECT 42 AS pwned) TO '{target}'; --"


@dataclass(frozen=True)
class Ran:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Callable[..., Ran]:
    """``slatelake ARGS`` in this process: its exit status and output. ``cwd``
    is where a relative path an attack names would land."""

    def run(*args: str, cwd: Path | None = None) -> Ran:
        if cwd is not None:
            monkeypatch.chdir(cwd)
        capsys.readouterr()
        code = main(list(args))
        out, err = capsys.readouterr()
        return Ran(code, out, err)

    return run


def test_hostile_data_path_for_a_new_lake_is_stored_as_text_and_runs_nothing(
    tmp_path: Path,
) -> None:
    pwned = tmp_path / "pwned.csv"
    data_path = f"{tmp_path}/data/{_copy_attack(pwned)}/"
    url = (tmp_path / "lake").as_uri()
    with connect(url, data_path=data_path) as session:
        session.sql("CREATE TABLE t AS SELECT range AS id FROM range(3000)")
        (stored,) = session.sql(
            "SELECT value FROM __slatelake_meta.ducklake_metadata WHERE key = 'data_path'"
        ).fetchone()
        assert session.sql("SELECT count(*) FROM t").fetchone() == (3000,)
    assert stored == data_path  # the whole text is the path, quotes and all
    assert not pwned.exists()
    assert list(Path(data_path).rglob("*.parquet"))  # the data went under it, literally


@pytest.mark.parametrize("bad", ["'", "\n", "\x00"], ids=["quote", "newline", "nul"])
def test_hostile_data_path_for_an_existing_lake_is_refused_naming_it(
    tmp_path: Path, bad: str
) -> None:
    pwned = tmp_path / "pwned.csv"
    url = (tmp_path / "lake").as_uri()
    with connect(url, data_path=f"{tmp_path}/data/") as session:
        session.sql("CREATE TABLE t (id INTEGER)")
    hostile = f"{tmp_path}/data{bad}{_copy_attack(pwned)}"
    with pytest.raises(MisconfigurationError) as err:
        connect(url, data_path=hostile)
    named = repr(f"{tmp_path}/data{bad}")[1:-1]  # quoted, up to the bad character
    assert named in str(err.value)
    assert not pwned.exists()


def test_hostile_data_path_through_the_cli_runs_nothing(
    tmp_path: Path, cli: Callable[..., Ran]
) -> None:
    pwned = tmp_path / "pwned.csv"
    url = (tmp_path / "lake").as_uri()
    hostile = f"{tmp_path}/data/{_copy_attack(pwned)}"
    proc = cli("sql", url, "--data-path", hostile, "-c", "SELECT 1 AS one", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [{"one": 1}]
    assert not pwned.exists()


def test_hostile_data_path_on_s3_writes_nothing_elsewhere(s3_bucket: str) -> None:
    target = f"s3://{s3_bucket}/elsewhere/pwned.csv"
    run = uuid.uuid4().hex[:8]
    url = f"s3://{s3_bucket}/lakes/{run}"
    data_path = f"s3://{s3_bucket}/data/{run}/{_copy_attack(target)}/"
    try:
        with connect(url, data_path=data_path) as session:
            session.sql("CREATE TABLE t AS SELECT range AS id FROM range(3000)")
            assert session.sql("SELECT count(*) FROM t").fetchone() == (3000,)
    except SlatelakeError as exc:  # refusing the path is fine too, if it names it
        assert data_path in str(exc)
    keys = [
        o["Key"] for o in boto3.client("s3").list_objects_v2(Bucket=s3_bucket).get("Contents", [])
    ]
    assert not any(k.startswith("elsewhere/") for k in keys)


@pytest.fixture
def indexed(tmp_path: Path) -> tuple[str, str, Path]:
    """A lake with an indexed table whose name is an injection attempt."""
    pwned = tmp_path / "pwned_csv"
    name = "odd \"name\"; COPY (SELECT 1) TO 'pwned_csv'; --"
    url = (tmp_path / "lake").as_uri()
    with connect(url, data_path=f"{tmp_path}/data/") as session:
        session.sql(f'CREATE TABLE "{name.replace(chr(34), chr(34) * 2)}" (id INTEGER, v VARCHAR)')
        quoted = '"' + name.replace('"', '""') + '"'
        session.sql(f"INSERT INTO {quoted} VALUES (1, 'one'), (2, 'two')")
        session.create_index(name, "id")
    return url, name, pwned


def test_index_lookup_of_a_hostile_table_name_reads_that_table_only(
    indexed: tuple[str, str, Path], cli: Callable[..., Ran]
) -> None:
    url, name, pwned = indexed
    proc = cli("index", "lookup", url, name, "id", "2", "--json", cwd=pwned.parent)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [{"id": 2, "v": "two"}]
    assert not pwned.exists()


def test_index_lookup_of_an_unknown_hostile_name_is_refused_naming_it(
    indexed: tuple[str, str, Path], cli: Callable[..., Ran]
) -> None:
    url, _, pwned = indexed
    name = "t LIMIT 0; COPY (SELECT 1) TO 'pwned_csv'; --"
    proc = cli("index", "lookup", url, name, "id", "2", cwd=pwned.parent)
    assert proc.returncode == 1
    assert name in proc.stderr
    assert not pwned.exists()
    with (
        connect(url, read_only=True) as session,
        pytest.raises(MisconfigurationError, match="\\\\x00"),
    ):
        session.lookup("t\x00x", "id", 2)


@pytest.mark.parametrize(
    "alias",
    ["lake\"; COPY (SELECT 1) TO 'PWNED'; --", "lake\nx", "lake'x"],
    ids=["quote", "newline", "single-quote"],
)
def test_hostile_alias_is_a_name_not_a_statement(tmp_path: Path, alias: str) -> None:
    pwned = tmp_path / "pwned.csv"
    alias = alias.replace("PWNED", str(pwned))
    url = (tmp_path / "lake").as_uri()
    with connect(url, data_path=f"{tmp_path}/data/", alias=alias) as session:
        session.sql("CREATE TABLE t (id INTEGER)")
        session.sql("INSERT INTO t VALUES (7)")
        assert session.sql("SELECT current_database()").fetchone() == (alias,)
    with connect(url, read_only=True, alias=alias) as session:
        assert session.sql("SELECT id FROM t").fetchall() == [(7,)]
    assert not pwned.exists()


def test_alias_with_a_nul_byte_is_refused_naming_it(tmp_path: Path) -> None:
    url = (tmp_path / "lake").as_uri()
    with pytest.raises(MisconfigurationError, match=re.escape(repr("la\x00ke"))):
        connect(url, data_path=f"{tmp_path}/data/", alias="la\x00ke")


@pytest.mark.parametrize(
    "variable",
    ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION"],
)
@pytest.mark.parametrize("shape", ["copy", "newline"])
def test_hostile_credentials_in_the_environment_run_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str, shape: str
) -> None:
    monkeypatch.chdir(tmp_path)  # a relative COPY target lands here
    pwned = tmp_path / "pwned.csv"
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    value = _copy_attack("pwned.csv")
    value = value if shape == "copy" else "line\n" + value
    monkeypatch.setenv(variable, value)
    con = extensions.connect()
    try:
        (secret,) = con.execute("SELECT secret_string FROM duckdb_secrets()").fetchone()
    finally:
        con.close()
    assert "name=slatelake_s3" in secret
    assert not pwned.exists()


def test_hostile_endpoint_in_the_environment_runs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # a relative COPY target lands here
    pwned = tmp_path / "pwned.csv"
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://h{_copy_attack('pwned.csv')}")
    con = extensions.connect()
    con.close()
    assert not pwned.exists()
