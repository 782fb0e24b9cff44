"""What ``status``, ``runs``, ``audit_log`` and ``health`` read, as shapes of the backlog.

Issue 41, item 5: with nobody folding the log, each of these reads grew with
the unfolded slots: ``status`` fully decoded every slot, ``runs`` and the
audit log read the whole tail twice, ``health`` opened a session (a second
copy of the catalog, DuckLake attached). Each now reads what it needs: the
sys reads GET each unfolded slot once and keep only the sys keys they read
(no slot decoded in full, nothing of the catalog loaded), and health loads
the committed catalog once, as a session's open builds it, with no DuckLake.
The answers stay exactly a full replay's. These tests count work, never time.
"""

from __future__ import annotations

import concurrent.futures.thread as pool_threads
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import slatelake
from slatelake import maintenance
from slatelake.catalog import state as catalog_state
from slatelake.catalog.folder import Folder
from slatelake.catalog.lake import Lake
from slatelake.catalog.state import SYS_FOLD, decode_fold
from slatelake.ducklake import duck_state
from slatelake.ducklake import session as session_module
from slatelake.ducklake.image_writer import write_image
from slatelake.ducklake.session import Session
from slatelake.errors import CorruptionError, StaleViewError
from slatelake.log import replay, slots
from slatelake.log.changeset import (
    ENVELOPE_KIND,
    LEGACY_VERSION,
    ChangeSet,
    Head,
    KeySelection,
    encode_envelope,
)
from slatelake.log.replay import read_key_tail, read_tail
from slatelake.maintenance import history
from slatelake.maintenance import report as rpt
from slatelake.maintenance.health import health as lake_health
from slatelake.maintenance.report import RAN, PassReport
from slatelake.maintenance.run_record import record_pass
from slatelake.store import values
from slatelake.store.location import LakeLocation
from slatelake.store.objects import ObjectClient
from tests.catalog.synthetic import commit_inserts

FLUSH = {"MAINTENANCE_FLUSH_INLINED_DATA": "true"}
NOW = datetime(2030, 1, 1, tzinfo=UTC)


# -- counting what a read does ----------------------------------------------------------
@dataclass
class Work:
    """What one read did: object GETs of slots, slots decoded in full (every
    put built into a change set) or for some keys only, catalog rows loaded
    from the store, change sets applied to a catalog, sessions opened."""

    slot_gets: int = 0
    full_decodes: int = 0
    keyed_decodes: int = 0
    catalog_rows_loaded: int = 0
    catalog_applies: int = 0
    sessions: int = 0


