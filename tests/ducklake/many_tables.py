"""A random workload over a lake of many tables, run through a slatelake
session and stock DuckLake side by side, and the checks that find them equal.

``Model`` is what the workload knows of the lake (each table's columns and
next id, which names were dropped, which tables each snapshot held, which
snapshots were expired) so it only writes statements both sides accept.
``Pair`` runs each statement on both sides and compares: every live table by
one hashing query per side (a count and a sum of row hashes per table: a
single changed value shows), the snapshot lists, and chosen tables in full,
now and at earlier snapshots (both sides must also fail alike).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import duckdb

from slatelake.ducklake.session import Session
from slatelake.ducklake.sql import ident, literal

CATALOG = "lake"
BASE_COLUMNS = [("id", "INTEGER"), ("v", "VARCHAR")]


def _value(kind: str, i: int) -> str:
    """A literal of ``kind`` for row ``i`` (the VALUES of a small insert)."""
    return {
        "INTEGER": str(i * 7 % 1000),
        "BIGINT": str(i * 100_000_000_003),
        "DOUBLE": repr(i / 4),
        "VARCHAR": literal(f"s{i}"),
        "BOOLEAN": "true" if i % 2 else "false",
        "DATE": f"DATE '2024-01-01' + {i % 365}",
    }[kind]


def _expr(kind: str) -> str:
    """The SQL expression of ``kind`` for row ``i`` (a bulk insert's SELECT)."""
    return {
        "INTEGER": "(i * 7 % 1000)::INTEGER",
        "BIGINT": "i * 100000000003",
        "DOUBLE": "i / 4",
        "VARCHAR": "'s' || i",
        "BOOLEAN": "i % 2 = 1",
        "DATE": "DATE '2024-01-01' + (i % 365)::INTEGER",
    }[kind]


ADDED_TYPES = ["INTEGER", "DOUBLE", "VARCHAR", "BIGINT", "BOOLEAN", "DATE"]


@dataclass
class Table:
    name: str
    columns: list[tuple[str, str]] = field(default_factory=lambda: list(BASE_COLUMNS))
    next_id: int = 0

    def create_sql(self) -> str:
        cols = ", ".join(f"{ident(c)} {t}" for c, t in self.columns)
        return f"CREATE TABLE {ident(self.name)} ({cols})"

    def values_sql(self, rows: int) -> str:
        """A small INSERT (DuckLake inlines it) of ``rows`` new ids, every column given."""
        first, self.next_id = self.next_id, self.next_id + rows
        tuples = []
        for i in range(first, first + rows):
            vals = [str(i), literal(f"v{i}")] + [_value(t, i) for _, t in self.columns[2:]]
            tuples.append(f"({', '.join(vals)})")
        return f"INSERT INTO {ident(self.name)} {self._names()} VALUES {', '.join(tuples)}"

    def bulk_sql(self, rows: int) -> str:
        """A bulk INSERT (DuckLake writes a Parquet file) of ``rows`` new ids."""
        first, self.next_id = self.next_id, self.next_id + rows
        exprs = ["i::INTEGER", "'v' || i"] + [_expr(t) for _, t in self.columns[2:]]
        return (
            f"INSERT INTO {ident(self.name)} {self._names()} SELECT {', '.join(exprs)} "
            f"FROM range({first}, {first + rows}) r(i)"
        )

    def _names(self) -> str:
        return "(" + ", ".join(ident(c) for c, _ in self.columns) + ")"


@dataclass(frozen=True)
class Statement:
    kind: str
    sql: str
    touched: str | None  # the table it names, if one


@dataclass
class Model:
    """What the workload knows of the lake between statements."""

    live: dict[str, Table] = field(default_factory=dict)
    dropped: list[str] = field(default_factory=list)
    history: dict[int, frozenset[str]] = field(default_factory=dict)  # snapshot -> live names
    expired: set[int] = field(default_factory=set)
    hot: list[str] = field(default_factory=list)  # picked half the time: files pile up
    created: int = 0

    def record(self, snapshot: int) -> None:
        self.history[snapshot] = frozenset(self.live)

    def existed(self, name: str) -> list[int]:
        return sorted(s for s, names in self.history.items() if name in names)


# Each kind's share of the random statements; flush, merge and expiry run at fixed points.
KINDS = {
    "insert_inlined": 5,
    "insert_parquet": 3,
    "delete": 3,
    "update": 3,
    "add_column": 3,
    "drop_table": 2,
    "create_table": 3,
}


def deck(rng: random.Random, slots: int) -> list[str]:
    """``slots`` kinds in a random order, each kind at least once and in
    proportion to its share (a short run still covers every kind)."""
    total = sum(KINDS.values())
    kinds = [k for k, share in KINDS.items() for _ in range(max(1, share * slots // total))]
    while len(kinds) < slots:
        kinds.append(rng.choices(list(KINDS), weights=list(KINDS.values()))[0])
    rng.shuffle(kinds)
    return kinds[:slots]


def random_statement(rng: random.Random, model: Model, kind: str) -> Statement:
    """One statement of ``kind`` on a random table; updates ``model``."""
    if kind == "create_table":
        if model.dropped and rng.random() < 0.6:  # a replacement under the old name
            name = model.dropped.pop(rng.randrange(len(model.dropped)))
        else:
            name, model.created = f"n{model.created:03d}", model.created + 1
        table = Table(name)
        if rng.random() < 0.5:  # a different shape than the one it may replace
            table.columns.append(("w", rng.choice(ADDED_TYPES)))
        model.live[name] = table
        return Statement(kind, table.create_sql(), name)
    hot = [n for n in model.hot if n in model.live]
    pool = hot if hot and rng.random() < 0.5 else sorted(model.live)
    table = model.live[rng.choice(pool)]
    name = ident(table.name)
    if kind == "insert_inlined":
        return Statement(kind, table.values_sql(rng.randint(1, 2)), table.name)
    if kind == "insert_parquet":
        return Statement(kind, table.bulk_sql(rng.randint(50, 300)), table.name)
    if kind == "delete":
        if rng.random() < 0.5:
            pred = f"id % {rng.randint(3, 9)} = {rng.randint(0, 2)}"
        else:
            lo = rng.randint(0, max(table.next_id, 1))
            pred = f"id BETWEEN {lo} AND {lo + rng.randint(0, 40)}"
        return Statement(kind, f"DELETE FROM {name} WHERE {pred}", table.name)
    if kind == "update":
        sets = ["v = v || '*'"]
        if len(table.columns) > 2:
            col, typ = rng.choice(table.columns[2:])
            sets.append(f"{ident(col)} = {_value(typ, rng.randint(0, 999))}")
        pred = f"id % {rng.randint(2, 7)} = {rng.randint(0, 1)}"
        return Statement(kind, f"UPDATE {name} SET {', '.join(sets)} WHERE {pred}", table.name)
    if kind == "add_column":
        col, typ = f"c{len(table.columns)}", rng.choice(ADDED_TYPES)
        table.columns.append((col, typ))
        return Statement(kind, f"ALTER TABLE {name} ADD COLUMN {ident(col)} {typ}", table.name)
    # drop_table
    del model.live[table.name]
    model.dropped.append(table.name)
    return Statement(kind, f"DROP TABLE {name}", table.name)


def expire_statement(rng: random.Random, model: Model, count: int) -> Statement:
    """Expire ``count`` old snapshots by id (the same ids on both sides), never
    the newest few. ``SELECT count(*) FROM`` the function: a CALL returns a
    TIMESTAMPTZ, which a session cannot fetch without pytz (it then reports the
    statement failed and drops its effect)."""
    snaps = sorted(model.history)
    candidates = [s for s in snaps[:-5] if s not in model.expired]
    chosen = sorted(rng.sample(candidates, min(count, len(candidates))))
    model.expired.update(chosen)
    versions = ", ".join(str(s) for s in chosen)
    call = f"ducklake_expire_snapshots({literal(CATALOG)}, versions => [{versions}])"
    sql = f"SELECT count(*) FROM {call}"
    return Statement("expire", sql, None)


def outcome(run: Callable[[str], Any], sql: str) -> tuple[str, Any]:
    """('rows', rows) or ('error', its type and first line): both sides must agree."""
    try:
        return "rows", run(sql).fetchall()
    except duckdb.Error as exc:
        return "error", (type(exc).__name__, str(exc).splitlines()[0])


def hashes_sql(names: Iterable[str], version: int | None = None) -> str:
    """One query: per table its row count and the sum of its rows' hashes."""
    at = "" if version is None else f" AT (VERSION => {int(version)})"
    return " UNION ALL ".join(
        f"SELECT {literal(n)} AS t, count(*) AS n, sum(hash(x)) AS h "
        f"FROM {ident(CATALOG)}.{ident(n)} x{at}"
        for n in sorted(names)
    )


SNAPSHOTS_SQL = f"SELECT snapshot_id FROM {ident(CATALOG)}.snapshots() ORDER BY 1"
SNAPSHOT_DETAIL_SQL = (
    f"SELECT snapshot_id, schema_version, changes FROM {ident(CATALOG)}.snapshots() ORDER BY 1"
)


class Pair:
    """A slatelake session and a stock DuckLake connection over the same workload.

    Stock's hashes of the tables a statement did not name are kept from the
    last comparison (stock is the oracle: its statement left them alone), so
    after each statement only slatelake hashes the whole lake."""

    def __init__(self, session: Session, stock: duckdb.DuckDBPyConnection) -> None:
        self.session = session
        self.stock = stock
        self._stock_hashes: dict[str, tuple[Any, ...]] = {}

    def run(self, sql: str) -> None:
        self.stock.execute(sql).fetchall()
        self.session.sql(sql)

    def both(self, sql: str) -> tuple[tuple[str, Any], tuple[str, Any]]:
        return outcome(self.session.sql, sql), outcome(self.stock.execute, sql)

    def snapshots(self) -> list[int]:
        """The snapshot ids, checked equal on both sides."""
        ours, stock = (
            [r[0] for r in run(SNAPSHOTS_SQL).fetchall()]
            for run in (self.session.sql, self.stock.execute)
        )
        assert ours == stock, f"snapshots differ: slatelake {ours} stock {stock}"
        return ours

    def compare_tables(
        self, names: Iterable[str], version: int | None = None, changed: set[str] | None = None
    ) -> None:
        """Every named table (at ``version``) equal on both sides; names those that
        are not. ``changed``: at the head, stock rehashes only these (None: all)."""
        names = sorted(names)
        ours = _sorted(outcome(self.session.sql, hashes_sql(names, version)))
        if version is None:
            stale = [n for n in names if changed is None or n in changed]
            stale += [n for n in names if n not in self._stock_hashes and n not in stale]
            if stale:
                fresh = outcome(self.stock.execute, hashes_sql(stale))
                assert fresh[0] == "rows", f"stock failed to hash its own tables: {fresh[1]}"
                self._stock_hashes.update((r[0], r[1:]) for r in fresh[1])
            self._stock_hashes = {n: self._stock_hashes[n] for n in names}
            stock = ("rows", [(n, *self._stock_hashes[n]) for n in names])
        else:
            stock = _sorted(outcome(self.stock.execute, hashes_sql(names, version)))
        if ours == stock:
            return
        if ours[0] == "rows":
            theirs = {r[0]: r[1:] for r in stock[1]}
            diff = [(r[0], r[1:], theirs.get(r[0])) for r in ours[1] if r[1:] != theirs.get(r[0])]
            raise AssertionError(
                f"tables differ at snapshot {'head' if version is None else version}: "
                f"(table, slatelake (count, hash), stock) {diff}"
            )
        raise AssertionError(f"hashing at snapshot {version}: slatelake {ours[1]} stock {stock[1]}")

    def compare_rows(self, name: str, version: int | None = None) -> None:
        at = "" if version is None else f" AT (VERSION => {int(version)})"
        sql = f"SELECT * FROM {ident(CATALOG)}.{ident(name)}{at} ORDER BY ALL"
        ours, stock = self.both(sql)
        assert ours == stock, f"{sql}: slatelake {ours} stock {stock}"


def _sorted(result: tuple[str, Any]) -> tuple[str, Any]:
    """A UNION ALL's rows come in no set order."""
    return (result[0], sorted(result[1])) if result[0] == "rows" else result
