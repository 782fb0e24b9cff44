"""A dry run that prices the pass: its estimate against the requests and
bytes the pass then makes (counted on S3 by a proxy in front of moto), price
files as outside input, and the budget that bounds a real pass."""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import slatelake
from slatelake import MaintenanceConfigError, maintenance
from slatelake.cli import main
from slatelake.maintenance import pricing
from slatelake.maintenance.delete_boundary import SKEW_ENV
from slatelake.maintenance.options import bind
from slatelake.maintenance.prices import PRICES_AS_OF, Prices
from tests.faults.counting import KINDS, CountingProxy
from tests.functions.conftest import churn
from tests.maintenance.test_dry_run import _listing
from tests.store.faulty_s3 import s3_endpoint

# The churn lake is 40 tables (the long tier); the default tier prices 12.
SIZES = [pytest.param(40, marks=pytest.mark.long, id="40-tables"), pytest.param(12, id="12-tables")]
TOLERANCE = 0.10  # estimate within 10% of what the pass did, per kind


@pytest.fixture(autouse=True)
def _one_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SKEW_ENV, "0")


def _options() -> dict[str, str]:
    """Every DuckLake step, windows as points in time or cleanup_all, so the
    dry run and the pass right after it select the same work."""
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f+00")
    return {
        "MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN": now,
        "MAINTENANCE_FLUSH_INLINED_DATA": "true",
        "MAINTENANCE_MERGE_ADJACENT_FILES": "true",
        "MAINTENANCE_REWRITE_DATA_FILES_DELETE_THRESHOLD": "0.01",
        "MAINTENANCE_CLEANUP_OLD_FILES_CLEANUP_ALL": "true",
        "MAINTENANCE_DELETE_ORPHANED_FILES_CLEANUP_ALL": "true",
        "MAINTENANCE_ORPHAN_AGE_FLOOR_OVERRIDE": "true",
    }


def _flat(estimate: dict[str, Any]) -> dict[str, int]:
    return {
        **estimate["requests"],
        "bytes_read": estimate["bytes_read"],
        "bytes_written": estimate["bytes_written"],
    }


@pytest.mark.parametrize("tables", SIZES)
def test_a_priced_dry_run_is_within_ten_percent_of_the_pass_it_prices(
    moto_endpoint: str, s3_bucket: str, tables: int
) -> None:
    root = f"s3://{s3_bucket}/{uuid.uuid4().hex[:8]}"
    url, data = f"{root}/lake", f"{root}/data/"
    with CountingProxy(moto_endpoint) as proxy, s3_endpoint(proxy.url):
        churn(url, data, tables=tables, rounds=2)
        time.sleep(1.1)  # every churn snapshot older than the expiry's instant
        options = _options()
        dry = maintenance.run(url, options, dry_run=True)
        mark = proxy.mark()
        real = maintenance.run(url, options)
        made = proxy.counts(since=mark)
    assert real.status == "succeeded", real.to_dict()
    assert dry.estimate is not None and dry.plan is not None
    estimated = _flat(dry.estimate["total"])
    gaps = {k: (estimated[k] - made[k]) / made[k] for k in (*KINDS, "bytes_read", "bytes_written")}
    assert all(abs(g) <= TOLERANCE for g in gaps.values()), (gaps, estimated, made)
    # what it would delete is what cleanup deleted, files and bytes
    cleanup = dry.plan["cleanup_old_files"].details["estimate"]
    deleted = real.step("cleanup_old_files").counts
    assert cleanup["files_to_delete"] == deleted["files_deleted"] > tables
    assert abs(cleanup["bytes_to_delete"] - deleted["bytes_deleted"]) <= (
        TOLERANCE * deleted["bytes_deleted"]
    )
    # every planned step is priced, and the total is their sum with the fixed part
    steps = [dry.plan[s].details["estimate"] for s in dry.plan]
    for kind in KINDS:
        summed = dry.estimate["fixed"]["requests"][kind] + sum(s["requests"][kind] for s in steps)
        assert summed == dry.estimate["total"]["requests"][kind], kind
    prices = Prices()
    requests = dry.estimate["total"]["requests"]
    expected = (
        requests["LIST"] * prices.list_per_1000 / 1000
        + requests["GET"] * prices.get_per_1000 / 1000
        + requests["PUT"] * prices.put_per_1000 / 1000
        + dry.estimate["total"]["seconds"] * prices.lambda_memory_mb / 1024 * 0.0000166667
    )
    assert dry.estimate["total"]["usd"] == pytest.approx(expected, rel=1e-3)


