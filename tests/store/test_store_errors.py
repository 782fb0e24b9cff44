"""Foreign errors are translated where slatelake calls the foreign code.

obstore's and SlateDB's errors (an HTTP status, an S3 error body, a Rust
debug dump) and DuckDB's data-file errors come out as slatelake's typed
errors, in one readable line naming the operation and the object. A
refusal (403/401, a missing bucket, a local file system's "no") is
terminal and never an ambiguous write. Real parts only: moto's S3 behind
the fault proxy, local files, SlateDB, DuckDB with DuckLake.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from slatelake.errors import (
    AmbiguousWriteError,
    NotFoundError,
    PermissionDeniedError,
    SlatelakeError,
    StoreError,
    StoreUnavailableError,
)
from slatelake.log.slots import SlotLog
from slatelake.store.db import open_reader, open_writer
from slatelake.store.location import LakeLocation
from slatelake.store.objects import ObjectClient
from slatelake.store.reachable import require_answers
from slatelake.store.refusal import SLATEDB_DIRS, refused_under
from tests.faults.proxy import FaultProxy, FaultRule
from tests.store.faulty_s3 import s3_endpoint

# What a foreign error's text carries that must never reach a message.
FOREIGN_NOISE = ("\n", "Debug source", "<?xml", "<Error>", "http://", "message='", "RetryError")


def _kind(error: BaseException) -> type:
    """The error's slatelake class: a session raises it as its DuckDB twin
    (ducklake/duck_errors.py), which names the class it twins."""
    return getattr(type(error), "_twin_of", (type(error),))[0]


def assert_one_readable_line(error: BaseException, *names: str) -> None:
    text = str(error)
    for noise in FOREIGN_NOISE:
        assert noise not in text, f"{noise!r} in {text!r}"
    for name in names:
        assert name in text, f"{name!r} not in {text!r}"
    assert len(text) < 400, text


@pytest.fixture
def proxy(moto_endpoint: str) -> Iterator[FaultProxy]:
    """The fault proxy in front of moto; every S3 client of the test goes through it."""
    with FaultProxy(upstream=moto_endpoint) as relay, s3_endpoint(relay.url):
        yield relay


@pytest.fixture
def s3_lake(proxy: FaultProxy, s3_bucket: str) -> LakeLocation:
    return LakeLocation.parse(f"s3://{s3_bucket}/lakes/{uuid.uuid4().hex[:8]}")


def _error(call: Callable[[], Any]) -> BaseException:
    try:
        call()
    except BaseException as exc:  # noqa: BLE001 - the test inspects it
        return exc
    raise AssertionError("the call succeeded")


# -- obstore on S3 ---------------------------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("method", ["GET", "PUT", "LIST"])
def test_a_403_is_a_terminal_permission_error_naming_the_operation_and_the_object(
    proxy: FaultProxy, s3_lake: LakeLocation, method: str
) -> None:
    proxy.add(FaultRule(method=method, prefix="commits/", kind="403", times=None))
    client = ObjectClient(s3_lake)
    key = s3_lake.path("commits", "00000000000000000001")
    call = {
        "GET": lambda: client.get(key),
        "PUT": lambda: client.put_if_absent(key, b"slot"),
        "LIST": lambda: list(client.list(s3_lake.path("commits") + "/")),
    }[method]
    error = _error(call)
    assert _kind(error) is PermissionDeniedError, error
    assert not error.retryable
    obj = f"s3://{s3_lake.bucket}/{key}" if method != "LIST" else f"{s3_lake.url}/commits/"
    assert_one_readable_line(
        error, f"{method} {obj}", "HTTP 403", "AccessDenied", "credentials", s3_lake.url
    )


@pytest.mark.timeout(60)
@pytest.mark.parametrize("method", ["GET", "PUT", "LIST"])
def test_a_missing_bucket_is_not_found_naming_the_bucket_and_the_object(
    moto_endpoint: str, method: str
) -> None:
    loc = LakeLocation.parse(f"s3://no-bucket-{uuid.uuid4().hex[:8]}/lake")
    client = ObjectClient(loc)
    key = loc.path("commits", "00000000000000000001")
    call = {
        "GET": lambda: client.get(key),
        "PUT": lambda: client.put_if_absent(key, b"slot"),
        "LIST": lambda: list(client.list(loc.path("commits") + "/")),
    }[method]
    error = _error(call)
    assert _kind(error) is NotFoundError, error
    assert_one_readable_line(error, method, f"s3://{loc.bucket}/lake/commits", "does not exist")


@pytest.mark.timeout(60)
def test_a_404_for_an_object_is_an_answer_not_an_error(s3_lake: LakeLocation) -> None:
    client = ObjectClient(s3_lake)
    assert client.get(s3_lake.path("commits", "00000000000000000009")) is None
    assert list(client.list(s3_lake.path("commits") + "/")) == []
    client.delete(s3_lake.path("commits", "00000000000000000009"))  # deleting nothing is fine


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["503", "drop_after"])
def test_a_put_without_a_usable_answer_is_ambiguous_in_one_line(
    proxy: FaultProxy, s3_lake: LakeLocation, kind: str
) -> None:
    proxy.add(FaultRule(method="PUT", prefix="commits/", kind=kind, times=None))
    key = s3_lake.path("commits", "00000000000000000001")
    error = _error(lambda: ObjectClient(s3_lake).put_if_absent(key, b"slot"))
    assert _kind(error) is AmbiguousWriteError, error
    assert error.retryable
    expected = ("HTTP 503", "SlowDown") if kind == "503" else ("connection",)
    assert_one_readable_line(error, f"PUT s3://{s3_lake.bucket}/{key}", "unknown", *expected)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["drop_before", "drop_after"])
def test_a_delete_whose_connection_dropped_is_sent_again_and_the_object_goes(
    proxy: FaultProxy, s3_lake: LakeLocation, kind: str
) -> None:
    """The holder's truncation deletes slot by slot; one dropped DELETE used
    to fail the whole fold (and, four folds running, stop the holder)."""
    client = ObjectClient(s3_lake)
    key = s3_lake.path("commits", "00000000000000000001")
    assert client.put_if_absent(key, b"slot")
    # obstore deletes with a bulk delete (POST ?delete) of one key
    proxy.add(FaultRule(method="POST", prefix="commits/", kind=kind, times=2))
    client.delete(key)
    assert client.get(key) is None
    proxy.clear()
    proxy.add(FaultRule(method="POST", prefix="commits/", kind=kind, times=None))
    assert client.put_if_absent(key, b"slot")
    error = _error(lambda: client.delete(key))  # a store that keeps dropping it: typed
    assert _kind(error) is StoreUnavailableError, error
    assert_one_readable_line(error, f"DELETE s3://{s3_lake.bucket}/{key}", "connection")


# -- the commit path: a refused slot PUT -------------------------------------------------------


@pytest.mark.timeout(120)
def test_a_403_on_a_slot_put_is_a_definite_refusal_naming_the_slot_and_nothing_lands(
    proxy: FaultProxy, s3_lake: LakeLocation, tmp_path: Path
) -> None:
    from slatelake.ducklake.session import connect

    with connect(s3_lake.url, data_path=str(tmp_path / "data")) as session:
        session.sql("CREATE TABLE t (a INTEGER)")
        log = SlotLog(s3_lake)
        before = [s.seq for s in log.list_after(0)]
        rule = proxy.add(FaultRule(method="PUT", prefix="commits/", kind="403", times=None))
        error = _error(lambda: session.sql("INSERT INTO t VALUES (1)"))
        assert _kind(error) is PermissionDeniedError, error
        slot = f"{s3_lake.url}/commits/{before[-1] + 1:020d}"
        assert_one_readable_line(error, f"PUT {slot}", "HTTP 403", "credentials")
        assert rule.fired == 1, "a refusal is neither retried nor re-read as ambiguous"
        proxy.clear()
        assert [s.seq for s in log.list_after(0)] == before, "a refused slot never lands"
        session.sql("INSERT INTO t VALUES (2)")
        assert session.sql("SELECT a FROM t").fetchall() == [(2,)]


# -- SlateDB ------------------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_a_slatedb_refusal_names_the_request_it_refused(
    proxy: FaultProxy, s3_lake: LakeLocation
) -> None:
    proxy.add(FaultRule(method="LIST", prefix="store/", kind="403", times=None))
    error = _error(lambda: open_reader(s3_lake))
    assert _kind(error) is PermissionDeniedError, error
    assert_one_readable_line(
        error,
        f"open store reader {s3_lake.url}",
        f"LIST {s3_lake.url}/store/manifest/",
        "HTTP 403",
    )


@pytest.mark.timeout(90)
def test_a_write_refusal_slatedb_reports_as_unavailable_is_found_and_named(
    proxy: FaultProxy, s3_lake: LakeLocation
) -> None:
    """SlateDB retries a refused WAL PUT and then says only "wal unavailable";
    the store is asked once, and the refusal is what the caller gets."""
    proxy.add(FaultRule(method="PUT", prefix="store/wal/", kind="403", times=None))
    error = _error(lambda: open_writer(s3_lake))
    assert _kind(error) is PermissionDeniedError and not error.retryable, error
    assert_one_readable_line(
        error, f"open store writer {s3_lake.url}", f"PUT {s3_lake.url}/store/wal/", "HTTP 403"
    )


@pytest.mark.timeout(60)
def test_the_permission_probe_writes_nothing_and_a_store_that_does_not_answer_settles_nothing(
    proxy: FaultProxy, s3_lake: LakeLocation
) -> None:
    folders = [f"{s3_lake.store_path}/{d}" for d in SLATEDB_DIRS]
    assert refused_under(s3_lake, folders) is None  # every probe allowed
    assert list(ObjectClient(s3_lake).list(f"{s3_lake.root}/")) == []  # and none wrote
    proxy.add(FaultRule(method="*", prefix="store/", kind="503", times=None))
    assert refused_under(s3_lake, folders) is None  # no answer is no refusal
    proxy.clear()
    proxy.add(FaultRule(method="GET", prefix="store/compacted/", kind="403", times=None))
    refusal = refused_under(s3_lake, folders)
    assert refusal is not None and f"GET {s3_lake.url}/store/compacted/" in str(refusal)


@pytest.mark.timeout(90)
def test_a_data_path_that_holds_every_request_fails_the_probe_within_its_bound_and_touches_nothing(
    proxy: FaultProxy, s3_lake: LakeLocation, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before a DuckLake call whose requests no deadline reaches, the data
    path is asked once: any answer (a refusal too) lets the call start, a
    one-off stall is asked again, a store that holds the request fails it
    typed within two bounds."""
    monkeypatch.setenv("SLATELAKE_STORE_TIMEOUT_S", "2")
    data = LakeLocation.parse(f"{s3_lake.url}/data", what="data path", lake=False)
    require_answers(data, ("LIST", "GET", "HEAD", "PUT"), before="merge_adjacent_files")
    assert list(ObjectClient(s3_lake).list(f"{s3_lake.root}/")) == []  # nothing written
    proxy.add(FaultRule(method="PUT", prefix="data/", kind="delay", delay_s=3.0, times=1))
    require_answers(data, ("PUT",), before="merge_adjacent_files")  # stalled once, asked again
    proxy.clear()
    proxy.add(FaultRule(method="PUT", prefix="data/", kind="403", times=None))
    require_answers(data, ("PUT",), before="rewrite_data_files")  # an answer: the call judges it
    proxy.clear()
    proxy.add(FaultRule(method="HEAD", prefix="data/", kind="delay", delay_s=5.0, times=None))
    started = time.monotonic()
    error = _error(lambda: require_answers(data, ("HEAD",), before="delete_orphaned_files"))
    assert _kind(error) is StoreUnavailableError and error.retryable, error
    assert time.monotonic() - started < 2 * 2.0 + 1.5  # two tries of the 2 s bound
    assert_one_readable_line(error, "delete_orphaned_files: not started", f"HEAD {data.url}/")
    assert list(ObjectClient(s3_lake).list(f"{s3_lake.root}/")) == []


