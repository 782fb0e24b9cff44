"""Other slatelake lakes attached beside a session's own, in one DuckDB database.

``ATTACH 'slatelake:<url>' AS name (READ_ONLY, SNAPSHOT_VERSION n,
SNAPSHOT_TIME ts, DATA_PATH p, CREATE_IF_NOT_EXISTS b, ENCRYPTED)`` in a session (or
``session.attach(url, name, ...)``) opens a ``Session`` of its own on that
lake whose DuckDB connection is a cursor of the host's: the lake appears as
catalog ``name`` to every statement of the host, beside the host's lake and
any stock DuckLake, with its own metadata copies (``__slatelake_meta_<n>``,
hidden), commit log, commit lock and reader lease. ``DETACH name`` closes it.

A statement still runs where the user sent it, on the host's connection;
what it wrote to an attached lake is committed through that lake's own
commit path:
- before a statement that may write and names an attached lake (or runs
  while one is in USE), that lake is brought to its log's head and its
  commit lock taken there, so nothing can land on it while the statement
  runs; after, what DuckLake wrote to its copy lands in its log on the head
  it was made on (never rebased), or the lock is given back;
- before a read naming one, it is brought to its log's head (one LIST);
- a write DuckDB made behind the host's back (a relation's ``insert_into``)
  is committed at the host's next statement, or refused with a
  ConflictError if another writer landed first (``commit_outside_writes``).

One transaction writes one lake: DuckDB itself refuses a transaction that
writes two attached databases, and a write to an attached lake inside the
host's explicit transaction is refused (its commit lock would be held for
the transaction's whole life): write it in autocommit, or open a session
on that lake. All the family's query-log readers share DuckDB's one log, so
none truncates it while lakes are attached but the host, at a point where
every capture is done (``write_log.py``).
"""

from __future__ import annotations

import itertools
import logging
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

import duckdb

from slatelake.ducklake import statements as stmt
from slatelake.ducklake.attach_options import check_meta_type, current_use
from slatelake.ducklake.sql import ident
from slatelake.errors import MisconfigurationError, NotFoundError
from slatelake.store.db import store_exists
from slatelake.store.location import LakeLocation

if TYPE_CHECKING:
    from slatelake.catalog.lake import Lake
    from slatelake.ducklake.commit_flow import Committer
    from slatelake.ducklake.copy_view import CopyView
    from slatelake.ducklake.duck_state import DuckState
    from slatelake.ducklake.statement_flow import StatementRunner
    from slatelake.ducklake.write_log import WriteLog


class Session(Protocol):
    """What the host and each attached lake are (``session.Session``): the
    parts a write made beside its own statements goes through."""

    alias: str
    read_only: bool
    meta_db: str
    base_db: str
    con: duckdb.DuckDBPyConnection
    log: WriteLog
    lake: Lake
    state: DuckState
    _runner: StatementRunner
    _committer: Committer
    _view: CopyView

    @property
    def in_transaction(self) -> bool: ...

    def close(self) -> None: ...


S = TypeVar("S", bound=Session)
log = logging.getLogger("slatelake.session")
PREFIX = "slatelake:"
INTERNAL_PREFIX = "__slatelake"  # the session's own databases (hidden) and tables
_numbers = itertools.count(1)
_ATTACH = re.compile(
    r"^\s*ATTACH\s+(?:DATABASE\s+)?(?P<ine>IF\s+NOT\s+EXISTS\s+)?"
    r"'(?P<path>(?:[^']|'')*)'"
    r"(?:\s+AS\s+(?P<alias>\"(?:[^\"]|\"\")+\"|[A-Za-z_][A-Za-z0-9_$]*))?"
    r"\s*(?:\((?P<options>.*)\))?\s*;?\s*$",
    re.IGNORECASE | re.DOTALL,
)
_DETACH = re.compile(
    r"^\s*DETACH\s+(?:DATABASE\s+)?(?P<ie>IF\s+EXISTS\s+)?"
    r"(?P<alias>\"(?:[^\"]|\"\")+\"|[A-Za-z_][A-Za-z0-9_$]*)\s*;?\s*$",
    re.IGNORECASE,
)
_OPTION = re.compile(
    r"\s*(?P<key>[A-Za-z_]+)(?:\s+(?P<value>'(?:[^']|'')*'|[^,\s]+))?\s*(?:,|$)", re.DOTALL
)
OPTIONS = (
    "READ_ONLY",
    "READ_WRITE",
    "SNAPSHOT_VERSION",
    "SNAPSHOT_TIME",
    "DATA_PATH",
    "CREATE_IF_NOT_EXISTS",
    "ENCRYPTED",
    "WRITE_DELETION_VECTORS",
    "OVERRIDE_DATA_PATH",
    "META_TYPE",
)


