"""Every DuckDB type DuckLake accepts reads back from a slatelake table exactly
as from stock DuckLake, value for value, through ``fetchall``, ``df`` and
``arrow``, from the writing session and from a fresh one.

Both sides run the same statements. Each of ``TABLES`` has a column per type
(its edge values and NULLs) and is created in schema ``inlined`` (the rows stay
in DuckLake's catalog, which slatelake keeps in SlateDB) and in ``parquet``
(inlining off: a data file). A type whose ``df`` or ``arrow`` raises on stock
has a table of its own, so the raise (compared like a value) hides no other
type; types share tables because a DuckLake scan costs ~10 ms. A type stock
refuses must be refused by slatelake too, in the same words. When slatelake's
one-transaction write fails, each table is written alone in each schema
(``write_each``), so every test reports its own outcome.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pandas.testing as pdt
import pyarrow as pa
import pytest

import slatelake
from slatelake.ducklake import extensions
from slatelake.ducklake.session import VERIFY_ENV
from slatelake.ducklake.sql import literal
from tests.conftest import subprocess_env

# DuckDB 1.5.5's df() calls DataFrame.drop(inplace=...), which pandas 3.1 deprecates
pytestmark = pytest.mark.filterwarnings("ignore:The inplace keyword in DataFrame.drop")
WRITE_ZONE = "America/New_York"  # TIMESTAMPTZ literals are read in a zone with DST
REOPEN_ZONE = "Asia/Kathmandu"  # and read back in another (+05:45) after a reopen
PATHS = ("inlined", "parquet")
SETUP = (
    f"SET TimeZone = '{WRITE_ZONE}'",
    "CREATE SCHEMA inlined",
    "CREATE SCHEMA parquet",
    "CALL lake.set_option('data_inlining_row_limit', 100, schema => 'inlined')",
    "CALL lake.set_option('data_inlining_row_limit', 0, schema => 'parquet')",
)


@dataclass(frozen=True)
class Table:
    """Columns named after their type, each with its SQL literals joined by
    ``; ``, one a row; shorter columns are NULL below, and a last row is all NULL."""

    name: str
    columns: dict[str, tuple[str, str]]  # column -> (SQL type, literals)
    parquet: bool = True  # False: stock DuckLake cannot write these values to Parquet

    @property
    def paths(self) -> tuple[str, ...]:
        return PATHS if self.parquet else ("inlined",)

    @property
    def rows(self) -> int:
        return 1 + max(len(lits.split("; ")) for _, lits in self.columns.values())

    def create(self, schema: str) -> str:
        cols = ", ".join(f"{c} {t}" for c, (t, _) in self.columns.items())
        return f"CREATE TABLE {schema}.{self.name} (id INTEGER, {cols})"

    def insert(self, schema: str) -> str:
        cells = {c: (t, lits.split("; ")) for c, (t, lits) in self.columns.items()}
        rows = [
            ", ".join(
                [str(i)]
                + [f"CAST({v[i]} AS {t})" if i < len(v) else "NULL" for t, v in cells.values()]
            )
            for i in range(self.rows)
        ]
        return f"INSERT INTO {schema}.{self.name} VALUES ({'), ('.join(rows)})"

    def select(self, schema: str) -> str:
        return f"SELECT id, {', '.join(self.columns)} FROM {schema}.{self.name} ORDER BY id"


# fmt: off
TABLES = (
    Table("integers", {
        "tinyint": ("TINYINT", "-128; 127; 0"),
        "smallint": ("SMALLINT", "-32768; 32767"),
        "integer": ("INTEGER", "-2147483648; 2147483647"),
        "bigint": ("BIGINT", "-9223372036854775808; 9223372036854775807"),
        "utinyint": ("UTINYINT", "0; 255"),
        "usmallint": ("USMALLINT", "0; 65535"),
        "uinteger": ("UINTEGER", "0; 4294967295"),
        "ubigint": ("UBIGINT", "0; 18446744073709551615"),
        "boolean": ("BOOLEAN", "true; false"),
    }),
    # 2**64 + 1 and -(2**100): past 64 bits (stock's Parquet holds HUGEINT as a DOUBLE)
    Table("hugeint", {"hugeint": ("HUGEINT", f"{2**64 + 1}; -{2**100}; -1")}),
    Table("hugeint_extremes", {"hugeint": ("HUGEINT", f"-{2**127}; {2**127 - 1}")}),
    Table("uhugeint", {"uhugeint": ("UHUGEINT", f"0; {2**64 + 1}")}),  # no NumPy type: df raises
    Table("uhugeint_max", {"uhugeint": ("UHUGEINT", f"{2**128 - 1}")}),
    Table("floats", {
        "float": ("FLOAT", "'nan'; 'inf'; '-inf'; '-0.0'; 3.4028235e38; 1e-45"),
        "double": ("DOUBLE", "'nan'; 'inf'; '-inf'; '-0.0'; 1.7976931348623157e308; 5e-324; 0.1"),
    }),
    Table("decimals", {
        "decimal_4_1": ("DECIMAL(4,1)", "-999.9; 999.9; 0.1"),
        "decimal_9_3": ("DECIMAL(9,3)", "-999999.999; 999999.999"),
        "decimal_18_6": ("DECIMAL(18,6)", "-999999999999.999999; 0.000001"),
        "decimal_38_10": ("DECIMAL(38,10)",
                          f"'-{'9' * 28}.{'9' * 10}'; '{'9' * 28}.{'9' * 10}'; '0.0000000001'"),
    }),
    Table("text", {
        "varchar": ("VARCHAR",
                    "''; 'héllo wörld 🦆 日本語'; 'a' || chr(0) || 'b'; repeat('x', 5000)"),
        "blob": ("BLOB", r"'\x00\x01\xFF\x00'; ''; '\x00'"),
        "uuid": ("UUID", "'00000000-0000-0000-0000-000000000000'; "
                 "'ffffffff-ffff-ffff-ffff-ffffffffffff'; '7fffffff-ffff-ffff-ffff-ffffffffffff'; "
                 "'80000000-0000-0000-0000-000000000000'"),
        "json": ("JSON", """'{"a": [1, 2, {"b": null}], "c": "ü"}'; '[1, 2.5, "x"]'; 'null'"""),
    }),
    # infinity has no pandas value (df raises); past year 9999 has no Python value either
    Table("date", {"date": ("DATE", "'1970-01-01'; '0001-01-01'; '9999-12-31'; 'infinity'; "
                            "'-infinity'")}),
    Table("date_far", {"date": ("DATE", "'5877642-06-25'; '4713-01-01 (BC)'")}),
    Table("times", {
        "time": ("TIME", "'00:00:00'; '23:59:59.999999'; '24:00:00'"),
        "timestamp": ("TIMESTAMP", "'1970-01-01'; '0001-01-01 00:00:00.000001'; "
                      "'294247-01-10 04:00:54.775806'; 'infinity'; '-infinity'"),
        "timestamp_s": ("TIMESTAMP_S", "'2021-01-01 12:00:01'; '1900-01-01'"),
        "timestamp_ms": ("TIMESTAMP_MS", "'2021-01-01 12:00:01.123'; '1969-12-31 23:59:59.999'"),
        "timestamp_ns": ("TIMESTAMP_NS", "'2021-01-01 12:00:00.123456789'; "
                         "'2262-04-11 23:47:16.854775806'; '1970-01-01'"),
        # in WRITE_ZONE: before and after the spring-forward gap, the repeated hour
        "timestamptz": ("TIMESTAMPTZ", "'2024-03-10 01:30:00'; '2024-03-10 03:30:00'; "
                        "'2024-11-03 01:30:00-04'; '1970-01-01 00:00:00+00'; 'infinity'"),
        "interval": ("INTERVAL", "INTERVAL '1 year 2 months 3 days 04:05:06.789012'; "
                     "INTERVAL '40 days'; INTERVAL '0 seconds'; "
                     "INTERVAL '1000 years 1 microsecond'"),
    }),
    Table("timetz", {"timetz": ("TIMETZ", "'12:34:56+05:30'; '00:00:00-15:59'; "
                                "'23:59:59.999999+00'")}),  # no pandas type: df raises
    Table("variant", {"variant": ("VARIANT", "42; 'text'; {'a': 1, 'b': [true, NULL]}; [1, 2]; "
                                  "3.25::DECIMAL(5,2)")}),  # no Arrow type: arrow raises
    Table("geometry", {"geometry": ("GEOMETRY", "'POINT(1 2)'; 'LINESTRING(0 0, 1 1)'; "
                                    "'POLYGON((0 0, 1 0, 1 1, 0 0))'")}),
    Table("nested", {
        "list": ("INTEGER[]", "[]; [1, NULL, 3]; [-2147483648, 2147483647]"),
        "nested_list": ("VARCHAR[][]", "[[], ['a', NULL], NULL]; []"),
        "list_of_struct": ("STRUCT(a INTEGER, b VARCHAR)[]",
                           "[{'a': 1, 'b': 'x'}, NULL, {'a': NULL, 'b': NULL}]; []"),
        "struct": ("STRUCT(a INTEGER, b VARCHAR, c DOUBLE[], d STRUCT(e DATE))",
                   "{'a': 1, 'b': 'x', 'c': [1.5, 'nan'::DOUBLE], 'd': {'e': DATE '2024-02-29'}}; "
                   "{'a': NULL, 'b': NULL, 'c': NULL, 'd': NULL}"),
        "map": ("MAP(VARCHAR, INTEGER)", "MAP {'k1': 1, 'k2': NULL, 'k3': -3, 'ü': 4}; MAP {}"),
        "nested_map": ("MAP(INTEGER, STRUCT(x VARCHAR[]))",
                       "MAP {1: {'x': ['a', 'b']}, 2: {'x': []}, 3: NULL}"),
    }),
    # Stock refuses these in Parquet ("Parquet files do not support negative intervals";
    # TIME_NS: an internal error that invalidates the database): inlined only here.
    Table("interval_negative", {"interval": ("INTERVAL", "INTERVAL '-1 month 40 days'; "
                                             "INTERVAL '-1 microsecond'")}, parquet=False),
    Table("time_ns", {"time_ns": ("TIME_NS", "'12:34:56.123456789'; '00:00:00'")}, parquet=False),
)
# Types DuckLake 1.5.5 refuses ("Failed to convert DuckDB type to DuckLake").
REFUSED = ("BIT", "BIGNUM", "INTEGER[3]", "UNION(a INTEGER, b VARCHAR)", "ENUM('a', 'b')",
           "STRUCT(a INTEGER[2])", "MAP(VARCHAR, ENUM('x'))")
# fmt: on
NOT_INLINED = {"geometry"}  # stock writes GEOMETRY to a Parquet file however few the rows
# Stock DuckLake 1.5.5 writes HUGEINT/UHUGEINT to Parquet as DOUBLE: the
# extremes round past the type's range and every read of the table fails.
STOCK_CANNOT_READ = {("hugeint_extremes", "parquet"), ("uhugeint_max", "parquet")}


# -- outcomes -------------------------------------------------------------------------------
DATA_FILE = re.compile(r'"[^"]*\.parquet"')  # each side names its own data file


@dataclass(frozen=True)
class Raised:
    """What a call raised: compared by type name and first line, like a value."""

    kind: str
    message: str

    @classmethod
    def of(cls, exc: BaseException) -> Raised:
        return cls.of_parts(type(exc).__name__, (str(exc).splitlines() or [""])[0])

    @classmethod
    def of_parts(cls, kind: str, first_line: str) -> Raised:
        return cls(kind, DATA_FILE.sub('"<data file>"', first_line))


def _outcome(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception as exc:
        return Raised.of(exc)


def _outcomes_differ(stock: Any, slate: Any) -> list[str]:
    """Where either side raised, both must have raised alike."""
    if isinstance(stock, Raised) and isinstance(slate, Raised) and stock == slate:
        return []
    shown = [
        v if isinstance(v, Raised | list) else f"{type(v).__name__}:\n{v}" for v in (stock, slate)
    ]
    return [f"stock: {shown[0]}\n  slatelake: {shown[1]}"]


def _arrow_table(result: Any) -> pa.Table:
    """DuckDB 1.5's ``.arrow()`` hands back a RecordBatchReader; read it whole."""
    got = result.arrow()
    return got.read_all() if isinstance(got, pa.RecordBatchReader) else got


