"""An image is bound to the log: one relabelled as a newer slot is skipped.

The attack: copy an old catalog image under a newer seq's name, its record
rewritten to that seq and head and its name's digest recomputed, so its own
checksum and name pass. Opened as current, the rows committed in between
vanished and an INSERT landed on top of the hole. The image records the
digest of the slot it was cut at, which the relabelled one does not match.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import duckdb
import pytest

from slatelake.catalog.folder import Folder
from slatelake.catalog.lake import Lake
from slatelake.ducklake.image_writer import write_image
from slatelake.ducklake.session import connect
from slatelake.log.images import ImageBook, ImageInfo, digest_of_file
from slatelake.store.location import LakeLocation

ROWS = "SELECT count(*), sum(id) FROM t"


def _fold(url: str) -> None:
    folder = Folder(LakeLocation.parse(url), margin_s=0)
    try:
        folder.fold_once(truncate=False)
    finally:
        folder.close()


def _head(url: str) -> tuple[int, int, int]:
    """(last slot, head snapshot id, head batch seq) of the lake now."""
    with Lake.open(url, read_only=True) as lake:
        state = lake.materialize()
    return state.last_seq, state.head.snapshot_id, state.head.batch_seq


def _rewrite_record(local: Path, sql: str, *params: object) -> None:
    con = duckdb.connect()
    try:
        con.execute(f"ATTACH '{local}' AS img")
        con.execute(sql, list(params))
        con.execute("DETACH img")
    finally:
        con.close()


def _put_as(book: ImageBook, local: Path, seq: int) -> ImageInfo:
    """What the attacker does last: the file under ``seq``'s name, the name's
    digest recomputed so the image's own checksum passes."""
    digest, size = digest_of_file(local)
    info = book.info(seq, digest, size)
    assert book.client.put_if_absent(info.path, local.read_bytes())
    return info


@pytest.fixture
def lake(shared_lake_url: str, tmp_path: Path) -> tuple[str, str]:
    if shared_lake_url.startswith("s3://"):
        bucket = shared_lake_url.split("/")[2]
        return shared_lake_url, f"s3://{bucket}/data-{tmp_path.name[-8:]}/"
    return shared_lake_url, f"{tmp_path}/data/"


def _old_image_and_newer_commits(url: str, data: str, tmp_path: Path) -> tuple[ImageBook, Path]:
    """A lake with an image at an early slot, then more commits folded past
    it; returns its images and a local copy of the old image's bytes."""
    with connect(url, data_path=data) as s:
        s.sql("CREATE TABLE t (id BIGINT, v VARCHAR)")
        s.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b')")
    _fold(url)
    location = LakeLocation.parse(url)
    old = write_image(location).info
    assert old is not None
    with connect(url) as s:
        s.sql("INSERT INTO t SELECT i, 'p' || i FROM range(10, 60) r(i)")
        s.sql("INSERT INTO t VALUES (3, 'c')")
    _fold(url)
    book = ImageBook(location)
    local = tmp_path / "stolen.duckdb"
    local.write_bytes(book.client.get(old.path))
    return book, local


@pytest.mark.parametrize("fold_moved_on", [False, True], ids=["at_fold", "below_fold"])
def test_an_old_image_relabelled_as_a_newer_slot_is_skipped_and_nothing_is_lost(
    lake: tuple[str, str], tmp_path: Path, caplog: pytest.LogCaptureFixture, fold_moved_on: bool
) -> None:
    """Checked against the store's record of the folded slot when the fold
    cursor stands on the forged seq, else against the slot in the log."""
    url, data = lake
    book, stolen = _old_image_and_newer_commits(url, data, tmp_path)
    seq, snap, batch = _head(url)
    if fold_moved_on:
        with connect(url) as s:
            s.sql("INSERT INTO t VALUES (5, 'e')")
        _fold(url)
    with connect(url, read_only=True) as s:
        truth = s.sql(ROWS).fetchone()
    assert truth[0] == 53 + fold_moved_on
    head = _head(url)
    _rewrite_record(
        stolen,
        "UPDATE img.slatelake.image SET seq = ?, snapshot_id = ?, batch_seq = ?",
        seq,
        snap,
        batch,
    )
    forged = _put_as(book, stolen, seq)
    assert book.newest().path == forged.path  # what an open tries first
    with caplog.at_level(logging.WARNING, logger="slatelake.images"), connect(url) as s:
        assert s.sql(ROWS).fetchone() == truth  # every row is there
        s.sql("INSERT INTO t VALUES (4, 'd')")
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(forged.url in w and f"slot {seq}" in w for w in warned), warned
    # the INSERT landed on the true head: the next slot, on top of every commit
    assert _head(url) == (head[0] + 1, head[1] + 1, head[2] + 1)
    with connect(url, read_only=True) as s:
        assert s.sql(ROWS).fetchone() == (truth[0] + 1, truth[1] + 4)


def test_an_image_that_records_no_slot_digest_is_not_trusted(
    lake: tuple[str, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The older form, which anyone able to write ``images/`` can write too."""
    url, data = lake
    book, stolen = _old_image_and_newer_commits(url, data, tmp_path)
    seq, snap, batch = _head(url)
    _rewrite_record(
        stolen,
        "UPDATE img.slatelake.image SET seq = ?, snapshot_id = ?, batch_seq = ?",
        seq,
        snap,
        batch,
    )
    _rewrite_record(stolen, "ALTER TABLE img.slatelake.image DROP COLUMN slot_digest")
    unbound = _put_as(book, stolen, seq)
    with (
        caplog.at_level(logging.WARNING, logger="slatelake.images"),
        connect(url, read_only=True) as s,
    ):
        assert s.sql(ROWS).fetchone()[0] == 53
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(unbound.url in w and "no slot digest" in w for w in warned), warned
    # `slatelake image` replaces it although an image at the fold cursor exists;
    # S3 dates objects to the second, and images of one seq are ordered by date
    time.sleep(1.1)
    written = write_image(LakeLocation.parse(url))
    assert written.written and written.seq == seq and book.newest().path == written.info.path


def test_an_image_is_checked_against_the_store_once_its_slot_is_truncated(
    tmp_path: Path,
) -> None:
    """The image's own slot may go once the fold moved on and a newer image
    exists; while the fold cursor stands on it, the store's record vouches."""
    url, data = (tmp_path / "lake").as_uri(), f"{tmp_path}/data/"
    with connect(url, data_path=data) as s:
        s.sql("CREATE TABLE t (id BIGINT, v VARCHAR)")
        s.sql("INSERT INTO t VALUES (1, 'a')")
        s.sql("INSERT INTO t VALUES (2, 'b')")
    _fold(url)
    location = LakeLocation.parse(url)
    image = write_image(location).info
    assert image is not None
    with Lake.open(url) as handle:
        digest = handle.slot_digest(image.seq)
        handle.log.delete(image.seq)  # as if truncated (the newest slot: never, but a cut)
        assert handle.slot_digest(image.seq) == digest  # the store's fold-slot record
    with connect(url, read_only=True) as s:
        assert s.state.source == f"image at slot {image.seq}"
        assert s.sql(ROWS).fetchone() == (2, 3)
