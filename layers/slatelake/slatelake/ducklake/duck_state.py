"""The committed catalog at a session's head, kept in DuckDB.

A ``DuckState`` answers what a session, its capture and its commits ask of
the catalog (``rows``, ``get``, one group, one inlined table's keys, the
inlined tables' DDL) with SQL against a base database, so a session never
holds a Python object per catalog row. It advances exactly as a
``CatalogState`` does (``Lake.refresh`` and ``Lake.commit_change_set`` call
``apply``), and remembers the change sets it applied that DuckLake's working
copy has not seen yet (``pending``), so the session brings that copy along
by applying the same change sets instead of reloading it.

The base database lags: change sets are applied to it when something next
reads it (``settle``), as one net effect, so a run of writes that capture
answers without the base (its counts and statistics are known from the last
capture) pays one apply for the run, not one per write. Everything that
reads the base goes through ``settle`` first, naming the tables it reads.
The lag is kept per table, and a read applies only its tables' (a pass's
capture reads the base's data files after each merge: it no longer applies
every snapshot and statistics row that waited with them); a table whose
lag is empty holds what the state says, and is read as it is. A net effect
the keys of which cannot be told apart by table (a range over several
tables, an undecodable key) joins every lag into one, applied whole.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from slatelake.catalog import registry
from slatelake.catalog.rows import Row, group_key, row_key, table_of_key
from slatelake.catalog.state import CatalogState, apply_side_records, check_catalog_ranges
from slatelake.ducklake import catalog_apply, catalog_db
from slatelake.ducklake.sql import ident, run
from slatelake.errors import CorruptionError, UnsupportedError
from slatelake.log.changeset import ChangeSet, Head
from slatelake.store.keys import Subspace

log = logging.getLogger("slatelake.session")
# a base database's identity within the process: a new one per load
_LOADS = itertools.count(1)
# (load, writes applied since): see DuckState.version
Version = tuple[int, int]
# The base settles when this many change sets, or keys, wait: the net effect
# held in Python stays small, and the apply it saves is per change set, not
# per key.
LAG_MAX = 64
LAG_KEYS_MAX = 20_000


# the key of the one lag that may span tables (every lag joined)
_ALL = ""


@dataclass
class _Lag:
    """Change sets applied to the state but not yet to one table of its base
    database (or to any, under ``_ALL``): their net effect, and what the
    database held there when the first was applied."""

    net: catalog_apply.NetEffect
    head: int  # the newest snapshot the table holds
    next_file: int | None | bool  # the head's next file id (False: not known)
    inline_names: set[str] | None  # the inlined tables the database holds (None: not known)


def _by_table(net: catalog_apply.NetEffect) -> dict[str, catalog_apply.NetEffect] | None:
    """``net`` split by the table each key and range belongs to; None when
    one cannot be told (a range that may span tables, an undecodable key)."""
    parts: dict[str, catalog_apply.NetEffect] = {}
    for key, value in net.keys.items():
        try:
            name = table_of_key(key)
        except CorruptionError:
            return None
        parts.setdefault(name, catalog_apply.NetEffect()).keys[key] = value
    for start, end in net.ranges:
        name = catalog_apply.range_table(start, end)
        if name is None:
            return None
        parts.setdefault(name, catalog_apply.NetEffect()).ranges.append((start, end))
    return parts


class DuckState:
    def __init__(self, con: duckdb.DuckDBPyConnection, db: str, head: Head, last_seq: int) -> None:
        self.con = con
        self.db = db
        self.head = head
        self.last_seq = last_seq
        self.sys_overlay: dict[bytes, bytes | None] = {}
        self.index_overlay: dict[bytes, bool] = {}
        self.index_swept: dict[bytes, bytes] = {}
        # applied here, not yet to DuckLake's copy; None: that copy must be rebuilt
        self.pending: list[ChangeSet] | None = []
        self.source = "store"
        # the verified image this state was opened from, until DuckLake's copy is made
        self.image_file: Path | None = None
        self._inline_names: set[str] | None = None  # cached; DDL change sets reset it
        # keys of slatelake's own tables (index definitions: read at every commit)
        self._own_keys: dict[int, set[bytes]] = {}
        self.columns = catalog_db.ColumnCache()  # inlined tables' columns, read once
        # (load, writes): moves whenever the base's catalog rows change, and
        # only then (a commit lock's or a status record's slot leaves it), so
        # what was counted in the base stays true while it stands
        self.version: Version = (next(_LOADS), 0)
        # the head snapshot's next file and catalog ids, as of one version
        self._head_ids: tuple[Version, int | None, int | None] | None = None
        # applied here, not yet to the database: per table (or one, ``_ALL``)
        self._lags: dict[str, _Lag] = {}
        self._lagging = 0  # change sets applied here since the database was whole

    # -- building ----------------------------------------------------------------
    @classmethod
    def empty_db(cls, con: duckdb.DuckDBPyConnection, db: str) -> None:
        con.execute(f"DETACH DATABASE IF EXISTS {ident(db)}")
        # hidden from the user's listings, as stock DuckLake hides its metadata catalog
        con.execute(f"ATTACH ':memory:' AS {ident(db)} (HIDDEN)")

    @classmethod
    def from_state(cls, con: duckdb.DuckDBPyConnection, db: str, state: CatalogState) -> DuckState:
        """Load a materialized state (the store path of an open) into a fresh ``db``."""
        cls.empty_db(con, db)
        catalog_db.load_state(con, db, state, own=True)
        out = cls(con, db, state.head, state.last_seq)
        out._take_side_records(state)
        out._inline_names = set(state.inline_ddl())  # exactly the tables just created
        return out

    def _take_side_records(self, state: CatalogState) -> None:
        self.sys_overlay = dict(state.sys_overlay)
        self.index_overlay = dict(state.index_overlay)
        self.index_swept = dict(state.index_swept)

    # -- advancing -------------------------------------------------------------
    def apply(self, cs: ChangeSet, seq: int | None = None) -> None:
        self.apply_tail([(seq, cs)])

    def apply_tail(self, tail: Iterable[tuple[int | None, ChangeSet]]) -> None:
        """Take change sets in log order: the state moves now, the base
        database when a read needs it (``settle``: one net effect, a few
        statements per table)."""
        net = catalog_apply.NetEffect()
        head = self.head.snapshot_id  # what the database holds, if nothing lags
        next_file = self._known_next_file()
        applied: list[ChangeSet] = []
        for seq, cs in tail:
            check_catalog_ranges(cs, seq)
            net.add(cs)
            apply_side_records(self, cs)
            applied.append(cs)
            self.head = cs.result
            if seq is not None:
                self.last_seq = seq
        if not applied:
            return
        if net.keys or net.ranges:
            self._lag_behind(net, head, next_file)
            self._lagging += len(applied)
            self.version = (self.version[0], self.version[1] + 1)
        self._track_inline_names(net)
        if self._own_keys and (
            any(_spans_kinds(r, self._own_keys) for r in net.ranges)
            or any(k[1] in self._own_keys for k in net.keys)
        ):
            self._own_keys = {}
        if self.pending is not None:
            self.pending.extend(applied)
        waiting = self._lagging
        if self._lags and (
            waiting >= LAG_MAX or sum(len(g.net.keys) for g in self._lags.values()) >= LAG_KEYS_MAX
        ):
            # a commit has landed by now: an apply that fails here must not
            # report it as failed; the change sets wait, and the next read
            # that needs them applies them (or raises) itself
            try:
                self.settle()
            except duckdb.Error as exc:
                log.warning(
                    "the base database could not apply %d change sets yet: %s", waiting, exc
                )

    def _lag_behind(
        self, net: catalog_apply.NetEffect, head: int, next_file: int | None | bool
    ) -> None:
        """Add ``net`` to the lags of the tables it touches; ``head`` and
        ``next_file`` are what a table with no lag holds (the state before it)."""
        parts = _by_table(net)
        if parts is None and self._lags and _ALL not in self._lags:
            # the tables' lags are applied first, so the one lag starts from a
            # whole database whose inlined tables are known (a commit has
            # landed: a failure here waits for the next read, as below)
            try:
                self.settle()
            except duckdb.Error as exc:
                log.warning("the base database could not apply its tables' lags yet: %s", exc)
                self._join_lags(head, next_file)
        if parts is None or _ALL in self._lags:
            parts = {_ALL: net}
        names = None if self._inline_names is None else set(self._inline_names)
        for table, part in parts.items():
            lag = self._lags.get(table)
            if lag is None:
                lag = self._lags[table] = _Lag(catalog_apply.NetEffect(), head, next_file, names)
            lag.net.merge(part)

    def _join_lags(self, head: int, next_file: int | None | bool) -> None:
        """Make every table's lag one (``_ALL``), for a net effect that may
        span tables, when they could not be applied first. No table of the
        database holds a row past ``head``, the state's before that net
        effect (a lagging table holds less): a row judged new there is new
        in every table, where an older lag's head would not do. The
        database's inlined tables are then looked up."""
        joined = catalog_apply.NetEffect()
        for lag in self._lags.values():  # disjoint tables: order does not matter
            joined.merge(lag.net)
        self._lags = {_ALL: _Lag(joined, head, next_file, None)}

    def settle(self, tables: Iterable[str] | None = None) -> None:
        """Apply what the base database lags behind the state in ``tables``
        (None: in every table), as one transaction; a failure leaves the
        base lagging, as it was."""
        if not self._lags:
            return
        if tables is None or _ALL in self._lags:
            chosen = list(self._lags)
        else:
            chosen = [t for t in dict.fromkeys(tables) if t in self._lags]
        if not chosen:
            return
        parts = [
            catalog_apply.Part(lag.net, lag.head, lag.next_file, lag.inline_names)
            for lag in (self._lags[t] for t in chosen)
        ]
        catalog_apply.apply_parts(self.con, self.db, parts, own=True, columns=self.columns)
        for table in chosen:
            del self._lags[table]
        if not self._lags:
            self._lagging = 0

    def _track_inline_names(self, net: catalog_apply.NetEffect) -> None:
        """Keep the cached inlined-table names in step with the DDL keys applied
        (listing the hidden base's tables costs a schema copy)."""
        if self._inline_names is None:
            return
        if any(
            start[0] == Subspace.INLINE and start[1] in registry.INLINE_DDL_KINDS
            for start, _ in net.ranges
        ):
            self._inline_names = None
            return
        for key, value in net.keys.items():
            if key[0] == Subspace.INLINE and key[1] in registry.INLINE_DDL_KINDS:
                name = table_of_key(key)
                if value is None:
                    self._inline_names.discard(name)
                else:
                    self._inline_names.add(name)

    def replace_with(self, other: CatalogState) -> None:
        """Become ``other`` (a re-materialization after the view went stale)."""
        fresh = DuckState.from_state(self.con, self.db, other)
        self._lags, self._lagging = {}, 0  # the database was rebuilt at the new state
        self.head, self.last_seq = fresh.head, fresh.last_seq
        self.version = fresh.version
        self._head_ids = None
        self._take_side_records(other)
        self._inline_names = fresh._inline_names
        self._own_keys = {}
        self.pending = None

    # -- reading -----------------------------------------------------------------
    def rows(self, table: str) -> list[Row]:
        self.settle([table])
        return catalog_db.table_rows(self.con, self.db, table, self.columns)

    def get(self, key: bytes) -> Any:
        """The decoded entry stored under ``key`` (a row, or a group's rows), or None."""
        self.settle([table_of_key(key)])
        rows = catalog_db.rows_at(self.con, self.db, key, self.columns)
        if not rows:
            return None
        spec = registry.BY_KIND.get(key[1])
        if spec is not None and spec.grouped:
            return rows
        return rows[0]

    def group(self, key: bytes) -> list[Row]:
        # read even for a file id past the head's next one: a damaged catalog
        # can hold such rows, and the sweep that reclaims them asks here
        self.settle([table_of_key(key)])
        return catalog_db.rows_at(self.con, self.db, key, self.columns)

    def groups(self, keys: Iterable[bytes]) -> dict[bytes, list[Row]]:
        """The rows of each grouped value, one query per table."""
        wanted = list(keys)
        if not wanted:
            return {}
        self.settle({table_of_key(k) for k in wanted})
        return catalog_db.groups_at(self.con, self.db, wanted, self.columns)

    def inline_row_keys(self, inline: registry.InlineTable) -> set[bytes]:
        self.settle([inline.name])
        exists = None if self._inline_names is None else inline.name in self._inline_names
        return catalog_db.inline_keys(self.con, self.db, inline, self.columns, exists)

    def head_ids(self) -> tuple[int | None, int | None]:
        """The head snapshot's next file and catalog ids (None before the
        first snapshot): read once per version of the base, not at all after
        a commit of this session says them (``note_head_ids``)."""
        if self._cached_head_ids() is None:
            row = None
            if self.head.snapshot_id >= 0:
                self.settle(["ducklake_snapshot"])
                row = run(
                    self.con,
                    f"SELECT next_file_id, next_catalog_id FROM {ident(self.db)}.ducklake_snapshot "
                    "WHERE snapshot_id = ?",
                    [self.head.snapshot_id],
                ).fetchone()
            file, catalog = (None, None) if row is None else row
            self._head_ids = (
                self.version,
                None if file is None else int(file),
                None if catalog is None else int(catalog),
            )
        return self._head_ids[1], self._head_ids[2]

    def _cached_head_ids(self) -> tuple[Version, int | None, int | None] | None:
        ids = self._head_ids
        return ids if ids is not None and ids[0] == self.version else None

    def _known_next_file(self) -> int | None | bool:
        """The head's next file id if known at this version, else False
        (applying a tail then reads it only if a file key comes up)."""
        ids = self._cached_head_ids()
        return False if ids is None else ids[1]

    def note_head_ids(self, snapshot_id: int, next_file: int, next_catalog: int) -> None:
        """A commit just applied here made snapshot ``snapshot_id`` with these ids."""
        if snapshot_id == self.head.snapshot_id:
            self._head_ids = (self.version, next_file, next_catalog)

    def keys_of_kind(self, kind: int) -> set[bytes]:
        spec = registry.BY_KIND.get(kind)
        if spec is None:
            raise UnsupportedError(f"keys of kind 0x{kind:02x} are not listed from DuckDB")
        own = spec in registry.OWN_TABLES
        if own and kind in self._own_keys:
            return set(self._own_keys[kind])
        key = group_key if spec.grouped else row_key
        keys = {key(spec, r) for r in self.rows(spec.name)}
        if own:  # few, and asked at every commit: kept until a change set touches them
            self._own_keys[kind] = set(keys)
        return keys

    def list_inline_names(self) -> None:
        """Read the inlined tables from the base now (an open from an image,
        whose file says them nowhere else): listed whole through a schema
        copy (``tables.listed_tables``; the base is hidden from DuckDB's own
        listings)."""
        self._inline_names = None
        self.inline_names()

    def inline_names(self) -> set[str]:
        """The inlined tables of the base (cached: only DDL change sets move it)."""
        if self._inline_names is None:
            self.settle()
            self._inline_names = {
                name
                for name in catalog_db.catalog_tables(self.con, self.db)
                if registry.inline_table(name) is not None
            }
        return set(self._inline_names)

    def inline_ddl(self) -> dict[str, list[tuple[str, str]]]:
        self.settle()
        return {name: self.columns.get(self.con, self.db, name) for name in self.inline_names()}

    def is_empty(self) -> bool:
        """No DuckLake catalog yet (a new lake before its first commit)."""
        # one lookup (listing the hidden base's tables costs a schema copy)
        self.settle()
        if not catalog_db.table_exists(self.con, self.db, "ducklake_snapshot"):
            return True
        sql = f"SELECT count(*) FROM {ident(self.db)}.ducklake_snapshot"
        return not self.con.execute(sql).fetchone()[0]


def _spans_kinds(rng: tuple[bytes, bytes], kinds: Iterable[int]) -> bool:
    """Whether a range delete can reach a key of one of ``kinds`` in any
    subspace (a flush's range, one inlined table's rows, reaches none)."""
    start, end = rng
    return any(start[:2] <= bytes((sub, k)) <= end[:2] for sub in Subspace for k in kinds)
