"""The image book: image objects named by seq and digest, found with one
LIST, verified on fetch, skipped with a warning naming the object when
damaged or gone, and collected only past the newest two and a grace.

Runs on local files, memory and moto's S3 (the ``lake_url`` fixture). The
images here are opaque bytes: what is inside one is tests/ducklake's concern.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from slatelake.errors import CorruptionError, FormatError, MisconfigurationError, NotFoundError
from slatelake.log.images import ImageBook, ImageInfo, digest_of_file
from slatelake.store.location import LakeLocation

pytestmark = pytest.mark.fast

HOUR_US = 3_600 * 1_000_000


@pytest.fixture
def book(lake_url: str) -> ImageBook:
    return ImageBook(LakeLocation.parse(lake_url))


def _file(tmp_path: Path, name: str, size: int = 4096) -> Path:
    path = tmp_path / name
    path.write_bytes(os.urandom(size))
    return path


def test_images_are_named_by_seq_and_digest_and_listed_newest_first(
    book: ImageBook, tmp_path: Path
) -> None:
    puts = {seq: book.put(seq, _file(tmp_path, f"i{seq}")) for seq in (3, 12, 7)}
    listed = book.list()
    assert [i.seq for i in listed] == [12, 7, 3]
    for info in listed:
        digest, size = digest_of_file(tmp_path / f"i{info.seq}")
        assert info.name == f"{info.seq:020d}-{digest}.duckdb"
        assert (info.digest, info.size, info.path) == (digest, size, puts[info.seq].path)
        assert info.url.endswith("/images/" + info.name)
    assert book.newest() == listed[0]


def test_putting_the_same_image_twice_is_one_object(book: ImageBook, tmp_path: Path) -> None:
    local = _file(tmp_path, "i")
    first = book.put(4, local)
    again = book.put(4, local)
    assert first.path == again.path
    assert len(book.list()) == 1


def test_an_object_that_is_not_an_image_name_is_ignored_with_a_warning(
    book: ImageBook, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    book.put(2, _file(tmp_path, "i"))
    stray = book.prefix + "notes.txt"
    book.client.put(stray, b"hello")
    with caplog.at_level(logging.WARNING, logger="slatelake.images"):
        assert [i.seq for i in book.list()] == [2]
    assert any("notes.txt" in r.getMessage() for r in caplog.records)
    book.collect(grace_s=0, now=1 << 62)
    assert book.client.get(stray) == b"hello"  # never ours to delete


def test_fetch_returns_a_verified_local_copy(book: ImageBook, tmp_path: Path) -> None:
    local = _file(tmp_path, "i")
    info = book.put(5, local)
    dest = tmp_path / "cache"
    dest.mkdir()
    fetched = book.fetch(info, dest)
    assert fetched.read_bytes() == local.read_bytes()
    assert book.fetch(info, dest) == fetched  # immutable: the verified copy serves again


def _damage(book: ImageBook, info: ImageInfo, data: bytes) -> None:
    """Replace the object in place, as something outside slatelake would."""
    book.client.delete(info.path)
    book.client.put(info.path, data)


def test_a_truncated_image_is_refused_naming_the_object(book: ImageBook, tmp_path: Path) -> None:
    info = book.put(5, _file(tmp_path, "i"))
    _damage(book, info, (tmp_path / "i").read_bytes()[:1000])
    listed = book.list()[0]
    with pytest.raises(CorruptionError, match=rf"catalog image {listed.url}.*truncated"):
        book.fetch(listed, tmp_path)


def test_a_flipped_byte_in_an_image_is_refused_naming_the_object(
    book: ImageBook, tmp_path: Path
) -> None:
    data = bytearray(_file(tmp_path, "i").read_bytes())
    info = book.put(5, tmp_path / "i")
    data[100] ^= 0x01
    _damage(book, info, bytes(data))
    with pytest.raises(CorruptionError, match=f"catalog image {info.url}"):
        book.fetch(book.list()[0], tmp_path)


def test_an_image_deleted_after_the_listing_is_not_found_naming_it(
    book: ImageBook, tmp_path: Path
) -> None:
    info = book.put(5, _file(tmp_path, "i"))
    listed = book.list()[0]
    book.client.delete(info.path)
    with pytest.raises(NotFoundError, match=f"catalog image {info.url} is gone"):
        book.fetch(listed, tmp_path)


def test_discovery_falls_back_to_the_older_image_warning_of_the_damaged_one(
    book: ImageBook, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    older = book.put(3, _file(tmp_path, "a"))
    newer = book.put(8, _file(tmp_path, "b"))
    _damage(book, newer, (tmp_path / "b").read_bytes()[:100])
    with caplog.at_level(logging.WARNING, logger="slatelake.images"):
        found = book.newest_valid(tmp_path)
    assert found is not None
    info, local = found
    assert info.path == older.path
    assert local.read_bytes() == (tmp_path / "a").read_bytes()
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and newer.url in warned[0] and "CorruptionError" in warned[0]


def test_an_image_the_check_refuses_is_skipped_like_a_damaged_one(
    book: ImageBook, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    older = book.put(3, _file(tmp_path, "a"))
    newer = book.put(8, _file(tmp_path, "b"))

    def check(info: ImageInfo, local: Path) -> None:
        if info.seq == newer.seq:
            raise FormatError("image format 9 is newer than this slatelake reads")

    with caplog.at_level(logging.WARNING, logger="slatelake.images"):
        found = book.newest_valid(tmp_path, check=check)
    assert found is not None and found[0].path == older.path
    assert any(
        newer.url in r.getMessage() and "FormatError" in r.getMessage() for r in caplog.records
    )


def test_discovery_is_none_when_no_image_works(book: ImageBook, tmp_path: Path) -> None:
    assert book.newest_valid(tmp_path) is None
    info = book.put(3, _file(tmp_path, "a"))
    book.client.delete(info.path)
    book.client.put(info.path, b"short")
    assert book.newest_valid(tmp_path) is None


def test_collect_keeps_the_newest_two_and_waits_out_the_grace(
    book: ImageBook, tmp_path: Path
) -> None:
    for seq in (1, 2, 3, 4):
        book.put(seq, _file(tmp_path, f"i{seq}"))
    listed = book.list()
    landed = max(i.last_modified_us for i in listed)
    assert book.collect(grace_s=3_600, now=landed + HOUR_US // 2) == []
    assert [i.seq for i in book.list()] == [4, 3, 2, 1]
    gone = book.collect(grace_s=3_600, now=landed + 2 * HOUR_US)
    assert sorted(i.seq for i in gone) == [1, 2]
    assert [i.seq for i in book.list()] == [4, 3]
    assert book.collect(grace_s=0, now=landed + 100 * HOUR_US) == []  # the newest two stay


def test_collect_counts_the_grace_from_when_an_image_was_superseded(
    book: ImageBook, tmp_path: Path
) -> None:
    for seq in (1, 2, 3):
        book.put(seq, _file(tmp_path, f"i{seq}"))
    listed = book.list()  # 3, 2, 1: image 1 stopped being newest when image 2 landed
    superseded = min(i.last_modified_us for i in listed[:2])
    assert book.collect(grace_s=60, now=superseded + 59_000_000) == []
    assert [i.seq for i in book.collect(grace_s=60, now=superseded + 60_000_000)] == [1]


def test_collect_refuses_to_keep_fewer_than_two(book: ImageBook) -> None:
    with pytest.raises(MisconfigurationError, match="newest 2"):
        book.collect(keep=1)
