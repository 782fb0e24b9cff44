"""The command line: --help everywhere, the substrate verbs, clear errors."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pytest

import slatelake
from slatelake.cli import build_parser, main
from tests.conftest import ClockAhead

COMMANDS = [
    "init",
    "fleet",
    "fsck",
    "fold",
    "hold",
    "log",
    "demo",
    "sql",
    "maintain",
    "backup",
    "policy",
    "runs",
    "audit",
    "protect",
    "unprotect",
    "protected",
    "pins",
    "checkpoint",
    "restore",
    "health",
    "status",
    "census",
    "compact-store",
    "index",
    "lease",
    "image",
    "export",
    "import",
    "release-borrowed",
]


def test_every_subcommand_is_registered_with_help() -> None:
    parser = build_parser()
    actions = [a for a in parser._actions if a.dest == "command"]
    assert sorted(actions[0].choices) == sorted(COMMANDS)


def _help(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """``slatelake ARGV --help``, in this process: its text, after checking it exits 0."""
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--help"])
    assert exit_.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("command", COMMANDS)
def test_help_on_every_subcommand(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert f"usage: slatelake {command}" in _help(capsys, command)


def test_init_fold_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = (tmp_path / "lake").as_uri()
    assert main(["init", url]) == 0
    assert main(["fold", url, "--json"]) == 0
    assert main(["log", url, "--json"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith(f"created lake {url}")
    assert json.loads(lines[1])["slots_folded"] == 0  # the turn's own to_dict()
    doc = json.loads(lines[2])
    assert doc["head"] == {"snapshot_id": -1, "batch_seq": 0}
    assert doc["fold_cursor"] == 0 and doc["catalog_rows"] == 0


def test_errors_go_to_stderr_with_status_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = (tmp_path / "missing").as_uri()
    assert main(["log", missing]) == 1
    err = capsys.readouterr().err
    assert "NotFoundError" in err and "slatelake init" in err


def test_a_malformed_lake_is_a_usage_error_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["init", "ftp://nope"])
    assert exit_.value.code == 2
    assert "argument LAKE: lake URL 'ftp://nope': unsupported scheme" in capsys.readouterr().err


def test_init_twice_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = (tmp_path / "lake").as_uri()
    assert main(["init", url]) == 0
    assert main(["init", url]) == 1
    assert "already exists" in capsys.readouterr().err


def test_init_encrypted_makes_a_lake_whose_files_only_its_catalog_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, data = (tmp_path / "lake").as_uri(), tmp_path / "data"
    assert main(["init", url, "--encrypted"]) == 1  # set with the catalog: needs a data path
    assert "give a data path too" in capsys.readouterr().err
    assert main(["init", url, "--data-path", f"{data}/", "--encrypted"]) == 0
    with slatelake.connect(url) as session:
        session.sql("CREATE TABLE t AS SELECT range AS i FROM range(1000)")
        session.sql("CALL ducklake_flush_inlined_data('lake')")
        assert session.sql("SELECT sum(i) FROM t").fetchone() == (499500,)
    (written,) = list(data.rglob("*.parquet"))
    with pytest.raises(duckdb.InvalidInputException, match="encrypt"):
        duckdb.sql(f"SELECT count(*) FROM read_parquet('{written}')").fetchall()


def test_demo_runs_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", str(tmp_path / "demo"), "--commits", "5"]) == 0
    out = capsys.readouterr().out
    assert "two sessions committed 10 inserts" in out and "10 rows, 10 distinct" in out
    assert "are identical" in out
    assert "lookup id=42: [(42, 'Oslo', 63.0)]" in out
    sweep = next(line for line in out.splitlines() if line.strip().startswith("sweep_indexes"))
    assert "ran" in sweep and "of 1 dropped indexes" in sweep and "reclaimed 0 " not in sweep


def _small_lake(tmp_path: Path, snapshots: int = 3) -> str:
    import slatelake

    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path}/data/") as s:
        s.sql("CREATE TABLE t (id INTEGER)")
        for i in range(snapshots):
            s.sql(f"INSERT INTO t VALUES ({i})")
    return url


def _utc_now_text() -> str:
    """Now, as a UTC timestamp option value: every snapshot already written is older."""
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f+00")


def test_maintain_exits_4_when_a_step_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = _small_lake(tmp_path)
    assert main(["maintain", url]) == 0  # nothing configured: every step ran or was skipped
    capsys.readouterr()
    monkeypatch.setenv("SLATELAKE_MAX_CHANGESET_OPS", "1")  # no snapshot fits: expiry fails
    option = f"MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN={_utc_now_text()}"
    assert main(["maintain", url, "--option", option, "--json"]) == 4
    out, err = capsys.readouterr()
    step = json.loads(out)["steps"][0]
    assert (step["step"], step["status"]) == ("expire_snapshots", "failed")
    assert "expire_snapshots" in err and "failed" in err
    # The same report as text (``status`` prints the recorded pass as ``maintain`` does).
    assert main(["status", url]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "expire_snapshots" in x)
    assert line.split()[:2] == ["expire_snapshots", "failed"]


def test_maintain_help_documents_its_exit_statuses(capsys: pytest.CaptureFixture[str]) -> None:
    assert "4 a step failed" in _help(capsys, "maintain")


def test_status_warns_about_a_corrupt_window_and_the_next_pass_rewrites_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import slatelake
    from slatelake.log.changeset import ChangeSet
    from slatelake.maintenance.report import STATUS_KEY

    url = _small_lake(tmp_path)
    with slatelake.connect(url) as s:
        cs = ChangeSet(
            base=s.state.head,
            puts=((STATUS_KEY, b"damaged"),),
            tables=("sys/maintenance_status",),
            changes_made="maintenance_status",
        )
        s.commit_change_set(cs)
    assert main(["status", url]) == 0
    out, err = capsys.readouterr()
    assert "warning" in err and "sys/maintenance_status" in err
    assert "no maintenance pass recorded" in out
    assert main(["maintain", url]) == 0
    capsys.readouterr()
    assert main(["status", url, "--json"]) == 0
    out, err = capsys.readouterr()
    assert len(json.loads(out)) == 1 and "warning" not in err


def test_lease_break_refuses_a_live_owner_and_breaks_a_silent_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from slatelake.maintenance import flight
    from slatelake.maintenance.flight import STALE_BEATS, PassLease
    from slatelake.store.location import LakeLocation

    url = _small_lake(tmp_path)
    assert main(["lease", "break", url]) == 0
    assert "nothing to break" in capsys.readouterr().out
    location = LakeLocation.parse(url)
    owner = PassLease(location, ttl_s=12.0)  # beats every second, stale after three
    owner.acquire()
    owner.start_heartbeat()
    assert main(["lease", "break", url]) == 5
    out, err = capsys.readouterr()
    assert "refusing to break a live pass" in err and owner.owner[:8] in err
    assert not PassLease(location).try_acquire()
    owner.stop_heartbeat()  # the owner hangs (or was SIGKILLed): no beats, no release
    # Three beats (3 s) later the heartbeat is stale, while the lease (12 s) still holds.
    monkeypatch.setattr(flight, "time", ClockAhead(STALE_BEATS * owner.heartbeat_s + 0.2))
    assert main(["lease", "break", url, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["broken"] is True and doc["lease"]["owner"] == owner.owner
    assert doc["lease"]["expires_at"] > time.time()  # broken before it expired
    assert not owner.renew() and owner.lost is not None  # a revived owner learns it lost
    assert PassLease(location).try_acquire()


def test_lease_break_help_documents_its_exit_statuses(capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(capsys, "lease", "break")
    assert "usage: slatelake lease break" in text
    assert "5" in text and "heartbeat is fresh" in text
