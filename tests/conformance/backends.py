"""Where a test file's statements run: stock DuckDB, or slatelake sessions.

``stock``: one DuckDB database with the ducklake extension loaded from the
wheel (``extensions.connect``); named connections are cursors on it, so the
test's ``ATTACH 'ducklake:...'`` runs as written and every connection sees it.

``slatelake``: the test's ATTACH of a DuckLake opens (or creates) a
``file://`` slatelake lake under the scratch directory, one per metadata path,
and a session on it through ``slatelake.ducklake.session.connect(...,
connection=)``, handing it the connection the test has used so far (its
settings and memory tables stay). Named connections are cursors, as on stock:
before the ATTACH, cursors of the unnamed connection's database; after it,
the session's cursors (one DuckLake catalog instance, transactions of their
own). DETACH closes them all, a later ATTACH reopens the lake (in a new
database, where the GLOBAL settings made so far are replayed). The metadata
catalog's names (``METADATA_CATALOG``, ``__ducklake_metadata_<alias>``) are
rewritten to the session's.

One difference is translated, not hidden: DuckDB's COMMIT of a transaction a
failed statement aborted is silent (it rolls back); a session's refuses,
saying nothing was committed (``statement_flow.py``). Where the file expects
that COMMIT to succeed after a statement of the transaction failed, the
refusal counts as stock's outcome (both committed nothing; the file's next
queries check what is there). Any other COMMIT error is the file's.
BEGIN/COMMIT/ROLLBACK go to ``session.transaction()`` (``txn="api"``) or
through ``session.sql`` (``txn="raw"``). ATTACH options map to ``connect``'s
arguments: DATA_PATH, READ_ONLY or READ_WRITE, SNAPSHOT_VERSION/SNAPSHOT_TIME and
ENCRYPTED, WRITE_DELETION_VECTORS and OVERRIDE_DATA_PATH (when ``connect``
takes them; a session takes the override read-only, so the runner attaches
read-only with it); META_TYPE goes through the session's own check (only
'duckdb' applies);
DATA_INLINING_ROW_LIMIT becomes the connection's default inlining limit.
METADATA_SCHEMA names one catalog of a metadata store that holds several: a
slatelake lake holds one catalog, so each (metadata path, schema) is a lake
of its own.

A second DuckLake attached beside the first is attached to the session as
``ATTACH 'slatelake:...'`` attaches one (``session.attach``); DETACH of it
detaches it. What a session cannot express raises ``Unsupported``: a catalog
in SQLite/Postgres, other ATTACH options (any DuckLake has beyond those; a
second lake's DATA_INLINING_ROW_LIMIT or METADATA_CATALOG), a DETACH of the
metadata catalog, a metadata file inside the data path (a lake's store never
overlaps its data).
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import re
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

MAIN = "__main__"  # the test's unnamed connection

_ATTACH = re.compile(
    r"^\s*ATTACH\s+(?:DATABASE\s+)?(?P<ine>IF\s+NOT\s+EXISTS\s+)?'ducklake:(?P<path>[^']*)'"
    r"(?:\s+AS\s+(?P<alias>\"[^\"]+\"|\w+))?\s*(?:\((?P<options>.*)\))?\s*;?\s*$",
    re.IGNORECASE | re.DOTALL,
)
_TYPE_DUCKLAKE = re.compile(r"^\s*ATTACH\b.*\bTYPE\s+'?ducklake\b", re.IGNORECASE | re.DOTALL)
_DETACH = re.compile(
    r"^\s*DETACH\s+(?:DATABASE\s+)?(?:IF\s+EXISTS\s+)?(?P<alias>\"[^\"]+\"|\w+)\s*;?\s*$",
    re.IGNORECASE,
)
_TXN = re.compile(
    r"^\s*(?P<verb>BEGIN|START|COMMIT|END|ROLLBACK|ABORT)(?:\s+TRANSACTION)?\s*;?\s*$",
    re.IGNORECASE,
)
_SET = re.compile(
    r"^\s*SET\s+(?P<scope>GLOBAL\s+|SESSION\s+|LOCAL\s+)?(?!VARIABLE\b)(?P<name>\w+)\s*(?:=|\bTO\b)",
    re.IGNORECASE,
)


class Unsupported(Exception):
    """A statement the slatelake backend cannot map onto a session."""


@dataclass(frozen=True)
class Outcome:
    """What a statement returned: its columns (name, DuckDBPyType) and rows."""

    columns: tuple[tuple[str, Any], ...]
    rows: list[tuple[Any, ...]]


EMPTY = Outcome((), [])


def _fetch(cursor: Any) -> Outcome:
    description = cursor.description
    if not description:
        return EMPTY
    return Outcome(tuple((d[0], d[1]) for d in description), cursor.fetchall())


def _close(thing: Any) -> None:
    with contextlib.suppress(Exception):
        thing.close()


def _connect() -> duckdb.DuckDBPyConnection:
    from slatelake.ducklake import extensions

    return extensions.connect()


def ducklake_version() -> str:
    """The loaded ducklake extension's version (the commit it was built from)."""
    con = _connect()
    try:
        row = con.execute(
            "SELECT extension_version FROM duckdb_extensions() WHERE extension_name = 'ducklake'"
        ).fetchone()
        return str(row[0]) if row else "unknown"
    finally:
        con.close()


