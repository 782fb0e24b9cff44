"""The S3 server the tests and the soak run (``tests/moto_server.py``) must
let exactly one of several racing conditional PUTs of a key win, as S3
does: the commit log, the commit lock and SlateDB's manifest all rest on
it. moto alone checks the precondition and writes in two steps; with its
threads switching often, racing PUTs then both won (the soak forked its
log at one slot that way)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.conftest import S3_ENV, start_moto_server

pytestmark = pytest.mark.s3

RACERS = 8
KEYS = 60


@pytest.fixture(scope="module")
def interleaving_endpoint() -> Iterator[str]:
    """A server of its own whose request threads switch every microsecond."""
    proc, endpoint = start_moto_server({"SLATELAKE_MOTO_SWITCH_INTERVAL": "0.000001"})
    try:
        yield endpoint
    finally:
        proc.terminate()
        proc.wait(10)


def _client(endpoint: str) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=S3_ENV["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=S3_ENV["AWS_SECRET_ACCESS_KEY"],
        region_name=S3_ENV["AWS_REGION"],
        config=Config(retries={"max_attempts": 1}),
    )


def test_racing_conditional_puts_of_one_key_let_exactly_one_win(
    interleaving_endpoint: str,
) -> None:
    clients = [_client(interleaving_endpoint) for _ in range(RACERS)]
    clients[0].create_bucket(Bucket="race")
    for key in range(KEYS):
        won: list[int | str] = []
        start = threading.Barrier(RACERS)

        def race(
            i: int, key: int = key, won: list[int | str] = won, start: threading.Barrier = start
        ) -> None:
            start.wait()
            try:
                clients[i].put_object(
                    Bucket="race", Key=f"slot-{key}", Body=str(i).encode(), IfNoneMatch="*"
                )
                won.append(i)
            except ClientError as exc:
                if exc.response["Error"]["Code"] != "PreconditionFailed":
                    won.append(exc.response["Error"]["Code"])  # anything else is a finding

        threads = [threading.Thread(target=race, args=(i,)) for i in range(RACERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        body = clients[0].get_object(Bucket="race", Key=f"slot-{key}")["Body"].read()
        assert won == [int(body)], (key, won, body)  # one winner, and its bytes are the object