def _small_lake(tmp_path: Path, tables: int = 3) -> tuple[str, list[str]]:
    url, data = (tmp_path / "lake").as_uri(), f"{tmp_path / 'data'}/"
    names = churn(url, data, tables=tables, rounds=2)
    time.sleep(1.1)
    return url, names


def test_a_price_file_overrides_the_defaults(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, _ = _small_lake(tmp_path)
    options = _options()
    listed = maintenance.run(url, options, dry_run=True)
    assert listed.estimate is not None
    assert listed.estimate["prices"]["as_of"] == PRICES_AS_OF
    assert listed.estimate["prices"]["source"] == "default"
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"get_per_1000": 1.0, "put_per_1000": 2, "as_of": "2027-01-01"}))

    own = maintenance.run(url, options, dry_run=True, prices=str(prices))

    assert own.estimate is not None
    assert own.estimate["prices"]["get_per_1000"] == 1.0
    assert own.estimate["prices"]["list_per_1000"] == Prices().list_per_1000  # not overridden
    total = own.estimate["total"]
    assert total["requests"] == listed.estimate["total"]["requests"]  # same work, other prices
    assert total["usd"] > 100 * listed.estimate["total"]["usd"]
    # the same as a mapping through the Python API
    mapped = maintenance.run(
        url, options, dry_run=True, prices={"get_per_1000": 1.0, "put_per_1000": 2}
    )
    assert mapped.estimate is not None and mapped.estimate["total"]["usd"] == total["usd"]

    args = ["maintain", url, "--dry-run", "--prices", str(prices)]
    for key, value in options.items():
        args += ["--option", f"{key}={value}"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert f"prices from {prices} as of 2027-01-01" in out
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("estimate ("))
    priced = [line.split()[0] for line in lines[start + 1 :]]
    assert priced[: len(own.plan or {})] == list(own.plan or {})
    assert lines[-1].lstrip().startswith("total ") and "$" in lines[-1]
    assert main([*args, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["estimate"]["prices"]["put_per_1000"] == 2.0
    assert set(doc["plan"]["flush_inlined_data"]["estimate"]["requests"]) == set(KINDS)


@pytest.mark.parametrize(
    ("doc", "named"),
    [
        ({"get_per_1000": -1}, "'get_per_1000'"),
        ({"put_per_1000": "0.005"}, "'put_per_1000'"),
        ({"list_per_1000": True}, "'list_per_1000'"),
        ({"get_per_1000": 1, "gets_per_1000": 1}, "'gets_per_1000'"),
        ({"lambda_memory_mb": 64}, "'lambda_memory_mb'"),
        ({"as_of": 2026}, "'as_of'"),
        ([1, 2], "a JSON object"),
    ],
)
def test_a_bad_price_file_is_refused_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], doc: object, named: str
) -> None:
    bad = tmp_path / "prices.json"
    bad.write_text(json.dumps(doc))
    nowhere = (tmp_path / "lake").as_uri()
    with pytest.raises(MaintenanceConfigError, match=named):
        maintenance.run(nowhere, {}, dry_run=True, prices=str(bad))
    assert main(["maintain", nowhere, "--dry-run", "--prices", str(bad)]) == 2
    err = capsys.readouterr().err
    assert named in err and str(bad) in err
    assert not (tmp_path / "lake").exists()  # refused before any lake was touched


def test_a_price_file_that_is_no_json_or_missing_or_given_without_a_dry_run_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nowhere = (tmp_path / "lake").as_uri()
    garbled = tmp_path / "garbled.json"
    garbled.write_text("{not json")
    for path, said in ((garbled, "not JSON"), (tmp_path / "absent.json", "absent.json")):
        assert main(["maintain", nowhere, "--dry-run", "--prices", str(path)]) == 2
        assert said in capsys.readouterr().err
    assert main(["maintain", nowhere, "--prices", str(garbled)]) == 2
    assert "add --dry-run" in capsys.readouterr().err
    assert not (tmp_path / "lake").exists()


