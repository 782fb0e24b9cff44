"""The conformance runner itself: a wrong result, a wrong error or a missing
error must come out as a failure, on both backends, so the suite's figures
cannot be all passes by accident. Small test files are written to tmp_path."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import duckdb
import pytest

from tests.conformance import cli
from tests.conformance.interpreter import FAIL, PASS, SKIP, UNSUPPORTED, FileResult, run_file
from tests.conformance.script import ScriptError, parse
from tests.conformance.suite import ROOT_ENV, Suite
from tests.conformance.values import compare, render, result_hash

BACKENDS = ("stock", "slatelake")

ATTACH = (
    "statement ok\n"
    "ATTACH 'ducklake:__TEST_DIR__/lake.db' AS lake (DATA_PATH '__TEST_DIR__/lake_files')\n"
)

PASSING = ATTACH + textwrap.dedent(
    """
    statement ok
    CREATE TABLE lake.t(i INTEGER, s VARCHAR)

    statement ok
    INSERT INTO lake.t VALUES (1, 'one'), (2, ''), (3, NULL)

    query IT
    SELECT i, s FROM lake.t ORDER BY i
    ----
    1	one
    2	(empty)
    3	NULL

    query I rowsort
    SELECT i FROM lake.t WHERE i < 3
    ----
    1
    2

    statement error
    SELECT * FROM lake.missing
    ----
    does not exist
    """
)


def _write(tmp_path: Path, text: str, name: str = "case.test") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _run(tmp_path: Path, text: str, backend: str, txn: str = "api") -> FileResult:
    work = tmp_path / f"work-{backend}"
    work.mkdir(exist_ok=True)
    return run_file(_write(tmp_path, text), "case.test", backend, work, txn)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_file_whose_results_match_is_reported_passing(tmp_path: Path, backend: str) -> None:
    result = _run(tmp_path, PASSING, backend)
    assert (result.status, result.error) == (PASS, "")
    assert result.records == 6


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_wrong_result_fails_the_file_naming_its_line_and_values(
    tmp_path: Path, backend: str
) -> None:
    text = PASSING + "\nquery I\nSELECT count(*) FROM lake.t\n----\n4\n"
    result = _run(tmp_path, text, backend)
    assert result.status == FAIL
    assert result.line == text.splitlines().index("query I") + 1
    assert result.error == "wrong result: row 1 column 1: expected '4', got '3'"
    assert result.sql == "SELECT count(*) FROM lake.t"


def test_a_statement_expected_to_fail_that_succeeds_fails_the_file(tmp_path: Path) -> None:
    text = ATTACH + "\nstatement error\nCREATE TABLE lake.t(i INTEGER)\n----\nalready exists\n"
    result = _run(tmp_path, text, "slatelake")
    assert result.status == FAIL
    assert result.error == "statement succeeded, expected an error ('already exists')"


def test_an_error_with_other_wording_than_expected_fails_the_file(tmp_path: Path) -> None:
    text = ATTACH + "\nstatement error\nSELECT * FROM lake.missing\n----\nTransaction conflict\n"
    result = _run(tmp_path, text, "slatelake")
    assert result.status == FAIL
    assert result.error.startswith("wrong error: expected 'Transaction conflict', got Catalog")


def test_a_failing_statement_fails_the_file(tmp_path: Path) -> None:
    text = ATTACH + "\nstatement ok\nINSERT INTO lake.missing VALUES (1)\n"
    result = _run(tmp_path, text, "slatelake")
    assert result.status == FAIL
    assert result.error.startswith("statement failed: CatalogException: Catalog Error")


def test_named_connections_see_each_others_commits(tmp_path: Path) -> None:
    text = ATTACH + textwrap.dedent(
        """
        statement ok con1
        CREATE TABLE lake.t AS SELECT 41 AS i

        statement ok con2
        UPDATE lake.t SET i = i + 1

        query I con1
        SELECT i FROM lake.t
        ----
        42
        """
    )
    assert _run(tmp_path, text, "slatelake").status == PASS


@pytest.mark.parametrize("txn", ["api", "raw"])
def test_a_rolled_back_transaction_leaves_nothing_on_slatelake(tmp_path: Path, txn: str) -> None:
    text = ATTACH + textwrap.dedent(
        """
        statement ok
        CREATE TABLE lake.t(i INTEGER)

        statement ok con1
        BEGIN

        statement ok con1
        INSERT INTO lake.t VALUES (1)

        statement ok con1
        ROLLBACK

        query I
        SELECT count(*) FROM lake.t
        ----
        0
        """
    )
    result = _run(tmp_path, text, "slatelake", txn)
    assert (result.status, result.error) == (PASS, "")


@pytest.mark.parametrize("backend", BACKENDS)
def test_each_concurrent_iteration_runs_on_a_connection_of_its_own(
    tmp_path: Path, backend: str
) -> None:
    # a TEMP table belongs to one connection: a shared one would refuse the second CREATE
    text = ATTACH + textwrap.dedent(
        """
        concurrentloop i 0 3

        statement ok
        CREATE TEMP TABLE mine AS SELECT ${i} AS i

        query I
        SELECT i FROM mine
        ----
        ${i}

        endloop
        """
    )
    assert _run(tmp_path, text, backend).status == PASS


def test_one_failing_concurrent_iteration_fails_the_file(tmp_path: Path) -> None:
    text = ATTACH + "\nconcurrentloop i 0 3\n\nquery I\nSELECT ${i}\n----\n0\n\nendloop\n"
    result = _run(tmp_path, text, "slatelake")
    assert result.status == FAIL
    assert result.error in (
        f"wrong result: row 1 column 1: expected '0', got '{k}'" for k in (1, 2)
    )


def test_an_attach_option_a_session_cannot_take_is_unsupported(tmp_path: Path) -> None:
    text = (
        "statement ok\n"
        "ATTACH 'ducklake:__TEST_DIR__/l.db' AS lake "
        "(DATA_PATH '__TEST_DIR__/f', AUTOMATIC_MIGRATION true)\n"
    )
    assert _run(tmp_path, text, "stock").status == PASS
    result = _run(tmp_path, text, "slatelake")
    assert (result.status, result.error) == (UNSUPPORTED, "ATTACH option AUTOMATIC_MIGRATION")


def test_each_metadata_schema_of_one_store_is_a_lake_of_its_own(tmp_path: Path) -> None:
    text = "".join(
        f"statement ok\nATTACH 'ducklake:__TEST_DIR__/l.db' AS lake "
        f"(DATA_PATH '__TEST_DIR__/{schema}', METADATA_SCHEMA '{schema}')\n\n"
        f"statement ok\nCREATE TABLE lake.t AS SELECT {value} AS v\n\n"
        f"query I\nSELECT v FROM lake.t\n----\n{value}\n\n"
        "statement ok\nDETACH lake\n\n"
        for schema, value in (("s1", 1), ("s2", 2))
    )
    for backend in ("stock", "slatelake"):
        result = _run(tmp_path, text, backend)
        assert result.status == PASS, (backend, result.error, result.detail)


def test_a_missing_extension_or_directive_skips_the_file(tmp_path: Path) -> None:
    result = _run(tmp_path, "require tpch\n\n" + PASSING, "stock")
    assert (result.status, result.error) == (SKIP, "require tpch: not available here")
    result = _run(tmp_path, "load __TEST_DIR__/x.db\n\n" + PASSING, "stock")
    assert result.status == SKIP
    assert result.error == "needs load (line 1), which this runner does not implement"


def test_skipif_and_loops_are_read_as_duckdb_reads_them(tmp_path: Path) -> None:
    script = parse(
        _write(
            tmp_path,
            textwrap.dedent(
                """
                skipif duckdb
                statement ok
                SELECT 1

                onlyif duckdb
                statement ok
                SELECT 2

                loop i 0 3

                skipif i>1
                query I con1
                SELECT ${i}
                ----
                ${i}

                endloop
                """
            ),
        )
    )
    kept, loop = script.records
    assert kept.sql == "SELECT 2"
    assert loop.values == ("0", "1", "2") and not loop.concurrent
    (query,) = loop.body
    assert query.connection == "con1"
    assert [query.conditions[0].allows({"i": v}) for v in loop.values] == [True, True, False]
    with pytest.raises(ScriptError, match="unknown directive 'frobnicate'"):
        parse(_write(tmp_path, "frobnicate\n", "bad.test"))


def test_values_render_as_duckdbs_varchar_cast() -> None:
    con = duckdb.connect()
    cases = [
        "['a', 'b c', '', NULL, 'NULL', 'it''s', 'x:y', 'a\\b']",
        "{'k': 'v w', 'n': [1.5, NULL]}",
        "map(['k'], ['v=w'])",
        "1e20::DOUBLE",
        "0.1::FLOAT",
        "0::DECIMAL(18, 10)",
        "'2024-01-02 03:04:05.120'::TIMESTAMP",
        "from_hex('5c00ff27226120')",
        "[1, 2]::INTEGER[2]",
        "true",
    ]
    for expr in cases:
        cursor = con.execute(f"SELECT {expr}, ({expr})::VARCHAR")
        typ = cursor.description[0][1]
        value, text = cursor.fetchone()
        assert render(value, typ) == text, expr


def test_comparison_follows_duckdbs_rules() -> None:
    con = duckdb.connect()
    cursor = con.execute("SELECT 0.333333::DOUBLE AS d, 2 AS i, true AS b")
    types = [d[1] for d in cursor.description]
    rows = cursor.fetchall()
    assert compare(3, "nosort", ["0.3333\t2\t1"], types, rows, None, {}) is None  # within 1 %
    assert compare(3, "nosort", ["0.3333", "2", "true"], types, rows, None, {}) is None
    assert compare(3, "nosort", ["0.4\t2\ttrue"], types, rows, None, {}) is not None
    assert compare(3, "nosort", ["0.3333\t2.0\tfalse"], types, rows, None, {}) is not None
    ints = con.execute("SELECT * FROM range(3) t(i) ORDER BY i DESC")
    int_types, int_rows = [ints.description[0][1]], ints.fetchall()
    assert compare(1, "rowsort", ["0", "1", "2"], int_types, int_rows, None, {}) is None
    assert compare(1, "nosort", ["0", "1", "2"], int_types, int_rows, None, {}) is not None
    digest = result_hash(["2", "1", "0"])
    assert compare(1, "nosort", [digest], int_types, int_rows, None, {}) is None
    labels: dict[str, str] = {}
    assert compare(1, "nosort", [], int_types, int_rows, "lbl", labels) is None
    assert compare(1, "rowsort", [], int_types, int_rows, "lbl", labels) is not None


def _suite(tmp_path: Path) -> Path:
    root = tmp_path / "suite"
    sql = root / "ducklake" / "test" / "sql"
    (sql / "demo").mkdir(parents=True)
    (sql / "demo" / "good.test").write_text(PASSING)
    (sql / "demo" / "bad.test").write_text(PASSING + "\nquery I\nSELECT 1\n----\n2\n")
    (sql / "demo" / "slow.test").write_text("sleep 60 seconds\n\n" + PASSING)
    (root / "selected.txt").write_text("test/sql/demo/bad.test\ntest/sql/demo/good.test\n")
    return root


def test_the_command_reports_a_failing_file_in_json_and_exits_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(ROOT_ENV, str(_suite(tmp_path)))
    out = tmp_path / "report.json"
    code = cli.main(["--backend", "stock", "--files", "demo/bad,demo/good", "--json", str(out)])
    assert code == 1
    report = json.loads(out.read_text())
    assert report["totals"] == {"pass": 1, "fail": 1, "skip": 0, "unsupported": 0, "files": 2}
    assert [(r["file"], r["status"]) for r in report["results"]] == [
        ("test/sql/demo/bad.test", FAIL),
        ("test/sql/demo/good.test", PASS),
    ]
    assert report["backend"] == "stock" and report["ducklake_extension"]
    printed = capsys.readouterr().out
    assert "FAIL        test/sql/demo/bad.test" in printed
    assert "good.test" not in printed  # passing files are not listed without --verbose


def test_the_command_refuses_a_selection_that_matches_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(ROOT_ENV, str(_suite(tmp_path)))
    assert cli.main(["--files", "demo,nothing_here"]) == 2
    assert "--files 'nothing_here' matches no listed file" in capsys.readouterr().err
    assert Suite.locate().select(["test/sql/a/x.test"], ["a/x"]) == ["test/sql/a/x.test"]


def test_a_file_that_outlives_its_timeout_fails_and_the_next_file_still_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ROOT_ENV, str(_suite(tmp_path)))
    out = tmp_path / "report.json"
    argv = ["--backend", "stock", "--files", "demo/slow,demo/good", "--jobs", "1"]
    assert cli.main([*argv, "--timeout", "3", "--json", str(out)]) == 1
    results = {r["file"]: r for r in json.loads(out.read_text())["results"]}
    assert results["test/sql/demo/slow.test"]["error"] == "timed out after 3 s"
    assert results["test/sql/demo/good.test"]["status"] == PASS


def test_a_second_ducklake_is_attached_beside_the_first_and_detached(tmp_path: Path) -> None:
    text = (
        "statement ok\nATTACH 'ducklake:__TEST_DIR__/a.db' AS a (DATA_PATH '__TEST_DIR__/fa')\n\n"
        "statement ok\nATTACH 'ducklake:__TEST_DIR__/b.db' AS b (DATA_PATH '__TEST_DIR__/fb')\n\n"
        "statement ok\nCREATE TABLE a.t AS SELECT 1 AS i\n\n"
        "statement ok\nCREATE TABLE b.u AS SELECT i + 1 AS i FROM a.t\n\n"
        "query I\nSELECT i FROM b.u\n----\n2\n\n"
        "statement ok\nDETACH b\n\n"
        "statement error\nSELECT i FROM b.u\n----\nb\n"
    )
    for backend in ("stock", "slatelake"):
        result = _run(tmp_path, text, backend)
        assert result.status == PASS, (backend, result.error, result.detail)
