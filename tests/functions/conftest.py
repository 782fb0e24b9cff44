"""Driving the maintenance Lambda's handler in-process against moto's S3.

The handler module is imported the way Lambda does (its folder on sys.path);
the context is a stand-in with a real clock, since Lambda's own object is
not importable outside the runtime.
"""

from __future__ import annotations

import copy
import functools
import importlib
import io
import json
import os
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import slatelake

ROOT = Path(__file__).resolve().parents[2]
FUNCTION_DIR = ROOT / "functions" / "maintenance"
EVENTS = ROOT / "events"
SAMPLE_LAKE = "s3://my-lake-bucket/lakes/sales"
SAMPLE_DATA = "s3://my-lake-bucket/data/sales/"


@dataclass
class FakeContext:
    """Lambda's context: ``remaining_s`` counts down in real time."""

    remaining_s: float = 900.0
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    function_name: str = "slatelake-maintenance"
    memory_limit_in_mb: int = 1024
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:slatelake"
    _t0: float = field(default_factory=time.monotonic)

    def get_remaining_time_in_millis(self) -> int:
        return int((self.remaining_s - (time.monotonic() - self._t0)) * 1000)


def powertools_env() -> dict[str, str]:
    """The POWERTOOLS_* settings template.yaml gives every function (Globals)."""
    doc = template()
    names = doc["Mappings"]["Metrics"]["Names"]
    variables = doc["Globals"]["Function"]["Environment"]["Variables"]
    return {
        key: names[value["FindInMap"][2]] if isinstance(value, dict) else value
        for key, value in variables.items()
        if key.startswith("POWERTOOLS_")
    }


