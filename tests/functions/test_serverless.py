"""The deployment with nothing resident, end to end on moto's S3: writer
processes commit, the pass function runs after each round and the fold
function folds, images and executes the store merges passes submit; the
backup action's manifest is enough to bring the lake back; a failed pass
or backup can be a function error; a scheduled tick never deletes on a lake
whose policy is off."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import uuid
from types import ModuleType
from typing import Any

import boto3
import pytest

import slatelake
from slatelake import maintenance
from tests.conftest import subprocess_env
from tests.functions.conftest import FakeContext, contents, deploy, template

# one worker builds the shared lake once (scripts/test: --dist loadgroup)
pytestmark = pytest.mark.xdist_group("pristine-s3-lake")

WRITERS, COMMITS = 3, 9
PASS_OPTIONS = {
    "MAINTENANCE_TABLE_BATCHES": "true",
    "MAINTENANCE_FLUSH_INLINED_DATA": "true",
    "MAINTENANCE_MERGE_ADJACENT_FILES": "true",
    "MAINTENANCE_COMPACT_STORE": "true",
}
# The writer leaves as the CLI does (cli.run): after its session closed, with
# os._exit, since interpreter teardown of the S3 clients' native threads now
# and then aborts a process that had finished (SIGABRT, exit -6; seen here).
WRITER = textwrap.dedent(
    """
    import os, sys, slatelake
    lake, writer, first, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    with slatelake.connect(lake) as s:
        for i in range(first, first + count):
            s.sql(f"INSERT INTO w{writer} VALUES ({i})")
            print(i, flush=True)  # acknowledged: the commit returned
    sys.stdout.flush()
    os._exit(0)
    """
)


def _new_lake(moto_endpoint: str) -> tuple[str, str]:
    bucket = f"lake-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=moto_endpoint).create_bucket(Bucket=bucket)
    return f"s3://{bucket}/lakes/sales", f"s3://{bucket}/data/sales/"


def _round(lake: str, first: int) -> dict[int, list[int]]:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, lake, str(w), str(first), str(COMMITS)],
            env=subprocess_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(WRITERS)
    ]
    acked = {}
    for w, proc in enumerate(procs):
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-2000:]
        acked[w] = [int(line) for line in out.split()]
    return acked


def test_a_lake_with_nothing_resident_stays_folded_imaged_and_merged(
    app: ModuleType, env_clean: pytest.MonkeyPatch, moto_endpoint: str
) -> None:
    """Three rounds of three writer processes, the pass after each round and
    the fold after each: the backlog never outgrows a round, every merge a
    pass submitted completes by the next fold, no row is lost or doubled."""
    lake, data = _new_lake(moto_endpoint)
    with slatelake.connect(lake, data_path=data) as s:
        for w in range(WRITERS):
            s.sql(f"CREATE TABLE w{w} (id INTEGER)")
    maintenance.set_policy(lake, {"enabled": "true"})
    deploy(env_clean, lake, data)
    acked: dict[int, list[int]] = {w: [] for w in range(WRITERS)}
    for r in range(3):
        for w, ids in _round(lake, r * COMMITS).items():
            acked[w] += ids
        tick = {"trigger": "scheduled", "lake": lake, "options": PASS_OPTIONS}
        passed = app.handler(tick, FakeContext())
        assert passed["ok"] and passed["result"]["status"] != "failed", passed
        steps = {s["step"]: s for s in passed["result"]["steps"]}
        assert steps["compact_store"]["status"] in ("ran", "skipped")
        fold = app.handler(
            {"trigger": "scheduled", "action": "fold", "lake": lake}, FakeContext(240)
        )
        turn = fold["result"]
        assert fold["ok"] and turn["status"] == "folded", fold
        backlog = turn["backlog"]
        assert backlog["unfolded_slots"] == 0 and backlog["image_seq"] is not None
        assert backlog["image_lag_slots"] <= app.IMAGE_EVERY_SLOTS  # the cadence bounds it
        assert backlog["store_merges_pending"] == 0 and turn["merges_pending"] == 0
        assert backlog["log_bytes"] > 0
    with slatelake.connect(lake, read_only=True) as s:
        for w in range(WRITERS):
            got = sorted(r[0] for r in s.sql(f"SELECT id FROM w{w}").fetchall())
            assert got == sorted(acked[w]), f"w{w}: lost or doubled rows"
    assert maintenance.backlog_of(lake).image_seq is not None


def _copy(objects: list[dict[str, Any]], old: str, new: str) -> None:
    s3 = boto3.client("s3")
    for item in objects:
        bucket, key = item["url"].removeprefix("s3://").split("/", 1)
        assert bucket == old
        s3.copy_object(Bucket=new, Key=key, CopySource={"Bucket": old, "Key": key})


def test_a_backup_manifest_copied_to_a_new_bucket_opens_as_the_same_lake(
    app: ModuleType, s3_lake: tuple[str, str, list[str]], moto_endpoint: str
) -> None:
    lake, data, names = s3_lake
    before = contents(lake, names)
    out = app.handler({"action": "backup", "lake": lake}, FakeContext())
    assert out["ok"], out
    report = out["result"]
    assert report["status"] == "succeeded" and report["image"].startswith(f"{lake}/images/")
    manifest = report["manifest"]
    urls = {o["url"] for o in manifest["catalog"]}
    assert report["image"] in urls
    assert not [u for u in urls if u.split("/")[5] in ("readers", "maintenance", "holder")]
    old = lake.removeprefix("s3://").split("/", 1)[0]
    new = f"copy-{uuid.uuid4().hex[:12]}"
    boto3.client("s3").create_bucket(Bucket=new)
    _copy(manifest["catalog"], old, new)
    copied = lake.replace(f"s3://{old}/", f"s3://{new}/")
    s3 = boto3.client("s3")  # the original root is gone: the copy stands alone
    for item in manifest["catalog"]:
        s3.delete_object(Bucket=old, Key=item["url"].removeprefix(f"s3://{old}/"))
    assert contents(copied, names) == before
    data_urls = {o["url"] for o in manifest["data"]}
    with slatelake.connect(copied, read_only=True) as s:
        assert (
            s.sql("SELECT max(snapshot_id) FROM ducklake_snapshots('lake')").fetchone()[0]
            == (report["head_snapshot_id"])
        )
        for name in names:
            files = s.sql(f"SELECT data_file FROM ducklake_list_files('lake', '{name}')").fetchall()
            assert files and {f for (f,) in files} <= data_urls


def test_raise_on_failure_turns_a_failed_pass_or_backup_into_a_function_error(
    app: ModuleType, small_lake: str, env_clean: pytest.MonkeyPatch
) -> None:
    failing = {"MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN": "1 millisecond"}
    env_clean.setenv("SLATELAKE_MAX_CHANGESET_OPS", "1")  # expiry fails its change set
    answered = app.handler({"lake": small_lake, "options": failing}, FakeContext())
    assert answered["ok"] is True and answered["result"]["status"] == "failed"
    with pytest.raises(app.PassFailedError, match="expire_snapshots"):
        app.handler(
            {"lake": small_lake, "options": failing, "raise_on_failure": True}, FakeContext()
        )
    backup = {"action": "backup", "lake": small_lake, "options": failing}
    assert app.handler(backup, FakeContext())["result"]["status"] == "failed"
    with pytest.raises(app.BackupFailedError, match="the pass before the backup failed"):
        app.handler({**backup, "raise_on_failure": True}, FakeContext())
    for bad in ("yes", 1, None, [True]):
        out = app.handler({"lake": small_lake, "raise_on_failure": bad}, FakeContext())
        if bad is None:
            continue  # absent means false
        assert out["ok"] is False and "raise_on_failure" in out["error"]["message"]


def _snapshots(lake: str) -> list[int]:
    with slatelake.connect(lake, read_only=True) as s:
        return [
            r[0] for r in s.sql("SELECT snapshot_id FROM ducklake_snapshots('lake')").fetchall()
        ]


def _data_objects(data: str) -> set[str]:
    bucket, prefix = data.removeprefix("s3://").split("/", 1)
    pages = (
        boto3.client("s3").get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    )
    return {o["Key"] for page in pages for o in page.get("Contents", [])}


def test_a_scheduled_tick_on_a_lake_whose_policy_is_off_deletes_nothing(
    app: ModuleType, s3_lake: tuple[str, str, list[str]]
) -> None:
    """The template's default options change nothing at all; options that
    ask for expiry, cleanup and orphans (what the template once defaulted
    to) still delete nothing until a person enables the policy."""
    lake, data, names = s3_lake
    rows, snapshots, files = contents(lake, names), _snapshots(lake), _data_objects(data)
    defaults = json.loads(template()["Parameters"]["MaintenanceOptions"]["Default"])
    quiet = app.handler({"trigger": "scheduled", "lake": lake, "options": defaults}, FakeContext())
    assert quiet["ok"] and all(s["status"] == "skipped" for s in quiet["result"]["steps"][:6])
    assert (contents(lake, names), _snapshots(lake), _data_objects(data)) == (
        rows,
        snapshots,
        files,
    )
    deleting = {
        "MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN": "1 millisecond",
        "MAINTENANCE_CLEANUP_OLD_FILES_OLDER_THAN": "1 millisecond",
        "MAINTENANCE_DELETE_ORPHANED_FILES_OLDER_THAN": "1 millisecond",
        "MAINTENANCE_ORPHAN_AGE_FLOOR_OVERRIDE": "true",
    }
    tick = app.handler({"trigger": "scheduled", "lake": lake, "options": deleting}, FakeContext())
    steps = {s["step"]: s for s in tick["result"]["steps"]}
    for step in ("expire_snapshots", "cleanup_old_files", "delete_orphaned_files"):
        assert (
            steps[step]["status"] == "skipped" and "policy is not enabled" in steps[step]["detail"]
        )
    assert (_snapshots(lake), _data_objects(data)) == (snapshots, files)
    manual = app.handler({"lake": lake, "options": deleting}, FakeContext())  # a person asked
    assert {s["step"]: s for s in manual["result"]["steps"]}["expire_snapshots"]["status"] == "ran"


@pytest.mark.parametrize(
    "sample", ["scheduled-fold.json", "manual-fold.json", "manual-backup.json"]
)
def test_the_fold_and_backup_samples_answer_on_the_stacks_lake(
    app: ModuleType, s3_lake: tuple[str, str, list[str]], sample: str
) -> None:
    from tests.functions.conftest import load_event

    lake, data, names = s3_lake
    before = contents(lake, names)
    out = app.handler(load_event(sample, lake, data), FakeContext())
    assert out["ok"] is True and out["action"] == sample.split("-", 1)[1].removesuffix(".json")
    assert out["result"]["status"] in ("folded", "succeeded"), out
    assert maintenance.backlog_of(lake).unfolded_slots == 0
    assert contents(lake, names) == before


def test_a_refused_scheduled_fold_counts_as_a_failed_fold_not_a_failed_pass(
    app: ModuleType, small_lake: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.functions.conftest import emf_lines

    capsys.readouterr()
    tick = {"trigger": "scheduled", "action": "fold", "lake": small_lake, "options": {"x": 1}}
    with pytest.raises(slatelake.MisconfigurationError, match="unknown option"):
        app.handler(tick, FakeContext(240))
    emitted = {k for doc in emf_lines(capsys.readouterr().out) for k in doc if k[0].isupper()}
    assert {"FoldRuns", "FoldFailed"} <= emitted and "PassFailed" not in emitted


@pytest.mark.parametrize("detail", [[], 0, "", False])
def test_a_scheduled_envelope_whose_detail_is_not_an_object_is_refused(
    app: ModuleType, small_lake: str, detail: object
) -> None:
    from tests.functions.conftest import EVENTS

    event = {**json.loads((EVENTS / "scheduled.json").read_text()), "detail": detail}
    with pytest.raises(slatelake.MisconfigurationError, match="detail is not a JSON object"):
        app.handler(event, FakeContext())
