"""Lake URLs: parsing, refusals that name the input, containment by component."""

from __future__ import annotations

import pytest

from slatelake.errors import MisconfigurationError
from slatelake.store.location import LakeLocation

pytestmark = pytest.mark.fast


@pytest.mark.parametrize(
    ("url", "scheme", "bucket", "root"),
    [
        ("file:///data/lake", "file", "", "data/lake"),
        ("file:///data/lake/", "file", "", "data/lake"),
        ("memory://demo", "memory", "demo", ""),
        ("s3://bucket/a/b", "s3", "bucket", "a/b"),
        ("s3://bucket", "s3", "bucket", ""),
    ],
)
def test_parse(url: str, scheme: str, bucket: str, root: str) -> None:
    loc = LakeLocation.parse(url)
    assert (loc.scheme, loc.bucket, loc.root) == (scheme, bucket, root)
    assert loc.store_path == "/".join(p for p in (root, "store") if p)


@pytest.mark.parametrize(
    ("url", "needle"),
    [
        ("ftp://x/y", "unsupported scheme 'ftp'"),
        ("s3:///nobucket", "name the bucket"),
        ("memory://", "name the memory lake"),
        ("file://host/path", "absolute path"),
    ],
)
def test_bad_urls_are_refused_naming_the_input(url: str, needle: str) -> None:
    with pytest.raises(MisconfigurationError, match=needle) as info:
        LakeLocation.parse(url)
    assert repr(url) in str(info.value)


def test_s3_without_a_region_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(MisconfigurationError, match="AWS_REGION"):
        LakeLocation.parse("s3://b/p").slatedb_store()


@pytest.mark.parametrize(
    ("outer", "inner", "contains"),
    [
        ("s3://b/lake", "s3://b/lake/data", True),
        ("s3://b/lake", "s3://b/lake", True),
        ("s3://b/lake", "s3://b/lakehouse", False),  # sibling sharing text
        ("s3://b/lake", "s3://c/lake/data", False),  # another bucket
        ("file:///x/lake", "s3://b/x/lake", False),  # another store kind
        ("file:///x", "file:///x/y/z", True),
    ],
)
def test_containment_is_by_path_component(outer: str, inner: str, contains: bool) -> None:
    assert LakeLocation.parse(outer).contains(LakeLocation.parse(inner)) is contains


@pytest.mark.parametrize(
    ("spelling", "canonical"),
    [
        ("file:///x/sub/..", "file:///x"),
        ("file:///x/./lake", "file:///x/lake"),
        ("file:///a/x/../lk", "file:///a/lk"),
        ("file:///x//lake/", "file:///x/lake"),
        ("file:///x/my%20lake", "file:///x/my%20lake"),
        ("/x/sub/../lake", "file:///x/lake"),
        ("s3://b/lake/", "s3://b/lake"),
        ("memory://demo/", "memory://demo"),
    ],
)
def test_every_spelling_of_a_location_parses_to_one_canonical_url(
    spelling: str, canonical: str
) -> None:
    loc = LakeLocation.parse(spelling)
    assert loc.url == canonical
    assert LakeLocation.parse(loc.url) == loc


def test_file_url_dot_dot_puts_the_log_and_the_store_under_one_root() -> None:
    loc = LakeLocation.parse("file:///a/x/../lk")
    assert loc.root == "a/lk"
    assert loc.store_path == "a/lk/store"
    assert loc.path("commits") == "a/lk/commits"


def test_percent_escapes_in_file_urls_name_the_directory_they_spell() -> None:
    assert LakeLocation.parse("file:///x/my%20lake").root == "x/my lake"


def test_a_symlink_to_a_lake_is_the_lake(tmp_path) -> None:  # noqa: ANN001
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "alias").symlink_to(real)
    assert LakeLocation.parse((tmp_path / "alias" / "lake").as_uri()) == LakeLocation.parse(
        (real / "lake").as_uri()
    )


@pytest.mark.parametrize(
    "url",
    [
        "s3://b/lake/../other",
        "s3://b/./lake",
        "s3://b/a//lake",
        "s3://bucket//lakes/x",  # a leading empty segment (the key starts with '/')
        "s3://b/lake//",
        "s3://b//",
        "s3://b/lake?versionId=1",
        "memory://a/../b",
        "file:///",
        "file:///x/..",
        "file:///x/lake\x00/y",
        "s3://b/lake\nx",
        "s3://Bucket/lake",
        "s3://key:secret@b/lake",
        "",
    ],
)
def test_locations_that_would_alias_or_smuggle_are_refused(url: str) -> None:
    with pytest.raises(MisconfigurationError) as info:
        LakeLocation.parse(url)
    assert repr(url) in str(info.value)