def _rows_differ(
    stock: list[tuple[Any, ...]], slate: list[tuple[Any, ...]], names: list[str]
) -> list[str]:
    """Cells compared by ``repr``: exact (1, 1.0 and True differ), NaN equal to
    NaN, -0.0 apart from 0.0, a datetime's zone and a Decimal's scale kept."""
    if len(stock) != len(slate):
        return [f"{len(stock)} rows from stock, {len(slate)} from slatelake"]
    return [
        f"row {row[0]} column {names[j]}: stock {a!r}\n  slatelake {b!r}"
        for row, other in zip(stock, slate, strict=True)
        for j, (a, b) in enumerate(zip(row, other, strict=True))
        if repr(a) != repr(b)
    ]


def _frames_differ(stock: pd.DataFrame, slate: pd.DataFrame, _: list[str]) -> list[str]:
    """Column by column: pandas' own comparison, dtype included; object
    columns (lists, dicts, UUIDs) by repr, since pandas compares objects with
    ``==`` (NaN in a list is unequal to itself)."""
    if list(stock.columns) != list(slate.columns):
        return [f"columns: stock {list(stock.columns)}, slatelake {list(slate.columns)}"]
    out = []
    for c in stock.columns:
        a, b = stock[c], slate[c]
        if a.dtype == object and b.dtype == object:
            same = repr(a.tolist()) == repr(b.tolist())
        else:
            try:
                pdt.assert_series_equal(b, a, check_exact=True)
                same = True
            except AssertionError:
                same = False
        if not same:
            out.append(
                f"column {c}: stock {a.dtype} {_cells(a)}\n  slatelake {b.dtype} {_cells(b)}"
            )
    return out