@dataclass(frozen=True)
class AttachRequest:
    """An ATTACH of a slatelake lake, parsed: every value still text from
    outside, each checked where it is used."""

    url: str
    alias: str
    if_not_exists: bool
    read_only: bool | None  # None: neither READ_ONLY nor READ_WRITE given
    snapshot_version: int | None
    snapshot_time: str | None
    data_path: str | None
    create_if_not_exists: bool
    encrypted: bool
    write_deletion_vectors: bool
    override_data_path: bool


def _unquote_name(text: str) -> str:
    return text[1:-1].replace('""', '"') if text.startswith('"') else text


def _unquote_value(text: str | None) -> str | None:
    if text is None:
        return None
    return text[1:-1].replace("''", "'") if text.startswith("'") else text


def _flag(key: str, value: str | None) -> bool:
    if value is None or value.lower() in ("true", "1"):
        return True
    if value.lower() in ("false", "0"):
        return False
    raise MisconfigurationError(f"attach option {key} takes true or false, not {value!r}")


def _options(text: str) -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    at = 0
    text = text.strip()
    while at < len(text):
        match = _OPTION.match(text, at)
        if match is None or match.end() == at:
            raise MisconfigurationError(f"attach options not understood at: {text[at:][:40]!r}")
        key = match.group("key").upper()
        if key not in OPTIONS:
            raise MisconfigurationError(
                f"attach option {key} is not one a slatelake lake takes ({', '.join(OPTIONS)})"
            )
        found[key] = _unquote_value(match.group("value"))
        at = match.end()
    return found


def _read_only(opts: dict[str, str | None]) -> bool | None:
    """READ_ONLY, or READ_WRITE as its opposite (DuckDB's pair); None: neither."""
    read_only = _flag("READ_ONLY", opts["READ_ONLY"]) if "READ_ONLY" in opts else None
    read_write = _flag("READ_WRITE", opts["READ_WRITE"]) if "READ_WRITE" in opts else None
    if read_only is not None and read_write is not None and read_only == read_write:
        raise MisconfigurationError("attach options READ_ONLY and READ_WRITE contradict")
    return read_only if read_only is not None else None if read_write is None else not read_write


def parse_attach(query: str) -> AttachRequest | None:
    """The ATTACH of a slatelake lake in ``query``; None: not one (DuckDB's)."""
    found = _ATTACH.match(query)
    if found is None:
        return None
    path = found.group("path").replace("''", "'")
    if not path.lower().startswith(PREFIX):
        return None
    url = path[len(PREFIX) :]
    if not url:
        raise MisconfigurationError("attach of 'slatelake:' names no lake: 'slatelake:<url>'")
    alias = _unquote_name(found.group("alias") or "")
    if not alias:
        tail = url.rstrip("/").rsplit("/", 1)[-1]
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", tail):
            raise MisconfigurationError(
                f"the lake {url!r} needs a name to be attached as: add AS name"
            )
        alias = tail
    opts = _options(found.group("options") or "")
    if "META_TYPE" in opts:
        check_meta_type(opts["META_TYPE"])
    version = opts.get("SNAPSHOT_VERSION")
    if version is not None and not version.isdigit():
        raise MisconfigurationError(f"SNAPSHOT_VERSION takes a snapshot id, not {version!r}")
    return AttachRequest(
        url=url,
        alias=alias,
        if_not_exists=found.group("ine") is not None,
        read_only=_read_only(opts),
        snapshot_version=None if version is None else int(version),
        snapshot_time=opts.get("SNAPSHOT_TIME"),
        data_path=opts.get("DATA_PATH"),
        create_if_not_exists=_flag("CREATE_IF_NOT_EXISTS", opts.get("CREATE_IF_NOT_EXISTS"))
        if "CREATE_IF_NOT_EXISTS" in opts
        else True,
        encrypted="ENCRYPTED" in opts and _flag("ENCRYPTED", opts["ENCRYPTED"]),
        write_deletion_vectors="WRITE_DELETION_VECTORS" in opts
        and _flag("WRITE_DELETION_VECTORS", opts["WRITE_DELETION_VECTORS"]),
        override_data_path="OVERRIDE_DATA_PATH" in opts
        and _flag("OVERRIDE_DATA_PATH", opts["OVERRIDE_DATA_PATH"]),
    )


