"""Truncation respects catalog images, and the holder writes and collects them.

Invariant: once any image exists the folder never deletes a slot above the
newest image's seq, so an open (newest image + the slots after it) never
misses a slot; without images the rule is as it always was. The holder
(`slatelake hold`) writes an image when enough was folded, collects old ones
but never the newest two, and an image it cannot write never stops folding.
A holder killed mid-image leaves either no object or a damaged one; discovery
then falls back to the older image, warning with the damaged object's name.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slatelake.catalog.folder import Folder
from slatelake.catalog.lake import Lake
from slatelake.ducklake.image_writer import check_image, write_image, write_image_file
from slatelake.log.images import ImageBook, digest_of_file
from slatelake.store.location import LakeLocation
from tests.catalog.helpers import commit_inserts
from tests.conftest import subprocess_env


def _slots(url: str) -> list[int]:
    with Lake.open(url, read_only=True) as lake:
        return [s.seq for s in lake.log.list_after(0)]


def _fold(folder: Folder) -> None:
    folder.fold_once()


def test_truncation_stops_below_the_newest_image_keeping_its_slot(lake_url: str) -> None:
    Lake.create(lake_url).close()
    location = LakeLocation.parse(lake_url)
    commit_inserts(lake_url, 3, 1)
    folder = Folder(location, margin_s=0)
    try:
        _fold(folder)
        assert _slots(lake_url) == [3]  # no image yet: the rule as before
        image = write_image(location)
        assert image.written and image.seq == 3
        commit_inserts(lake_url, 4, 1)  # slots 4..7
        report = folder.fold_once()
        assert report.fold_seq == 7
        # Folded, flushed, unleased and past the margin, yet none may go: the
        # image plus slots 4..7 is what an open reads, and slot 3 is what it
        # checks the image against.
        assert _slots(lake_url) == [3, 4, 5, 6, 7]
        folder.note_image(write_image(location, reader=folder.writer).seq)
        folder.fold_once()
        assert _slots(lake_url) == [7]  # the newest slot always stays
    finally:
        folder.close()


def test_an_image_written_elsewhere_is_seen_by_a_folder_that_had_none(lake_url: str) -> None:
    Lake.create(lake_url).close()
    location = LakeLocation.parse(lake_url)
    commit_inserts(lake_url, 2, 1)
    folder = Folder(location, margin_s=0)
    try:
        _fold(folder)  # no image: listed, none found
        write_image(location)  # another process: `slatelake image`
        commit_inserts(lake_url, 3, 1)
        folder.fold_once()
        assert _slots(lake_url) == [2, 3, 4, 5]  # from the image's own slot on
    finally:
        folder.close()


def test_a_holder_killed_while_writing_an_image_leaves_discovery_on_the_older_one(
    shared_lake_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = shared_lake_url
    Lake.create(url).close()
    location = LakeLocation.parse(url)
    book = ImageBook(location)
    commit_inserts(url, 2, 1)
    folder = Folder(location, margin_s=0)
    try:
        _fold(folder)
        older = write_image(location, reader=folder.writer).info
        assert older is not None
        commit_inserts(url, 2, 1)
        _fold(folder)
        # Killed after the local file was written, before the PUT: nothing landed.
        local = tmp_path / "unsent.duckdb"
        record, _ = write_image_file(local, folder.writer, url)
        assert book.newest() == book.list()[0] and book.newest().seq == older.seq
        # Killed mid-upload in a store that keeps partial objects: the name (seq and
        # digest of the whole file) over the first half of its bytes.
        digest, size = digest_of_file(local)
        partial = book.path(record.seq, digest)
        assert book.client.put_if_absent(partial, local.read_bytes()[: size // 2])
        assert book.newest().seq == record.seq > older.seq
        cache = tmp_path / "cache"
        cache.mkdir()
        with caplog.at_level(logging.WARNING, logger="slatelake.images"):
            found = book.newest_valid(cache, check=check_image)
        assert found is not None
        info, path = found
        assert info.path == older.path and check_image(info, path).seq == older.seq
        skipped = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert len(skipped) == 1 and book.url_of(partial) in skipped[0]
        # The truncation rule reads names only: never a slot above the newest
        # name, whatever its bytes, and the store plus the kept slots stays whole.
        commit_inserts(url, 2, 1)
        assert folder.fold_once().fold_seq == 6
        kept = _slots(url)
        assert kept[0] <= record.seq + 1 and kept == list(range(kept[0], 7))
    finally:
        folder.close()


def _hold(url: str, *extra: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "slatelake.cli", "hold", url, "--poll", "0.1", "--margin", "0"]
        + list(extra),
        env=env or subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _stop(proc: subprocess.Popen) -> tuple[str, str]:
    proc.terminate()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return out, err


def _newest_seq(book: ImageBook) -> int:
    newest = book.newest()
    return newest.seq if newest is not None else 0


def _wait(condition, what: str, timeout: float = 60.0) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def test_hold_writes_images_and_collects_old_ones_but_never_the_newest_two(
    shared_lake_url: str,
) -> None:
    url = shared_lake_url
    Lake.create(url).close()
    book = ImageBook(LakeLocation.parse(url))
    proc = _hold(
        url, "--image-every-slots", "2", "--image-max-age", "0", "--image-grace", "0", "--json"
    )
    try:
        for round_ in range(1, 5):
            commit_inserts(url, 2, 1)
            _wait(lambda r=round_: _newest_seq(book) == 2 * r, f"no image of slot {2 * round_}")
        _wait(lambda: len(book.list()) == 2, "old images were never collected")
        assert [i.seq for i in book.list()] == [8, 6]
        _wait(lambda: _slots(url) == [8], "the log was not truncated up to the image")
    finally:
        out, _ = _stop(proc)
    docs = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert [d["image"]["seq"] for d in docs if "image" in d] == [2, 4, 6, 8]
    collected = [u for d in docs if "images_collected" in d for u in d["images_collected"]]
    assert len(collected) == 2 and all("/images/0000000000000000000" in u for u in collected)
    assert {u.rsplit("/", 1)[-1][:20] for u in collected} == {f"{2:020d}", f"{4:020d}"}


@pytest.fixture(params=["file", "s3"])
def unwritable_images(request: pytest.FixtureRequest, tmp_path: Path):  # noqa: ANN201
    """A lake whose images cannot be stored, and the environment its holder
    runs in: locally a file where ``images/`` goes; on S3 every PUT under
    ``images/`` refused with a 403 by the fault proxy in front of moto."""
    if request.param == "file":
        url = (tmp_path / "lake").as_uri()
        Lake.create(url).close()
        (tmp_path / "lake" / "images").write_text("a file where the images directory goes")
        yield url, subprocess_env()
        return
    from tests.faults.proxy import FaultProxy, FaultRule

    url = f"s3://{request.getfixturevalue('s3_bucket')}/lake"
    Lake.create(url).close()
    with FaultProxy(upstream=request.getfixturevalue("moto_endpoint")) as proxy:
        proxy.add(FaultRule(method="PUT", prefix="images/", kind="403", times=None))
        yield url, {**subprocess_env(), "AWS_ENDPOINT_URL": proxy.url}


def test_an_image_the_holder_cannot_write_never_stops_folding(unwritable_images) -> None:  # noqa: ANN001
    url, env = unwritable_images
    proc = _hold(url, "--image-every-slots", "1", env=env)
    try:
        commit_inserts(url, 3, 1)
        _wait(lambda: _slots(url) == [3], "nothing was folded")
        commit_inserts(url, 2, 1)  # folded after the failed image, or folding stopped
        _wait(lambda: _slots(url) == [5], "folding stopped after the image failed")
        assert proc.poll() is None
    finally:
        _, err = _stop(proc)
    assert "catalog image failed" in err and "folding goes on" in err
    assert ImageBook(LakeLocation.parse(url)).list() == []
