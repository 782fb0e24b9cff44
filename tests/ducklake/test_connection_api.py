"""A session answers every public name of DuckDB's connection, as DuckDB does.

The names are pinned to the installed DuckDB's (an upgrade that adds one
fails here until the session answers it too). Each name is then called on a
stock DuckLake connection and on a session with the same arguments: the
results must be of the same kind (the connection itself where DuckDB hands
back the connection: a session hands back itself), or both fail with the
same DuckDB error class. Signatures are compared with the parameter names
DuckDB's docstrings give. What may write goes through the commit path: a
second session sees it.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa
import pytest

import slatelake
from slatelake.ducklake import extensions
from slatelake.ducklake.session import Session
from slatelake.ducklake.session_cursor import SessionCursor
from slatelake.maintenance.session import LakeSession

PINNED_VERSION = "1.5.5"
PINNED_NAMES = frozenset(
    [
        "append",
        "array_type",
        "arrow",
        "begin",
        "checkpoint",
        "close",
        "commit",
        "create_function",
        "cursor",
        "decimal_type",
        "description",
        "df",
        "disable_profiling",
        "dtype",
        "duplicate",
        "enable_profiling",
        "enum_type",
        "execute",
        "executemany",
        "extract_statements",
        "fetch_arrow_table",
        "fetch_df",
        "fetch_df_chunk",
        "fetch_record_batch",
        "fetchall",
        "fetchdf",
        "fetchmany",
        "fetchnumpy",
        "fetchone",
        "filesystem_is_registered",
        "from_arrow",
        "from_csv_auto",
        "from_df",
        "from_parquet",
        "from_query",
        "get_profiling_information",
        "get_table_names",
        "install_extension",
        "interrupt",
        "list_filesystems",
        "list_type",
        "load_extension",
        "map_type",
        "pl",
        "query",
        "query_progress",
        "read_csv",
        "read_json",
        "read_parquet",
        "register",
        "register_filesystem",
        "remove_function",
        "rollback",
        "row_type",
        "rowcount",
        "sql",
        "sqltype",
        "string_type",
        "struct_type",
        "table",
        "table_function",
        "tf",
        "to_arrow_reader",
        "to_arrow_table",
        "torch",
        "type",
        "union_type",
        "unregister",
        "unregister_filesystem",
        "values",
        "view",
    ]
)
INT = duckdb.sqltype("INTEGER")


def _public(cls: type) -> set[str]:
    return {n for n in dir(cls) if not n.startswith("_")}


def test_the_pinned_names_are_the_installed_duckdbs() -> None:
    installed = _public(duckdb.DuckDBPyConnection)
    assert duckdb.__version__ == PINNED_VERSION and installed == PINNED_NAMES, (
        f"DuckDB {duckdb.__version__} (pinned {PINNED_VERSION}): new names "
        f"{sorted(installed - PINNED_NAMES)}, gone {sorted(PINNED_NAMES - installed)}; "
        "make the session answer them, then re-pin"
    )


def _duckdb_params(doc: str) -> list[tuple[str, str]]:
    """(kind, name) of a pybind signature's parameters after ``self``: kind is
    ``pos`` (positional or keyword), ``kw`` (keyword only), ``*`` or ``**``."""
    head = doc.strip().splitlines()[0]
    inner, depth, start = head[head.index("(") + 1 :], 0, 0
    parts: list[str] = []
    for i, ch in enumerate(inner):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            if depth == 0:
                parts.append(inner[start:i])
                break
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(inner[start:i])
            start = i + 1
    out: list[tuple[str, str]] = []
    keyword_only = False
    for part in (p.strip() for p in parts[1:]):  # parts[0] is self
        if part == "*":
            keyword_only = True
        elif part.startswith("**"):
            out.append(("**", part[2:]))
        elif part.startswith("*"):
            out.append(("*", part[1:]))
            keyword_only = True
        else:
            out.append(("kw" if keyword_only else "pos", re.split(r"[:=]", part)[0].strip()))
    return out


def _accepts(ours: Callable[..., Any], theirs: list[tuple[str, str]]) -> list[str]:
    """What of DuckDB's signature ``ours`` does not accept as DuckDB does."""
    params = list(inspect.signature(ours).parameters.values())[1:]  # after self
    P = inspect.Parameter
    positional = [p for p in params if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]
    star = any(p.kind is P.VAR_POSITIONAL for p in params)
    kwargs = any(p.kind is P.VAR_KEYWORD for p in params)
    named = {p.name for p in params if p.kind in (P.POSITIONAL_OR_KEYWORD, P.KEYWORD_ONLY)}
    wrong: list[str] = []
    for at, (_, name) in enumerate(k for k in theirs if k[0] == "pos"):
        fits = at < len(positional) and positional[at].name == name
        if not fits and not (star and at >= len(positional)):
            wrong.append(f"positional {at} {name}")
        if name not in named and not kwargs:
            wrong.append(f"keyword {name}")
    for kind, name in theirs:
        if kind == "kw" and name not in named and not kwargs:
            wrong.append(f"keyword {name}")
        if kind == "*" and not star:
            wrong.append("*args")
        if kind == "**" and not kwargs:
            wrong.append("**kwargs")
    return wrong