@contextmanager
def counted() -> Iterator[Work]:
    work = Work()
    with pytest.MonkeyPatch.context() as mp:

        def wrap(owner: Any, name: str, count: Any) -> None:
            original = getattr(owner, name)

            def wrapper(*args: Any, **kwargs: Any) -> Any:
                args, kwargs = count(*args, **kwargs) or (args, kwargs)
                return original(*args, **kwargs)

            mp.setattr(owner, name, wrapper)

        def get(client: ObjectClient, path: str) -> None:
            if "/commits/" in f"/{path}":
                work.slot_gets += 1

        def full(*_: Any, **__: Any) -> None:
            work.full_decodes += 1

        def keyed(*_: Any, **__: Any) -> None:
            work.keyed_decodes += 1

        def load(state: Any, pairs: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
            pairs = list(pairs)
            work.catalog_rows_loaded += len(pairs)
            return (state, pairs), {}

        def apply(*_: Any, **__: Any) -> None:
            work.catalog_applies += 1

        def apply_tail(state: Any, tail: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
            tail = list(tail)
            work.catalog_applies += len(tail)
            return (state, tail), {}

        def session(*_: Any, **__: Any) -> None:
            work.sessions += 1

        wrap(ObjectClient, "get", get)
        wrap(replay, "decode_envelope", full)
        wrap(slots, "decode_envelope", full)
        wrap(replay, "decode_keys", keyed)
        wrap(catalog_state.CatalogState, "load", load)
        wrap(catalog_state.CatalogState, "apply", apply)
        wrap(duck_state.DuckState, "apply_tail", apply_tail)
        wrap(session_module.Session, "__init__", session)
        yield work


# -- lakes -------------------------------------------------------------------------------
def fold(url: str) -> None:
    """Fold every slot into the store, truncating none: the backlog is zero."""
    folder = Folder(LakeLocation.parse(url))
    try:
        while folder.fold_once(truncate=False).slots:
            pass
    finally:
        folder.close()


def unfolded(url: str) -> int:
    """The slots past the store's fold cursor."""
    with Lake.open(url, read_only=True) as lake:
        cursor, _ = decode_fold(lake.reader().get(SYS_FOLD) or b"")
        return sum(1 for _ in lake.log.list_after(cursor))


def change_sets_after_fold(url: str) -> int:
    """The change sets a replay past the fold cursor applies."""
    with Lake.open(url, read_only=True) as lake:
        cursor, head = decode_fold(lake.reader().get(SYS_FOLD) or b"")
        return len(read_tail(lake.log, head, cursor).applied)


@pytest.fixture
def lake(tmp_path: Path) -> str:
    """A catalog, a pass recorded, a policy change audited: all folded."""
    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path / 'data'}/") as s:
        for t in ("a", "b"):
            s.sql(f"CREATE TABLE {t} (id INTEGER, v VARCHAR)")
            s.sql(f"INSERT INTO {t} SELECT r, 'x' || r FROM range(20) r(r)")
        maintenance.run(s, FLUSH)
        s.sql("INSERT INTO a VALUES (100, 'inlined')")
        s.sql("DELETE FROM b WHERE id < 3")
    maintenance.set_policy(url, {"retention": "14d"}, by="alice")
    maintenance.protect(url, 1, "keep", by="carol")
    fold(url)
    assert unfolded(url) == 0
    return url


def backlog(url: str, inserts: int) -> PassReport:
    """``inserts`` commits and then a manual pass (a status record, a run and
    an audit entry), none of it folded. Returns the pass's report."""
    with slatelake.connect(url) as s:
        for i in range(inserts):
            s.sql(f"INSERT INTO a VALUES ({1000 + i}, 'backlog')")
        return maintenance.run(s, FLUSH, by="erin")


# -- status, runs, the audit log ---------------------------------------------------------
def test_status_reads_only_sys_changes_of_unfolded_slots(lake: str) -> None:
    with counted() as work:
        maintenance.status(lake)
    assert work == Work()  # nothing unfolded: the store's record, no slot
    for inserts in (2, 6):
        newest = backlog(lake, inserts)
        slots_now = unfolded(lake)
        with counted() as work:
            window = maintenance.status(lake)
        assert window[0].run_id == newest.run_id  # recorded in an unfolded slot
        assert work == Work(slot_gets=slots_now, keyed_decodes=slots_now), work


def test_runs_and_audit_read_each_unfolded_slot_once(lake: str) -> None:
    newest = backlog(lake, 4)
    slots_now = unfolded(lake)
    with counted() as work:
        page = maintenance.runs(lake, limit=5)
    assert page.items[0].run_id == newest.run_id
    assert work == Work(slot_gets=slots_now, keyed_decodes=slots_now), work
    with counted() as work:
        entries = maintenance.audit_log(lake, limit=5).items
    assert (entries[0].kind, entries[0].who) == ("run.manual", "erin")
    assert entries[0].what["run_id"] == newest.run_id
    assert work == Work(slot_gets=slots_now, keyed_decodes=slots_now), work


def _dicts(window: rpt.StatusWindow) -> tuple[list[dict[str, Any]], str | None]:
    return [p.to_dict() for p in window], window.warning


def _replayed_page(url: str, runs: bool, limit: int, before: int | None) -> list[dict[str, Any]]:
    """A history page as a full replay reads it: every catalog row and sys
    record at the head materialized, the page read from that."""
    index_key = history.RUNS_INDEX if runs else history.AUDIT_INDEX
    key_of = history.run_key if runs else history.audit_key
    decode = history._decode_run if runs else history._decode_audit
    with Lake.open(url, read_only=True) as lake:
        state = lake.materialize()
        ids = history._ids(lake.read_sys(state, index_key), "index")
        chosen = [i for i in reversed(ids) if before is None or i < before][:limit]
        found = {i: lake.read_sys(state, key_of(i)) for i in chosen}
    return [decode(raw, i).to_dict() for i, raw in found.items() if raw is not None]


def test_history_pages_and_status_are_what_a_full_replay_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path / 'data'}/") as s:
        s.sql("CREATE TABLE t (id INTEGER)")
    monkeypatch.setattr(history, "KEEP_RUNS", 4)
    monkeypatch.setattr(history, "KEEP_AUDIT", 3)

    def record(count: int) -> list[int]:
        ids = []
        with Session(url) as session:
            for n in range(count):
                report = PassReport(trigger="manual" if n % 2 else "scheduled", by=f"u{n}")
                report.add("flush_inlined_data", RAN, f"pass {n}", {"rows_flushed": n})
                record_pass(session, report)
                ids.append(report.run_id)
                session.sql(f"INSERT INTO t VALUES ({n})")
        return ids

    ids = record(3)
    fold(url)
    ids += record(5)  # the unfolded slots trim items the store still holds
    assert unfolded(url) > 0
    pages = [(limit, before) for limit in (1, 3, 4, 10) for before in (None, ids[-2], ids[2])]
    for limit, before in pages:
        runs = maintenance.runs(url, limit=limit, before=before).items
        assert [r.to_dict() for r in runs] == _replayed_page(url, True, limit, before), (
            limit,
            before,
        )
        audit = maintenance.audit_log(url, limit=limit, before=before).items
        assert [e.to_dict() for e in audit] == _replayed_page(url, False, limit, before), (
            limit,
            before,
        )
    assert [r.run_id for r in maintenance.runs(url, limit=10).items] == ids[::-1][:4]
    with Lake.open(url, read_only=True) as handle:
        replayed = handle.read_sys(handle.materialize(), rpt.STATUS_KEY)
    assert _dicts(maintenance.status(url)) == _dicts(rpt.newest_first(replayed))