@pytest.fixture
def app(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The handler module in a new container: the template's Powertools
    settings, and Powertools' cold-start flag set as a fresh process has it."""
    from aws_lambda_powertools.metrics.provider import cold_start

    for key, value in powertools_env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.syspath_prepend(str(FUNCTION_DIR))
    monkeypatch.setattr(cold_start, "is_cold_start", True)
    module = importlib.import_module("app")
    yield module
    module.warm.release()  # each test starts cold, as a new container would


@pytest.fixture
def log_lines(app: ModuleType) -> Any:
    """The handler's structured log lines (JSON objects), as a callable."""
    buffer = io.StringIO()
    handler = app.logger.registered_handler
    saved = handler.setStream(buffer)

    def read() -> list[dict[str, Any]]:
        return [json.loads(line) for line in buffer.getvalue().splitlines() if line.strip()]

    yield read
    handler.setStream(saved)


def emf_lines(text: str, cold_start: bool = False) -> list[dict[str, Any]]:
    """EMF documents printed to stdout by Powertools Metrics; Powertools' own
    ColdStart document only when asked for."""
    out = []
    for line in text.splitlines():
        if line.startswith("{") and '"_aws"' in line:
            doc = json.loads(line)
            if cold_start or "ColdStart" not in doc:
                out.append(doc)
    return out


def load_event(name: str, lake: str, data_path: str | None = None) -> dict[str, Any]:
    text = (EVENTS / name).read_text()
    text = text.replace(SAMPLE_LAKE, lake)
    if data_path is not None:
        text = text.replace(SAMPLE_DATA, data_path)
    return json.loads(text)


def churn(lake: str, data_path: str, tables: int = 4, rounds: int = 3) -> list[str]:
    """A churned lake: Parquet and inlined inserts, deletes, a dropped table."""
    names = [f"t{i}" for i in range(tables)]
    with slatelake.connect(lake, data_path=data_path) as s:
        for n in names:
            s.sql(f"CREATE TABLE {n} (id INTEGER, v VARCHAR)")
        for r in range(rounds):
            for n in names:
                lo = r * 40
                s.sql(f"INSERT INTO {n} SELECT i, 'v' || i FROM range({lo}, {lo + 40}) r(i)")
                s.sql(f"INSERT INTO {n} VALUES ({1000 + r}, 'inline')")
        for n in names[::2]:
            s.sql(f"DELETE FROM {n} WHERE id % 3 = 0")
        s.sql("CREATE TABLE dropped (id INTEGER)")
        s.sql("INSERT INTO dropped SELECT * FROM range(50)")
        s.sql("DROP TABLE dropped")
    return names


def end_state(lake: str, names: list[str]) -> dict[str, Any]:
    """What a pass must leave alike however it ran (one process, fanned out):
    rows, each table's live files (sizes, and whether a delete file rides
    along), the snapshots' changes, the status records and the run history."""
    handle = slatelake.open(lake)
    with slatelake.connect(lake, read_only=True) as s:
        rows = {n: sorted(s.sql(f"SELECT * FROM {n}").fetchall()) for n in names}
        files = {
            n: sorted(
                s.sql(
                    "SELECT data_file_size_bytes, delete_file IS NULL "
                    f"FROM ducklake_list_files('lake', '{n}')"
                ).fetchall()
            )
            for n in names
        }
        changes = sorted(
            str(r[0]) for r in s.sql("SELECT changes FROM ducklake_snapshots('lake')").fetchall()
        )
    return {
        "rows": rows,
        "files": files,
        "snapshot_changes": changes,
        "status_records": len(handle.maintenance.status()),
        "runs": [r.status for r in handle.maintenance.runs().items],
    }


def contents(lake: str, names: list[str]) -> dict[str, list[tuple[Any, ...]]]:
    with slatelake.connect(lake, read_only=True) as s:
        return {n: sorted(s.sql(f"SELECT * FROM {n}").fetchall()) for n in names}


@dataclass
class PristineLake:
    """A churned lake built once per worker; every test gets it back byte for
    byte at the same URLs (the catalog names its data path's bucket, so the
    copy goes back into the same bucket)."""

    bucket: str
    lake: str
    data: str
    names: list[str]
    objects: dict[str, bytes]

    def restore(self) -> None:
        """Empty the bucket (a batch delete per page), then put every object
        back, several at a time (one by one took ~2.5 s a test)."""
        import boto3

        s3 = boto3.client("s3")
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket)
        for page in pages:
            doomed = [{"Key": obj["Key"]} for obj in page.get("Contents", [])]
            if doomed:
                out = s3.delete_objects(Bucket=self.bucket, Delete={"Objects": doomed})
                assert not out.get("Errors"), out["Errors"]
        with ThreadPoolExecutor(8) as pool:
            list(
                pool.map(
                    lambda item: s3.put_object(Bucket=self.bucket, Key=item[0], Body=item[1]),
                    self.objects.items(),
                )
            )


@pytest.fixture(scope="session")
def pristine_lake(moto_endpoint: str) -> PristineLake:
    import boto3

    bucket = f"lake-{uuid.uuid4().hex[:12]}"
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=bucket)
    lake, data = f"s3://{bucket}/lakes/sales", f"s3://{bucket}/data/sales/"
    names = churn(lake, data)
    objects = {
        obj["Key"]: s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket)
        for obj in page.get("Contents", [])
    }
    return PristineLake(bucket, lake, data, names, objects)


