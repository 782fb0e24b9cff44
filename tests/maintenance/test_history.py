"""Run history and the audit log: kept on the lake beyond the status window,
paged newest first by keyset, bounded, and written with what they record."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

import slatelake
from slatelake import NotFoundError, maintenance
from slatelake.cli import main
from slatelake.ducklake.session import Session
from slatelake.maintenance import history
from slatelake.maintenance.report import RAN, WINDOW, PassReport
from slatelake.maintenance.run_record import record_pass

FLUSH = {"MAINTENANCE_FLUSH_INLINED_DATA": "true"}


@pytest.fixture(params=["file", "s3"])
def lake(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "file":
        url, data = (tmp_path / "lake").as_uri(), f"{tmp_path / 'data'}/"
    else:
        bucket = request.getfixturevalue("s3_bucket")
        root = uuid.uuid4().hex[:8]
        url, data = f"s3://{bucket}/{root}/lake", f"s3://{bucket}/{root}/data/"
    with slatelake.connect(url, data_path=data) as s:
        s.sql("CREATE TABLE t (id INTEGER)")
        s.sql("INSERT INTO t VALUES (1), (2)")
    return url


def _record(url: str, count: int, trigger: str = "scheduled") -> list[int]:
    """``count`` passes recorded as a pass records them (the real commit path)."""
    ids = []
    with Session(url) as session:
        for n in range(count):
            report = PassReport(trigger=trigger)
            report.add("flush_inlined_data", RAN, f"pass {n}", {"rows_flushed": n})
            record_pass(session, report)
            assert report.run_id is not None
            ids.append(report.run_id)
    return ids


def test_history_pages_newest_first_over_a_hundred_passes(lake: str) -> None:
    recorded = _record(lake, 99)
    real = maintenance.run(lake, FLUSH)
    recorded.append(real.run_id)
    seen, before, sizes = [], None, []
    for _ in range(10):  # bounded: a paging bug must fail, not hang
        page = maintenance.runs(lake, limit=30, before=before)
        seen += [r.run_id for r in page.items]
        sizes.append(len(page.items))
        if page.next_before is None:
            break
        before = page.next_before
    assert sizes == [30, 30, 30, 10]
    assert seen == sorted(recorded, reverse=True)
    newest = maintenance.runs(lake, limit=1).items[0]
    assert newest.run_id == real.run_id
    assert newest.step("flush_inlined_data").counts == {"rows_flushed": 2}
    assert len(maintenance.status(lake)) == WINDOW  # the window stays 16 passes


def test_history_keeps_the_newest_passes_and_drops_the_oldest_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path / 'data'}/"):
        pass
    monkeypatch.setattr(history, "KEEP_RUNS", 5)
    ids = _record(url, 8)
    page = maintenance.runs(url, limit=100)
    assert [r.run_id for r in page.items] == sorted(ids[-5:], reverse=True)
    with slatelake.connect(url, read_only=True) as s:
        gone = s.lake.read_sys_many_at_head(history.run_key(i) for i in ids[:3])
    assert set(gone.values()) == {None}  # trimmed in the same change set


def test_the_audit_log_records_each_kind_of_change_with_who(lake: str) -> None:
    maintenance.set_policy(lake, {"retention": "14d"}, by="alice")
    maintenance.set_policy(lake, {"cleanup_grace": "2d"}, table="t", by="alice")
    maintenance.unset_policy(lake, ["cleanup_grace"], table="t", by="bob")
    maintenance.protect(lake, 1, "keep", by="carol")
    maintenance.unprotect(lake, "keep", by="carol")
    manual = maintenance.run(lake, FLUSH, operations="flush", table="t", by="erin")
    scheduled = maintenance.run(lake, FLUSH, trigger="scheduled")  # audited too
    entries = maintenance.audit_log(lake).items
    assert (entries[0].kind, entries[0].who) == ("run.scheduled", None)
    assert entries[0].what["run_id"] == scheduled.run_id
    entries = entries[1:]
    assert [(e.kind, e.who) for e in entries] == [
        ("run.manual", "erin"),
        ("hold.unprotect", "carol"),
        ("hold.protect", "carol"),
        ("policy.unset", "bob"),
        ("policy.set", "alice"),
        ("policy.set", "alice"),
    ]
    assert entries[0].what == {
        "run_id": manual.run_id,
        "status": "succeeded",
        "operations": ["flush"],
        "table": "main.t",
        "counts": {"rows_flushed": 2},
        "bytes_deleted": None,
        "catalog_bytes_reclaimed": manual.catalog_bytes_reclaimed,
        "seconds": manual.seconds,
    }
    assert maintenance.runs(lake, limit=2).items[1].by == "erin"
    assert entries[2].what["snapshot_id"] == 1 and entries[2].what["name"] == "keep"
    scope = {"kind": "table", "schema": "main", "table": "t", "schema_id": 0, "table_id": 1}
    assert entries[3].what["scope"] == scope  # by name and by DuckLake's ids
    assert entries[3].what["before"] == {"cleanup_grace": 2 * 86400.0}
    assert entries[-1].what["fields"] == {"retention": 14 * 86400.0}
    assert [e.id for e in entries] == sorted((e.id for e in entries), reverse=True)


def test_a_refused_change_leaves_no_audit_entry(tmp_path: Path) -> None:
    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path / 'data'}/") as s:
        s.sql("CREATE TABLE t (id INTEGER)")
    with pytest.raises(NotFoundError):
        maintenance.set_policy(url, {"retention": "1d"}, table="nope")
    with pytest.raises(NotFoundError):
        maintenance.protect(url, 99, "nope")
    assert maintenance.audit_log(url).items == []


def test_the_cli_pages_runs_and_prints_the_audit_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path / 'data'}/"):
        pass
    ids = _record(url, 5)
    assert main(["runs", url, "--limit", "3", "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert [r["run_id"] for r in first["runs"]] == ids[::-1][:3]
    assert main(["runs", url, "--limit", "3", "--before", str(first["next_before"]), "--json"]) == 0
    second = json.loads(capsys.readouterr().out)
    assert [r["run_id"] for r in second["runs"]] == ids[::-1][3:]
    assert second["next_before"] is None
    assert main(["runs", url, "--limit", "2"]) == 0
    text = capsys.readouterr().out
    assert f"more: --before {ids[-2]}" in text and "rows_flushed=4" in text
    maintenance.protect(url, 0, "zero", by="dana")
    assert main(["audit", url]) == 0
    assert "hold.protect" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv", [["--limit", "0"], ["--limit", "1001"], ["--limit", "1e3"], ["--before", "-5"]]
)
def test_the_cli_refuses_a_bad_page_argument(
    tmp_path: Path, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["runs", (tmp_path / "lake").as_uri(), *argv])
    assert exc.value.code == 2
    assert "expected" in capsys.readouterr().err