# -- local files ---------------------------------------------------------------------------------


@pytest.fixture
def blocked_lake(tmp_path: Path) -> LakeLocation:
    """A local lake whose ``commits`` and ``store`` are files, not directories."""
    root = tmp_path / "lake"
    root.mkdir()
    (root / "commits").write_bytes(b"not a directory")
    (root / "store").write_bytes(b"not a directory")
    return LakeLocation.parse(root.as_uri())


def test_a_local_file_system_refusal_is_terminal_and_never_ambiguous(
    blocked_lake: LakeLocation,
) -> None:
    key = blocked_lake.path("commits", "00000000000000000001")
    error = _error(lambda: ObjectClient(blocked_lake).put_if_absent(key, b"slot"))
    assert _kind(error) is StoreError, error
    assert not error.retryable
    assert_one_readable_line(error, f"PUT {blocked_lake.url}/commits/", "Not a directory")


def test_a_local_slatedb_refusal_names_the_file(blocked_lake: LakeLocation) -> None:
    error = _error(lambda: open_reader(blocked_lake))
    assert isinstance(error, SlatelakeError) and not error.retryable, error
    assert_one_readable_line(error, f"{blocked_lake.url}/store/manifest", "Not a directory")


def test_a_local_object_that_does_not_exist_is_an_answer(tmp_path: Path) -> None:
    loc = LakeLocation.parse((tmp_path / "lake").as_uri())
    client = ObjectClient(loc)
    assert client.get(loc.path("commits", "00000000000000000001")) is None
    assert list(client.list(loc.path("commits") + "/")) == []