@pytest.fixture
def env_clean(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No SLATELAKE_* / MAINTENANCE_* leaking in from the developer's shell."""
    for key in list(os.environ):
        if key.startswith(
            ("SLATELAKE_LAKE", "SLATELAKE_DATA_PATH", "SLATELAKE_ALLOWED_", "MAINTENANCE_")
        ):
            monkeypatch.delenv(key)
    return monkeypatch


def deploy(monkeypatch: pytest.MonkeyPatch, lake: str, data: str | None = None) -> None:
    """The stack's configuration: the function maintains this lake (and data path)."""
    monkeypatch.setenv("SLATELAKE_LAKE", lake)
    if data is not None:
        monkeypatch.setenv("SLATELAKE_DATA_PATH", data)


@pytest.fixture
def s3_lake(
    pristine_lake: PristineLake, env_clean: pytest.MonkeyPatch
) -> tuple[str, str, list[str]]:
    """The churned lake on moto's S3, fresh for this test, and the function
    deployed for it."""
    pristine_lake.restore()
    deploy(env_clean, pristine_lake.lake, pristine_lake.data)
    return pristine_lake.lake, pristine_lake.data, list(pristine_lake.names)


def template() -> dict[str, Any]:
    """template.yaml as data; CloudFormation's short tags become {tag: value}.
    A fresh copy each call (callers may change it) of one parse per file
    version (a parse takes ~0.1 s)."""
    path = ROOT / "template.yaml"
    return copy.deepcopy(_parsed_template(path.read_text()))


@functools.lru_cache(maxsize=2)
def _parsed_template(text: str) -> dict[str, Any]:
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    def tagged(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
        if isinstance(node, yaml.ScalarNode):
            value: Any = loader.construct_scalar(node)
        elif isinstance(node, yaml.SequenceNode):
            value = loader.construct_sequence(node, deep=True)
        else:
            value = loader.construct_mapping(node, deep=True)
        return {suffix: value}

    Loader.add_multi_constructor("!", tagged)
    return yaml.load(text, Loader=Loader)  # noqa: S506


MetricKey = tuple[str, tuple[tuple[str, str], ...]]


def metric_key(name: str, dims: dict[str, str]) -> MetricKey:
    """A metric by name and dimensions, the lake's value wildcarded."""
    return name, tuple(sorted((k, "*" if k == "Lake" else v) for k, v in dims.items()))


@pytest.fixture
def dashboard_metrics() -> set[MetricKey]:
    body = template()["Resources"]["MaintenanceDashboard"]["Properties"]["DashboardBody"]
    assert set(body["Sub"][1]) == {"Lake", "Namespace", "Service"}
    params = {"LakeBucket": "bucket", "LakePrefix": "lake", "SchedulePeriodSeconds": "3600"}
    params |= {
        "FoldPeriodSeconds": "300",
        "MaintenanceFunction": "pass-fn",
        "FoldFunction": "fold-fn",
    }
    doc = json.loads(render_sub(body, params))
    out: set[MetricKey] = set()
    for widget in doc["widgets"]:
        for row in widget["properties"]["metrics"]:
            assert row[0] == powertools_env()["POWERTOOLS_METRICS_NAMESPACE"]
            pairs = [x for x in row[2:] if isinstance(x, str)]
            out.add(metric_key(row[1], dict(zip(pairs[::2], pairs[1::2], strict=True))))
    return out


def render_sub(value: Any, params: dict[str, str]) -> str:
    """A template value with ``!Sub`` / ``!Ref`` / ``!FindInMap`` resolved from
    ``params`` and the template's Mappings."""
    if isinstance(value, dict) and "Ref" in value:
        return params[value["Ref"]]
    if isinstance(value, dict) and "FindInMap" in value:
        mapping, top, key = value["FindInMap"]
        return str(template()["Mappings"][mapping][top][key])
    if not (isinstance(value, dict) and "Sub" in value):
        return str(value)
    sub = value["Sub"]
    text, local = (sub, {}) if isinstance(sub, str) else (sub[0], sub[1])
    names = {**params, "AWS::Region": "us-east-1", "AWS::Partition": "aws"}
    names |= {k: render_sub(v, params) for k, v in local.items()}
    names.setdefault(
        "MaintenanceOptions", template()["Parameters"]["MaintenanceOptions"]["Default"]
    )
    for key, val in names.items():
        text = text.replace("${" + key + "}", str(val))
    assert "${" not in text, f"unresolved substitution in {text[:200]}"
    return text


@pytest.fixture
def small_lake(env_clean: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """A lake on local files with one table and a few snapshots, the function
    deployed for it: for what does not depend on the store (the pass's
    outcome, how the handler reports it)."""
    lake, data = (tmp_path / "lake").as_uri(), f"{tmp_path / 'data'}/"
    with slatelake.connect(lake, data_path=data) as s:
        s.sql("CREATE TABLE t (id INTEGER)")
        for i in range(3):
            s.sql(f"INSERT INTO t VALUES ({i})")
    deploy(env_clean, lake, data)
    return lake
