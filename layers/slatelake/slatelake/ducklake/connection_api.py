"""DuckDB's connection API on a session, so a script written for DuckDB runs unchanged.

Every public method and property of ``duckdb.DuckDBPyConnection`` is here
with DuckDB's signature and result, on the one rule that keeps the lake
whole: whatever may change the catalog runs through the session's
statements (its commit path), everything else goes straight to DuckDB.

- Statements (``sql``, ``query``, ``from_query``, ``execute``,
  ``executemany``, ``append``, ``checkpoint``, a DuckLake
  ``table_function``) go through the commit path; so does ``COPY`` and a
  ``read_*`` inserted with SQL.
- ``table`` and ``view`` bring the session to the log's head first, as a
  statement's read does, then hand back DuckDB's lazy relation.
- Results, types, relations over data outside the lake (``values``,
  ``from_df``, ``read_parquet`` ...), UDFs, filesystems and profiling are
  DuckDB's own calls on the session's connection.
- Where DuckDB returns the connection, a session returns itself, so a
  chain (``session.execute(...).execute(...)``) stays on the commit path.
- ``cursor`` and ``duplicate`` open a second connection to the session's
  DuckDB database, as DuckDB's do: the same attached lake (one DuckLake
  catalog instance) and memory tables, transactions of its own
  (``session_cursor.py``); closing the session closes them.
- A relation's own writes (``insert_into``, ``create``, ``to_table``) run
  on DuckDB alone: they are committed by the session's next call that
  touches the lake, or refused with a ConflictError if another writer
  committed first (``Committer.commit_outside_writes``).

The host (``Session``, ``LakeSession``) provides ``con``, ``_statements``,
``_ready_to_read``, ``_cursor``, ``in_transaction`` and ``transaction``.
"""

from __future__ import annotations

import itertools
import sys
import weakref
from collections.abc import Callable
from contextlib import AbstractContextManager
from types import FrameType
from typing import Any, Self

import duckdb
from duckdb.sqltypes import DuckDBPyType

from slatelake.ducklake.duck_errors import duckdb_errors
from slatelake.ducklake.sql import ident
from slatelake.ducklake.statements import DUCKLAKE_PREFIX

Relation = duckdb.DuckDBPyRelation
Type = DuckDBPyType
BATCH = 1_000_000  # DuckDB's default rows per Arrow batch
_APPEND_PREFIX = "__slatelake_append_"
_appends = itertools.count()


