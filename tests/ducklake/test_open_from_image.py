"""Opening a session from the newest catalog image plus the log's tail.

The session's catalog must be the one a store materialization gives, row for
row, whether it came from an image (and which one) or from the store; a bad
image is skipped with a warning naming it, never a wrong answer.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from slatelake.catalog.folder import Folder
from slatelake.catalog.lake import Lake
from slatelake.ducklake.duck_state import DuckState
from slatelake.ducklake.image_writer import write_image
from slatelake.ducklake.session import BASE_DB, META_DB, connect
from slatelake.log.images import ImageBook
from slatelake.store.location import LakeLocation
from tests.ducklake.test_catalog_db import dump

ROWS = "SELECT id, v FROM t ORDER BY id"


def _fold(url: str) -> None:
    folder = Folder(LakeLocation.parse(url), margin_s=0)
    try:
        folder.fold_once(truncate=False)
    finally:
        folder.close()


def _image(url: str) -> ImageBook:
    _fold(url)
    write_image(LakeLocation.parse(url))
    return ImageBook(LakeLocation.parse(url))


def _materialized(url: str, con: object) -> dict:
    with Lake.open(url, read_only=True) as lake:
        DuckState.from_state(con, "expected", lake.materialize())  # type: ignore[arg-type]
    return dump(con, "expected")  # type: ignore[arg-type]


def _build(url: str, data: str) -> None:
    with connect(url, data_path=data) as s:
        s.sql("CREATE TABLE t (id BIGINT, v VARCHAR)")
        s.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b')")  # inlined
        s.sql("INSERT INTO t SELECT i, 'p' || i FROM range(10, 60) r(i)")  # Parquet


@pytest.fixture
def lake(shared_lake_url: str, tmp_path: Path) -> tuple[str, str]:
    """A lake URL on local files or moto S3, with a data path beside it."""
    if shared_lake_url.startswith("s3://"):
        bucket = shared_lake_url.split("/")[2]
        return shared_lake_url, f"s3://{bucket}/data-{tmp_path.name[-8:]}/"
    return shared_lake_url, f"{tmp_path}/data/"


def test_a_session_opens_from_the_newest_image_plus_the_tail(lake: tuple[str, str]) -> None:
    url, data = lake
    _build(url, data)
    _image(url)
    with connect(url) as s:  # past the image: a tail to replay
        s.sql("DELETE FROM t WHERE id = 1")
        s.sql("INSERT INTO t VALUES (3, 'c')")
        s.sql("ALTER TABLE t ADD COLUMN w INTEGER")
    with connect(url, read_only=True) as s:
        assert s.state.source.startswith("image at slot")
        got = s.sql("SELECT id, v FROM t ORDER BY id").fetchall()
        assert got[:2] == [(2, "b"), (3, "c")] and len(got) == 52
        s.state.settle()  # the base database lags the state until something reads it
        assert dump(s.con, BASE_DB) == _materialized(url, s.con)
        meta = dump(s.con, META_DB)
        assert meta == {k: v for k, v in dump(s.con, BASE_DB).items() if k != "slatelake_index"}


def test_a_session_opened_from_an_image_commits_and_others_see_it(tmp_path: Path) -> None:
    url, data = (tmp_path / "lake").as_uri(), f"{tmp_path}/data/"
    _build(url, data)
    _image(url)
    with connect(url) as writer, connect(url) as reader:
        assert writer.state.source.startswith("image")
        writer.sql("INSERT INTO t VALUES (100, 'w')")
        writer.sql("UPDATE t SET v = 'u' WHERE id = 2")
        assert reader.sql("SELECT v FROM t WHERE id IN (2, 100) ORDER BY id").fetchall() == [
            ("u",),
            ("w",),
        ]
        reader.capture.verify(reader.state)
    with connect(url, read_only=True) as s:
        s.state.settle()  # the base database lags the state until something reads it
        assert dump(s.con, BASE_DB) == _materialized(url, s.con)


def test_a_corrupted_image_is_skipped_with_a_warning_and_the_answer_is_right(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url, data = (tmp_path / "lake").as_uri(), f"{tmp_path}/data/"
    _build(url, data)
    _image(url)
    with connect(url) as s:
        s.sql("INSERT INTO t VALUES (7, 'x')")
    book = _image(url)
    newest = book.list()[0]
    raw = bytearray(Path(newest.url).read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    Path(newest.url).write_bytes(bytes(raw))
    with caplog.at_level(logging.WARNING), connect(url, read_only=True) as s:
        assert s.sql("SELECT count(*) FROM t WHERE id = 7").fetchall() == [(1,)]
        assert s.state.source.startswith("image at slot")  # the older one
        s.state.settle()  # the base database lags the state until something reads it
        assert dump(s.con, BASE_DB) == _materialized(url, s.con)
    assert newest.url in caplog.text


def test_an_image_older_than_the_retained_log_falls_back_to_the_store(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An image whose following slots are gone cannot be replayed: the store serves."""
    url, data = (tmp_path / "lake").as_uri(), f"{tmp_path}/data/"
    _build(url, data)
    book = _image(url)
    with connect(url) as s:
        s.sql("INSERT INTO t VALUES (8, 'y')")
        s.sql("INSERT INTO t VALUES (9, 'z')")
    _fold(url)
    image = book.list()[0]
    with Lake.open(url) as lake:  # lose the slot right after the image, as a bad truncation would
        lake.log.delete(image.seq + 1)
        lake.log.mark_truncated(image.seq + 1)
    with caplog.at_level(logging.WARNING), connect(url, read_only=True) as s:
        assert s.state.source == "store"
        assert s.sql("SELECT count(*) FROM t WHERE id IN (8, 9)").fetchall() == [(2,)]
    assert image.url in caplog.text