def test_a_change_set_a_replay_skips_is_skipped_by_a_sys_read(lake: str) -> None:
    before = maintenance.status(lake)
    with Lake.open(lake) as handle:
        state = handle.materialize()
        seq = state.last_seq + 1
        behind = ChangeSet(base=Head(0, 1), puts=((rpt.STATUS_KEY, b"not a window"),))
        assert handle.log.try_write(seq, encode_envelope([behind], seq))
        cursor, head = decode_fold(handle.reader().get(SYS_FOLD) or b"")
        assert read_tail(handle.log, head, cursor).skipped == 1
        assert handle.read_sys_at_head(rpt.STATUS_KEY) == handle.read_sys(
            handle.materialize(), rpt.STATUS_KEY
        )
    assert _dicts(maintenance.status(lake)) == _dicts(before)


def test_a_version_1_slot_still_reads_for_a_sys_record(lake: str) -> None:
    with Lake.open(lake) as handle:
        state = handle.materialize()
        seq = state.last_seq + 1
        row = ["txn-v1", state.head.snapshot_id, state.head.batch_seq, False, [], "", [], [], []]
        row[6], row[7] = [history.RUNS_INDEX], [values.frame(0x08, [7, 8])]
        assert handle.log.try_write(seq, values.frame(ENVELOPE_KIND, [LEGACY_VERSION, [row]]))
        assert handle.read_sys_at_head(history.RUNS_INDEX) == values.frame(0x08, [7, 8])
        assert handle.read_sys(handle.materialize(), history.RUNS_INDEX) == values.frame(
            0x08, [7, 8]
        )