@pytest.mark.parametrize(
    ("value", "said"),
    [("0", "must be positive"), ("1e6", "positive integer"), ("١٠٠", "positive integer")],
)
def test_a_budget_is_a_positive_whole_number_of_ascii_digits(value: str, said: str) -> None:
    for name in ("MAINTENANCE_BUDGET_BYTES", "MAINTENANCE_BUDGET_REQUESTS"):
        with pytest.raises(MaintenanceConfigError, match=f"{name}=.*{said}"):
            bind({name: value})
    bound = bind({"MAINTENANCE_BUDGET_BYTES": " 1000 ", "MAINTENANCE_BUDGET_REQUESTS": 20})
    assert (bound.budget_bytes, bound.budget_requests) == (1000, 20)


def _inlined(url: str, names: list[str]) -> int:
    with slatelake.connect(url, read_only=True) as s:
        total = 0
        for name in names:
            rows = s.sql(f"SELECT count(*) FROM ducklake_list_files('lake', '{name}')").fetchone()
            total += int(rows[0])
        return total


def test_a_byte_budget_stops_between_tables_and_the_next_pass_continues(tmp_path: Path) -> None:
    tables = 6
    url, names = _small_lake(tmp_path, tables)
    with slatelake.connect(url, read_only=True) as s:
        before = {n: sorted(s.sql(f"SELECT * FROM {n}").fetchall()) for n in names}
    flush = {"MAINTENANCE_FLUSH_INLINED_DATA": "true"}
    dry = maintenance.run(url, flush, dry_run=True)
    assert dry.estimate is not None and dry.plan is not None
    fixed = dry.estimate["fixed"]
    step = dry.plan["flush_inlined_data"].details["estimate"]
    base = pricing.flush_step([])
    per_table = (step["bytes_read"] + step["bytes_written"] - base.bytes_moved) / tables
    budget = fixed["bytes_read"] + fixed["bytes_written"] + base.bytes_moved + int(2.5 * per_table)
    options = {**flush, "MAINTENANCE_BUDGET_BYTES": str(budget)}

    first = maintenance.run(url, options)

    flushed = first.step("flush_inlined_data")
    assert flushed.status == "ran" and "MAINTENANCE_BUDGET_BYTES" in flushed.detail, flushed
    assert first.work_pending and first.status == "partial"
    assert flushed.counts["rows_flushed"] == 2 * 2  # two tables of two inlined rows each
    passes, files = [first], _inlined(url, names)
    while passes[-1].work_pending and len(passes) < tables + 1:
        passes.append(maintenance.run(url, options))
        now = _inlined(url, names)
        assert now > files, "each pass flushes at least one more table"
        files = now
    assert not passes[-1].work_pending and passes[-1].status == "succeeded"
    assert sum(p.step("flush_inlined_data").counts["rows_flushed"] for p in passes) == 2 * tables
    with slatelake.connect(url, read_only=True) as s:
        assert {n: sorted(s.sql(f"SELECT * FROM {n}").fetchall()) for n in names} == before
    assert maintenance.run(url, flush, dry_run=True).plan["flush_inlined_data"].total == 0


def test_a_request_budget_spent_before_a_step_leaves_the_step_pending(tmp_path: Path) -> None:
    url, _ = _small_lake(tmp_path)
    options = {**_options(), "MAINTENANCE_BUDGET_REQUESTS": "1"}  # the fixed part spends it
    report = maintenance.run(url, options)
    assert report.work_pending and report.status == "partial"
    # a pass's first work runs whatever it costs, so every pass makes progress
    assert report.step("expire_snapshots").counts["snapshots_expired"] > 0
    skipped = report.step("flush_inlined_data")
    assert (
        skipped.status == "skipped" and "MAINTENANCE_BUDGET_REQUESTS=1 is spent" in skipped.detail
    )
    assert maintenance.run(url, _options()).status == "succeeded"  # unbounded, it all runs


def test_a_priced_dry_run_writes_nothing(moto_endpoint: str, s3_bucket: str) -> None:
    root = f"s3://{s3_bucket}/{uuid.uuid4().hex[:8]}"
    url, data = f"{root}/lake", f"{root}/data/"
    churn(url, data, tables=3, rounds=2)
    status = maintenance.status(url)
    before = {**_listing(url), **_listing(data)}
    dry = maintenance.run(url, _options(), dry_run=True)
    assert dry.estimate is not None and dry.estimate["total"]["requests"]["PUT"] > 0
    assert {**_listing(url), **_listing(data)} == before
    assert maintenance.pass_lease(url) is None
    assert [p.started_at for p in maintenance.status(url)] == [p.started_at for p in status]