class StockBackend:
    name = "stock"

    def __init__(self, workdir: Path, txn: str = "api") -> None:
        self._main = _connect()
        self._cursors: dict[str, duckdb.DuckDBPyConnection] = {}
        self._lock = threading.Lock()

    def _cursor(self, connection: str | None) -> duckdb.DuckDBPyConnection:
        if connection is None:
            return self._main
        with self._lock:
            if connection not in self._cursors:
                self._cursors[connection] = self._main.cursor()
            return self._cursors[connection]

    def execute(self, connection: str | None, sql: str) -> Outcome:
        cursor = self._cursor(connection)
        cursor.execute(sql)
        return _fetch(cursor)

    def release(self, connection: str) -> None:
        with self._lock:
            cursor = self._cursors.pop(connection, None)
        if cursor is not None:
            _close(cursor)

    def close(self) -> None:
        for cursor in self._cursors.values():
            _close(cursor)
        _close(self._main)


@dataclass(frozen=True)
class _Lake:
    """The DuckLake the test attached, as a slatelake lake."""

    url: str
    alias: str
    data_path: str | None
    read_only: bool | None  # None: neither READ_ONLY nor READ_WRITE given
    inline_limit: int | None
    meta_names: tuple[str, ...]
    at: dict[str, Any]  # snapshot_version / snapshot_time / encrypted, when connect takes them


class _Transaction:
    """``session.transaction()`` held open across statements (BEGIN ... COMMIT)."""

    def __init__(self, session: Any) -> None:
        self._cm = session.transaction()
        self._cm.__enter__()
        self.failed = False  # a statement of it raised

    def commit(self) -> None:
        self._cm.__exit__(None, None, None)

    def rollback(self) -> None:
        rollback = _Rollback()
        self._cm.__exit__(_Rollback, rollback, None)


class _Rollback(Exception):
    """Raised into the transaction block to roll it back."""


