"""Shared fixtures: moto's S3 server on loopback, and lake URLs per store kind.

moto runs as a real HTTP server (moto's own, ``tests/moto_server.py``) so SlateDB, obstore
and (later) DuckDB's httpfs all speak the S3 protocol to it, conditional puts
included. Nothing here mocks slatelake.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

S3_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
}


# The bridge and maintenance tests run with every capture checked against a
# full comparison of DuckLake's copy with the committed state (the net under
# the query-log capture).
VERIFIED_DIRS = ("ducklake", "maintenance")


@pytest.fixture(autouse=True)
def _verify_capture(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if Path(str(request.node.path)).parent.name in VERIFIED_DIRS:
        monkeypatch.setenv("SLATELAKE_VERIFY_CAPTURE", "1")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# moto's own server less its per-request overheads (tests/moto_server.py says which)
MOTO_SERVER = Path(__file__).with_name("moto_server.py")


def start_moto_server(env: dict[str, str] | None = None) -> tuple[subprocess.Popen, str]:
    """moto's server on a free loopback port, once it accepts connections;
    ``env`` adds variables (e.g. moto's request recorder)."""
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, str(MOTO_SERVER), "-H", "127.0.0.1", "-p", str(port)],
        env={**os.environ, **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise RuntimeError("moto server did not start") from None
            time.sleep(0.1)


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    proc, endpoint = start_moto_server()
    saved = {k: os.environ.get(k) for k in (*S3_ENV, "AWS_ENDPOINT_URL")}
    os.environ.update(S3_ENV, AWS_ENDPOINT_URL=endpoint)
    try:
        yield endpoint
    finally:
        proc.terminate()
        proc.wait(10)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture
def s3_bucket(moto_endpoint: str) -> str:
    import boto3

    name = f"lake-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=moto_endpoint).create_bucket(Bucket=name)
    return name


@pytest.fixture(params=["file", "memory", "s3"])
def lake_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, not yet created lake URL on each store kind."""
    if request.param == "file":
        return (tmp_path / "lake").as_uri()
    if request.param == "memory":
        return f"memory://{uuid.uuid4().hex}"
    bucket = request.getfixturevalue("s3_bucket")
    return f"s3://{bucket}/lakes/{uuid.uuid4().hex[:8]}"


@pytest.fixture(params=["file", "s3"])
def shared_lake_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A lake URL other processes can reach too (memory lakes are per process)."""
    if request.param == "file":
        return (tmp_path / "lake").as_uri()
    bucket = request.getfixturevalue("s3_bucket")
    return f"s3://{bucket}/lakes/{uuid.uuid4().hex[:8]}"


# The quick tier (`scripts/test --fast`, under 2 minutes) is the modules that say
# `pytestmark = pytest.mark.fast`: codecs, keys, options, locations, the log's
# integrity rules, the session's refusals, the quoting check. Every other test is
# marked slow here, so a new module is slow until someone measures it quick. A fast
# module's test that starts a process carries @pytest.mark.slow itself, one that
# reaches moto is marked s3 below, and neither runs in the quick tier. The tier
# `long` (scripts/test --long) and DuckLake's own files (`conformance`) are marked
# where they are written.


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by these marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test that talks to moto's server ``s3`` (its fixtures, or a
    parameter spelled ``s3``: the lake fixtures', a ``store`` parameter that
    asks for ``s3_bucket`` by name), and every test not marked ``fast``
    ``slow``, so ``scripts/test --fast`` can leave them out without anyone
    remembering to mark them."""
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        uses_moto = "moto_endpoint" in getattr(item, "fixturenames", ())
        if uses_moto or any(isinstance(v, str) and v == "s3" for v in params.values()):
            item.add_marker(pytest.mark.s3)
        if item.get_closest_marker("fast") is None:
            item.add_marker(pytest.mark.slow)


class _GroupKeeper:
    """Runs after xdist's own collection hook (``trylast``), so it sees what
    xdist did to the ids (``_keep_groups``)."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        if getattr(config.option, "loadgroup", False):
            _keep_groups(items)


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_GroupKeeper(), "slatelake-group-keeper")


def _keep_groups(items: list[pytest.Item]) -> None:
    """xdist's loadgroup scheduler sends the tests whose id ends ``@group`` to
    one worker, and xdist 3.8 adds that suffix by setting ``item._nodeid``,
    which pytest 9 no longer reads (the id is ``item._id``): every group was
    spread over the workers, each building the group's lake again (a fault
    matrix or the Lambda's pristine S3 lake per worker). The suffix is set
    where pytest 9 keeps it; when xdist sets it itself this does nothing."""
    from _pytest.nodeid import coerce_node_id

    for item in items:
        names = sorted(
            {
                str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                for m in item.iter_markers("xdist_group")
            }
        )
        if names and "@" not in item.nodeid:
            item._id = coerce_node_id(f"{item.nodeid}@{'_'.join(names)}")  # type: ignore[attr-defined]


class ClockAhead:
    """A stand-in for the ``time`` module a slatelake module imported, whose
    wall clock reads ``ahead_s`` seconds later (``monkeypatch.setattr(module,
    "time", ClockAhead(5))``): time passing for expiries and heartbeats
    without sleeping through it. Everything else is the real ``time``."""

    def __init__(self, ahead_s: float) -> None:
        self.ahead_s = ahead_s

    def time(self) -> float:
        return time.time() + self.ahead_s

    def time_ns(self) -> int:
        return time.time_ns() + int(self.ahead_s * 1e9)

    def __getattr__(self, name: str) -> object:
        return getattr(time, name)


def subprocess_env() -> dict[str, str]:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (root, str(Path(root, "layers", "slatelake")), env.get("PYTHONPATH")) if p
    )
    return env


@pytest.fixture(scope="session")
def signatures() -> dict[str, dict[str, str]]:
    """The pinned DuckLake's maintenance signatures, read once per worker."""
    from slatelake.ducklake import extensions
    from slatelake.maintenance.options import ducklake_signatures

    con = extensions.connect()
    try:
        return ducklake_signatures(con)
    finally:
        con.close()