@pytest.mark.parametrize(
    "cls", [Session, LakeSession, SessionCursor], ids=["Session", "LakeSession", "SessionCursor"]
)
def test_a_session_has_every_name_of_duckdbs_connection_with_its_signature(cls: type) -> None:
    missing = sorted(PINNED_NAMES - _public(cls))
    assert not missing, f"{cls.__name__} lacks {missing}"
    wrong: dict[str, Any] = {}
    for name in sorted(PINNED_NAMES):
        theirs = getattr(duckdb.DuckDBPyConnection, name)
        ours = inspect.getattr_static(cls, name)
        if isinstance(theirs, property):
            if not isinstance(ours, property) and type(ours).__name__ != "Through":
                wrong[name] = "not a property"
            continue
        method = getattr(cls, name)
        if not callable(method):
            wrong[name] = "not a method"
            continue
        differs = _accepts(method, _duckdb_params(theirs.__doc__ or ""))
        if differs:
            wrong[name] = differs
    assert not wrong, f"{cls.__name__} answers differently: {wrong}"


# Each name, called the same way on both: its result's kind (or error) must match.
CALLS: dict[str, Callable[[Any, Path], Any]] = {
    "append": lambda c, _: c.append("t", pd.DataFrame({"i": [41]})),
    "array_type": lambda c, _: c.array_type(INT, 3),
    "arrow": lambda c, _: c.execute("SELECT 1 AS x").arrow(),
    "begin": lambda c, _: (c.begin(), c.rollback())[0],
    "checkpoint": lambda c, _: c.checkpoint(),
    "close": lambda c, _: c.cursor().close(),
    "commit": lambda c, _: c.commit(),
    "create_function": lambda c, _: c.create_function("twice", lambda x: 2 * x, [INT], INT),
    "cursor": lambda c, _: c.cursor(),
    "decimal_type": lambda c, _: c.decimal_type(10, 2),
    "description": lambda c, _: c.execute("SELECT 1 AS x").description,
    "df": lambda c, _: c.execute("SELECT 1 AS x").df(),
    "disable_profiling": lambda c, _: c.disable_profiling(),
    "dtype": lambda c, _: c.dtype("BIGINT"),
    "duplicate": lambda c, _: c.duplicate(),
    "enable_profiling": lambda c, _: (c.enable_profiling(), c.disable_profiling())[0],
    "enum_type": lambda c, _: c.enum_type("mood", duckdb.sqltype("VARCHAR"), ["a", "b"]),
    "execute": lambda c, _: c.execute("SELECT count(*) FROM t"),
    "executemany": lambda c, _: c.executemany("INSERT INTO t VALUES (?)", [[1], [2]]),
    "extract_statements": lambda c, _: c.extract_statements("SELECT 1; SELECT 2"),
    "fetch_arrow_table": lambda c, _: c.execute("SELECT 1 AS x").fetch_arrow_table(),
    "fetch_df": lambda c, _: c.execute("SELECT 1 AS x").fetch_df(),
    "fetch_df_chunk": lambda c, _: c.execute("SELECT 1 AS x").fetch_df_chunk(),
    "fetch_record_batch": lambda c, _: c.execute("SELECT 1 AS x").fetch_record_batch(),
    "fetchall": lambda c, _: c.execute("SELECT i FROM t ORDER BY i").fetchall(),
    "fetchdf": lambda c, _: c.execute("SELECT 1 AS x").fetchdf(),
    "fetchmany": lambda c, _: c.execute("SELECT i FROM t ORDER BY i").fetchmany(2),
    "fetchnumpy": lambda c, _: c.execute("SELECT 1 AS x").fetchnumpy(),
    "fetchone": lambda c, _: c.execute("SELECT count(*) FROM t").fetchone(),
    "filesystem_is_registered": lambda c, _: c.filesystem_is_registered("nothing"),
    "from_arrow": lambda c, _: c.from_arrow(pa.table({"x": [1, 2]})),
    "from_csv_auto": lambda c, p: c.from_csv_auto(str(p / "in.csv")),
    "from_df": lambda c, _: c.from_df(pd.DataFrame({"x": [1]})),
    "from_parquet": lambda c, p: c.from_parquet(str(p / "in.parquet")),
    "from_query": lambda c, _: c.from_query("SELECT * FROM t"),
    "get_profiling_information": lambda c, _: c.get_profiling_information(),
    "get_table_names": lambda c, _: c.get_table_names("SELECT * FROM t JOIN u USING (i)"),
    "install_extension": lambda c, p: c.install_extension(str(p / "no.duckdb_extension")),
    "interrupt": lambda c, _: c.interrupt(),
    "list_filesystems": lambda c, _: c.list_filesystems(),
    "list_type": lambda c, _: c.list_type(INT),
    "load_extension": lambda c, p: c.load_extension(str(p / "no.duckdb_extension")),
    "map_type": lambda c, _: c.map_type(INT, INT),
    "pl": lambda c, _: c.execute("SELECT 1 AS x").pl(),
    "query": lambda c, _: c.query("SELECT * FROM t"),
    "query_progress": lambda c, _: c.query_progress(),
    "read_csv": lambda c, p: c.read_csv(str(p / "in.csv")),
    "read_json": lambda c, p: c.read_json(str(p / "in.json")),
    "read_parquet": lambda c, p: c.read_parquet(str(p / "in.parquet")),
    "register": lambda c, _: c.register("frame", pd.DataFrame({"x": [1]})),
    "register_filesystem": lambda c, _: c.register_filesystem(object()),
    "remove_function": lambda c, _: c.create_function(
        "gone", lambda x: x, [INT], INT
    ).remove_function("gone"),
    "rollback": lambda c, _: (c.begin(), c.rollback())[1],
    "row_type": lambda c, _: c.row_type({"a": INT}),
    "rowcount": lambda c, _: c.execute("SELECT 1").rowcount,
    "sql": lambda c, _: c.sql("SELECT * FROM t"),
    "sqltype": lambda c, _: c.sqltype("VARCHAR"),
    "string_type": lambda c, _: c.string_type(),
    "struct_type": lambda c, _: c.struct_type({"a": INT}),
    "table": lambda c, _: c.table("t"),
    "table_function": lambda c, _: c.table_function("range", [3]),
    "tf": lambda c, _: c.execute("SELECT 1 AS x").tf(),
    "to_arrow_reader": lambda c, _: c.execute("SELECT 1 AS x").to_arrow_reader(),
    "to_arrow_table": lambda c, _: c.execute("SELECT 1 AS x").to_arrow_table(),
    "torch": lambda c, _: c.execute("SELECT 1 AS x").torch(),
    "type": lambda c, _: c.type("DOUBLE"),
    "union_type": lambda c, _: c.union_type({"a": INT}),
    "unregister": lambda c, _: c.register("gone", pd.DataFrame({"x": [1]})).unregister("gone"),
    "unregister_filesystem": lambda c, _: c.unregister_filesystem("nothing"),
    "values": lambda c, _: c.values([1, "a"]),
    "view": lambda c, _: c.view("v"),
}


