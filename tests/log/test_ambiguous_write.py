"""A slot PUT whose answer was lost is resolved by re-reading the slot, even
when the store is briefly unavailable while we look."""

from __future__ import annotations

from pathlib import Path

import pytest

from slatelake.errors import StoreUnavailableError
from slatelake.log.changeset import ChangeSet, Head
from slatelake.log.committer import Committer
from slatelake.log.slots import SlotLog
from slatelake.store.location import LakeLocation
from slatelake.store.objects import AmbiguousWriteError, ObjectClient

pytestmark = pytest.mark.fast


class LostAnswerClient(ObjectClient):
    """The slot PUT lands but its answer is lost; the next ``flaky_gets``
    reads of it fail the way an overloaded store does (503)."""

    def __init__(self, location: LakeLocation, flaky_gets: int) -> None:
        super().__init__(location)
        self.flaky_gets = flaky_gets

    def put_if_absent(self, path: str, data: bytes) -> bool:
        super().put_if_absent(path, data)
        raise AmbiguousWriteError(f"PUT {path}: connection reset after the body was sent")

    def get(self, path: str) -> bytes | None:
        if "/commits/" in path and self.flaky_gets > 0:
            self.flaky_gets -= 1
            raise StoreUnavailableError(f"GET {path}: 503 Slow Down")
        return super().get(path)


def test_lost_answer_with_a_briefly_unavailable_store_is_found_durable_once(
    tmp_path: Path,
) -> None:
    location = LakeLocation.parse((tmp_path / "lake").as_uri())
    log = SlotLog(location, LostAnswerClient(location, flaky_gets=2))
    cs = ChangeSet(base=Head(0, 0), puts=((b"\x02k", b"v"),), mints_snapshot=True)
    committed = Committer(log, backoff_s=0).commit(cs, 1)
    assert committed.seq == 1
    assert [c.txn_id for c in log.read(1) or []] == [cs.txn_id]
    assert [s.seq for s in log.list_after(0)] == [1]