class SlatelakeBackend:
    name = "slatelake"

    def __init__(self, workdir: Path, txn: str = "api") -> None:
        from slatelake.ducklake import session as session_module

        self._session_module = session_module
        self._meta_db = session_module.META_DB
        self._lakes = workdir / "lakes"
        self._lakes.mkdir(parents=True, exist_ok=True)
        self._txn = txn
        self._lake: _Lake | None = None
        self._plain: dict[str, duckdb.DuckDBPyConnection] = {}  # no lake attached on these
        self._sessions: dict[str, Any] = {}
        self._open_txns: dict[str, _Transaction] = {}
        self._failed_raw: set[str] = set()  # txn="raw": a statement of the open one raised
        self._others: set[str] = set()  # lakes attached beside the first (session.attach)
        self._global_sets: list[str] = []  # SETs of GLOBAL scope, replayed in a new database
        self._lock = threading.RLock()

    # -- connections ------------------------------------------------------------
    def _plain_connection(self, name: str) -> duckdb.DuckDBPyConnection:
        """The connection ``name`` uses while no lake is attached: the unnamed
        one's database (a new one gets the GLOBAL settings made so far, as
        stock's database kept them), and a cursor of it for a named one."""
        with self._lock:
            con = self._plain.get(name)
            if con is None:
                if name != MAIN:
                    con = self._plain_connection(MAIN).cursor()
                else:
                    con = _connect()
                    for statement in self._global_sets:
                        con.execute(statement)
                self._plain[name] = con
            return con

    def _session(self, name: str) -> Any | None:
        """The session on the attached lake (the unnamed connection's), or a
        cursor of it for a named connection."""
        with self._lock:
            if name in self._sessions:
                return self._sessions[name]
            lake = self._lake
            if lake is None:
                return None
            if name != MAIN:
                main = self._session(MAIN)
                plain = self._plain.pop(name, None)  # its database is the session's
                if plain is not None:
                    _close(plain)
                cursor = main.cursor()
                self._sessions[name] = cursor
                return cursor
            con = self._plain_connection(name)
            del self._plain[name]
        if lake.inline_limit is not None:
            con.execute(f"SET ducklake_default_data_inlining_row_limit = {lake.inline_limit}")
        try:
            session = self._session_module.connect(
                lake.url,
                data_path=lake.data_path,
                read_only=lake.read_only,
                alias=lake.alias,
                connection=con,
                **lake.at,
            )
        except BaseException:
            _close(con)
            raise
        # DuckLake's own test files write its metadata by hand (a legacy file's
        # missing mapping): the backend allows it, as stock DuckLake does
        session.metadata_writes = True
        try:
            session.sql("USE memory")  # stock's ATTACH leaves the default catalog as it was
        except BaseException:
            _close(session)
            raise
        with self._lock:
            self._sessions[name] = session
        return session

    def release(self, connection: str) -> None:
        with self._lock:
            txn = self._open_txns.pop(connection, None)
            session = self._sessions.pop(connection, None)
            plain = self._plain.pop(connection, None)
            if connection == MAIN:  # its cursors close with it
                cursors = [(n, s) for n, s in self._sessions.items() if n != MAIN]
                for other, _ in cursors:
                    del self._sessions[other]
                    self._open_txns.pop(other, None)
        if txn is not None:
            with contextlib.suppress(Exception):
                txn.rollback()
        for thing in (session, plain):
            if thing is not None:
                _close(thing)

    def _close_sessions(self) -> None:
        with self._lock:
            names = sorted(self._sessions, key=lambda n: n == MAIN)  # cursors first
        for name in names:
            self.release(name)

    def close(self) -> None:
        self._close_sessions()
        with self._lock:
            plain, self._plain = list(self._plain.values()), {}
        for con in plain:
            _close(con)

    # -- statements ----------------------------------------------------------------
    def execute(self, connection: str | None, sql: str) -> Outcome:
        name = connection or MAIN
        attach = _ATTACH.match(sql)
        if attach:
            return self._attach(name, attach)
        if _TYPE_DUCKLAKE.match(sql):
            raise Unsupported("ATTACH ... (TYPE ducklake)")
        detach = _DETACH.match(sql)
        lake = self._lake
        if detach and lake is not None:
            target = _unquote(detach.group("alias"))
            if target in lake.meta_names:
                raise Unsupported("DETACH of the metadata catalog (the session owns it)")
            if target in self._others:
                self._others.discard(target)
                self._session(MAIN).detach(target)
                return EMPTY
            if target == lake.alias:
                self._close_sessions()
                self._others.clear()  # closed with the session
                self._lake = None
                return EMPTY
        session = self._session(name)
        if session is None:
            con = self._plain_connection(name)
            con.execute(sql)
            outcome = _fetch(con)
            self._note_setting(sql, con)
            return outcome
        verb = _TXN.match(sql)
        if verb and self._txn == "api":
            return self._transaction(name, session, verb.group("verb").upper())
        in_txn = session.in_transaction
        try:
            outcome = _fetch(session.execute(self._rename_meta(sql)))
        except Exception as exc:
            if name in self._open_txns:
                self._open_txns[name].failed = True
            if verb and in_txn and _after_failure(exc, name in self._failed_raw):
                self._failed_raw.discard(name)
                return EMPTY  # stock's silent rollback of an aborted transaction
            if in_txn and not verb:
                self._failed_raw.add(name)
            raise
        if verb:
            self._failed_raw.discard(name)
        self._note_setting(sql, session.con)
        return outcome

    def _transaction(self, name: str, session: Any, verb: str) -> Outcome:
        if verb in ("BEGIN", "START"):
            if name in self._open_txns:
                raise duckdb.TransactionException(
                    "TransactionContext Error: cannot start a transaction within a transaction"
                )
            self._open_txns[name] = _Transaction(session)
            return EMPTY
        txn = self._open_txns.pop(name, None)
        if txn is None:
            word = "commit" if verb in ("COMMIT", "END") else "rollback"
            raise duckdb.TransactionException(
                f"TransactionContext Error: cannot {word} - no transaction is active"
            )
        if verb in ("COMMIT", "END"):
            try:
                txn.commit()
            except Exception as exc:
                if not _after_failure(exc, txn.failed):
                    raise
        else:
            txn.rollback()
        return EMPTY

    def _rename_meta(self, sql: str) -> str:
        lake = self._lake
        if lake is None:
            return sql
        for name in lake.meta_names:
            sql = re.sub(r'(?<![\w"])"?' + re.escape(name) + r'"?(?![\w"])', self._meta_db, sql)
        return sql

    def _note_setting(self, sql: str, con: duckdb.DuckDBPyConnection) -> None:
        """A SET of GLOBAL scope: the connections share it (one database);
        kept to replay in the database a later ATTACH opens."""
        found = _SET.match(sql)
        if not found or (found.group("scope") or "").strip().upper() in ("SESSION", "LOCAL"):
            return
        if not (found.group("scope") or "").strip():
            row = con.execute(
                "SELECT scope FROM duckdb_settings() WHERE lower(name) = lower(?)",
                [found.group("name")],
            ).fetchone()
            if row is None or row[0] != "GLOBAL":
                return
        with self._lock:
            self._global_sets.append(sql)

    def _attach(self, name: str, found: re.Match[str]) -> Outcome:
        if name in self._open_txns:
            raise Unsupported("ATTACH of a DuckLake inside a transaction")
        path = found.group("path")
        alias = _unquote(found.group("alias") or "")
        if not alias:
            raise Unsupported("ATTACH of a DuckLake without AS alias")
        if re.match(r"^(sqlite|postgres|mysql|md|motherduck):", path, re.IGNORECASE):
            raise Unsupported(f"a DuckLake catalog in {path.split(':')[0]}")
        options = _options(found.group("options") or "")
        lake = self._lake
        if lake is not None and (lake.alias == alias or alias in self._others):
            if found.group("ine"):
                return EMPTY
            raise duckdb.BinderException(
                f'Binder Error: Failed to attach database: database with name "{alias}" '
                "already exists"
            )
        data_path, meta, inline, read_only, read_write, at = None, None, None, False, False, {}
        schema = ""
        only: bool | None = None  # READ_ONLY, READ_WRITE (False), or neither
        accepted = set(inspect.signature(self._session_module.connect).parameters)
        for key, value in options:
            if key == "DATA_PATH" and value:
                data_path = value
            elif key == "METADATA_CATALOG" and value:
                if value == alias:
                    raise Unsupported("METADATA_CATALOG naming the lake itself")
                meta = value
            elif key == "DATA_INLINING_ROW_LIMIT" and value is not None:
                inline = int(value)
            elif key == "READ_ONLY":
                read_only = value is None or value.lower() in ("true", "1")
            elif key == "READ_WRITE":
                read_write = value is None or value.lower() in ("true", "1")
            elif key == "TYPE" and (value or "").lower() == "ducklake":
                continue
            elif key == "ENCRYPTED" and "encrypted" in accepted:
                at["encrypted"] = value is None or value.lower() in ("true", "1")
            elif key == "WRITE_DELETION_VECTORS" and "write_deletion_vectors" in accepted:
                at["write_deletion_vectors"] = value is None or value.lower() in ("true", "1")
            elif key == "OVERRIDE_DATA_PATH" and "override_data_path" in accepted:
                # a session takes it read-only (attach_options.check_override)
                override = value is None or value.lower() in ("true", "1")
                at["override_data_path"] = override
                read_only = read_only or override
            elif key == "META_TYPE" and value is not None:
                from slatelake.ducklake.attach_options import check_meta_type

                check_meta_type(value)  # the session's own check: only 'duckdb' applies
            elif key == "METADATA_SCHEMA" and value:
                schema = value  # one catalog of a shared metadata store: a lake of its own
            elif key in ("SNAPSHOT_VERSION", "SNAPSHOT_TIME") and key.lower() in accepted:
                at[key.lower()] = int(value or 0) if key == "SNAPSHOT_VERSION" else value
            else:
                raise Unsupported(f"ATTACH option {key}")
        if read_write and read_only:
            raise Unsupported("ATTACH options READ_WRITE with READ_ONLY")
        if read_only or read_write:
            only = read_only  # named: connect refuses a snapshot read-write, as DuckLake
        if data_path and path not in ("", ":memory:") and _inside(path, data_path):
            # the file's premise (the metadata file among the data files) cannot be
            # built: a lake's store may never overlap its data path (guard.py)
            raise Unsupported("a metadata catalog inside the data path")
        key_text = path if path not in ("", ":memory:") else uuid.uuid4().hex
        key_text += f"#{schema}" if schema else ""
        root = self._lakes / hashlib.sha1(key_text.encode()).hexdigest()[:16]
        if not root.exists() and data_path is None:
            data_path = path + ".files"  # DuckLake's default: next to the metadata file
        if data_path is not None and not data_path.endswith("/"):
            data_path += "/"
        if lake is not None:  # a second lake: attached to the session, as ATTACH 'slatelake:'
            if inline is not None or meta:
                raise Unsupported(
                    "a second DuckLake with DATA_INLINING_ROW_LIMIT or METADATA_CATALOG"
                )
            self._session(MAIN).attach(
                root.as_uri(), alias, read_only=only, data_path=data_path, **at
            )
            self._others.add(alias)
            return EMPTY
        names = (f"__ducklake_metadata_{alias}",) + ((meta,) if meta else ())
        self._lake = _Lake(root.as_uri(), alias, data_path, only, inline, names, at)
        try:
            self._session(name)
        except BaseException:
            self._lake = None
            raise
        return EMPTY


