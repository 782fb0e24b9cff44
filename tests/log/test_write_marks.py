"""Reader leases say when their holder started writing (log/leases.py): the
orphan step's window ends there. What a mark costs and how long it lives."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import slatelake
from slatelake.log.leases import LeaseBook, ReaderLease, now_us, oldest_write
from slatelake.store.location import LakeLocation
from slatelake.store.objects import ObjectClient


class CountingBook(LeaseBook):
    def __init__(self, location: LakeLocation) -> None:
        super().__init__(location)
        self.writes = 0

    def write(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN201
        self.writes += 1
        return super().write(*args, **kwargs)


@pytest.fixture
def book(tmp_path: Path) -> CountingBook:
    location = LakeLocation.parse((tmp_path / "lake").as_uri())
    ObjectClient(location).put(location.path("format"), b"x")
    return CountingBook(location)


def test_a_write_is_marked_before_it_starts_and_once_while_marked(book: CountingBook) -> None:
    lease = ReaderLease(book)
    lease.hold(3)
    before = now_us()
    lease.begin_write(3)
    (live,) = book.live()
    assert live.writing_since_us is not None and live.writing_since_us >= before
    assert live.fold == 3
    writes = book.writes
    lease.end_write()
    lease.begin_write(5)  # the record still says writing since the first: no PUT
    assert book.writes == writes
    assert book.live()[0].writing_since_us == live.writing_since_us
    lease.release()


def test_a_renewal_after_the_write_ended_clears_the_mark(book: CountingBook) -> None:
    lease = ReaderLease(book, ttl_s=0.4)
    lease.begin_write(1)
    lease.end_write()
    time.sleep(0.25)  # past half the lease's life: the next hold renews
    lease.hold(1)
    assert book.live()[0].writing_since_us is None
    lease.release()


def test_a_long_write_keeps_its_mark_alive_past_the_leases_ttl(book: CountingBook) -> None:
    lease = ReaderLease(book, ttl_s=0.8)
    lease.begin_write(1)
    first = book.live()[0]
    time.sleep(2.0)  # a statement running for 2.5 TTLs: the heartbeat renews
    (live,) = book.live()
    assert live.writing_since_us == first.writing_since_us
    assert live.expires_at_us > first.expires_at_us
    lease.end_write()
    lease.release()
    assert book.live() == []


def test_the_oldest_write_among_live_leases_sets_the_window(book: CountingBook) -> None:
    a, b, idle = ReaderLease(book), ReaderLease(book), ReaderLease(book)
    idle.hold(1)
    a.begin_write(1)
    time.sleep(0.01)
    b.begin_write(1)
    marks = {lease.reader_id: lease.writing_since_us for lease in book.live()}
    assert oldest_write(book.live()) == marks[a.reader_id] < marks[b.reader_id]
    assert marks[idle.reader_id] is None
    a.release()
    assert oldest_write(book.live()) == marks[b.reader_id]
    b.release()
    assert oldest_write(book.live()) is None
    idle.release()


def test_a_session_marks_its_lease_while_a_transaction_writes(tmp_path: Path) -> None:
    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path / 'data'}/") as s:
        s.sql("CREATE TABLE t (i INTEGER)")
        s.lake.lease.hold(s.state.last_seq + 1000)  # a renewal clears the create's mark
        book = LeaseBook(LakeLocation.parse(url))
        with s.transaction():
            s.sql("INSERT INTO t VALUES (1)")
            assert s.lake.lease.writing
            assert [lease.writing_since_us is not None for lease in book.live()] == [True]
        assert not s.lake.lease.writing  # the write ended with its transaction
        s.sql("SELECT * FROM t").fetchall()
        assert not s.lake.lease.writing