def test_only_sys_records_are_read_at_the_head(lake: str) -> None:
    with Lake.open(lake, read_only=True) as handle, pytest.raises(ValueError, match="not a sys"):
        handle.read_sys_many_at_head([b"\x03\x14" + b"\x00" * 8])


# -- the keyed replay: the same checks as a replay, bounded reads ---------------------------
@pytest.fixture
def synthetic(tmp_path: Path) -> Iterator[Lake]:
    """Five INSERT-shaped slots, unfolded (no DuckDB)."""
    url = (tmp_path / "lake").as_uri()
    Lake.create(url).close()
    commit_inserts(url, 5, 1)
    with Lake.open(url) as handle:
        yield handle


def _damage(lake: Lake, how: str) -> None:
    log = lake.log
    if how == "hole":
        log.delete(3)
    elif how == "garbage":
        log.delete(5)
        assert log.try_write(5, b"not an envelope at all")
    elif how == "copy":
        raw = log.read_raw(3)
        log.delete(4)
        assert raw is not None and log.try_write(4, raw)
    elif how == "ahead":
        ahead = ChangeSet(base=Head(40, 41), puts=((rpt.STATUS_KEY, b"x"),))
        assert log.try_write(6, encode_envelope([ahead], 6))
    elif how == "newer":
        log.delete(5)
        assert log.try_write(5, values.frame(ENVELOPE_KIND, [9, [5, b"", b""]]))
    elif how == "truncated":
        log.mark_truncated(2)
    elif how == "sys range":
        head = read_tail(log, Head(-1, 0), 0).head
        swept = ChangeSet(base=head, ranges=((rpt.STATUS_KEY, rpt.STATUS_KEY + b"\x01"),))
        assert log.try_write(6, encode_envelope([swept], 6))


@pytest.mark.parametrize(
    "how", ["hole", "garbage", "copy", "ahead", "newer", "truncated", "sys range"]
)
def test_a_sys_read_refuses_damage_as_a_replay_does(synthetic: Lake, how: str) -> None:
    _damage(synthetic, how)
    with pytest.raises((CorruptionError, StaleViewError)) as full:
        synthetic.materialize()
    with pytest.raises(type(full.value)) as keyed:
        synthetic.read_sys_at_head(rpt.STATUS_KEY)
    assert str(keyed.value) == str(full.value)
    if how != "sys range":  # a range over sys is the catalog's refusal, not the log's
        select = KeySelection(frozenset((rpt.STATUS_KEY,)))
        with pytest.raises((CorruptionError, StaleViewError)) as whole:
            read_tail(synthetic.log, Head(-1, 0), 0)
        with pytest.raises(type(whole.value)) as tail:
            read_key_tail(synthetic.log, Head(-1, 0), 0, select)
        assert str(tail.value) == str(whole.value)


class Watched(ObjectClient):
    """Counts slot GETs and the most in flight at once (each held a moment)."""

    def __init__(self, inner: ObjectClient) -> None:
        super().__init__(inner.location, inner.store)
        self.gets = 0
        self.flying = 0
        self.most = 0
        self._lock = threading.Lock()

    def get(self, path: str) -> bytes | None:
        if "/commits/" not in f"/{path}":
            return super().get(path)
        with self._lock:
            self.gets += 1
            self.flying += 1
            self.most = max(self.most, self.flying)
        try:
            time.sleep(0.005)
            return super().get(path)
        finally:
            with self._lock:
                self.flying -= 1