def _cells(column: pd.Series) -> str:
    """A column's values; where Python cannot hold them (a timestamp past its
    range shown in a zone), the raw integers pandas keeps."""
    try:
        return repr(column.tolist())
    except Exception:
        return repr(list(getattr(column.array, "asi8", column.array)))


def _tables_differ(stock: pa.Table, slate: pa.Table, _: list[str]) -> list[str]:
    """Schemas exactly (metadata included), then each column: Arrow's
    ``equals`` finds NaN unequal to itself, so where it says no the column is
    compared as Arrow prints it (exact, NaN as ``nan``, no Python conversion)."""
    if not slate.schema.equals(stock.schema, check_metadata=True):
        return [f"schema: stock {stock.schema}\n  slatelake {slate.schema}"]
    stock, slate = stock.combine_chunks(), slate.combine_chunks()
    out = []
    for name, a, b in zip(stock.column_names, stock.columns, slate.columns, strict=True):
        if not a.equals(b) and _arrow_text(a) != _arrow_text(b):
            out.append(f"column {name}: stock {_arrow_text(a)}\n  slatelake {_arrow_text(b)}")
    return out


def _arrow_text(column: pa.ChunkedArray) -> str:
    return column.to_string(window=10**6, container_window=10**6, skip_new_lines=True)


