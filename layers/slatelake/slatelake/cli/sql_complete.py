"""The names ``slatelake sql``'s shell knows: completion, and DuckDB's hints kept honest.

``Names`` reads the user's catalog names once (databases, schemas, tables
and views, their columns, DuckDB's keywords) and again after any statement;
the session's own catalogs (``__slatelake_base``, ``__slatelake_meta``) are
attached hidden, as stock DuckLake hides its metadata catalog, so DuckDB's
listings never name them, and its temporary result tables are left out.
``Completer`` is readline's completer over them and the dot commands;
``honest_hint`` drops a DuckDB "Did you mean" that points at something the
user never made (``pg_catalog.pg_enum`` for a missing table).
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Callable, Iterable
from typing import Any

INTERNAL = "__slatelake"  # the prefix of the session's temporary result tables
# the user's columns: of tables and views, in every catalog the user attached
_COLUMNS = (
    "SELECT database_name, schema_name, table_name, column_name FROM duckdb_columns() "
    "WHERE NOT internal AND NOT starts_with(table_name, ?)"
)
_SCHEMAS = (
    "SELECT DISTINCT database_name, schema_name FROM duckdb_schemas() "
    "WHERE database_name NOT IN ('system', 'temp')"
)
_KEYWORDS = "SELECT keyword_name FROM duckdb_keywords()"
# files after these dot commands, as DuckDB's shell completes them
FILE_COMMANDS = (".read", ".output", ".once")
_HINT = re.compile(r'\n?Did you mean "([^"]*)"\?')
_MISSING = re.compile(r"^Catalog Error: (Table|Schema|Catalog) with name ")


class Names:
    """The user's names in the session, read on first use after ``forget``."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self._columns: list[tuple[str, str, str, str]] | None = None
        self._schemas: list[tuple[str, str]] = []
        self._keywords: list[str] | None = None

    def forget(self) -> None:
        """A statement ran: the names may have changed."""
        self._columns = None

    def _load(self) -> list[tuple[str, str, str, str]]:
        if self._columns is None:
            try:
                self._columns = self._read(_COLUMNS, [INTERNAL])
                self._schemas = self._read(_SCHEMAS, [])
            except Exception:  # noqa: BLE001 - completion never breaks the shell
                self._columns, self._schemas = [], []
        return self._columns

    def _read(self, query: str, params: list[str]) -> list[Any]:
        result = self.session.sql(query, params)
        return [] if result is None else list(result.fetchall())

    @property
    def keywords(self) -> list[str]:
        if self._keywords is None:
            try:
                self._keywords = sorted(str(k).upper() for (k,) in self._read(_KEYWORDS, []))
            except Exception:  # noqa: BLE001 - completion never breaks the shell
                self._keywords = []
        return self._keywords

    @property
    def tables(self) -> set[tuple[str, str, str]]:
        """(database, schema, table) of every table and view."""
        return {(d, s, t) for d, s, t, _ in self._load()}

    @property
    def columns(self) -> set[tuple[str, str]]:
        """(table, column) of every column."""
        return {(t, c) for _, _, t, c in self._load()}

    @property
    def schemas(self) -> set[tuple[str, str]]:
        self._load()
        return set(self._schemas)

    def words(self) -> set[str]:
        """Every name one may type unqualified: databases, schemas, tables, columns."""
        out = {t for _, _, t in self.tables} | {c for _, c in self.columns}
        return out | {s for _, s in self.schemas} | {d for d, _ in self.schemas}

    def qualified(self) -> set[str]:
        """Every dotted name: schema.table, database.schema.table, database.table
        (schema main), table.column, database.schema."""
        out: set[str] = set()
        for d, s, t in self.tables:
            out |= {f"{s}.{t}", f"{d}.{s}.{t}"} | ({f"{d}.{t}"} if s == "main" else set())
        out |= {f"{t}.{c}" for t, c in self.columns}
        return out | {f"{d}.{s}" for d, s in self.schemas}


def matching(text: str, candidates: Iterable[str]) -> list[str]:
    """The candidates ``text`` begins, ignoring case, sorted and unique."""
    low = text.lower()
    return sorted({c for c in candidates if c.lower().startswith(low)})


class Completer:
    """readline's completer: dot commands at the start of a statement, files
    after ``.read``/``.output``/``.once``, else keywords (in the case typed),
    and the lake's table, view, schema and column names."""

    def __init__(
        self,
        names: Names,
        commands: Iterable[str],
        line: Callable[[], str],
        statement_started: Callable[[], bool],
    ) -> None:
        self.names = names
        self.commands = sorted(commands)
        self._line = line  # the line being edited (readline.get_line_buffer)
        self._started = statement_started  # earlier lines of a statement were read
        self._matches: list[str] = []

    def __call__(self, text: str, state: int) -> str | None:
        if state == 0:
            try:
                self._matches = self.candidates(self._line(), text)
            except Exception:  # noqa: BLE001 - a failing completer must not end input()
                self._matches = []
            if len(self._matches) == 1 and not self._matches[0].endswith(os.sep):
                self._matches = [self._matches[0] + " "]  # one match: a word done, as in DuckDB
        return self._matches[state] if state < len(self._matches) else None

    def candidates(self, line: str, text: str) -> list[str]:
        before = line[: len(line) - len(line.lstrip())]
        head = line.lstrip()
        if not self._started() and head.startswith("."):
            command = head.split(maxsplit=1)[0] if head.split() else head
            if head == text and not before:
                return matching(text, self.commands)
            if command in FILE_COMMANDS:
                return _files(text)
            return []
        if "." in text:
            return matching(text, self.names.qualified())
        keywords = self.names.keywords
        if text and text == text.lower():
            keywords = [k.lower() for k in keywords]
        return matching(text, [*keywords, *self.names.words()])


def _files(text: str) -> list[str]:
    """Paths beginning with ``text``; a directory ends in ``/``."""
    found = glob.glob(os.path.expanduser(text) + "*")
    return sorted(p + os.sep if os.path.isdir(p) else p for p in found)


def honest_hint(message: str, names: Names) -> str:
    """DuckDB's message, less a "Did you mean" for a missing table, schema or
    catalog that names no table, schema or catalog of the user's (DuckDB
    offers system catalogs such as ``pg_catalog.pg_enum``, and would offer the
    session's own)."""
    kind = _MISSING.match(message)
    hint = _HINT.search(message)
    if kind is None or hint is None:
        return message
    suggested = hint.group(1).lower()
    if kind.group(1) == "Table":
        known = {t.lower() for _, _, t in names.tables} | {q.lower() for q in names.qualified()}
    elif kind.group(1) == "Schema":
        schemas = names.schemas
        known = {s.lower() for _, s in schemas} | {f"{d}.{s}".lower() for d, s in schemas}
    else:
        known = {d.lower() for d, _ in names.schemas}
    if suggested in known:
        return message
    return message[: hint.start()] + message[hint.end() :]