def test_a_sys_read_keeps_few_slots_in_flight_and_stops_at_the_first_bad_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = (tmp_path / "lake").as_uri()
    Lake.create(url).close()
    commit_inserts(url, 60, 1)
    select = KeySelection(frozenset((rpt.STATUS_KEY,)))
    with Lake.open(url) as handle:
        monkeypatch.setattr(replay, "KEY_READ_PARALLELISM", 3)
        watched = Watched(handle.log.client)
        handle.log.client = watched
        assert read_key_tail(handle.log, Head(-1, 0), 0, select).last_seq == 60
        assert watched.gets == 60 and 1 < watched.most <= 3  # each slot once, 3 at a time
        # by bytes: a budget below one slot reads one slot at a time
        monkeypatch.setattr(replay, "KEY_READ_AHEAD_BYTES", 1)
        watched.gets = watched.most = 0
        read_key_tail(handle.log, Head(-1, 0), 0, select)
        assert (watched.gets, watched.most) == (60, 1)
        # a damaged slot ends the read: what was read ahead of it, no more
        monkeypatch.setattr(replay, "KEY_READ_AHEAD_BYTES", 64 << 20)
        handle.log.delete(5)
        assert handle.log.try_write(5, b"damaged")
        watched.gets = 0
        with pytest.raises(CorruptionError, match="commit log slot 5"):
            read_key_tail(handle.log, Head(-1, 0), 0, select)
        assert watched.gets <= 5 + 2 * 3, watched.gets


def test_a_sys_read_reads_slot_by_slot_once_the_interpreter_is_exiting(
    lake: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    newest = backlog(lake, 3)
    monkeypatch.setattr(pool_threads, "_shutdown", True)  # no pool takes work
    assert maintenance.status(lake)[0].run_id == newest.run_id
    assert maintenance.runs(lake, limit=1).items[0].run_id == newest.run_id


# -- health ------------------------------------------------------------------------------
def _without_volatile(doc: dict) -> dict:
    return {k: v for k, v in doc.items() if k != "generated_at"}


def test_health_opens_no_session_and_reports_what_a_session_reads(lake: str) -> None:
    backlog(lake, 3)
    with Session(lake) as s:
        s.sql("INSERT INTO b VALUES (500, 'inlined')")  # inlined rows in the backlog too
        s.sql("DELETE FROM a WHERE id = 5")
        s.sql("CALL lake.set_option('target_file_size', '1KB', table_name => 'a')")
    with counted() as work:
        from_url = lake_health(lake, now=NOW)
    assert work.sessions == 0
    with Session(lake, read_only=True) as s:
        from_session = lake_health(s, now=NOW)
    assert _without_volatile(from_url.to_dict()) == _without_volatile(from_session.to_dict())
    assert from_url.estimate.expire_kept_by_holds >= 0 and from_url.tables


def test_health_loads_the_store_once_and_replays_each_unfolded_slot_once(lake: str) -> None:
    with counted() as folded:
        lake_health(lake, now=NOW)
    assert folded.slot_gets == 0 and folded.catalog_applies == 0
    stored_rows = folded.catalog_rows_loaded
    assert stored_rows > 0  # no image: the store's catalog rows, once
    for inserts in (2, 5):
        backlog(lake, inserts)
        with counted() as work:
            lake_health(lake, now=NOW)
        slots_now = unfolded(lake)
        assert work.catalog_rows_loaded == stored_rows  # the backlog adds no store rows
        assert work.slot_gets == slots_now and work.full_decodes == slots_now
        assert work.catalog_applies == change_sets_after_fold(lake)
        assert work.sessions == 0 and work.keyed_decodes == 0


def test_health_with_an_image_loads_no_store_rows_and_replays_only_the_slots_after_it(
    lake: str,
) -> None:
    write_image(LakeLocation.parse(lake))
    with counted() as at_image:
        lake_health(lake, now=NOW)
    assert at_image == Work()
    backlog(lake, 3)
    slots_now = unfolded(lake)  # the image is at the fold cursor
    with counted() as work:
        report = lake_health(lake, now=NOW)
    assert work.catalog_rows_loaded == 0
    assert work.slot_gets == slots_now and work.full_decodes == slots_now
    assert work.catalog_applies == change_sets_after_fold(lake)
    with Session(lake, read_only=True) as s:
        assert _without_volatile(report.to_dict()) == _without_volatile(
            lake_health(s, now=NOW).to_dict()
        )