COMPARE = {"fetchall": _rows_differ, "df": _frames_differ, "arrow": _tables_differ}


def _read(run: Callable[[str], Any], query: str) -> dict[str, Any]:
    """One query read three ways, each from a fresh result."""
    return {
        "fetchall": _outcome(lambda: run(query).fetchall()),
        "df": _outcome(lambda: run(query).df()),
        "arrow": _outcome(lambda: _arrow_table(run(query))),
    }


def _differ(how: str, stock: Any, slate: Any, names: list[str]) -> list[str]:
    if isinstance(stock, Raised) or isinstance(slate, Raised):
        return _outcomes_differ(stock, slate)
    return COMPARE[how](stock, slate, names)


# -- the two lakes --------------------------------------------------------------------------
Unit = tuple[Table, str]  # a table in one schema (path)
UNITS: tuple[Unit, ...] = tuple((t, p) for t in TABLES for p in t.paths)


def _statements(units: tuple[Unit, ...]) -> list[str]:
    return ["BEGIN", *(s for t, p in units for s in (t.create(p), t.insert(p))), "COMMIT"]


def _attach_stock(con: duckdb.DuckDBPyConnection, root: Path) -> None:
    catalog, data = literal(f"ducklake:{root}/stock.ducklake"), literal(f"{root}/stock/")
    con.execute(f"ATTACH {catalog} AS lake (DATA_PATH {data})")
    con.execute("USE lake")