# -- DuckDB's data-file errors -------------------------------------------------------------------


def _indexed_session(lake_url: str, data_path: str) -> Any:
    from slatelake.ducklake.session import connect

    session = connect(lake_url, data_path=data_path)
    session.sql("CREATE TABLE t (a INTEGER, b VARCHAR)")
    session.sql("INSERT INTO t SELECT i, 'v' || i FROM range(1000) r(i)")  # a Parquet file
    session.create_index("t", "a")
    return session


@pytest.mark.timeout(120)
def test_a_refused_data_file_read_is_a_typed_error_naming_the_file_on_s3(
    proxy: FaultProxy, s3_bucket: str
) -> None:
    tag = uuid.uuid4().hex[:8]
    session = _indexed_session(f"s3://{s3_bucket}/lake-{tag}", f"s3://{s3_bucket}/data-{tag}")
    try:
        proxy.add(FaultRule(method="GET", prefix=f"data-{tag}/", kind="403", times=None))
        error = _error(lambda: session.lookup("t", "a", 5))
        assert _kind(error) is PermissionDeniedError, error
        assert_one_readable_line(
            error, "lookup t.a", f"s3://{s3_bucket}/data-{tag}/", ".parquet", "HTTP 403"
        )
        proxy.clear()
        proxy.add(FaultRule(method="GET", prefix=f"data-{tag}/", kind="500", times=None))
        error = _error(lambda: session.lookup("t", "a", 5))
        assert _kind(error) is StoreUnavailableError and error.retryable, error
        proxy.clear()
        assert [r[0] for r in session.lookup("t", "a", 5)] == [5]
    finally:
        session.close()


@pytest.mark.timeout(120)
def test_a_data_file_missing_locally_is_not_found_naming_the_file(tmp_path: Path) -> None:
    session = _indexed_session((tmp_path / "lake").as_uri(), str(tmp_path / "data"))
    try:
        files = list((tmp_path / "data").rglob("*.parquet"))
        assert files
        for file in files:
            file.unlink()
        error = _error(lambda: session.lookup("t", "a", 5))
        assert _kind(error) is NotFoundError, error
        assert_one_readable_line(error, "lookup t.a", str(files[0]), "removed outside DuckLake")
    finally:
        session.close()
