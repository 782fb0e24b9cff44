"""Fuzz: lake URLs and data paths parse to one canonical, literal location, or
are refused with a MisconfigurationError naming them on one line.

No other exception escapes ``LakeLocation.parse``, ``data_location``,
``ducklake_data_path`` or ``check_overlap`` for any input: not urlsplit's
ValueError, not a UnicodeError from a lone surrogate, not a TypeError from a
value that is not text.
"""

from __future__ import annotations

import string
import unicodedata

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from slatelake.ducklake.guard import check_overlap, data_location, ducklake_data_path
from slatelake.errors import MisconfigurationError
from slatelake.store.location import LakeLocation
from tests.fuzz.hostile import (
    NOT_TEXT,
    SEGMENTS,
    fuzz,
    hostile_text,
    hostile_urls,
    named,
    one_line,
)

KEY_SAFE = set(string.ascii_letters + string.digits + " !$&'()+,-.:;=@_/")
GLOB = set("*?[]{}\\")
pytestmark = [pytest.mark.fast, pytest.mark.filterwarnings("ignore:Generating overly large repr")]


def _refused(exc: MisconfigurationError, given: object) -> None:
    one_line(str(exc))
    assert named(given, str(exc)), (str(exc)[:300], given)


def _literal(loc: LakeLocation, lake: bool = True) -> None:
    """What every accepted location holds: a fixed point, no character that
    reads as another, no segment that climbs."""
    assert LakeLocation.parse(loc.url, lake=lake) == loc
    assert not [c for c in loc.url if unicodedata.category(c) in ("Cc", "Cf", "Cs")]
    if loc.root:
        assert not {"", ".", ".."} & set(loc.root.split("/")), loc.root


@fuzz(300)
@given(url=st.one_of(hostile_urls, st.sampled_from(NOT_TEXT)))
@example(url="s3://[bad")  # urlsplit: "Invalid IPv6 URL" (was a ValueError)
@example(url="memory://[x")
@example(url="file:///x/\ud800")  # realpath: UnicodeEncodeError
@example(url="file:///x%00y")  # realpath: "embedded null byte"
@example(url="file:///x/%ff")  # decoded to U+FFFD: two escapes, one directory
@example(url="s3://bucket/la\tke")  # urlsplit drops the tab: named s3://bucket/lake
@example(url="\x01s3://bucket/lake")
@example(url="memory://a?b")  # the query was dropped: named memory://a
@example(url="s3://b/x?")
@example(url="s3://bucket:80/x")
@example(url="s3://b/\ud800")
@example(url="memory://a\u202eb")
@example(url="file:///tmp/a~b")  # the store clients rewrite '~' in keys
@example(url="s3://bucket/l%C3%A9")
def test_a_lake_url_is_one_literal_location_or_refused_naming_it(url: object) -> None:
    try:
        loc = LakeLocation.parse(url)  # type: ignore[arg-type]
    except MisconfigurationError as exc:
        _refused(exc, url)
        return
    _literal(loc)
    if loc.scheme in ("file", "s3"):
        assert set(loc.root) <= KEY_SAFE, loc.root


_lakes = st.sampled_from(("s3://b/lake", "file:///x/lake", "memory://m", "/x/lake/"))
_near = st.builds(
    lambda lake, segs: lake.rstrip("/") + "/" + "/".join(segs),
    _lakes,
    st.lists(st.one_of(st.sampled_from(SEGMENTS), hostile_text), max_size=3),
)
_beside = st.builds(
    lambda base, segs: base + "/".join(segs),
    st.sampled_from(("s3://b/", "file:///x/", "/x/", "s3://c/", "memory://")),
    st.lists(st.one_of(st.sampled_from(SEGMENTS), hostile_text), max_size=3),
)


@fuzz(300)
@given(
    lake=st.one_of(_lakes, hostile_urls),
    data=st.one_of(_near, _beside, hostile_urls, st.sampled_from(NOT_TEXT)),
)
@example(lake="s3://b/lake", data=5)  # was a TypeError
@example(lake="file:///x/lake", data="/x/d*/")  # DuckLake's orphan glob reached /x/dother/
@example(lake="file:///x/lake", data="/x/d[o]ata/")
@example(lake="s3://b/lake", data="s3://b/lake/../x")
def test_a_data_path_beside_the_lake_is_handed_to_ducklake_literal_or_refused(
    lake: str, data: object
) -> None:
    try:
        check_overlap(lake, data)  # type: ignore[arg-type]
        handed = ducklake_data_path(data)  # type: ignore[arg-type]
    except MisconfigurationError as exc:
        one_line(str(exc))
        assert named(data, str(exc)) or named(lake, str(exc)), (str(exc)[:300], data, lake)
        return
    loc, root = data_location(data), LakeLocation.parse(lake)  # type: ignore[arg-type]
    _literal(loc, lake=False)
    assert not (loc.contains(root) or root.contains(loc))
    assert not GLOB & set(loc.root), handed
    assert handed.endswith("/") and LakeLocation.parse(handed, lake=False).url == loc.url


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("s3://[bad", "not a URL"),
        ("file:///x%00y", "control or invisible"),
        ("file:///x/\ud800", "control or invisible"),
        ("file:///x/%ff", "not UTF-8"),
        ("s3://bucket/la\tke", "control or invisible"),
        ("s3://bucket/lake\x7f", "control or invisible"),
        ("memory://a\u202eb", "control or invisible"),
        ("memory://a?b", "no query"),
        ("file:///x/lake?v=1", "no query"),
        ("s3://bucket:80/x", "bucket names"),
        ("s3://b b/x", "bucket names"),
    ],
)
def test_a_spelling_urlsplit_would_misread_is_refused_naming_it(url: str, why: str) -> None:
    with pytest.raises(MisconfigurationError, match=why) as info:
        LakeLocation.parse(url)
    _refused(info.value, url)


@pytest.mark.parametrize("char", ["~", "%25", "%C3%A9", "*", "[", "{", "^", "|"])
@pytest.mark.parametrize("scheme", ["file:///tmp/", "s3://bucket/"])
def test_a_lake_root_the_store_clients_would_rewrite_is_refused(char: str, scheme: str) -> None:
    with pytest.raises(MisconfigurationError, match="a lake path holds letters"):
        LakeLocation.parse(f"{scheme}a{char}b")


def test_a_data_path_may_hold_what_a_lake_root_may_not() -> None:
    # Only DuckDB reads a data path, and it keeps 'é' and '~' as given.
    assert data_location("s3://b/donn%C3%A9es~1/").root == "donn%C3%A9es~1"
    assert data_location("file:///x/donn%C3%A9es~1/").root == "x/données~1"


@pytest.mark.parametrize("data", ["/x/d*/", "/x/d?ta/", "/x/d[a]ta/", "s3://b/d{a,b}/", "/x/a\\b/"])
def test_a_data_path_with_a_glob_character_is_refused_before_ducklake_lists_it(
    data: str,
) -> None:
    with pytest.raises(MisconfigurationError, match="reads as a glob"):
        check_overlap("file:///x/lake", data)


@pytest.mark.parametrize("data", NOT_TEXT)
def test_a_data_path_that_is_not_text_is_refused(data: object) -> None:
    with pytest.raises(MisconfigurationError, match="data path"):
        data_location(data)  # type: ignore[arg-type]


def test_a_huge_number_is_shown_without_being_printed() -> None:
    from slatelake.store.location import show_input

    assert show_input(10**5000) == "<int too large to show>"
    assert len(show_input("x" * 100_000)) < 250