def _after_failure(exc: Exception, failed: bool) -> bool:
    """Whether ``exc`` is a session's refusal to COMMIT a transaction in which
    a statement failed: stock's COMMIT rolls such a one back silently (see the
    module), so the file's ``statement ok`` holds."""
    return failed and "nothing was committed" in str(exc)


def _inside(path: str, directory: str) -> bool:
    return Path(path).resolve().is_relative_to(Path(directory).resolve())


def _unquote(name: str) -> str:
    return name[1:-1] if len(name) > 1 and name[0] == name[-1] == '"' else name


def _options(text: str) -> list[tuple[str, str | None]]:
    """``KEY value, KEY 'value', FLAG`` at the top level of an ATTACH's parentheses."""
    parts, current, depth, quoted = [], "", 0, False
    for ch in text:
        if ch == "'":
            quoted = not quoted
        elif not quoted and ch in "([":
            depth += 1
        elif not quoted and ch in ")]":
            depth -= 1
        if ch == "," and not quoted and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    options = []
    for part in parts:
        part = part.strip()
        if not part:
            continue
        key, value = (re.split(r"\s+", part, maxsplit=1) + [""])[:2]
        if len(value) > 1 and value[0] == value[-1] == "'":
            value = value[1:-1]
        options.append((key.upper(), value or None))
    return options


BACKENDS = {"stock": StockBackend, "slatelake": SlatelakeBackend}
