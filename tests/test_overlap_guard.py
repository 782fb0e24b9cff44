"""The DATA_PATH overlap guard holds against every spelling of a nested location."""

from __future__ import annotations

from pathlib import Path

import pytest

from slatelake.ducklake import guard
from slatelake.ducklake.guard import check_overlap
from slatelake.errors import MisconfigurationError

pytestmark = pytest.mark.fast


@pytest.mark.parametrize(
    ("lake", "data"),
    [
        ("file:///X/lk", "file:///X/sub/.."),  # `..` climbs to the lake's parent
        ("file:///X/lk", "file:///X/lk/./data"),
        ("file:///X/lk", "/X/other/../lk/data"),
        ("file:///X/a/../lk", "file:///X/lk/data"),
        ("file:///X/lk/data/..", "file:///X/lk/data"),
        ("s3://b/lake/", "s3://b/lake/data/"),
    ],
)
def test_overlap_guard_sees_through_dot_segments(lake: str, data: str) -> None:
    with pytest.raises(MisconfigurationError, match="overlaps the lake root"):
        check_overlap(lake, data)


def test_overlap_guard_sees_through_a_symlink(tmp_path: Path) -> None:
    (tmp_path / "lake").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "lake")
    with pytest.raises(MisconfigurationError, match="overlaps"):
        check_overlap((tmp_path / "lake").as_uri(), str(tmp_path / "link" / "data"))


def test_s3_data_path_with_dot_dot_is_refused_not_reinterpreted() -> None:
    with pytest.raises(MisconfigurationError, match="'..'"):
        check_overlap("s3://b/lake", "s3://b/elsewhere/../lake/data")


@pytest.mark.parametrize(
    ("given", "handed"),
    [
        ("file:///srv/data", "/srv/data/"),
        ("file:///srv/x/../data/", "/srv/data/"),
        ("/srv/data/", "/srv/data/"),
        ("s3://b/data", "s3://b/data/"),
    ],
)
def test_ducklake_gets_a_plain_normalized_data_path(given: str, handed: str) -> None:
    assert guard.ducklake_data_path(given) == handed
