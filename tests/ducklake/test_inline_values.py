"""An inlined-data table's values come back from slatelake's store exactly.

DuckLake keeps small inserts in ``ducklake_inlined_data_<table>_<version>``
tables of the user's column types; slatelake captures their rows from DuckDB,
stores them (msgpack), and loads them back into DuckDB (a reopen, a session
applying the log's tail, a catalog image, an import). Each value travels in
the form ``tables.inline_form`` gives its type; these tests take a table of
edge values through the store codec and every loader and compare each cell
with DuckDB's own text and hash of the original. Rows stored in the earlier
form (typed Python values, TIMESTAMPTZ as epoch µs) must load unchanged: a
lake written before keeps opening.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb
import pytest

import slatelake
from slatelake.catalog import registry
from slatelake.catalog.changes import RowChanges, build_change_set
from slatelake.catalog.folder import Folder
from slatelake.catalog.lake import Lake
from slatelake.catalog.rows import Row, decode_entry, encode_inline_row, inline_row_key
from slatelake.catalog.state import EMPTY_HEAD, CatalogState
from slatelake.ducklake import catalog_apply, catalog_db, extensions, transfer
from slatelake.ducklake.catalog_file import load_sqlite
from slatelake.ducklake.image_writer import write_image
from slatelake.ducklake.sql import ident, literal
from slatelake.ducklake.tables import load_inline_table, select_list, table_columns
from slatelake.store.location import LakeLocation
from tests.ducklake.transfer_oracle import attach_stock

TABLE = "ducklake_inlined_data_7_1"
SYSTEM = [("row_id", "BIGINT"), ("begin_snapshot", "BIGINT"), ("end_snapshot", "BIGINT")]
WRITE_ZONE = "America/New_York"  # 1800 there is LMT, -04:56:02: an offset with seconds
LOAD_ZONE = "Asia/Kathmandu"

# column -> (type, SQL literals, one a row; missing cells are NULL)
# fmt: off
EDGES: dict[str, tuple[str, list[str]]] = {
    "hugeint": ("HUGEINT", [str(2**127 - 1), str(-(2**127)), str(2**64 + 1)]),
    "uhugeint": ("UHUGEINT", [str(2**128 - 1), "0"]),
    "ubigint": ("UBIGINT", [str(2**64 - 1)]),
    "timetz": ("TIMETZ", ["'12:34:56+05:30'", "'00:00:00-15:59'", "'23:59:59.999999+00'"]),
    "time_ns": ("TIME_NS", ["'12:34:56.123456789'", "'00:00:00'"]),
    "time": ("TIME", ["'24:00:00'", "'23:59:59.999999'"]),
    "date": ("DATE", ["'infinity'", "'-infinity'", "'5877642-06-25'", "'4713-01-01 (BC)'"]),
    "timestamp": ("TIMESTAMP", ["'infinity'", "'-infinity'", "'294247-01-10 04:00:54.775806'"]),
    "timestamp_ns": ("TIMESTAMP_NS", ["'2262-04-11 23:47:16.854775806'"]),
    "timestamp_s": ("TIMESTAMP_S", ["'1900-01-01 00:00:01'"]),
    "timestamp_ms": ("TIMESTAMP_MS", ["'1969-12-31 23:59:59.999'"]),
    "timestamptz": ("TIMESTAMPTZ", ["'infinity'", "'-infinity'", "'1800-01-01 00:00:00.000001+00'",
                                    "'2024-11-03 01:30:00-04'", "'4714-11-24 (BC) 00:00:00+00'"]),
    "interval": ("INTERVAL", ["INTERVAL '1 year 2 months 3 days 04:05:06.789012'",
                              "INTERVAL '-1 month 40 days'", "INTERVAL '-1 microsecond'"]),
    "float": ("FLOAT", ["'nan'", "'-0.0'", "1e-45", "'-inf'"]),
    "double": ("DOUBLE", ["'nan'", "'-0.0'", "5e-324", "0.1"]),
    "decimal": ("DECIMAL(38,10)", [f"'-{'9' * 28}.{'9' * 10}'", "'0.0000000001'"]),
    "varchar": ("VARCHAR", ["'a' || chr(0) || 'b'", "''", "'it''s, [x] {y} \"z\"'"]),
    "blob": ("BLOB", [r"'\x00\x01\xFF\x00'", "''"]),
    "uuid": ("UUID", ["'ffffffff-ffff-ffff-ffff-ffffffffffff'"]),
    "json": ("JSON", ["""'{"a": "x,y", "b": [1, null]}'""", "'null'"]),
    "json_list": ("JSON[]", ["""['{"a": "x,y"}'::JSON, 'null'::JSON, NULL]"""]),
    "variant": ("VARIANT", ["42", "'text'", "{'a': 1, 'b': [true, NULL]}"]),
    "doubles": ("DOUBLE[]", ["[1.5, 'nan'::DOUBLE, NULL, '-0.0'::DOUBLE]", "[]"]),
    "strings": ("VARCHAR[][]", ["""[['a,b', 'c''d', '"q"', 'NULL', '', ' x ', '[x]', '{a: 1}',
                                  'x\\y', 'k=v'], NULL, []]"""]),
    "struct": ("STRUCT(\"we,ird\" VARCHAR, \"b c\" DOUBLE, d TIMESTAMPTZ, e BLOB, f HUGEINT)",
               ["{'we,ird': 'it''s, [x]', 'b c': 'nan', 'd': 'infinity', "
                f"'e': '\\x00a'::BLOB, 'f': {2**127 - 1}}}",
                "{'we,ird': NULL, 'b c': NULL, 'd': NULL, 'e': NULL, 'f': NULL}"]),
    "map": ("MAP(VARCHAR, INTERVAL)", ["MAP {'a=b': INTERVAL '1 month', 'x, y': NULL, "
                                       "'': INTERVAL '-1 microsecond'}", "MAP {}"]),
    "nested_map": ("MAP(INTEGER, STRUCT(x VARCHAR[]))",
                   ["MAP {1: {'x': ['a', 'b']}, 2: {'x': []}, 3: NULL}"]),
    "zoned": ("TIMESTAMPTZ[]", ["['infinity'::TIMESTAMPTZ, '2024-11-03 01:30:00-04', NULL]"]),
    "times_ns": ("TIME_NS[]", ["['12:34:56.123456789'::TIME_NS]"]),
}
# Values the earlier form (typed Python values, TIMESTAMPTZ as epoch µs) held exactly.
EARLIER: dict[str, tuple[str, list[str]]] = {
    "timestamptz": ("TIMESTAMPTZ", ["'1800-01-01 00:00:00.000001+00'", "'2024-11-03 01:30:00-04'",
                                    "'294246-12-31 00:00:00+00'"]),
    "time_ns": ("TIME_NS", ["'12:34:56.123456'"]),  # TIME -> TIME_NS has no DuckDB cast
    "time": ("TIME", ["'23:59:59.999999'"]),
    "date": ("DATE", ["'2024-02-29'", "'0001-01-01'"]),
    "timestamp": ("TIMESTAMP", ["'0001-01-01 00:00:00.000001'"]),
    "timestamp_ns": ("TIMESTAMP_NS", ["'2021-01-01 12:00:00.123456'"]),
    "interval": ("INTERVAL", ["INTERVAL '3 days 04:05:06.789012'"]),
    "hugeint": ("HUGEINT", [str(-(2**63))]),
    "decimal": ("DECIMAL(38,10)", ["'0.0000000001'"]),
    "uuid": ("UUID", ["'ffffffff-ffff-ffff-ffff-ffffffffffff'"]),
    "blob": ("BLOB", [r"'\x00\x01'"]),
    "json": ("JSON", ["""'{"a": "x,y"}'"""]),
    "ints": ("INTEGER[]", ["[1, NULL, 3]"]),
    "struct": ("STRUCT(a INTEGER, b VARCHAR, c DATE)", ["{'a': 1, 'b': 'x', 'c': '2024-02-29'}"]),
    "map": ("MAP(VARCHAR, INTEGER)", ["MAP {'k1': 1, 'k2': NULL}"]),
    "zoned": ("TIMESTAMPTZ[]", ["['2024-11-03 01:30:00-04'::TIMESTAMPTZ]"]),
}
# fmt: on
NO_HASH: set[str] = set()  # VARIANT keeps its values, not always their widths (see tables.py)


@pytest.fixture
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    con = extensions.connect()
    con.execute(f"SET TimeZone = {literal(WRITE_ZONE)}")
    con.execute("ATTACH ':memory:' AS src")
    try:
        yield con
    finally:
        con.close()


def _columns(cases: dict[str, tuple[str, list[str]]]) -> list[tuple[str, str]]:
    return [*SYSTEM, *((name, typ) for name, (typ, _) in cases.items())]


def _make_source(con: duckdb.DuckDBPyConnection, cases: dict[str, tuple[str, list[str]]]) -> None:
    """The inlined table in ``src``: a row per literal position, then an all-NULL row."""
    cols = ", ".join(f"{ident(c)} {t}" for c, t in _columns(cases))
    con.execute(f"CREATE TABLE src.{TABLE} ({cols})")
    rows = 1 + max(len(lits) for _, lits in cases.values())
    for i in range(rows):
        cells = [
            f"CAST({lits[i]} AS {typ})" if i < len(lits) else "NULL" for typ, lits in cases.values()
        ]
        con.execute(f"INSERT INTO src.{TABLE} VALUES ({i}, 1, NULL, {', '.join(cells)})")


def _fetch(con: duckdb.DuckDBPyConnection, db: str, inline: bool) -> list[Row]:
    """The rows as slatelake captures them (``inline``: the store form; else
    the earlier form, which is the registry tables' select list still)."""
    columns = table_columns(con, db, TABLE)
    sql = f"SELECT {select_list(columns, inline=inline)} FROM {ident(db)}.{TABLE} ORDER BY 1"
    return [tuple(r) for r in con.execute(sql).fetchall()]


def _stored(rows: list[Row]) -> list[Row]:
    """Each row through the store's codec, as a reopen decodes it."""
    inline = registry.inline_table(TABLE)
    assert inline is not None
    out = []
    for row in rows:
        key = inline_row_key(inline, row)
        out.append(tuple(decode_entry(key, encode_inline_row(inline, row))))
    return out


def _load(con: duckdb.DuckDBPyConnection, columns: list[tuple[str, str]], rows: list[Row]) -> None:
    """What opening from the store does: the table from its stored DDL (the
    column types as DuckDB renders them), then its rows."""
    con.execute("ATTACH ':memory:' AS dst")
    load_inline_table(con, "dst", TABLE, columns, rows)


def _apply(con: duckdb.DuckDBPyConnection, columns: list[tuple[str, str]], rows: list[Row]) -> None:
    """What a session applying the log's tail does: a change set creating the
    table with its rows, applied to a base by key."""
    con.execute("ATTACH ':memory:' AS dst")
    catalog_db.create_tables(con, "dst", own=True)
    changes = RowChanges(created_inline={TABLE: columns})
    changes.insert(TABLE, *rows)
    cs = build_change_set(CatalogState(head=EMPTY_HEAD, last_seq=0), changes, False)
    catalog_apply.apply_change_sets(con, "dst", [cs], own=True)


LOADERS: dict[str, Callable[..., None]] = {"load": _load, "apply": _apply}


def _differences(
    con: duckdb.DuckDBPyConnection, cases: dict[str, tuple[str, list[str]]]
) -> list[str]:
    """Cells whose DuckDB text or hash differs between ``src`` and ``dst``."""
    out = []
    for name in cases:
        c = ident(name)
        sql = (
            f"SELECT s.row_id, CAST(s.{c} AS VARCHAR), CAST(d.{c} AS VARCHAR) "
            f"FROM src.{TABLE} s FULL JOIN dst.{TABLE} d USING (row_id) "
            f"WHERE CAST(s.{c} AS VARCHAR) IS DISTINCT FROM CAST(d.{c} AS VARCHAR) "
            f"OR hash(s.{c}) <> hash(d.{c}) "
            "ORDER BY 1"
        )
        out += [
            f"{name} row {r}: wrote {a!r}, loaded {b!r}" for r, a, b in con.execute(sql).fetchall()
        ]
    return out


@pytest.mark.parametrize("loader", sorted(LOADERS))
def test_inlined_values_of_every_type_come_back_exactly_from_the_store(
    con: duckdb.DuckDBPyConnection, loader: str
) -> None:
    _make_source(con, EDGES)
    captured = _fetch(con, "src", inline=True)
    con.execute(f"SET TimeZone = {literal(LOAD_ZONE)}")  # a reopen elsewhere reads the same
    LOADERS[loader](con, table_columns(con, "src", TABLE), _stored(captured))
    assert not _differences(con, EDGES), "\n".join(_differences(con, EDGES))
    con.execute(f"SET TimeZone = {literal(WRITE_ZONE)}")
    # capture diffs rows in Python: what loaded reads back as the very rows captured
    assert repr(_fetch(con, "dst", inline=True)) == repr(captured)


@pytest.mark.parametrize("loader", sorted(LOADERS))
def test_rows_stored_in_the_earlier_form_load_unchanged(
    con: duckdb.DuckDBPyConnection, loader: str
) -> None:
    _make_source(con, EARLIER)
    earlier = _stored(_fetch(con, "src", inline=False))
    assert isinstance(earlier[0][len(SYSTEM)], int)  # TIMESTAMPTZ as epoch µs, as stored
    con.execute(f"SET TimeZone = {literal(LOAD_ZONE)}")
    LOADERS[loader](con, table_columns(con, "src", TABLE), earlier)
    assert not _differences(con, EARLIER), "\n".join(_differences(con, EARLIER))


# -- a lake whose store holds rows in the earlier form ---------------------------------------
LAKE_COLUMNS = (
    "id INTEGER, tz TIMESTAMPTZ, iv INTERVAL, d DATE, tn TIME_NS, m MAP(VARCHAR, INTEGER)"
)
LAKE_ROWS = (
    "(1, '2024-11-03 01:30:00-04', INTERVAL '3 days 00:00:01', '2024-02-29', "
    "'12:34:56.123456', MAP {'k': 1}), (2, NULL, NULL, NULL, NULL, NULL)"
)
READ = (
    "SELECT id, CAST(tz AS VARCHAR), CAST(iv AS VARCHAR), CAST(d AS VARCHAR), "
    "CAST(tn AS VARCHAR), CAST(m AS VARCHAR) FROM t ORDER BY id"
)


def _rewrite_in_earlier_form(url: str) -> int:
    """Replace each stored inlined row of the lake by the row the earlier
    capture stored (typed Python values, TIMESTAMPTZ as epoch µs): one commit
    putting the same keys. Returns how many rows it rewrote."""
    con = extensions.connect()
    con.execute("ATTACH ':memory:' AS scratch")
    try:
        with Lake.open(url) as lake:
            state = lake.materialize()
            changes = RowChanges()
            for name, columns in state.inline_ddl().items():
                if registry.inline_table(name).row_kind != registry.INLINE_ROW_KIND:
                    continue
                load_inline_table(con, "scratch", name, columns, state.tables().get(name, []))
                sql = f"SELECT {select_list(columns)} FROM scratch.{ident(name)}"
                changes.insert(name, *(tuple(r) for r in con.execute(sql).fetchall()))
            rewritten = sum(len(r) for r in changes.inserted.values())
            lake.commit(state, changes, mints_snapshot=False)
            return rewritten
    finally:
        con.close()


def _write_image(url: str) -> None:
    """Fold the log into the store, then write a catalog image from it."""
    folder = Folder(LakeLocation.parse(url), margin_s=0)
    try:
        folder.fold_once(truncate=False)
    finally:
        folder.close()
    write_image(LakeLocation.parse(url))


def test_a_lake_whose_store_holds_earlier_form_rows_opens_and_reads_them_exactly(
    shared_lake_url: str, tmp_path: Path
) -> None:
    data = f"{tmp_path}/data/" if shared_lake_url.startswith("file:") else None
    data = data or shared_lake_url.replace("/lakes/", "/data/") + "/"
    with slatelake.connect(shared_lake_url, data_path=data) as writer:
        writer.sql("CALL lake.set_option('data_inlining_row_limit', 100)")
        writer.sql(f"CREATE TABLE t ({LAKE_COLUMNS})")
        writer.sql(f"INSERT INTO t VALUES {LAKE_ROWS}")
        writer.sql("SET TimeZone = 'UTC'")
        want = writer.sql(READ).fetchall()
    with slatelake.connect(shared_lake_url) as live:  # opened before: applies the tail
        live.sql("SET TimeZone = 'UTC'")
        seq = live.state.last_seq
        assert _rewrite_in_earlier_form(shared_lake_url) == 2
        assert live.sql(READ).fetchall() == want
        assert live.state.last_seq == seq + 1, "the session applied the rewrite from the log"
    with slatelake.connect(shared_lake_url) as fresh:  # from the store
        fresh.sql("SET TimeZone = 'UTC'")
        assert fresh.sql(READ).fetchall() == want
        files = fresh.sql("SELECT count(*) FROM ducklake_list_files('lake', 't')").fetchall()
        assert files == [(0,)], "the rows are inlined"
    _write_image(shared_lake_url)  # a catalog image written from the stored rows
    with slatelake.connect(shared_lake_url) as imaged:
        assert imaged.state.source.startswith("image at slot")
        imaged.sql("SET TimeZone = 'UTC'")
        assert imaged.sql(READ).fetchall() == want


# -- a stock catalog's inlined values, imported ------------------------------------------------
# column -> (type, row 1's literal, row 2's); TIME_NS only in a DuckDB file:
# catalog_file.py cannot yet type it from a SQLite catalog's ducklake_column
STOCK: dict[str, tuple[str, str, str]] = {
    "h": ("HUGEINT", str(2**100), "NULL"),
    "iv": ("INTERVAL", "INTERVAL '1 year 2 months -3 days'", "NULL"),
    "tz": ("TIMESTAMPTZ", "'infinity'", "'2024-11-03 01:30:00-04'"),
    "d": ("DATE", "'-infinity'", "'4713-01-01 (BC)'"),
    "ns": ("TIMESTAMP_NS", "'2262-04-11 23:47:16.854775806'", "NULL"),
    "tt": ("TIMETZ", "'12:34:56+05:30'", "NULL"),
    "xs": ("DOUBLE[]", "[1.5, 'nan'::DOUBLE, NULL]", "[]"),
    "tn": ("TIME_NS", "'12:34:56.123456789'", "NULL"),
}


@pytest.mark.parametrize("kind", ["duckdb", "sqlite"])
def test_a_stock_catalogs_inlined_values_import_exactly(tmp_path: Path, kind: str) -> None:
    columns = {c: v for c, v in STOCK.items() if kind == "duckdb" or c != "tn"}
    ddl = ", ".join(f"{c} {t}" for c, (t, _, _) in columns.items())
    rows = [", ".join(v[i] for v in columns.values()) for i in (1, 2)]
    read = f"SELECT {', '.join(f'CAST({c} AS VARCHAR)' for c in columns)} FROM t ORDER BY id"
    catalog = tmp_path / f"stock.{kind}"
    con = extensions.connect()
    try:
        if kind == "sqlite":
            load_sqlite(con)
        spec = f"sqlite:{catalog}" if kind == "sqlite" else str(catalog)
        attach_stock(con, spec, f"{tmp_path}/data/")
        con.execute(f"CREATE TABLE t (id INTEGER, {ddl})")
        con.execute(f"INSERT INTO t VALUES (1, {rows[0]}), (2, {rows[1]})")
        con.execute("SET TimeZone = 'UTC'")
        want = con.execute(read).fetchall()
        files = con.execute("SELECT count(*) FROM ducklake_list_files('lake', 't')").fetchall()
        assert files == [(0,)], "stock keeps these rows inlined"
    finally:
        con.close()
    url = (tmp_path / "lake").as_uri()
    transfer.import_catalog(catalog, url)
    with slatelake.connect(url) as session:
        session.sql("SET TimeZone = 'UTC'")
        assert session.sql(read).fetchall() == want
