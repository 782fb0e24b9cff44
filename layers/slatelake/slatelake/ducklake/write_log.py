"""Which metadata tables a DuckLake call wrote, from DuckDB's own query log.

DuckLake writes its metadata catalog only through SQL statements (and the
appender, whose batches DuckDB logs as ``INSERT INTO ... FROM
__duckdb_internal_appended_data``), because the same code must run against
Postgres and SQLite catalogs. DuckDB's ``QueryLog`` records each of them, so
after a statement the log names exactly the tables DuckLake wrote, however
many tables the lake holds; capture then reads only those.

Each capture reads the entries past the newest it has seen (DuckDB's
``context_id`` only grows), so the next one sees only what ran since, and
truncates the log every ``WRITES_PER_TRUNCATE`` captures (a truncation is a
statement of its own); a session also truncates it after its own writes to
DuckLake's copy (a load, others' commits applied). Nothing is truncated between the
statements of a transaction and its COMMIT, when DuckLake writes. Reads only
append to the log, so it is also truncated every ``READS_PER_TRUNCATE``
reads to keep memory flat in a read-only session.

Anything the log cannot vouch for makes ``written`` return None, and the
caller falls back to comparing every table:
- the log holds nothing at all (someone turned logging off or filtered the
  ``QueryLog`` type away: the statement itself would have been logged);
- a write whose target looks like a DuckLake metadata table but is not
  qualified with the metadata database (``USE __slatelake_meta`` then an
  unqualified ``INSERT INTO ducklake_metadata``), or names a metadata table
  slatelake does not know.
Writes to the session's base copy are its own bookkeeping and are ignored.

``Written.appended`` names the tables DuckLake only inserted into, in its own
spelling (``"meta"."main".table``, or the appender's ``meta.main.table``), with
no ``OR REPLACE`` or ``ON CONFLICT``: capture reads those by the new ids
alone, without counting them. A row written by hand can carry an old id, or
change in place, so a statement sent through the session that names the
metadata database turns this off for the next capture (``user_statement``),
which then compares each table written whole (``Written.by_hand``). A
hand-written insert through another cursor of the instance, outside the session's statements,
is not seen that way; writing DuckLake's metadata by hand is not supported.
``Written.removed`` names the tables only ever deleted from: one whose
count did not move lost no row, whoever deleted, and capture skips it.

The log is the DuckDB instance's, and a user may be logging too (``CALL
enable_logging('DuckLakeMetadata')`` before or after connecting). Turning
``QueryLog`` on keeps the types the user turned on beside it, and while the
user logs anything nothing is truncated: each capture reads only the
entries past the newest it has seen (DuckDB's ``context_id`` only grows), so
the user's entries stay for ``duckdb_logs()`` as on stock, beside the
session's ``QueryLog`` ones (the log then grows as the user's own does, and
costs each capture a scan of it). ``disable_logging`` hands the log back:
the next write finds it empty, compares every table once and turns
``QueryLog`` on alone.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import duckdb

from slatelake.catalog import registry
from slatelake.ducklake.sql import ident, literal

READS_PER_TRUNCATE = 256
WRITES_PER_TRUNCATE = 16
# A write verb and the name it targets (up to three dotted parts, quoted or not).
_TARGET = (
    r"\b(insert\s+(?:or\s+\w+\s+)?into|update|delete\s+from|"
    r"create\s+(?:or\s+replace\s+)?(?:temp\s+|temporary\s+)?table(?:\s+if\s+not\s+exists)?|"
    r"drop\s+table(?:\s+if\s+exists)?|alter\s+table(?:\s+if\s+exists)?|truncate(?:\s+table)?|"
    r"merge\s+into|copy)\s+"
    r'((?:"(?:[^"]|"")*"|\w+)(?:\s*\.\s*(?:"(?:[^"]|"")*"|\w+)){0,2})'
)
_PARSE = re.compile(_TARGET, re.IGNORECASE)
_PART = re.compile(r'"((?:[^"]|"")*)"|(\w+)')
_PLAIN_INSERT = re.compile(r"insert\s+into", re.IGNORECASE)
_DELETE = re.compile(r"delete\s+from", re.IGNORECASE)
_DDL = ("create", "drop", "alter")


@dataclass(frozen=True)
class Written:
    """Metadata tables written in the window; ``ddl`` those created, dropped or
    altered; ``appended`` those only ever inserted into (a plain ``INSERT
    INTO``, no ``OR REPLACE`` or ``ON CONFLICT``): they lost and changed no row."""

    tables: frozenset[str]
    ddl: frozenset[str]
    appended: frozenset[str] = frozenset()
    # those only ever deleted from (``DELETE FROM``): a count that did not move
    # says no row went, so nothing changed there
    removed: frozenset[str] = frozenset()
    # a statement of the session's user named the metadata database: a row
    # may have changed in place, where no id or snapshot predicate looks
    by_hand: bool = False


class WriteLog:
    def __init__(self, con: duckdb.DuckDBPyConnection, meta: str, base: str) -> None:
        self.con = con
        self.meta = meta.lower()
        self.base = base.lower()
        self._reads = 0
        self._writes = 0  # captures since the last truncation
        # another log type kept beside QueryLog, and who reads it before each
        # truncation (``request_log.RequestWatch``, while a step watches)
        self.also: tuple[str, Callable[[], None]] | None = None
        self.user_types: frozenset[str] = frozenset()  # the types the user logs
        self._user_all = False  # the user logs every type (enable_logging() without types)
        self._added: frozenset[str] = frozenset()  # what enable() turned on, not the user
        self._mark = 0  # the newest entry read, while the user's log is kept
        self._user_named_meta = False  # a user statement named the metadata database
        # other sessions read this DuckDB log too (lakes attached to one host,
        # attached_lakes.py): only marks move; the host truncates when all are done
        self.shared = False
        self._quiet = 0  # statements since the host's last truncation

    @property
    def keeps_user_log(self) -> bool:
        """The user logs too (or the log is shared): it is truncated by no capture."""
        return self.shared or self._user_all or bool(self.user_types)

    def truncate_if_due(self) -> None:
        """At a point where no reader of a shared log has anything left to
        capture (the host, after its attached lakes committed): truncate the
        log every ``READS_PER_TRUNCATE`` statements, unless the user logs."""
        if not self.shared or self._user_all or self.user_types:
            return
        self._quiet += 1
        if self._quiet >= READS_PER_TRUNCATE:
            newest = self.con.execute("SELECT max(context_id) FROM duckdb_logs()").fetchone()
            self._mark = max(self._mark, int(newest[0] or 0))
            self.con.execute("CALL truncate_duckdb_logs()")
            self._quiet = 0

    def enable(self) -> None:
        """Log every query (DuckDB's ``QueryLog`` type, kept in memory),
        keeping whatever the user logs beside it."""
        self._note_user_logging()
        if self._user_all:
            return  # every type is logged, QueryLog with them
        ours = {"QueryLog"} | ({self.also[0]} if self.also is not None else set())
        self._added = frozenset(ours - self.user_types)
        types = ", ".join(literal(t) for t in sorted(ours | self.user_types))
        self.con.execute(f"CALL enable_logging([{types}])")

    def _note_user_logging(self) -> None:
        """What the instance logs now, less what this session turned on."""
        on, mode, types = self.con.execute(
            "SELECT current_setting('enable_logging'), current_setting('logging_mode'), "
            "current_setting('enabled_log_types')"
        ).fetchone()
        self._user_all = bool(on) and mode != "ENABLE_SELECTED"
        named = {t.strip() for t in str(types or "").split(",") if t.strip()}
        self.user_types = (
            frozenset(named - self._added) if on and not self._user_all else frozenset()
        )

    def open(self) -> None:
        """Forget what was logged so far (the session's own writes)."""
        if self.also is not None:
            self.also[1]()
        if self.keeps_user_log:
            newest = self.con.execute("SELECT max(context_id) FROM duckdb_logs()").fetchone()
            self._mark = max(self._mark, int(newest[0] or 0))
        else:
            self.con.execute("CALL truncate_duckdb_logs()")
        self._reads = 0
        self._writes = 0

    def read_done(self) -> None:
        """A read ran: keep the log from growing without bound (unless the
        user's entries are in it)."""
        self._reads += 1
        if self._reads >= READS_PER_TRUNCATE and not self.keeps_user_log:
            self.open()

    def written(self) -> Written | None:
        """The metadata tables written since the last read; None when the log
        cannot say."""
        entries = self.con.execute(
            "SELECT context_id, message FROM duckdb_logs() "
            f"WHERE type = 'QueryLog' AND context_id > {int(self._mark)}"
        ).fetchall()
        if not entries:  # not even the statement itself: logging was turned off
            self.enable()  # or the user chose other types: keep them, before truncating
            self.open()
            return None
        self._seen(max(int(e[0]) for e in entries))
        tables: set[str] = set()
        ddl: set[str] = set()
        changed: set[str] = set()  # written some other way than a plain insert
        kept: set[str] = set()  # written some other way than a delete
        for _, message in entries:
            lowered = message.lower()
            if "ducklake" not in lowered:
                continue
            upsert = "conflict" in lowered  # INSERT ... ON CONFLICT may change rows
            for m in _PARSE.finditer(message):
                parsed = self._target(m)
                if parsed is None:
                    return None
                if not parsed:
                    continue
                verb, name = parsed
                tables.add(name)
                if verb in _DDL:
                    ddl.add(name)
                if not self._ducklake_insert(m, upsert):
                    changed.add(name)
                if _DELETE.fullmatch(m.group(1)) is None:
                    kept.add(name)
        by_hand, self._user_named_meta = self._user_named_meta, False
        appended = frozenset() if by_hand else frozenset(tables - changed)
        return Written(
            frozenset(tables), frozenset(ddl), appended, frozenset(tables - kept), by_hand
        )

    def user_statement(self, query: str) -> None:
        """A statement the user sent through the session: one that names the
        metadata database writes it by hand, and the next capture takes no
        insert in its window on trust (``Written.appended``)."""
        if self.meta in query.lower():
            self._user_named_meta = True

    def _ducklake_insert(self, m: re.Match[str], upsert: bool) -> bool:
        """A plain insert as DuckLake spells one (``"meta"."main".table``, or
        the appender's ``meta.main.table``): it adds rows and changes none."""
        if upsert or _PLAIN_INSERT.fullmatch(m.group(1)) is None:
            return False
        target = m.group(2).split(".")
        if len(target) != 3:
            return False
        quoted = target[:2] == [ident(self.meta), ident("main")]
        bare = target[:2] == [self.meta, "main"]
        return quoted or bare

    def _seen(self, newest: int) -> None:
        """What was read is forgotten: past the mark from now on, and the log
        truncated every ``WRITES_PER_TRUNCATE`` captures (at once while
        another log type is watched: its reader runs before a truncation)."""
        self._writes += 1
        if self.keeps_user_log or self.also is not None or self._writes >= WRITES_PER_TRUNCATE:
            self.open()
        self._mark = max(self._mark, newest)

    def _target(self, m: re.Match[str]) -> tuple[str, str] | tuple[()] | None:
        """(verb, metadata table) for a write to the metadata database; () for a
        write that cannot touch it; None for one that may, unqualified."""
        verb = m.group(1).split()[0].lower()
        parts = [(q.replace('""', '"') if q else w) for q, w in _PART.findall(m.group(2))]
        name = parts[-1].lower()
        database = parts[0].lower() if len(parts) > 1 else None
        if database == self.base:
            return ()  # the session's own bookkeeping
        if database == self.meta:
            if name in registry.BY_NAME or registry.inline_table(name) is not None:
                return verb, name
            return None  # a table slatelake does not know: compare everything
        if name.startswith("ducklake_"):
            return None  # maybe the metadata database under another spelling or USE
        return ()