@dataclass
class SlateLakes:
    """Where each (table, path) lives in slatelake, or why it could not be written."""

    root: Path
    sessions: dict[tuple[str, str], Any] = field(default_factory=dict)  # -> writing session
    urls: dict[tuple[str, str], str] = field(default_factory=dict)  # -> lake URL
    refused: dict[tuple[str, str], Raised] = field(default_factory=dict)  # -> write failure
    opened: list[Any] = field(default_factory=list)

    def open(self) -> tuple[Any, str]:
        label = len(self.opened)
        url = (self.root / f"lake-{label}").as_uri()
        session = slatelake.connect(url, data_path=f"{self.root / f'data-{label}'}/")
        self.opened.append(session)
        for statement in SETUP:
            session.sql(statement)
        return session, url

    def write(self, units: tuple[Unit, ...], into: tuple[Any, str] | None = None) -> None:
        """Every unit in one transaction (of a new lake unless given one)."""
        session, url = into or self.open()
        for statement in _statements(units):
            session.sql(statement)
        for table, path in units:
            self.sessions[table.name, path], self.urls[table.name, path] = session, url

    def write_each(self, units: tuple[Unit, ...]) -> None:
        """One transaction per unit. A failed write may leave its lake unable
        to open (a commit that landed but does not load): then the units
        written before it are written again in a new lake, and the rest go there."""
        session, url = self.open()
        written: list[Unit] = []
        for unit in units:
            try:
                self.write((unit,), into=(session, url))
            except Exception as exc:
                key = (unit[0].name, unit[1])
                self.refused[key] = Raised.of(exc)
                try:
                    slatelake.connect(url).close()
                except Exception as reopening:
                    why = f"{self.refused[key].message}; then its lake would not open: "
                    self.refused[key] = Raised(type(exc).__name__, why + repr(Raised.of(reopening)))
                    session, url = self.open()
                    if written:
                        self.write(tuple(written), into=(session, url))
                continue
            written.append(unit)

    def close(self) -> None:
        for session in self.opened:
            session.close()


@pytest.fixture(scope="module")
def lakes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, SlateLakes]]:
    """Both lakes with every table, slatelake's capture check on: every commit
    is checked to leave the committed catalog equal to DuckLake's, so a value
    the store would change is refused at commit, and the reopened sessions
    show what a user would then read."""
    root = tmp_path_factory.mktemp("types")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(VERIFY_ENV, "1")
        stock = extensions.connect()
        _attach_stock(stock, root)
        for statement in (*SETUP, *_statements(UNITS)):
            stock.execute(statement)
        slate = SlateLakes(root)
        try:
            slate.write(UNITS)
        except Exception:  # some type did not store: write each unit alone, to name it
            slate.close()
            slate = SlateLakes(root / "each")
            slate.root.mkdir()
            slate.write_each(UNITS)
        try:
            yield stock, slate
        finally:
            slate.close()
            stock.close()


@pytest.fixture(scope="module")
def reopened(lakes: tuple[Any, SlateLakes]) -> Iterator[dict[str, Any]]:
    """A fresh session per lake: the catalog comes from the store, not the writer's memory."""
    _, slate = lakes
    sessions: dict[str, Any] = {}
    try:
        for url in sorted(set(slate.urls.values())):
            try:
                sessions[url] = slatelake.connect(url)
            except Exception as exc:
                sessions[url] = Raised.of(exc)
        yield {unit: sessions[url] for unit, url in slate.urls.items()}
    finally:
        for session in sessions.values():
            if not isinstance(session, Raised):
                session.close()


# -- the tests ------------------------------------------------------------------------------
READS = [pytest.param(t, p, id=f"{t.name}-{p}") for t, p in UNITS]


@pytest.mark.parametrize("reader", ["writer", "reopened"])
@pytest.mark.parametrize(("table", "path"), READS)
def test_every_type_reads_back_exactly_as_from_stock_ducklake(
    lakes: tuple[Any, SlateLakes],
    reopened: dict[str, Any],
    table: Table,
    path: str,
    reader: str,
) -> None:
    stock, slate = lakes
    types = ", ".join(t for t, _ in table.columns.values())
    assert (table.name, path) not in slate.refused, (
        f"{types}: stock DuckLake wrote them, slatelake raised {slate.refused[table.name, path]}"
    )
    session = (slate.sessions if reader == "writer" else reopened)[table.name, path]
    assert not isinstance(session, Raised), f"reopening the lake with {types}: {session}"
    zone = WRITE_ZONE if reader == "writer" else REOPEN_ZONE
    stock.execute(f"SET TimeZone = '{zone}'")
    session.sql(f"SET TimeZone = '{zone}'")
    query, names = table.select(path), ["id", *table.columns]
    want, got = _read(stock.sql, query), _read(session.sql, query)
    if (table.name, path) in STOCK_CANNOT_READ:
        assert isinstance(want["fetchall"], Raised), "stock DuckLake reads it now: compare values"
    else:
        assert len(want["fetchall"]) == table.rows, want["fetchall"]
    problems = [f"{how}: {p}" for how in COMPARE for p in _differ(how, want[how], got[how], names)]
    assert not problems, f"{types} ({path}, {reader} session):\n" + "\n".join(problems)


