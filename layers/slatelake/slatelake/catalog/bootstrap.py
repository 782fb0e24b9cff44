"""Laying down a new lake straight from a catalog's rows, as folded state.

Importing a catalog (``slatelake import``) must not push every row through
the commit log as one giant change set: that is one slot holding the whole
catalog, replayed by every view until a holder folds it, and capped by
``SLATELAKE_MAX_CHANGESET_OPS``. Instead the rows are written into the store
directly, in WriteBatches, as if a holder had already folded them: every
stored key comes from the same ``rows.py`` mapping a change set uses (a live
row under its live key, an ended versioned row under its history key, a
grouped table's rows of one parent as one value, an inlined table's DDL and
rows in ``inline``). Then, last, ``sys``: the format stamp and ``sys/fold`` =
(slot 0, head (newest snapshot id, 0)). A view opens
it like any lake (fold cursor 0, an empty log) and the next DuckLake commit
mints snapshot id + 1.

The lake root must be empty (no store, no log, nothing): an import never
lands on or beside another lake. A failure part way leaves rows without
``sys`` records; such a root is refused by name ("a partial import") until
it is deleted. Knows no SQL and no DuckDB.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from slatelake.catalog import registry
from slatelake.catalog.rows import (
    Row,
    encode_group,
    encode_inline_ddl,
    encode_inline_row,
    encode_row,
    group_key,
    inline_ddl_key,
    inline_row_key,
    row_key,
)
from slatelake.catalog.state import (
    SYS_FOLD,
    SYS_FORMAT,
    encode_fold,
    encode_format,
)
from slatelake.errors import MisconfigurationError, UnsupportedError
from slatelake.log.changeset import Head
from slatelake.store.db import StoreWriter, open_writer, store_exists
from slatelake.store.location import LakeLocation
from slatelake.store.objects import ObjectClient

BATCH_KEYS = 20_000  # keys per WriteBatch
SNAPSHOT_TABLE = "ducklake_snapshot"


@dataclass(frozen=True)
class BootstrapReport:
    """What a bootstrap wrote: the lake's head, rows per table, stored keys."""

    url: str
    head: Head
    rows: dict[str, int]
    keys: int
    batches: int
    seconds: float


def check_empty_root(location: LakeLocation) -> None:
    """Refuse a root that holds a lake, a partial import or anything at all."""
    if store_exists(location):
        from slatelake.store.db import open_reader

        reader = open_reader(location)
        try:
            folded = reader.get(SYS_FOLD) is not None
        finally:
            reader.close()
        if folded:
            raise MisconfigurationError(
                f"a lake already exists at {location.url}; import lays down a new lake: "
                "choose an empty root"
            )
        raise MisconfigurationError(
            f"{location.url} holds a partial import (a store without a fold cursor); "
            "delete that root and import again"
        )
    prefix = location.root + "/" if location.root else ""
    found = next(iter(ObjectClient(location).list(prefix)), None)
    if found is not None:
        raise MisconfigurationError(
            f"lake root {location.url} is not empty (it holds {found.path}); import lays "
            "down a new lake: choose an empty root"
        )