def test_every_name_is_called_below() -> None:
    assert set(CALLS) == PINNED_NAMES


def _kind(value: Any, connection: Any) -> str:
    """A result's kind, the connection (stock's, or the session) as one kind."""
    connections = duckdb.DuckDBPyConnection | Session | LakeSession | SessionCursor
    if value is connection or isinstance(value, connections):
        return "the connection" if value is connection else "a connection"
    return type(value).__qualname__


def _outcome(con: Any, call: Callable[[Any, Path], Any], inputs: Path) -> str:
    try:
        return _kind(call(con, inputs), con)
    except Exception as exc:  # noqa: BLE001 - the error's class is the outcome
        return f"raises {type(exc).__name__}"


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("inputs")
    con = duckdb.connect()
    con.execute(f"COPY (SELECT 1 AS x) TO '{path / 'in.parquet'}'")
    con.execute(f"COPY (SELECT 1 AS x) TO '{path / 'in.csv'}'")
    con.execute(f"COPY (SELECT 1 AS x) TO '{path / 'in.json'}'")
    con.close()
    return path


def _prepare(con: Any) -> None:
    con.execute("CREATE TABLE t (i INTEGER)")
    con.execute("INSERT INTO t VALUES (1), (2), (3)")
    con.execute("CREATE TABLE u (i INTEGER)")
    con.execute("CREATE VIEW v AS SELECT i + 1 AS j FROM t")


