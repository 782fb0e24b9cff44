"""The lake the slow fuzz tests run against, built once per session per store
(local files, moto's S3) and restored by each test that uses it."""

from __future__ import annotations

import uuid

import pytest

from tests.fuzz.hostile import PristineBucket, PristineFiles
from tests.fuzz.inputs import Lake, build_lake


@pytest.fixture(scope="session")
def fuzz_file_lake(tmp_path_factory: pytest.TempPathFactory) -> PristineFiles:
    return PristineFiles.build(tmp_path_factory.mktemp("fuzz-lake"), build_lake)


@pytest.fixture(scope="session")
def fuzz_s3_lake(moto_endpoint: str) -> PristineBucket:
    import boto3

    bucket = f"lake-{uuid.uuid4().hex[:12]}"
    boto3.client("s3").create_bucket(Bucket=bucket)
    return PristineBucket.build(bucket, build_lake)


@pytest.fixture(params=["file", "s3"])
def pristine(request: pytest.FixtureRequest) -> Lake:
    """The fuzz lake on each store, as built."""
    lake = request.getfixturevalue(f"fuzz_{request.param}_lake")
    lake.restore()
    return lake
