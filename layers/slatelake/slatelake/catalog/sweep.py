"""The sweep: reclaim what nothing else does (RFC 0021 steps 7, 7b, 7c).

- 7: entries of equality indexes no longer live (dropped, or their table or
  column dropped). Discovery is a skip-scan per kind: seek, read one key,
  decode its index id; a live id costs one seek past its whole range, a dead
  one is read once (one scan with read-ahead) and drained into batches. Safe
  without coordination because index ids are never reused: a range dead at
  the head stays dead. History is never consulted.
- 7b: file column statistics whose data file is absent from live state and
  history (a damaged or pre-fix catalog holds them; nothing else removes them).
- 7c: inlined-data tables whose table is absent from live state and history.

Every delete goes out as a head-preserving change set of at most
``batch_size`` keys through the commit log: the snapshot id stands, batch_seq
advances once per batch, no DuckLake snapshot is written. A batch that loses
a race rebases (its keys are disjoint from any commit's) or, on a real
conflict, re-reads the head and retries; deletes are idempotent. The sweep
waits ``pace_s`` between batches so applications rarely meet one.

Refuses a read-only lake before reading anything. Knows no SQL.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from slatelake.catalog import indexes, registry
from slatelake.catalog.rows import inline_ddl_key, row_key
from slatelake.catalog.state import SWEEP_INDEX_TABLE, CatalogView
from slatelake.errors import ConflictError, MisconfigurationError, ReadOnlyError, retry
from slatelake.log.changeset import ChangeSet
from slatelake.store.keys import Subspace, decode_key, encode_key

if TYPE_CHECKING:
    from slatelake.catalog.lake import Lake
    from slatelake.log.committer import Committed

DEFAULT_BATCH_SIZE = 65_536
DEFAULT_PACE_S = 1.0
PROGRESS_EVERY = 64  # batches between progress lines
CONFLICT_RETRIES = 8
log = logging.getLogger("slatelake.sweep")


@dataclass(frozen=True)
class SweepRequest:
    """Which sweeps one ``sweep`` call runs (one switch each), the deletes per
    commit and ``pace_s``, the wait between batches."""

    index_entries: bool = True
    file_stats: bool = True
    inlined_tables: bool = True
    batch_size: int = DEFAULT_BATCH_SIZE
    pace_s: float = DEFAULT_PACE_S

    def __post_init__(self) -> None:
        if type(self.batch_size) is not int or self.batch_size <= 0:
            raise MisconfigurationError(
                f"batch_size={self.batch_size!r}: the sweep needs a positive number of deletes "
                f"per commit; use at least 1 (default {DEFAULT_BATCH_SIZE})"
            )
        if self.pace_s < 0:
            raise MisconfigurationError(f"pace_s={self.pace_s!r}: expected seconds >= 0")


@dataclass(frozen=True)
class SweptRange:
    kind: int
    index_id: int
    entries: int


@dataclass
class SweepReport:
    indexes_swept: int = 0
    index_entries_reclaimed: int = 0
    file_stats_files: int = 0  # data files whose stranded statistics went
    file_column_stats_reclaimed: int = 0  # statistics rows
    inlined_tables_reclaimed: int = 0
    inlined_rows_reclaimed: int = 0
    batches: int = 0
    rebases: int = 0  # lost races a batch survived (rebased or retried)
    seeks: int = 0  # discovery cost: one per distinct index id plus one per kind
    ranges: list[SweptRange] = field(default_factory=list)
    stopped: str | None = None  # why it stopped with work left, or None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def sweep(
    lake: Lake,
    request: SweepRequest | None = None,
    state: CatalogView | None = None,
    progress: Callable[[str], None] | None = None,
    should_stop: Callable[[], str | None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> SweepReport:
    """Run the sweeps asked for against the lake's head. ``state`` (kept current as the
    batches commit) defaults to a fresh materialization; ``should_stop``
    returns a reason to stop between batches (a deadline, a shutdown)."""
    request = request or SweepRequest()
    if lake.read_only:
        raise ReadOnlyError(
            f"{lake.location.url} is open read-only and refuses maintenance; reopen read-write"
        )
    if state is None:
        state = lake.materialize()
    else:
        lake.refresh(state)
    sweeper = _Sweeper(lake, state, request, progress, should_stop, sleep)
    if request.index_entries:
        sweeper.sweep_indexes()
    if request.file_stats:
        sweeper.sweep_file_stats()
    if request.inlined_tables:
        sweeper.sweep_inlined_tables()
    return sweeper.report


# -- discovery ---------------------------------------------------------------
def next_index(reader, kind: int, start_id: int) -> int | None:  # noqa: ANN001
    """The lowest index id of ``kind`` with an entry at or after ``start_id``:
    one seek, one read. None past the last."""
    found = reader.seek_first(indexes.kind_prefix(kind), encode_key(Subspace.INDEX, kind, start_id))
    if found is None:
        return None
    return decode_key(found[0])[2][0]


def discover(
    reader,  # noqa: ANN001
    state: CatalogView,
    live: set[int],
    report: SweepReport | None = None,
) -> list[tuple[int, int]]:
    """(kind, index_id) of every dead index holding entries, in key order:
    the store by skip-scan, plus ids only the unfolded log tail wrote.

    The store reader may be ahead of ``state`` (it follows the newest
    manifest), so an id at or past the state's id horizon is never dead: it
    may be an index created after this view. Past the horizon the scan stops."""
    horizon = indexes.id_horizon(state)
    dead: set[tuple[int, int]] = set()
    for kind in indexes.INDEX_KINDS:
        at = 0
        while at < horizon:
            if report is not None:
                report.seeks += 1
            index_id = next_index(reader, kind, at)
            if index_id is None or index_id >= horizon:
                break
            if index_id not in live:
                dead.add((kind, index_id))
            at = index_id + 1
    for key, present in state.index_overlay.items():
        if present:
            _, kind, comps = decode_key(key)
            if comps[0] not in live and comps[0] < horizon:
                dead.add((kind, comps[0]))
    return sorted(dead)


# -- the sweep ---------------------------------------------------------------
class _Sweeper:
    def __init__(
        self,
        lake: Lake,
        state: CatalogView,
        request: SweepRequest,
        progress: Callable[[str], None] | None,
        should_stop: Callable[[], str | None] | None,
        sleep: Callable[[float], None],
    ) -> None:
        self.lake = lake
        self.state = state
        self.request = request
        self.progress = progress or (lambda message: log.info("%s", message))
        self.should_stop = should_stop or (lambda: None)
        self.sleep = sleep
        self.report = SweepReport()

    # Every batch: pace (after the first), then commit with rebase-retry.
    def _commit(self, deletes: list[bytes], what: str) -> bool:
        """Commit one batch; False when asked to stop before it."""
        reason = self.should_stop()
        if reason is not None:
            self.report.stopped = reason
            return False
        if self.report.batches and self.request.pace_s:
            self.sleep(self.request.pace_s)
        keys = tuple(sorted(deletes))

        def commit() -> Committed:  # against the head as it is now
            cs = ChangeSet(
                base=self.state.head,
                deletes=keys,
                tables=(SWEEP_INDEX_TABLE if what == "index" else what,),
                changes_made=f"slatelake:sweep:{what}",
            )
            return self.lake.commit_change_set(self.state, cs)

        def reread(*_: object) -> None:  # a real conflict: re-read the head, go again
            self.report.rebases += 1
            self.lake.refresh(self.state)

        committed = retry(commit, attempts=CONFLICT_RETRIES, on=ConflictError, between=reread)
        self.report.rebases += committed.attempts - 1
        self.report.batches += 1
        return True

    def _stopped(self) -> bool:
        return self.report.stopped is not None

    def sweep_indexes(self) -> None:
        reader = self.lake.reader()
        live = indexes.live_index_ids(self.state)
        for kind, index_id in discover(reader, self.state, live, self.report):
            if self._stopped():
                return
            entries = 0
            for batch in self._range_batches(reader, indexes.index_prefix(kind, index_id)):
                if not self._commit(batch, "index"):
                    break
                entries += len(batch)
                self.report.index_entries_reclaimed += len(batch)
                if self.report.batches % PROGRESS_EVERY == 0:
                    self.progress(
                        f"sweep: {self.report.index_entries_reclaimed} index entries reclaimed "
                        f"in {self.report.batches} batches"
                    )
            if entries:
                self.report.indexes_swept += 1
                self.report.ranges.append(SweptRange(kind, index_id, entries))
            self.progress(f"sweep: index {index_id} (kind {kind}): {entries} entries reclaimed")

    def _range_batches(self, reader, key_prefix: bytes) -> Iterator[list[bytes]]:  # noqa: ANN001
        """The dead range read once (one scan, read-ahead), overlaid with the
        unfolded tail, cut into batches."""
        overlay = {k: p for k, p in self.state.index_overlay.items() if k.startswith(key_prefix)}
        # stored keys up to an earlier batch's highest are already deleted
        through = self.state.index_swept.get(key_prefix)
        size = self.request.batch_size
        out: list[bytes] = []
        scan = reader.scan_prefix_batches(key_prefix, start_after=through, batch=min(size, 10_000))
        for rows in scan:
            for key, _ in rows:
                if overlay.pop(key, True):
                    out.append(key)
                if len(out) >= size:
                    yield out
                    out = []
        out.extend(k for k, present in overlay.items() if present)
        while out:
            yield out[:size]
            out = out[size:]

    def _drain(self, keys: list[bytes], what: str) -> int:
        size = self.request.batch_size
        done = 0
        for start in range(0, len(keys), size):
            if not self._commit(keys[start : start + size], what):
                break
            done = min(start + size, len(keys))
        return done

    def sweep_file_stats(self) -> None:
        """7b: statistics groups of data files absent from live state and history."""
        if self._stopped():
            return
        files = {r[0] for r in self.state.rows("ducklake_data_file")}
        spec = registry.spec("ducklake_file_column_stats")
        stranded = sorted(
            k
            for k in self.state.keys_of_kind(spec.kind)
            if k[0] == spec.home and decode_key(k)[2][0] not in files
        )
        rows = {k: len(self.state.group(k)) for k in stranded}
        done = self._drain(stranded, "file_column_stats")
        self.report.file_stats_files += done
        self.report.file_column_stats_reclaimed += sum(rows[k] for k in stranded[:done])
        if stranded:
            self.progress(f"sweep: stranded statistics of {done} data files reclaimed")

    def sweep_inlined_tables(self) -> None:
        """7c: inlined-data tables (DDL, rows, registration) of absent tables."""
        if self._stopped():
            return
        tables = {r[0] for r in self.state.rows("ducklake_table")}
        reg = registry.spec("ducklake_inlined_data_tables")
        registered = self.state.rows(reg.name)
        keys: list[bytes] = []
        reclaimed = rows = 0
        for name in sorted(self.state.inline_ddl()):
            inline = registry.inline_table(name)
            if inline is None or inline.ids[0] in tables:
                continue
            row_keys = sorted(self.state.inline_row_keys(inline))
            keys += [inline_ddl_key(inline), *row_keys]
            keys += [row_key(reg, r) for r in registered if r[1] == name]
            reclaimed += 1
            rows += len(row_keys)
        keys = sorted(set(keys))
        if self._drain(keys, "inlined_tables") == len(keys):
            self.report.inlined_tables_reclaimed += reclaimed
            self.report.inlined_rows_reclaimed += rows
        if reclaimed:
            self.progress(f"sweep: {reclaimed} inlined tables of absent tables reclaimed")