class AttachedLakes(Generic[S]):
    """The slatelake lakes attached to one host session (see the module)."""

    def __init__(self, host: S, opener: Callable[..., S]) -> None:
        self._host = host
        self._open = opener  # the host's class: a session of its own per lake
        self._lakes: dict[str, S] = {}  # by alias, lower case (DuckDB's names)

    def __bool__(self) -> bool:
        return bool(self._lakes)

    def get(self, alias: str) -> S | None:
        return self._lakes.get(alias.lower())

    def internal_databases(self) -> frozenset[str]:
        return frozenset(
            name.lower() for lake in self._lakes.values() for name in (lake.meta_db, lake.base_db)
        )

    # -- attach and detach ---------------------------------------------------------
    def attach(
        self,
        url: str,
        alias: str,
        *,
        read_only: bool | None = None,
        data_path: str | None = None,
        snapshot_version: int | None = None,
        snapshot_time: datetime | str | None = None,
        create_if_not_exists: bool = True,
        if_not_exists: bool = False,
        encrypted: bool = False,
        write_deletion_vectors: bool = False,
        override_data_path: bool = False,
    ) -> S:
        if self._host.in_transaction:
            raise MisconfigurationError(
                f"attaching {url} runs outside a transaction; commit or roll back first"
            )
        if alias.lower().startswith(INTERNAL_PREFIX):
            raise MisconfigurationError(
                f"{alias!r}: names starting {INTERNAL_PREFIX} are the session's own; "
                "attach the lake under another name"
            )
        if alias.lower() in self._taken():
            if if_not_exists and alias.lower() in self._lakes:
                return self._lakes[alias.lower()]
            raise duckdb.BinderException(
                f"Binder Error: Failed to attach database: database with name {ident(alias)} "
                "already exists"
            )
        if not create_if_not_exists and not store_exists(LakeLocation.parse(url)):
            raise NotFoundError(
                f"no slatelake lake at {url} and CREATE_IF_NOT_EXISTS is false; "
                "attach without it (and with a data path) to create one"
            )
        number = next(_numbers)
        lake = self._open(
            url,
            data_path=data_path,
            read_only=read_only,
            alias=alias,
            connection=self._host.con.cursor(),
            snapshot_version=snapshot_version,
            snapshot_time=snapshot_time,
            encrypted=encrypted,
            write_deletion_vectors=write_deletion_vectors,
            override_data_path=override_data_path,
            _internal=(f"__slatelake_meta_{number}", f"__slatelake_base_{number}"),
        )
        self._lakes[alias.lower()] = lake
        self._share_logs()
        return lake

    def _taken(self) -> set[str]:
        """Database names in use (the hidden ones too), lower case."""
        rows = self._host.con.execute("SELECT database_name FROM duckdb_databases()").fetchall()
        listed = {str(name).lower() for (name,) in rows}
        return listed | {self._host.alias.lower()} | set(self.internal_databases())

    def detach(self, alias: str) -> bool:
        """Close the attached lake ``alias``; False: none by that name."""
        lake = self._lakes.get(alias.lower())
        if lake is None:
            return False
        if self._host.in_transaction:
            raise MisconfigurationError(
                f"detaching {alias} runs outside a transaction; commit or roll back first"
            )
        del self._lakes[alias.lower()]
        try:
            lake.close()
        finally:
            self._share_logs()
        return True

    def close(self) -> None:
        for alias in list(self._lakes):
            with suppress(Exception):  # one lake's failure leaves the others to close
                self._lakes.pop(alias).close()

    def _share_logs(self) -> None:
        """While lakes are attached every reader of DuckDB's one query log
        keeps it (marks only); the host truncates at quiet points."""
        shared = bool(self._lakes)
        self._host.log.shared = shared
        for lake in self._lakes.values():
            lake.log.shared = True

    def statement(self, query: str) -> bool:
        """Run ``query`` if it is an ATTACH of a slatelake lake or a DETACH
        of an attached one; False: it is DuckDB's to run."""
        request = parse_attach(query)
        if request is not None:
            if request.if_not_exists and request.alias.lower() in self._taken():
                return True  # as DuckDB: a database by that name is there, nothing to do
            self.attach(
                request.url,
                request.alias,
                read_only=request.read_only,
                data_path=request.data_path,
                snapshot_version=request.snapshot_version,
                snapshot_time=request.snapshot_time,
                create_if_not_exists=request.create_if_not_exists,
                if_not_exists=request.if_not_exists,
                encrypted=request.encrypted,
                write_deletion_vectors=request.write_deletion_vectors,
                override_data_path=request.override_data_path,
            )
            return True
        found = _DETACH.match(query)
        if found is not None and self.get(_unquote_name(found.group("alias"))) is not None:
            return self.detach(_unquote_name(found.group("alias")))
        return False

    # -- statements on the host --------------------------------------------------------
    def named(self, query: str) -> list[S]:
        """The attached lakes ``query`` names, or that are in USE."""
        if not self._lakes:
            return []
        found = [
            lake
            for alias, lake in self._lakes.items()
            if stmt.names_any(query, frozenset({alias}), strings=False) is not None
        ]
        where = current_use(self._host.con)
        if where is not None:
            used = self._lakes.get(where[0].lower())
            if used is not None and used not in found:
                found.append(used)
        return found

    def commit_outside_writes(self) -> None:
        """What DuckDB wrote to an attached lake behind the host's back lands now."""
        for lake in self._lakes.values():
            lake._committer.commit_outside_writes()

    def ready(self, lakes: list[S]) -> None:
        """Bring each to its log's head before a read."""
        for lake in lakes:
            lake._runner.ready_to_read()

    @contextmanager
    def writing(self, lakes: list[S], in_transaction: bool) -> Iterator[None]:
        """Hold each named lake's commit lock at its head while a statement
        that may write it runs; then commit what it wrote there.
        ``in_transaction``: the statement's connection (the host's, or a
        cursor's) has a transaction open."""
        if in_transaction:
            names = ", ".join(lake.alias for lake in lakes)
            raise MisconfigurationError(
                f"this transaction is {self._host.alias}'s; a write to the attached lake "
                f"{names} runs in autocommit (or in a session of its own on that lake)"
            )
        busy = [lake.alias for lake in lakes if lake.in_transaction]
        if busy:
            raise MisconfigurationError(
                f"the attached lake {', '.join(busy)} has a transaction open on its own "
                "session; commit or roll it back before writing it from here"
            )
        held: list[S] = []
        watched = [lake for lake in lakes if lake.read_only]
        try:
            for lake in lakes:
                lake._runner.ready_to_read()
                if lake.read_only:
                    continue  # never written: a change there is refused after
                lake._committer.lock_at_head(fresh=lake._view.just_refreshed())
                lake.lake.lease.begin_write(lake.state.last_seq)
                held.append(lake)
        except BaseException:
            _release(held)
            raise
        try:
            yield
        except BaseException:
            # DuckDB may have committed to a lake's copy before the host's flow
            # failed: that lands too (the lock is held on its head); else it goes back
            _settle(held)
            raise
        failed: BaseException | None = None
        for lake in watched:
            try:
                lake._committer.refuse_written_beside()
            except BaseException as exc:  # noqa: BLE001 - the rest still commit or release
                failed = failed or exc
        for lake in held:
            try:
                lake._committer.commit_written_beside()
            except BaseException as exc:  # noqa: BLE001 - the rest still commit or release
                failed = failed or exc
            finally:
                lake.lake.lease.end_write()
        if failed is not None:
            raise failed
        self._host.log.truncate_if_due()


def _settle(held: Sequence[Session]) -> None:
    """After a failed statement: commit what reached each lake's copy, if
    anything did (``commit_written_beside`` gives the lock back otherwise)."""
    for lake in held:
        try:
            lake._committer.commit_written_beside()
        except Exception:  # noqa: BLE001 - the statement's own error is the one raised
            log.warning("attached lake %s: a write beside a failed statement", lake.alias)
            with suppress(Exception):
                lake._committer.release_lock()
        finally:
            with suppress(Exception):
                lake.lake.lease.end_write()


def _release(held: Sequence[Session]) -> None:
    for lake in held:
        with suppress(Exception):
            lake._committer.release_lock()
        with suppress(Exception):
            lake.lake.lease.end_write()
