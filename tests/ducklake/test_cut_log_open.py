"""An open from an image never takes a cut log for its end.

The folded newest slot deleted outside slatelake: an image older than it
plus the slots left would miss its commit, and the next INSERT would take
its seq, where no folder ever reads it again. The store's fold cursor says
the log reached that slot, so the image is not used and the store serves."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from slatelake.catalog.folder import Folder
from slatelake.catalog.lake import Lake
from slatelake.ducklake.image_writer import write_image
from slatelake.ducklake.session import connect
from slatelake.store.location import LakeLocation


def _fold(url: str) -> None:
    folder = Folder(LakeLocation.parse(url), margin_s=3600)
    try:
        folder.fold_once()
    finally:
        folder.close()


def test_an_open_below_the_store_fold_cursor_refuses_the_image_and_loses_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url, data = (tmp_path / "lake").as_uri(), f"{tmp_path}/data/"
    with connect(url, data_path=data) as s:
        s.sql("CREATE TABLE t (id BIGINT)")
        s.sql("INSERT INTO t VALUES (1)")
    _fold(url)
    assert write_image(LakeLocation.parse(url)).written
    with connect(url) as s:
        s.sql("INSERT INTO t VALUES (2)")
        s.sql("INSERT INTO t VALUES (3)")
    _fold(url)
    with Lake.open(url) as lake:
        newest = lake.materialize().last_seq
        lake.log.delete(newest)  # folded, then cut: the INSERT of 3 lives in the store only
    with caplog.at_level(logging.WARNING, logger="slatelake.session"), connect(url) as s:
        assert s.sql("SELECT list(id ORDER BY id) FROM t").fetchone() == ([1, 2, 3],)
        s.sql("INSERT INTO t VALUES (4)")
    warned = " ".join(r.getMessage() for r in caplog.records)
    assert f"commit log cut: commit log slot {newest} " in warned
    with Lake.open(url) as lake:
        state = lake.materialize()
        assert state.last_seq == newest + 1  # the INSERT took a new seq, not the cut one
    with connect(url, read_only=True) as s:
        assert s.sql("SELECT list(id ORDER BY id) FROM t").fetchone() == ([1, 2, 3, 4],)
