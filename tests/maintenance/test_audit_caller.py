"""Who the audit log names: a policy or hold change made from Python without
``by`` is audited as the OS user, the name the CLI gives the same change; an
explicit ``by`` still wins. Real lakes on files, real DuckDB and DuckLake."""

from __future__ import annotations

import getpass
from pathlib import Path

import pytest

import slatelake
from slatelake.cli import main
from slatelake.cli.common import caller as cli_caller
from slatelake.maintenance.history import caller


@pytest.fixture
def lake(tmp_path: Path) -> slatelake.LakeHandle:
    handle = slatelake.open((tmp_path / "lake").as_uri(), data_path=str(tmp_path / "data"))
    handle.create()
    with handle.connect() as s:
        s.sql("CREATE TABLE t (i INTEGER)")
        s.sql("INSERT INTO t VALUES (1)")
    return handle


def _head(lake: slatelake.LakeHandle) -> int:
    with lake.connect() as s:
        return int(s.sql("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0])


def _audited(lake: slatelake.LakeHandle) -> list[tuple[str, str | None]]:
    """(kind, who) of every audit entry, oldest first."""
    return [(e.kind, e.who) for e in reversed(lake.maintenance.audit().items)]


def test_policy_and_hold_changes_from_python_are_audited_as_the_os_user(
    lake: slatelake.LakeHandle,
) -> None:
    user = getpass.getuser()
    assert caller() == cli_caller() == user  # the library's caller is the CLI's
    lake.policy.set({"retention": "30d"})
    lake.policy.set({"compaction": "false"}, table="t")
    lake.policy.unset(["compaction"], table="t")
    assert lake.holds.protect(_head(lake), "keep").hold.created_by == user
    lake.holds.unprotect("keep")
    assert _audited(lake) == [
        ("policy.set", user),
        ("policy.set", user),
        ("policy.unset", user),
        ("hold.protect", user),
        ("hold.unprotect", user),
    ]
    row = next(r for r in lake.policy.show().rows if r.scope.kind == "lake")
    assert row.updated_by == user


def test_the_cli_and_the_library_audit_the_same_change_under_one_name(
    lake: slatelake.LakeHandle,
) -> None:
    assert main(["policy", "set", lake.url, "--retention", "14d"]) == 0
    lake.policy.set({"retention": "21d"})
    (cli_who, lib_who) = [who for _, who in _audited(lake)]
    assert cli_who == lib_who == getpass.getuser()


def test_an_explicit_by_still_wins_over_the_os_user(lake: slatelake.LakeHandle) -> None:
    lake.policy.set({"retention": "30d"}, by="ops")
    lake.policy.unset(["retention"], by="ops")
    placed = lake.holds.protect(_head(lake), "keep", by="release-bot")
    assert placed.hold.created_by == "release-bot"
    lake.holds.unprotect("keep", by="release-bot")
    assert _audited(lake) == [
        ("policy.set", "ops"),
        ("policy.unset", "ops"),
        ("hold.protect", "release-bot"),
        ("hold.unprotect", "release-bot"),
    ]
