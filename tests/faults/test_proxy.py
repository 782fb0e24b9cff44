"""The fault proxy itself, driven by a plain S3 client (boto3, no retries)
against moto: what it relays, which request it fails, and how."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import (
    ClientError,
    ConnectionClosedError,
    EndpointConnectionError,
    ReadTimeoutError,
)

from tests.faults.proxy import FaultProxy, FaultRule, key_has_prefix

DROPPED = (ConnectionClosedError, EndpointConnectionError, ConnectionError)


@pytest.fixture
def proxy(moto_endpoint: str) -> Iterator[FaultProxy]:
    with FaultProxy(upstream=moto_endpoint) as running:
        yield running


@pytest.fixture
def bucket(moto_endpoint: str) -> str:
    name = f"proxy-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=moto_endpoint).create_bucket(Bucket=name)
    return name


def _client(url: str):  # noqa: ANN202
    return boto3.client(
        "s3", endpoint_url=url, config=Config(retries={"total_max_attempts": 1}, read_timeout=10)
    )


def _exists(moto_endpoint: str, bucket: str, key: str) -> bool:
    try:
        boto3.client("s3", endpoint_url=moto_endpoint).head_object(Bucket=bucket, Key=key)
    except ClientError:
        return False
    return True


def test_requests_no_rule_picks_are_relayed_unchanged(proxy: FaultProxy, bucket: str) -> None:
    s3 = _client(proxy.url)
    s3.put_object(Bucket=bucket, Key="lake/commits/1", Body=b"one")
    assert s3.get_object(Bucket=bucket, Key="lake/commits/1")["Body"].read() == b"one"
    listed = s3.list_objects_v2(Bucket=bucket, Prefix="lake/")
    assert [o["Key"] for o in listed["Contents"]] == ["lake/commits/1"]
    assert proxy.injected == 0 and proxy.requests == 3


@pytest.mark.parametrize(
    ("kind", "code"), [("500", "InternalError"), ("503", "SlowDown"), ("403", "AccessDenied")]
)
def test_a_status_fault_answers_with_an_s3_error_and_nothing_lands(
    proxy: FaultProxy, bucket: str, moto_endpoint: str, kind: str, code: str
) -> None:
    proxy.add(FaultRule(method="PUT", prefix="commits/", kind=kind))
    with pytest.raises(ClientError) as info:
        _client(proxy.url).put_object(Bucket=bucket, Key="lake/commits/1", Body=b"x")
    assert info.value.response["Error"]["Code"] == code
    assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == int(kind)
    assert not _exists(moto_endpoint, bucket, "lake/commits/1")
    assert proxy.log == [("PUT", "lake/commits/1", kind)]


def test_a_drop_before_forwarding_loses_the_write(
    proxy: FaultProxy, bucket: str, moto_endpoint: str
) -> None:
    proxy.add(FaultRule(method="PUT", prefix="commits/", kind="drop_before"))
    with pytest.raises(DROPPED):
        _client(proxy.url).put_object(Bucket=bucket, Key="lake/commits/1", Body=b"x")
    assert not _exists(moto_endpoint, bucket, "lake/commits/1")


def test_a_drop_after_forwarding_lands_the_write_but_loses_the_answer(
    proxy: FaultProxy, bucket: str, moto_endpoint: str
) -> None:
    proxy.add(FaultRule(method="PUT", prefix="commits/", kind="drop_after"))
    with pytest.raises(DROPPED):
        _client(proxy.url).put_object(Bucket=bucket, Key="lake/commits/1", Body=b"x")
    assert _exists(moto_endpoint, bucket, "lake/commits/1")


def test_only_the_nth_matching_request_fails_and_only_times_of_them(
    proxy: FaultProxy, bucket: str
) -> None:
    rule = proxy.add(FaultRule(method="PUT", prefix="store/wal/", kind="503", nth=2, times=2))
    s3 = _client(proxy.url)
    outcomes = []
    for i in range(5):
        s3.put_object(Bucket=bucket, Key=f"lake/store/manifest/{i}", Body=b"m")  # never matches
        try:
            s3.put_object(Bucket=bucket, Key=f"lake/store/wal/{i}", Body=b"w")
            outcomes.append("ok")
        except ClientError:
            outcomes.append("503")
    s3.get_object(Bucket=bucket, Key="lake/store/wal/0")  # another method: not counted
    assert outcomes == ["ok", "503", "503", "ok", "ok"]
    assert (rule.matched, rule.fired, rule.exhausted) == (5, 2, True)
    assert proxy.log == [("PUT", "lake/store/wal/1", "503"), ("PUT", "lake/store/wal/2", "503")]


def test_a_listing_is_matched_as_list_by_its_prefix(proxy: FaultProxy, bucket: str) -> None:
    proxy.add(FaultRule(method="LIST", prefix="commits/", kind="500", times=None))
    s3 = _client(proxy.url)
    s3.list_objects_v2(Bucket=bucket, Prefix="lake/readers/")
    with pytest.raises(ClientError):
        s3.list_objects_v2(Bucket=bucket, Prefix="lake/commits/")
    assert proxy.log == [("LIST", "lake/commits/", "500")]


def test_a_prefix_matches_at_a_path_segment_boundary_only() -> None:
    assert key_has_prefix("lakes/x/commits/00000000000000000001", "commits/")
    assert key_has_prefix("commits/1", "commits/")
    assert not key_has_prefix("lakes/x/mycommits/1", "commits/")
    assert key_has_prefix("anything", "")


def test_a_delay_holds_the_request_then_answers_it(proxy: FaultProxy, bucket: str) -> None:
    proxy.add(FaultRule(method="PUT", prefix="log/", kind="delay", delay_s=0.6))
    t0 = time.monotonic()
    _client(proxy.url).put_object(Bucket=bucket, Key="lake/log/mark", Body=b"x")
    assert time.monotonic() - t0 >= 0.6
    assert proxy.log == [("PUT", "lake/log/mark", "delay")]


def test_settle_waits_for_a_held_write_the_client_gave_up_on(
    proxy: FaultProxy, bucket: str, moto_endpoint: str
) -> None:
    proxy.add(FaultRule(method="PUT", prefix="log/", kind="delay", delay_s=1.0))
    impatient = boto3.client(
        "s3",
        endpoint_url=proxy.url,
        config=Config(retries={"total_max_attempts": 1}, read_timeout=0.2),
    )
    with pytest.raises(ReadTimeoutError):
        impatient.put_object(Bucket=bucket, Key="lake/log/late", Body=b"x")
    assert not proxy.settle(0.1)  # still held
    assert proxy.settle(5.0)
    assert _exists(moto_endpoint, bucket, "lake/log/late")  # it landed after the client gave up


def test_random_faults_are_reproducible_from_the_seed_and_clear_stops_them(
    proxy: FaultProxy, bucket: str
) -> None:
    s3 = _client(proxy.url)

    def run() -> list[str]:
        proxy.set_random(0.5, ("500", "503"), seed=7, prefixes=("data/",))
        seen = []
        for i in range(12):
            s3.put_object(Bucket=bucket, Key=f"lake/other/{i}", Body=b"x")  # outside the prefixes
            try:
                s3.put_object(Bucket=bucket, Key=f"data/{i}.parquet", Body=b"x")
                seen.append("ok")
            except ClientError as exc:
                seen.append(exc.response["Error"]["Code"])
        return seen

    first, second = run(), run()
    assert first == second and "ok" in first and len(set(first)) > 1
    assert all(key.startswith("data/") for _, key, _ in proxy.log)
    proxy.clear()
    before = proxy.injected
    s3.put_object(Bucket=bucket, Key="data/after.parquet", Body=b"x")
    assert proxy.injected == before


def test_an_unknown_fault_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="drop_sideways"):
        FaultRule(kind="drop_sideways")


def test_a_stopped_proxy_refuses_connections(moto_endpoint: str) -> None:
    with FaultProxy(upstream=moto_endpoint) as proxy:
        url = proxy.url
    with pytest.raises(DROPPED):
        _client(url).list_buckets()


def test_slatedb_obstore_and_httpfs_all_reach_moto_through_the_proxy(
    moto_endpoint: str, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import slatelake

    with FaultProxy(upstream=moto_endpoint, record=True) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
        url, data = f"s3://{bucket}/lake", f"s3://{bucket}/data/"
        with slatelake.connect(url, data_path=data) as s:
            s.sql("CREATE TABLE t (id INTEGER)")
            s.sql("INSERT INTO t SELECT * FROM range(100)")
            assert s.sql("SELECT count(*) FROM t").fetchone() == (100,)
        seen = {(method, key.split("/")[1]) for method, key in proxy.trace or []}
    assert ("PUT", "store") in seen  # SlateDB: the store's manifest and SSTs
    assert ("PUT", "commits") in seen  # obstore: the commit log's slots
    assert ("PUT", "main") in seen  # DuckDB's httpfs: the Parquet file under data/main/
