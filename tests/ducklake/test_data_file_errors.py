"""A data-file request that fails inside DuckDB (httpfs, or the file system)
reaches a write statement's caller as slatelake's typed error, one line
naming the file, DuckLake's own file removal included; a request the store
holds fails at the store deadline.

Real parts: moto's S3 behind the fault proxy, local files, DuckDB with
DuckLake. After the failure the session still follows its failed-statement
rules: nothing of the statement is committed, and the next statement works.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import duckdb
import pytest

from slatelake.ducklake.session import Session, connect
from slatelake.errors import PermissionDeniedError, SlatelakeError, StoreUnavailableError
from tests.faults.proxy import FaultProxy, FaultRule
from tests.store.faulty_s3 import s3_endpoint
from tests.store.test_store_errors import assert_one_readable_line

INSERT = "INSERT INTO t SELECT i FROM range(50000) r(i)"  # one Parquet file
DEADLINE_S = 4


def _exactly(error: BaseException, cls: type) -> bool:
    """``cls`` itself (not a narrower error), as a session raises it: its
    DuckDB twin, which is also a duckdb.IOException."""
    return (
        isinstance(error, cls)
        and type(error).__name__ == cls.__name__
        and isinstance(error, duckdb.IOException)
    )


@pytest.fixture
def proxy(moto_endpoint: str) -> Iterator[FaultProxy]:
    with FaultProxy(upstream=moto_endpoint) as relay, s3_endpoint(relay.url):
        yield relay


@pytest.fixture
def s3_session(
    proxy: FaultProxy, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Session, str]]:
    monkeypatch.setenv("SLATELAKE_STORE_TIMEOUT_S", str(DEADLINE_S))
    tag = uuid.uuid4().hex[:8]
    data = f"s3://{s3_bucket}/data-{tag}/"
    session = connect(f"s3://{s3_bucket}/lake-{tag}", data_path=data)
    session.sql("CREATE TABLE t (a INTEGER)")
    try:
        yield session, data
    finally:
        session.close()


def _failure(session: Session, query: str) -> SlatelakeError:
    with pytest.raises(SlatelakeError) as raised:
        session.sql(query)
    return raised.value


def _still_usable(session: Session, proxy: FaultProxy, rows: int) -> None:
    """Nothing of the failed statement landed; the next one commits."""
    proxy.clear()
    assert session.sql("SELECT count(*) FROM t").fetchall() == [(rows,)]
    session.sql(INSERT)
    assert session.sql("SELECT count(*) FROM t").fetchall() == [(rows + 50000,)]


@pytest.mark.timeout(120)
def test_a_refused_data_file_write_is_permission_denied_naming_the_file_on_s3(
    proxy: FaultProxy, s3_session: tuple[Session, str]
) -> None:
    session, data = s3_session
    prefix = data.split("/", 3)[3]
    proxy.add(FaultRule(method="PUT", prefix=prefix, kind="403", times=None))
    error = _failure(session, INSERT)
    assert _exactly(error, PermissionDeniedError), error
    assert_one_readable_line(error, "INSERT", data, ".parquet", "HTTP 403")
    _still_usable(session, proxy, 0)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["500", "drop_before"])
def test_a_data_path_that_keeps_failing_is_store_unavailable_naming_the_file_on_s3(
    proxy: FaultProxy, s3_session: tuple[Session, str], kind: str
) -> None:
    session, data = s3_session
    proxy.add(FaultRule(method="PUT", prefix=data.split("/", 3)[3], kind=kind, times=None))
    error = _failure(session, INSERT)
    assert _exactly(error, StoreUnavailableError) and error.retryable, error
    assert_one_readable_line(error, "INSERT", data, ".parquet", "no usable answer")
    _still_usable(session, proxy, 0)


@pytest.mark.timeout(120)
def test_a_data_file_write_the_store_holds_fails_at_the_store_deadline_on_s3(
    proxy: FaultProxy, s3_session: tuple[Session, str]
) -> None:
    """httpfs's own timeout is 30 s a try: without the store's deadline the
    held PUT would be waited out and land. Few tries (the user's setting), so
    the clock shows the deadline (the upload takes about two tries), not
    httpfs's default retries."""
    session, data = s3_session
    session.sql("SET http_retries = 0")
    held = 6 * DEADLINE_S
    proxy.add(FaultRule(method="PUT", prefix=data.split("/", 3)[3], kind="delay", delay_s=held))
    started = time.monotonic()
    error = _failure(session, INSERT)
    took = time.monotonic() - started
    assert _exactly(error, StoreUnavailableError), error
    assert_one_readable_line(error, "INSERT", data, ".parquet")
    assert took < 3 * DEADLINE_S, f"the held write took {took:.1f} s, past the deadline"
    _still_usable(session, proxy, 0)


@pytest.mark.timeout(120)
def test_a_refused_delete_of_an_old_file_is_permission_denied_and_keeps_it_scheduled(
    proxy: FaultProxy, s3_session: tuple[Session, str]
) -> None:
    """DuckLake's cleanup says "Failed to remove files: HTTP 403 (Forbidden)":
    the caller gets the typed refusal, and the file stays scheduled, so a
    later cleanup with working credentials removes it."""
    session, data = s3_session
    session.sql(INSERT)
    session.sql("DELETE FROM t")  # the file ends; expiring its snapshots schedules it
    session.sql("CALL ducklake_expire_snapshots('lake', older_than => now())")
    scheduled = (
        "SELECT count(*) FROM ducklake_cleanup_old_files('lake', cleanup_all => true, "
        "dry_run => true)"
    )
    assert session.sql(scheduled).fetchall() == [(1,)]
    proxy.add(FaultRule(method="POST", prefix=data.split("/", 3)[3], kind="403", times=None))
    error = _failure(session, "CALL ducklake_cleanup_old_files('lake', cleanup_all => true)")
    assert _exactly(error, PermissionDeniedError), error
    assert_one_readable_line(error, "deleting", "HTTP 403", "credentials")
    assert session.sql(scheduled).fetchall() == [(1,)]
    proxy.clear()
    session.sql("CALL ducklake_cleanup_old_files('lake', cleanup_all => true)")
    assert session.sql(scheduled).fetchall() == [(0,)]