class ConnectionApi:
    """DuckDB's connection methods, answered by a session (see the module)."""

    con: duckdb.DuckDBPyConnection

    # -- the host's ------------------------------------------------------------
    def _statements(
        self, query: str, params: Any, writes: bool | None, frame: FrameType | None, pending: bool
    ) -> Any:
        raise NotImplementedError

    def _ready_to_read(self) -> None:
        raise NotImplementedError

    def _cursor(self) -> ConnectionApi:
        raise NotImplementedError

    @property
    def in_transaction(self) -> bool:
        raise NotImplementedError

    def transaction(self) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def _cursors(self) -> weakref.WeakSet[Any]:
        """The sessions ``cursor`` opened, closed with this one."""
        opened = self.__dict__.get("_opened_cursors")
        if opened is None:
            opened = self.__dict__["_opened_cursors"] = weakref.WeakSet()
        return opened

    def _close_cursors(self) -> None:
        for cursor in list(self._cursors()):
            cursor.close()

    # -- statements (the commit path) -----------------------------------------
    def sql(
        self, query: str, params: Any = None, writes: bool | None = None, *, alias: str = ""
    ) -> Relation | None:
        """Run SQL as DuckDB's ``sql`` does; each statement autocommits
        (unless a transaction is open).

        A read returns DuckDB's relation (lazy, as DuckDB's). A statement that
        may write runs to completion in a transaction of its own, committed
        under the lake's commit lock, before its result comes back,
        materialized: DuckDB's row count as a one-row relation, or its rows
        (``RETURNING``, a DuckLake function). ``None`` where DuckDB returns
        None (SET, BEGIN). Several statements in one string run one after the
        other; the last one's result comes back. Python objects named in the
        query are found in the caller's scope (DuckDB's replacement scans).
        ``writes`` overrides the guess of whether the statement may change
        the catalog; ``alias`` names the relation."""
        # DuckDB resolves Python objects named in SQL from the calling frame (its
        # replacement scans): the caller's, not this method's, so it is passed on.
        return self._relation(query, params, writes, sys._getframe(1), alias)

    def query(self, query: str, *, alias: str = "", params: Any = None) -> Relation | None:
        """DuckDB's ``query``: ``sql`` by another name."""
        return self._relation(query, params, None, sys._getframe(1), alias)

    def from_query(self, query: str, *, alias: str = "", params: Any = None) -> Relation | None:
        """DuckDB's ``from_query``: ``sql`` by another name."""
        return self._relation(query, params, None, sys._getframe(1), alias)

    def _relation(
        self, query: str, params: Any, writes: bool | None, frame: FrameType, alias: str
    ) -> Relation | None:
        result = self._statements(query, params, writes, frame, False)
        return result.set_alias(alias) if alias and result is not None else result

    def execute(self, query: str, parameters: Any = None) -> Self:
        """Run SQL as DuckDB's ``execute`` does: the session comes back with
        the result pending (``fetchone``, ``fetchall``, ``df`` ...)."""
        self._statements(query, parameters, None, sys._getframe(1), True)
        return self

    def executemany(self, query: str, parameters: Any = None) -> Self:
        """Run one statement once per parameter set, as DuckDB's ``executemany``;
        in autocommit, all of them as one transaction (one commit)."""
        frame = sys._getframe(1)  # the caller's Python names, for replacement scans
        sets = list(parameters or [])
        if self.in_transaction:
            for params in sets:
                self._statements(query, params, None, frame, True)
            return self
        with self.transaction():
            for params in sets:
                self._statements(query, params, None, frame, True)
        return self

    def append(self, table_name: str, df: Any, *, by_name: bool = False) -> Self:
        """DuckDB's ``append``: the frame's rows inserted into ``table_name``
        (one name, quoted whole, as DuckDB quotes it), committed as one write."""
        name = f"{_APPEND_PREFIX}{next(_appends)}"
        self.con.register(name, df)
        try:
            query = (
                f"INSERT INTO {ident(table_name)}{' BY NAME' if by_name else ''} "
                f"SELECT * FROM {ident(name)}"
            )
            self._statements(query, None, True, None, False)  # its rows are registered
        finally:
            self.con.unregister(name)
        return self

    def checkpoint(self) -> Self:
        """``CHECKPOINT``, as DuckDB's ``checkpoint``; on the lake it is
        DuckLake's (inlined data flushed...), committed as any write."""
        self._statements("CHECKPOINT", None, True, None, False)
        return self

    def table_function(self, name: str, parameters: Any = None) -> Relation | None:
        """DuckDB's ``table_function``. A DuckLake function may change the
        catalog (``ducklake_expire_snapshots``): it runs as a statement."""
        args = [] if parameters is None else list(parameters)
        if name.lower().startswith(DUCKLAKE_PREFIX):
            marks = ", ".join("?" for _ in args)
            query = f"SELECT * FROM {ident(name)}({marks})"
            return self._statements(query, args or None, None, None, False)  # values bound
        self._ready_to_read()
        with duckdb_errors():
            return self.con.table_function(name, parameters)

    # -- the lake's relations, at the head -------------------------------------
    def table(self, table_name: str) -> Relation:
        """DuckDB's ``table``, read at the log's head."""
        self._ready_to_read()
        with duckdb_errors():
            return self.con.table(table_name)

    def view(self, view_name: str) -> Relation:
        """DuckDB's ``view``, read at the log's head."""
        self._ready_to_read()
        with duckdb_errors():
            return self.con.view(view_name)

    # -- relations over data outside the lake ---------------------------------
    def values(self, *args: Any) -> Relation:
        return self.con.values(*args)

    def from_df(self, df: Any) -> Relation:
        return self.con.from_df(df)

    def from_arrow(self, arrow_object: Any) -> Relation:
        return self.con.from_arrow(arrow_object)

    def read_parquet(self, path_or_buffer: Any, *args: Any, **kwargs: Any) -> Relation:
        return self.con.read_parquet(path_or_buffer, *args, **kwargs)

    def from_parquet(self, path_or_buffer: Any, *args: Any, **kwargs: Any) -> Relation:
        return self.con.from_parquet(path_or_buffer, *args, **kwargs)

    def read_csv(self, path_or_buffer: Any, **kwargs: Any) -> Relation:
        return self.con.read_csv(path_or_buffer, **kwargs)

    def from_csv_auto(self, path_or_buffer: Any, **kwargs: Any) -> Relation:
        return self.con.from_csv_auto(path_or_buffer, **kwargs)

    def read_json(self, path_or_buffer: Any, **kwargs: Any) -> Relation:
        return self.con.read_json(path_or_buffer, **kwargs)

    def register(self, view_name: str, python_object: Any) -> Self:
        """Make a pandas, Arrow or polars object queryable as ``view_name``."""
        self.con.register(view_name, python_object)
        return self

    def unregister(self, view_name: str) -> Self:
        self.con.unregister(view_name)
        return self

    # -- the pending result ----------------------------------------------------
    def fetchone(self) -> tuple[Any, ...] | None:
        return self.con.fetchone()

    def fetchmany(self, size: int = 1) -> list[Any]:
        return self.con.fetchmany(size)

    def fetchall(self) -> list[Any]:
        return self.con.fetchall()

    def fetchnumpy(self) -> dict[str, Any]:
        return self.con.fetchnumpy()

    def fetchdf(self, *, date_as_object: bool = False) -> Any:
        return self.con.fetchdf(date_as_object=date_as_object)

    def fetch_df(self, *, date_as_object: bool = False) -> Any:
        return self.con.fetch_df(date_as_object=date_as_object)

    def df(self, *, date_as_object: bool = False) -> Any:
        return self.con.df(date_as_object=date_as_object)

    def fetch_df_chunk(self, vectors_per_chunk: int = 1, *, date_as_object: bool = False) -> Any:
        return self.con.fetch_df_chunk(vectors_per_chunk, date_as_object=date_as_object)

    def fetch_arrow_table(self, rows_per_batch: int = BATCH) -> Any:
        return self.con.fetch_arrow_table(rows_per_batch)

    def fetch_record_batch(self, rows_per_batch: int = BATCH) -> Any:
        return self.con.fetch_record_batch(rows_per_batch)

    def arrow(self, rows_per_batch: int = BATCH) -> Any:
        return self.con.arrow(rows_per_batch)

    def to_arrow_table(self, batch_size: int = BATCH) -> Any:
        return self.con.to_arrow_table(batch_size)

    def to_arrow_reader(self, batch_size: int = BATCH) -> Any:
        return self.con.to_arrow_reader(batch_size)

    def pl(self, rows_per_batch: int = BATCH, *, lazy: bool = False) -> Any:
        return self.con.pl(rows_per_batch, lazy=lazy)

    def torch(self) -> dict[str, Any]:
        return self.con.torch()

    def tf(self) -> dict[str, Any]:
        return self.con.tf()

    @property
    def description(self) -> list[Any] | None:
        """Get result set attributes, mainly column names (DuckDB's)."""
        return self.con.description

    @property
    def rowcount(self) -> int:
        """Get result set row count (DuckDB's: -1)."""
        return self.con.rowcount

    # -- types -----------------------------------------------------------------
    def sqltype(self, type_str: str) -> Type:
        return self.con.sqltype(type_str)

    def dtype(self, type_str: str) -> Type:
        return self.con.dtype(type_str)

    def type(self, type_str: str) -> Type:
        return self.con.type(type_str)

    def array_type(self, type: Type, size: int) -> Type:  # noqa: A002 - DuckDB's name
        return self.con.array_type(type, size)

    def list_type(self, type: Type) -> Type:  # noqa: A002 - DuckDB's name
        return self.con.list_type(type)

    def map_type(self, key: Type, value: Type) -> Type:
        return self.con.map_type(key, value)

    def struct_type(self, fields: Any) -> Type:
        return self.con.struct_type(fields)

    def row_type(self, fields: Any) -> Type:
        return self.con.row_type(fields)

    def union_type(self, members: Any) -> Type:
        return self.con.union_type(members)

    def enum_type(self, name: str, type: Type, values: list[Any]) -> Type:  # noqa: A002
        return self.con.enum_type(name, type, values)

    def decimal_type(self, width: int, scale: int) -> Type:
        return self.con.decimal_type(width, scale)

    def string_type(self, collation: str = "") -> Type:
        return self.con.string_type(collation)

    # -- functions, filesystems, extensions, profiling --------------------------
    def create_function(
        self,
        name: str,
        function: Callable[..., Any],
        parameters: Any = None,
        return_type: Any = None,
        **kwargs: Any,
    ) -> Self:
        """DuckDB's ``create_function`` (a Python UDF on this connection)."""
        self.con.create_function(name, function, parameters, return_type, **kwargs)
        return self

    def remove_function(self, name: str) -> Self:
        self.con.remove_function(name)
        return self

    def register_filesystem(self, filesystem: Any) -> None:
        self.con.register_filesystem(filesystem)

    def unregister_filesystem(self, name: str) -> None:
        self.con.unregister_filesystem(name)

    def list_filesystems(self) -> list[Any]:
        return self.con.list_filesystems()

    def filesystem_is_registered(self, name: str) -> bool:
        return self.con.filesystem_is_registered(name)

    def install_extension(self, extension: str, **kwargs: Any) -> None:
        self.con.install_extension(extension, **kwargs)

    def load_extension(self, extension: str) -> None:
        self.con.load_extension(extension)

    def extract_statements(self, query: str) -> list[Any]:
        return self.con.extract_statements(query)

    def get_table_names(self, query: str, *, qualified: bool = False) -> set[str]:
        return self.con.get_table_names(query, qualified=qualified)

    def interrupt(self) -> None:
        self.con.interrupt()

    def query_progress(self) -> float:
        return self.con.query_progress()

    def enable_profiling(self) -> None:
        self.con.enable_profiling()

    def disable_profiling(self) -> None:
        self.con.disable_profiling()

    def get_profiling_information(self, format: Any = "json") -> str:  # noqa: A002
        return self.con.get_profiling_information(format)

    # -- more connections --------------------------------------------------------
    def cursor(self) -> ConnectionApi:
        """A second connection on the session's copy of the lake, with
        transactions of its own (see the module); closed with this one."""
        opened = self._cursor()
        self._cursors().add(opened)
        return opened

    def duplicate(self) -> ConnectionApi:
        """DuckDB's ``duplicate``: as ``cursor``."""
        return self.cursor()
