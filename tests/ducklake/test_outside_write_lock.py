"""A write made outside the session's statements survives a busy commit lock:
the statement that found it fails with the lock's error, and the next one
commits it."""

from __future__ import annotations

from pathlib import Path

import pytest

import slatelake
from slatelake.catalog.commit_lock import CommitLock
from slatelake.catalog.lake import Lake


def test_a_busy_commit_lock_keeps_a_write_made_outside_the_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, data = (tmp_path / "lake").as_uri(), f"{tmp_path / 'data'}/"
    with slatelake.connect(url, data_path=data) as session:
        session.sql("CREATE TABLE t (id INTEGER)")
    monkeypatch.setenv("SLATELAKE_COMMIT_LOCK_WAIT_S", "200ms")
    with slatelake.connect(url) as session, Lake.open(url) as rival:
        session.sql("SELECT 7 AS id").insert_into("t")  # lands in the session's copy only
        lock = CommitLock(rival, owner="rival", ttl_s=600)
        state = rival.materialize()
        lock.acquire(state)
        try:
            with pytest.raises(slatelake.CommitLockBusyError, match="held by rival"):
                session.sql("SELECT count(*) FROM t")
        finally:
            lock.release(state)
        assert session.sql("SELECT id FROM t").fetchall() == [(7,)]
    with slatelake.connect(url, read_only=True) as fresh:
        assert fresh.sql("SELECT id FROM t").fetchall() == [(7,)]