# DuckDB 1.5 deprecates these two but still has them: called all the same
@pytest.mark.filterwarnings("ignore:fetch_arrow_table:DeprecationWarning")
@pytest.mark.filterwarnings("ignore:fetch_record_batch:DeprecationWarning")
def test_every_name_answers_with_duckdbs_kind_of_result(tmp_path: Path, inputs: Path) -> None:
    stock = extensions.connect()
    stock.execute(f"ATTACH 'ducklake:{tmp_path / 'stock.db'}' AS lake (DATA_PATH '{tmp_path}/s/')")
    stock.execute("USE lake")
    _prepare(stock)
    url = (tmp_path / "lake").as_uri()
    session = slatelake.connect(url, data_path=f"{tmp_path / 'data'}/")
    _prepare(session)
    try:
        differ = {}
        for name, call in sorted(CALLS.items()):
            theirs, ours = _outcome(stock, call, inputs), _outcome(session, call, inputs)
            if theirs != ours:
                differ[name] = (theirs, ours)
        assert not differ, f"(stock, session) differ: {differ}"
    finally:
        session.close()
        stock.close()


def test_what_may_write_reaches_the_lake_through_its_commit_path(tmp_path: Path) -> None:
    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path / 'data'}/") as session:
        session.execute("CREATE TABLE t (i INTEGER, s VARCHAR)")
        session.append("t", pd.DataFrame({"i": [1, 2], "s": ["a", "b"]}))
        session.append("t", pd.DataFrame({"s": ["c"], "i": [3]}), by_name=True)
        session.executemany("INSERT INTO t VALUES (?, ?)", [[4, "d"], [5, "e"]])
        session.execute("INSERT INTO t VALUES (6, 'f')").execute("INSERT INTO t VALUES (7, 'g')")
        session.table("t").filter("i = 1").insert_into("t")  # DuckDB's own relation write
        assert session.table("t").count("*").fetchall() == [(8,)]  # committed before the read
        session.checkpoint()  # DuckLake's CHECKPOINT: the inlined rows flushed to files
        expired = session.table_function("ducklake_expire_snapshots", ["lake"])
        assert expired is not None
        with slatelake.connect(url, read_only=True) as other:
            assert other.sql("SELECT count(*), sum(i) FROM t").fetchall() == [(8, 29)]
            files = other.sql("SELECT count(*) FROM ducklake_list_files('lake', 't')")
            assert files.fetchone()[0] > 0  # the checkpoint's flush committed


def test_a_name_duckdb_quotes_whole_is_quoted_whole_by_append(tmp_path: Path) -> None:
    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path / 'data'}/") as session:
        session.sql("CREATE TABLE t (i INTEGER)")
        with pytest.raises(
            duckdb.CatalogException, match="Table with name t; DROP TABLE t; -- does not exist"
        ):
            session.append("t; DROP TABLE t; --", pd.DataFrame({"i": [1]}))
        assert session.table("t").count("*").fetchall() == [(0,)]


def test_a_cursor_is_a_second_connection_with_transactions_of_its_own(tmp_path: Path) -> None:
    url = (tmp_path / "lake").as_uri()
    session = slatelake.connect(url, data_path=f"{tmp_path / 'data'}/")
    session.sql("CREATE TABLE t (i INTEGER)")
    cursor = session.cursor()
    assert isinstance(cursor, SessionCursor) and cursor is not session
    cursor.begin()
    cursor.execute("INSERT INTO t VALUES (1)")
    assert session.table("t").count("*").fetchall() == [(0,)]  # not committed yet
    cursor.commit()
    assert session.table("t").count("*").fetchall() == [(1,)]
    session.close()
    with pytest.raises(duckdb.ConnectionException):
        cursor.con.execute("SELECT 1")  # closed with the session, as DuckDB's cursors
