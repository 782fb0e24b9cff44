"""A tail of several slots is read in parallel, on a thread pool; once the
interpreter has begun to exit no pool takes work, yet a scheduled pass still
finishing then (the session's exit hook waits for it) must read the log. The
read falls back to one slot after another."""

from __future__ import annotations

import concurrent.futures.thread as pool_threads
from pathlib import Path

import pytest

from slatelake.catalog.lake import Lake
from tests.catalog.synthetic import commit_inserts


def test_a_tail_is_read_slot_by_slot_once_the_interpreter_is_exiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = (tmp_path / "lake").as_uri()
    Lake.create(url).close()
    commit_inserts(url, 1, table_id=1)
    with Lake.open(url) as lake:
        state = lake.materialize()
        before = state.head.snapshot_id
        commit_inserts(url, 5, table_id=2)  # five slots this view has not seen
        # what concurrent.futures does at interpreter exit: submit refuses work
        monkeypatch.setattr(pool_threads, "_shutdown", True)
        lake.refresh(state)
        fresh = lake.materialize()
    assert state.head.snapshot_id == before + 5
    assert state.head == fresh.head
