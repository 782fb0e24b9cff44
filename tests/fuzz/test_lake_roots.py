"""Every character a lake root may hold keeps the whole lake under that root.

``LakeLocation.parse`` refuses roots with characters the store clients
percent-encode in object keys (a root with '~' or 'é' once put the log, the
manifests and the SSTs under three prefixes). This pins the other side: a
root using every character still allowed lands, log and store, in exactly
one place, on local files and on moto's S3.
"""

from __future__ import annotations

from pathlib import Path

import boto3

import slatelake

# Letters and digits, and all the punctuation a lake root may hold.
ROOT_NAME = "Lk0 !$&'()+,-.:;=@_z"


def _write(url: str, data_path: str) -> None:
    with slatelake.connect(url, data_path=data_path) as s:
        s.sql("CREATE TABLE t (i INTEGER)")
        s.sql("INSERT INTO t SELECT * FROM range(5)")
    with slatelake.connect(url, read_only=True) as s:
        assert s.sql("SELECT count(*) FROM t").fetchall() == [(5,)]


def test_a_file_lake_root_with_every_allowed_character_holds_the_log_and_the_store(
    tmp_path: Path,
) -> None:
    _write((tmp_path / ROOT_NAME).as_uri(), f"{tmp_path / 'data'}/")
    assert ROOT_NAME in {p.name for p in tmp_path.iterdir()} <= {ROOT_NAME, "data"}
    assert {"commits", "store"} <= {p.name for p in (tmp_path / ROOT_NAME).iterdir()}


def test_an_s3_lake_root_with_every_allowed_character_holds_the_log_and_the_store(
    s3_bucket: str,
) -> None:
    _write(f"s3://{s3_bucket}/{ROOT_NAME}", f"s3://{s3_bucket}/data/")
    pages = boto3.client("s3").get_paginator("list_objects_v2").paginate(Bucket=s3_bucket)
    keys = [o["Key"] for page in pages for o in page.get("Contents", [])]
    assert ROOT_NAME in {k.split("/")[0] for k in keys} <= {ROOT_NAME, "data"}
    assert {k.split("/")[1] for k in keys if k.startswith(ROOT_NAME)} >= {"commits", "store"}