@pytest.mark.parametrize("table", TABLES, ids=lambda t: t.name)
def test_rows_are_inlined_or_in_parquet_exactly_where_stock_ducklake_puts_them(
    lakes: tuple[Any, SlateLakes], table: Table
) -> None:
    stock, slate = lakes
    query = "SELECT count(*) FROM ducklake_list_files('lake', ?, schema => ?)"
    for path in table.paths:
        assert (table.name, path) not in slate.refused, slate.refused.get((table.name, path))
        want = stock.execute(query, [table.name, path]).fetchall()
        got = slate.sessions[table.name, path].sql(query, [table.name, path]).fetchall()
        expected = 0 if path == "inlined" and table.name not in NOT_INLINED else 1
        assert want == [(expected,)], f"stock DuckLake stores {table.name} {path} elsewhere"
        assert got == want, f"{table.name} ({path}): {got} data files, stock has {want}"


def test_types_stock_ducklake_refuses_are_refused_in_the_same_words_and_leave_nothing(
    lakes: tuple[Any, SlateLakes],
) -> None:
    stock, slate = lakes
    session = slate.opened[-1]
    for i, sql_type in enumerate(REFUSED):
        statement = f"CREATE TABLE refused_{i} (id INTEGER, v {sql_type})"
        want = _outcome(lambda s=statement: stock.execute(s))
        got = _outcome(lambda s=statement: session.sql(s))
        assert isinstance(want, Raised), f"stock DuckLake now accepts {sql_type}: cover it"
        assert "Failed to convert DuckDB type to DuckLake" in want.message
        assert got == want, sql_type
    with slatelake.connect(session.url) as again:
        names = again.sql("SELECT table_name FROM duckdb_tables() WHERE database_name = 'lake'")
        assert not [n for (n,) in names.fetchall() if n.startswith("refused_")]


# The slatelake side runs in a child: TIME_NS's internal error invalidates
# DuckDB's database, and closing a connection that then still holds a
# transaction aborts the process. Each table gets a lake and a session of its
# own; the sessions close at the end, after every outcome is printed.
CHILD = """
import json, sys
import slatelake
sessions = []
for url, data, *statements in json.loads(sys.argv[1]):
    sessions.append(session := slatelake.connect(url, data_path=data))
    out = []
    for statement in statements:
        try:
            session.sql(statement)
            out.append(None)
        except Exception as exc:
            out.append([type(exc).__name__, (str(exc).splitlines() or [""])[0]])
    print(json.dumps(out), flush=True)
for session in sessions:
    session.close()
"""


def test_values_stock_cannot_write_to_parquet_are_refused_alike_and_commit_nothing(
    tmp_path: Path,
) -> None:
    tables = [t for t in TABLES if not t.parquet]
    runs = [[*SETUP, t.create("parquet"), t.insert("parquet")] for t in tables]
    wanted = []
    for table, statements in zip(tables, runs, strict=True):
        stock = extensions.connect()  # one each: TIME_NS's error invalidates the database
        try:
            (tmp_path / table.name).mkdir()
            _attach_stock(stock, tmp_path / table.name)
            wanted.append([_outcome(lambda s=s, con=stock: con.execute(s)) for s in statements])
        finally:
            stock.close()
        assert isinstance(wanted[-1][-1], Raised), f"stock writes {table.name} to Parquet now"
    urls = [(tmp_path / f"lake-{t.name}").as_uri() for t in tables]
    args = [
        [u, f"{tmp_path}/data-{t.name}/", *r] for u, t, r in zip(urls, tables, runs, strict=True)
    ]
    child = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(args)],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = child.stdout.splitlines()
    assert len(lines) == len(tables), child.stderr[-3000:]
    problems = []
    for table, line, want in zip(tables, lines, wanted, strict=True):
        got = [None if o is None else Raised.of_parts(*o) for o in json.loads(line)]
        want = [w if isinstance(w, Raised) else None for w in want]
        if got != want:
            problems.append(f"{table.name}: slatelake {got[-1]}\n  stock {want[-1]}")
    assert not problems, "\n".join(problems)
    for table, url in zip(tables, urls, strict=True):
        with slatelake.connect(url) as again:
            count = again.sql(f"SELECT count(*) FROM parquet.{table.name}").fetchall()
            assert count == [(0,)], table.name
    if child.returncode != 0:
        # Known gap, kept visible: DuckDB 1.5.5 aborts the process when a
        # connection whose explicit transaction saw a fatal error is closed
        # (stock does too after BEGIN); every slatelake write runs in one.
        assert "database has been invalidated" in child.stderr, child.stderr[-1500:]
        pytest.xfail(f"closing after a fatal TIME_NS error aborted (exit {child.returncode})")
