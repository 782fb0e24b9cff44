"""commit_with_retry: one read-modify-write of sys records, rebuilt at the new
head after a conflict, returning what the attempt that landed built.

Every conflict here is a real one: a second session commits an audit entry
(the same index record ours writes) between our build and our commit.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

import slatelake
from slatelake import NotFoundError, maintenance
from slatelake.catalog.commit_lock import LOCK_KEY
from slatelake.ducklake.session import Session
from slatelake.errors import ConflictError, OperationLimitError
from slatelake.log.changeset import ChangeSet
from slatelake.log.committer import MAX_OPERATIONS_ENV
from slatelake.maintenance import history
from slatelake.maintenance import report as rpt
from slatelake.maintenance.commit_retry import Built, commit_with_retry
from slatelake.maintenance.report import RAN, PassReport
from slatelake.maintenance.run_record import record_pass

MODES = pytest.mark.parametrize("under_lock", [True, False], ids=["under_lock", "plain"])


@pytest.fixture
def lake(tmp_path: Path) -> str:
    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path / 'data'}/") as s:
        s.sql("CREATE TABLE t (id INTEGER)")
    return url


def _audit(session: Session, kind: str, what: dict[str, Any]) -> ChangeSet:
    """One audit entry on the session's view: its item and the index every
    entry rewrites, so two entries made on the same view conflict."""
    puts, deletes = history.audit_writes(
        lambda key: session.lake.read_sys(session.state, key), kind, "test", what
    )
    return ChangeSet(
        base=session.state.head,
        puts=tuple(puts),
        deletes=tuple(deletes),
        tables=("sys/audit_log",),
        changes_made=f"audit: {kind}",
    )


def _index(session: Session) -> bytes | None:
    return session.lake.read_sys(session.state, history.AUDIT_INDEX)


def _entries(url: str) -> list[tuple[str, dict[str, Any]]]:
    return [(e.kind, e.what) for e in maintenance.audit_log(url, limit=100).items]


@MODES
def test_a_conflicting_commit_rebuilds_on_the_new_head_and_returns_what_the_winning_attempt_built(
    lake: str, under_lock: bool
) -> None:
    builds: list[int] = []
    rival_left: list[bytes | None] = []
    with Session(lake) as mine, Session(lake) as rival:

        def build() -> Built[tuple[int, bytes | None]]:
            builds.append(len(builds) + 1)
            seen = _index(mine)
            change = _audit(mine, "test.mine", {"attempt": builds[-1]})
            if builds[-1] == 1:  # the rival lands between our read and our slot
                rival.refresh()
                rival.commit_change_set(_audit(rival, "test.rival", {}))
                rival_left.append(_index(rival))
            return Built(change, (builds[-1], seen))

        value = commit_with_retry(mine, build, attempts=3, under_lock=under_lock)
    assert builds == [1, 2]
    # the second attempt's value, built on the head the rival left
    assert rival_left[0] is not None and value == (2, rival_left[0])
    assert _entries(lake) == [("test.mine", {"attempt": 2}), ("test.rival", {})]
    with Session(lake) as after:
        assert after.lake.read_sys(after.state, LOCK_KEY) is None  # the lock was given back


@MODES
def test_nothing_to_write_commits_nothing(lake: str, under_lock: bool) -> None:
    with Session(lake) as before:
        head, seq = before.state.head, before.state.last_seq
    with Session(lake) as mine:
        value = commit_with_retry(
            mine, lambda: Built(None, "unchanged"), attempts=3, under_lock=under_lock
        )
    assert value == "unchanged"
    assert _entries(lake) == []
    with Session(lake) as after:
        assert after.state.head.snapshot_id == head.snapshot_id
        assert after.lake.read_sys(after.state, LOCK_KEY) is None
        if not under_lock:  # under the lock, only its own take and release land
            assert (after.state.head, after.state.last_seq) == (head, seq)


@MODES
def test_conflicts_on_every_attempt_raise_the_last_conflict_after_the_attempts(
    lake: str, under_lock: bool
) -> None:
    builds: list[int] = []
    with Session(lake) as mine, Session(lake) as rival:

        def build() -> Built[None]:
            builds.append(len(builds) + 1)
            change = _audit(mine, "test.mine", {"attempt": builds[-1]})
            rival.refresh()
            rival.commit_change_set(_audit(rival, "test.rival", {"n": builds[-1]}))
            return Built(change, None)

        with pytest.raises(ConflictError):
            commit_with_retry(mine, build, attempts=3, under_lock=under_lock)
    assert builds == [1, 2, 3]
    assert [kind for kind, _ in _entries(lake)] == ["test.rival"] * 3


@MODES
def test_an_error_from_build_is_raised_at_once_and_commits_nothing(
    lake: str, under_lock: bool
) -> None:
    builds: list[int] = []

    def build() -> Built[None]:
        builds.append(1)
        raise NotFoundError("injected: nothing to change")

    with Session(lake) as mine:
        with pytest.raises(NotFoundError, match="injected"):
            commit_with_retry(mine, build, attempts=3, under_lock=under_lock)
        # and the session commits again at once (under the lock: it was given back)
        value = commit_with_retry(
            mine,
            lambda: Built(_audit(mine, "test.after", {}), "landed"),
            attempts=3,
            under_lock=under_lock,
        )
    assert builds == [1] and value == "landed"
    assert _entries(lake) == [("test.after", {})]
    with Session(lake) as after:
        assert after.lake.read_sys(after.state, LOCK_KEY) is None


def test_a_change_set_over_the_cap_commits_what_over_limit_gives_in_its_place(
    lake: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    refused: list[OperationLimitError] = []
    monkeypatch.setenv(MAX_OPERATIONS_ENV, "2")  # an audit entry is 2 operations
    with Session(lake) as mine:

        def build() -> Built[str]:
            whole = _audit(mine, "test.whole", {})
            whole = ChangeSet(
                base=whole.base,
                puts=(*whole.puts, (rpt.STATUS_KEY, rpt.encode_window([]))),
                tables=whole.tables,
            )

            def smaller(exc: OperationLimitError) -> ChangeSet:
                refused.append(exc)
                return _audit(mine, "test.smaller", {})

            return Built(whole, "built", over_limit=smaller)

        assert commit_with_retry(mine, build, attempts=3, under_lock=False) == "built"
    assert [(e.operations, e.limit) for e in refused] == [(3, 2)]
    assert _entries(lake) == [("test.smaller", {})]


def test_over_limit_is_refused_under_the_lock_and_the_lock_given_back(lake: str) -> None:
    with Session(lake) as mine:

        def build() -> Built[None]:
            change = _audit(mine, "test.mine", {})
            return Built(change, None, over_limit=lambda exc: change)

        with pytest.raises(ValueError, match="plain commits"):
            commit_with_retry(mine, build, attempts=3)
    assert _entries(lake) == []
    with Session(lake) as after:
        assert after.lake.read_sys(after.state, LOCK_KEY) is None


def test_a_pass_record_over_the_cap_records_the_window_alone(
    lake: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(MAX_OPERATIONS_ENV, "1")  # the window alone fits, its history not
    report = PassReport(trigger="manual")
    report.add("flush_inlined_data", RAN, "one pass", {"rows_flushed": 0})
    with caplog.at_level(logging.WARNING, "slatelake.maintenance"), Session(lake) as session:
        record_pass(session, report)
    assert "recording the status window alone" in caplog.text
    assert "not recorded after" not in caplog.text
    monkeypatch.delenv(MAX_OPERATIONS_ENV)
    assert [r.step("flush_inlined_data").detail for r in maintenance.status(lake)] == ["one pass"]
    assert maintenance.runs(lake).items == [] and _entries(lake) == []
