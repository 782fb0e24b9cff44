"""The borrowed-files record: one spelling per file, a codec that round-trips,
garbage that raises only CorruptionError, and a size that stays small."""

from __future__ import annotations

import contextlib
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slatelake.catalog.borrowed import (
    BorrowedFiles,
    decode_borrowed,
    encode_borrowed,
    normalize_path,
)
from slatelake.errors import CorruptionError
from slatelake.store import values

SEGMENT = st.text(st.characters(blacklist_characters="/\x00"), min_size=1, max_size=12)
LOCAL = st.lists(SEGMENT, min_size=1, max_size=5).map(lambda parts: "/" + "/".join(parts))
S3 = st.lists(SEGMENT, min_size=1, max_size=5).map(lambda parts: "s3://b/" + "/".join(parts))


@given(st.lists(st.one_of(LOCAL, S3), max_size=30), st.none() | st.text(max_size=20))
def test_borrowed_record_round_trips(paths: list[str], source: str | None) -> None:
    record = BorrowedFiles(tuple(paths), source, 123)
    back = decode_borrowed(encode_borrowed(record))
    assert back == record and len(back) == len({normalize_path(p) for p in paths})
    assert all(back.covers(p) for p in paths)


FRAMED = st.binary(max_size=64).map(lambda tail: values.MAGIC + bytes((1, 0x0E)) + tail)
DOCS = st.dictionaries(
    st.sampled_from(["format", "source", "created_at", "count", "paths"]),
    st.none() | st.integers(-(2**63), 2**63 - 1) | st.binary(max_size=16) | st.text(max_size=8),
).map(lambda doc: values.frame(0x0E, doc))


@settings(
    max_examples=200,
    deadline=None,
    # a framed document can be large to draw; on a loaded CI machine that is slow, not wrong
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.one_of(st.binary(max_size=64), FRAMED, DOCS))
def test_a_damaged_record_raises_only_corruption(raw: bytes) -> None:
    with contextlib.suppress(CorruptionError):
        decode_borrowed(raw)


def test_a_record_whose_count_disagrees_is_corruption() -> None:
    good = values.unframe(encode_borrowed(BorrowedFiles(("/d/a", "/d/b"))), 0x0E)
    bad = values.frame(0x0E, {**good, "count": 1})
    with pytest.raises(CorruptionError, match="sys/borrowed_files does not decode"):
        decode_borrowed(bad)


def test_no_record_borrows_nothing() -> None:
    assert len(decode_borrowed(None)) == 0
    assert not decode_borrowed(None).covers("/anything")


@pytest.mark.parametrize(
    "spelling",
    [
        "/data/main/t/f.parquet",
        "file:///data/main/t/f.parquet",
        "file://localhost/data/main/t/f.parquet",
        "/data//main/./t/f.parquet",
        "/data/main/x/../t/f.parquet",
        "//data/main/t/f.parquet",
        "/data/main/t/f.parquet/",
        "file:///data/main/t/%66.parquet",
    ],
)
def test_covers_answers_for_every_spelling_of_a_local_file(spelling: str) -> None:
    assert BorrowedFiles(("file:///data/main/t/f.parquet/",)).covers(spelling)


def test_covers_keeps_object_keys_literal_and_other_files_out() -> None:
    borrowed = BorrowedFiles(("s3://b/data/main/t/f.parquet",))
    assert borrowed.covers("s3://b/data/main/t/f.parquet/")
    assert not borrowed.covers("s3://b/data//main/t/f.parquet")
    assert not borrowed.covers("s3://other/data/main/t/f.parquet")
    assert not borrowed.covers("/data/main/t/f.parquet")
    assert not BorrowedFiles(("/data/main/t/f.parquet",)).covers("/data/main/t/g.parquet")


def test_without_releases_paths_in_any_spelling() -> None:
    borrowed = BorrowedFiles(("/d/a", "/d/b"), "cat.duckdb", 1)
    left = borrowed.without(["file:///d/a/"])
    assert left.paths == ("/d/b",) and left.source == "cat.duckdb"


def test_a_hundred_thousand_paths_stay_a_few_megabytes() -> None:
    paths = tuple(
        f"s3://bucket/lakes/prod/data/main/table_{i % 400:04d}/ducklake-{uuid.uuid4()}.parquet"
        for i in range(100_000)
    )
    raw = encode_borrowed(BorrowedFiles(paths))
    assert len(raw) < 3_000_000, len(raw)  # ~23 bytes a path (random UUIDs: the worst case)
    assert decode_borrowed(raw).covers(paths[-1])
