"""What a run was asked to do: some operations, on one table.

A manual run names operations (the seed's names: flush, expire, merge,
rewrite, cleanup, orphans) and may name one table; under a table only the
per-table steps (flush, merge, rewrite) can run, since DuckLake's other
functions act on the whole lake. Outside input is parsed here once, for the
CLI, the Lambda and Python alike, before any lake is touched.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from slatelake.errors import MaintenanceConfigError
from slatelake.store.location import show_input

TableName = tuple[str, str]  # (schema, table)
# The seed's operation names for the six DuckLake steps, in the pass's order.
OPERATIONS = {
    "expire": "expire_snapshots",
    "flush": "flush_inlined_data",
    "merge": "merge_adjacent_files",
    "rewrite": "rewrite_data_files",
    "cleanup": "cleanup_old_files",
    "orphans": "delete_orphaned_files",
}
# DuckLake's functions take a table for these; the others act on the whole lake.
TABLE_SAFE = ("flush", "merge", "rewrite")
DEFAULT_SCHEMA = "main"


@dataclass(frozen=True)
class RunScope:
    """What a manual run was asked to do: ``operations`` (seed names, in the
    pass's order; None: every configured step) and ``table`` (None: the lake).
    A scoped run does only what was asked: the sweeps and the store merge,
    lake-wide and not operations of the seed's, run only in an unscoped pass."""

    operations: tuple[str, ...] | None = None
    table: TableName | None = None

    @property
    def scoped(self) -> bool:
        return self.operations is not None or self.table is not None

    @property
    def table_name(self) -> str | None:
        return None if self.table is None else f"{self.table[0]}.{self.table[1]}"

    def left_out(self, step: str) -> str | None:
        """Why this scope leaves a DuckLake step out (None: it may run)."""
        name = next(op for op, s in OPERATIONS.items() if s == step)
        if self.operations is not None and name not in self.operations:
            return f"left out: this run's operations are {', '.join(self.operations)}"
        if self.table is not None and name not in TABLE_SAFE:
            return f"lake-wide; this run is scoped to table {self.table_name}"
        return None

    def left_out_of_sweeps(self) -> str | None:
        """Why the sweeps and the store merge do not run (None: they run)."""
        if self.operations is not None:
            return f"left out: this run's operations are {', '.join(self.operations)}"
        if self.table is not None:
            return f"lake-wide; this run is scoped to table {self.table_name}"
        return None


def run_scope(
    operations: Iterable[str] | str | None, table: str | None, schema: str | None = None
) -> RunScope:
    """A run's scope from outside input, checked before any lake is touched.
    ``operations``: names from OPERATIONS, a list or comma-separated text,
    each at most once; ``table``: ``[SCHEMA.]TABLE`` (a bare name means
    schema ``main``), or, with ``schema`` given, the table's name as spelled
    (a name holding a dot). Under a table scope a lake-wide operation named
    explicitly is refused: it cannot be scoped, and dropping it silently
    would do less than was asked."""
    ops = None if operations is None else _operations(operations)
    if schema is not None and table is None:
        raise MaintenanceConfigError(f"schema {show_input(schema)} given without a table")
    if schema is None:
        scoped = None if table is None else _table(table)
    else:
        scoped = (_name("schema", schema), _name("table", table))
    if scoped is not None and ops is not None:
        wide = [op for op in ops if op not in TABLE_SAFE]
        if wide:
            raise MaintenanceConfigError(
                f"operations {', '.join(wide)} act on the whole lake and cannot be scoped to "
                f"table {scoped[0]}.{scoped[1]}; a table-scoped run takes only "
                f"{', '.join(TABLE_SAFE)}: drop them, or drop the table"
            )
    return RunScope(ops, scoped)


def _operations(value: Iterable[str] | str) -> tuple[str, ...]:
    valid = ", ".join(OPERATIONS)
    items = value.split(",") if isinstance(value, str) else value
    if isinstance(items, bytes | dict) or not isinstance(items, Iterable):
        raise MaintenanceConfigError(
            f"operations {show_input(value)}: expected names from {valid}, as a list or "
            "comma-separated text"
        )
    seen: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise MaintenanceConfigError(
                f"operation {show_input(item)}: expected a name, one of {valid}"
            )
        name = item.strip(" \t")
        if name not in OPERATIONS:
            raise MaintenanceConfigError(
                f"unknown operation {show_input(item)}; the operations are {valid}"
            )
        if name in seen:
            raise MaintenanceConfigError(f"operation {name} is given twice; give it once")
        seen.append(name)
    if not seen:
        raise MaintenanceConfigError(f"no operations given; name one or more of {valid}")
    return tuple(op for op in OPERATIONS if op in seen)


def _unusable(text: str) -> bool:
    return not text or "\x00" in text or any(0xD800 <= ord(ch) <= 0xDFFF for ch in text)


def _name(what: str, value: object) -> str:
    text = value if isinstance(value, str) else ""
    if _unusable(text):
        raise MaintenanceConfigError(f"{what} {show_input(value)}: expected a name")
    return text


def _table(value: object) -> TableName:
    text = value if isinstance(value, str) else ""
    bad = _unusable(text)
    schema, dot, name = text.partition(".")
    if not dot:
        schema, name = DEFAULT_SCHEMA, schema
    if bad or not schema or not name:
        raise MaintenanceConfigError(
            f"table {show_input(value)}: expected a table name, schema-qualified or not "
            "(orders, s1.orders)"
        )
    return schema, name