class Bootstrap:
    """A new lake's store, written table by table, then ``finish``ed.

    ``add_table`` takes one table's rows whole (a grouped table's rows of one
    parent are one stored value, so a table cannot arrive in two calls).
    Registry rows are tuples in the registry's column order; an inlined
    table also needs its columns (name, DuckDB type), which become its DDL.
    """

    def __init__(self, url: str, batch_keys: int = BATCH_KEYS) -> None:
        self.location = LakeLocation.parse(url)
        check_empty_root(self.location)
        self.batch_keys = batch_keys
        self._started = time.perf_counter()
        self._writer: StoreWriter | None = open_writer(self.location)
        self._pending: list[tuple[bytes, bytes]] = []
        self._rows: dict[str, int] = {}
        self._keys = 0
        self._batches = 0
        self._max_snapshot: int | None = None

    # -- rows --------------------------------------------------------------
    def add_table(
        self,
        name: str,
        rows: Iterable[Row],
        columns: Sequence[tuple[str, str]] | None = None,
    ) -> int:
        """Write one table's rows; returns how many. Refuses a table slatelake
        does not store, a row of the wrong width, two rows under one key."""
        if name in self._rows:
            raise UnsupportedError(f"{name}: its rows were already written; give a table once")
        inline = registry.inline_table(name)
        try:
            if inline is not None:
                count = self._add_inline(inline, rows, columns)
            else:
                count = self._add_registry(_spec(name), rows, columns)
        except (TypeError, OverflowError) as exc:  # the value codec (store/values.py)
            raise UnsupportedError(
                f"{name}: a value cannot be stored by slatelake's value codec ({exc}); "
                "this catalog cannot be imported whole"
            ) from None
        self._rows[name] = count
        return count

    def _add_inline(
        self,
        inline: registry.InlineTable,
        rows: Iterable[Row],
        columns: Sequence[tuple[str, str]] | None,
    ) -> int:
        if columns is None:
            raise UnsupportedError(f"{inline.name}: an inlined table needs its columns")
        ddl = [(str(c), str(t)) for c, t in columns]
        self._put(inline_ddl_key(inline), encode_inline_ddl(inline, ddl))
        seen: set[bytes] = set()
        count = 0
        for row in rows:
            self._check_width(inline.name, row, len(ddl))
            key = inline_row_key(inline, row)
            self._unique(inline.name, key, row, seen)
            self._put(key, encode_inline_row(inline, row))
            count += 1
        return count

    def _add_registry(
        self,
        spec: registry.TableSpec,
        rows: Iterable[Row],
        columns: Sequence[tuple[str, str]] | None,
    ) -> int:
        if columns is not None and tuple(c for c, _ in columns) != spec.column_names:
            raise UnsupportedError(
                f"{spec.name}: columns {[c for c, _ in columns]} are not DuckLake 1.0's "
                f"{list(spec.column_names)}"
            )
        groups: dict[bytes, list[Row]] = defaultdict(list)
        seen: set[bytes] = set()
        snapshot = spec.index("snapshot_id") if spec.name == SNAPSHOT_TABLE else None
        count = 0
        for row in rows:
            self._check_width(spec.name, row, spec.width)
            if snapshot is not None:
                self._saw_snapshot(row[snapshot])
            if spec.grouped:
                groups[group_key(spec, row)].append(row)
            else:
                key = row_key(spec, row)
                self._unique(spec.name, key, row, seen)
                self._put(key, encode_row(spec, row))
            count += 1
        for key, members in groups.items():
            self._put(key, encode_group(spec, members))
        return count

    def _saw_snapshot(self, snapshot_id: object) -> None:
        if not isinstance(snapshot_id, int):
            raise UnsupportedError(f"{SNAPSHOT_TABLE}: snapshot_id {snapshot_id!r} is not an id")
        if self._max_snapshot is None or snapshot_id > self._max_snapshot:
            self._max_snapshot = snapshot_id

    @staticmethod
    def _check_width(name: str, row: Row, width: int) -> None:
        if len(row) != width:
            raise UnsupportedError(f"{name}: a row has {len(row)} values for {width} columns")

    @staticmethod
    def _unique(name: str, key: bytes, row: Row, seen: set[bytes]) -> None:
        """Two rows under one key would leave one of them behind: refused,
        never collapsed (an import keeps every row or fails)."""
        if key in seen:
            raise UnsupportedError(
                f"{name}: two rows map to stored key {key.hex()} (one is {row!r}); slatelake "
                "keeps one row per key, so this catalog cannot be imported whole"
            )
        seen.add(key)

    def _put(self, key: bytes, value: bytes) -> None:
        self._pending.append((key, value))
        if len(self._pending) >= self.batch_keys:
            self._write()

    def _write(self) -> None:
        if not self._pending:
            return
        assert self._writer is not None, "bootstrap already finished"
        self._writer.write(self._pending)
        self._keys += len(self._pending)
        self._batches += 1
        self._pending = []

    # -- the end -------------------------------------------------------------
    def finish(self) -> BootstrapReport:
        """Write the last rows, then the sys records, and flush: the lake exists."""
        if self._max_snapshot is None:
            raise UnsupportedError(
                f"the catalog has no {SNAPSHOT_TABLE} rows, so it has no head; a DuckLake "
                "catalog has at least its initial snapshot"
            )
        head = Head(self._max_snapshot, 0)
        self._write()
        assert self._writer is not None, "bootstrap already finished"
        self._writer.write(
            [
                (SYS_FORMAT, encode_format()),
                (SYS_FOLD, encode_fold(0, head)),
            ]
        )
        self._batches += 1
        self._writer.flush()
        self.close()
        return BootstrapReport(
            url=self.location.url,
            head=head,
            rows=dict(self._rows),
            keys=self._keys,
            batches=self._batches,
            seconds=time.perf_counter() - self._started,
        )

    def close(self) -> None:
        """Close the writer. Before ``finish`` this abandons the import: rows
        may be in the store without ``sys``, which is refused as a partial
        import until the root is deleted."""
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()

    def __enter__(self) -> Bootstrap:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _spec(name: str) -> registry.TableSpec:
    spec = next((t for t in registry.TABLES if t.name == name), None)
    if spec is None:
        raise UnsupportedError(
            f"table {name!r} is not a DuckLake 1.0 metadata table slatelake stores; "
            "refusing to import a catalog it cannot keep whole"
        )
    return spec
