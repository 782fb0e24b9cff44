"""Hostile inputs for the fuzz tests, the settings they run under, and the
snapshots that prove a refusal touched no lake.

Every parser of outside input (lake URLs, data paths, maintenance options,
Lambda events, CLI arguments, index names) must end in a typed slatelake
error or a success: never another exception, never a message spanning lines,
never a write to a lake it refused.

Settings: the profile ``slatelake-fuzz`` (no deadline, derandomized so CI
reruns the same examples, no example database). ``fuzz(n)`` runs n examples,
or ``SLATELAKE_FUZZ_EXAMPLES`` when that is larger (a long run).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from slatelake.errors import SlatelakeError

FUZZ_ENV = "SLATELAKE_FUZZ_EXAMPLES"
settings.register_profile(
    "slatelake-fuzz",
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=True,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
        HealthCheck.function_scoped_fixture,  # fixtures here are per test, restored by hand
    ],
)


def fuzz(examples: int = 150) -> settings:
    """The fuzz profile with ``examples`` examples (or more, from the environment)."""
    raw = os.environ.get(FUZZ_ENV, "").strip()
    return settings(
        settings.get_profile("slatelake-fuzz"), max_examples=max(examples, int(raw or 0))
    )


# -- text ----------------------------------------------------------------------
NASTY_CHARS = (
    *("\x00", "\ud800", "\udcff", "\u202e", "\u200b", "\ufeff", "\u0301", "\u2028"),
    *("\t", "\n", "\r", "\x7f", "\x85", "é", "ﬂ", "ı", "٣", "'", '"', ";", "%"),
    *("/", "\\", "*", "?", "[", "]", "{", "#", "@", ":", " ", "~", "=", "."),
)
NASTY_STRINGS = (
    *("", " ", ".", "..", "%00", "%2e%2e", "%2F", "%ff", "%", "%%", "%zz", "%C3%A9"),
    *("'; DROP TABLE t; --", '"x"', "a\x00b", "\ud800", "x" * 5000, "a" * 100_000),
    *("1e309", "nan", "-nan", "NaN", "inf", "-inf", "Infinity", "-0.0", "0.0", "1e-400"),
    *("0x10", "1_000", "٣٠", "١", str(2**64), str(2**64 - 1), str(-(2**63) - 1), "9" * 400),
    *("true", "TRUE ", " yes", "on", "off", "tru", "1", "0", "-1", "+1", "01", "1.0"),
    *("y", "n", "t", "f", "\t1\n", "null", "None"),
    *("1 day", "7 days", "-1 day", "0 seconds", "2147483647 months", "P1D", "1 day ago"),
    *("infinity", "-infinity", "epoch", "2024-01-01", "2024-02-30", "01:30:00"),
    *("294247-01-10 04:00:54.775806+00", "2024-01-01 00:00:00+99", "1 day'--"),
    *(
        "[1,2]",
        "[]",
        "[1.5]",
        "['2']",
        "[" + ",".join(["1"] * 1000) + "]",
        "[18446744073709551615]",
    ),
    *("30s", "5m", "2 hours", "0s", "1e400s", "1.5d", "365 days", "366 days"),
    *("current", "history", "index", "sys", "snapshot", "inline", "indexes"),
)
_chars = st.one_of(st.characters(), st.sampled_from(NASTY_CHARS))
hostile_text = st.one_of(
    st.sampled_from(NASTY_STRINGS),
    st.text(alphabet=_chars, max_size=24),
    st.lists(st.sampled_from(NASTY_STRINGS[:40] + NASTY_CHARS), max_size=4).map("".join),
)

# -- numbers and JSON ------------------------------------------------------------
hostile_numbers = st.one_of(
    st.integers(),
    st.sampled_from([2**63, 2**64, -(2**63) - 1]),
    # Past Python's 4300-digit limit: str() and repr() raise. Built, not listed,
    # so describing the strategy never prints one.
    st.integers(4300, 5000).map(lambda digits: (-1) ** digits * 10**digits),
    st.floats(allow_nan=True, allow_infinity=True),
)
json_scalars = st.one_of(st.none(), st.booleans(), hostile_numbers, hostile_text)
hostile_json = st.recursive(
    json_scalars,
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(hostile_text, kids, max_size=3),
    max_leaves=6,
)

# -- locations -------------------------------------------------------------------
SCHEMES = (
    *("s3://", "file://", "file:///", "memory://", "/", "", "S3://", "s3:/", "s3:"),
    *("http://", "ftp://", "file:", "FILE://", "memory:/", " s3://", "\ts3://"),
)
AUTHORITIES = (
    *("bucket", "lake-bucket", "b", "", "Bucket", "user:secret@bucket", "bucket:80"),
    *("[x", "[::1]", "b b", "localhost", "host", "bücket", "b%41", "b" * 70),
)
SEGMENTS = (
    *("lake", "data", "lakes", ".", "..", "", "%2e%2e", "%00", "%0a", "%ff", "%20"),
    *("a b", "é", "~", "*", "d*", "[ab]", "?q=1", "#frag", ";p", "x" * 300, "it's"),
)
_segment = st.one_of(st.sampled_from(SEGMENTS), hostile_text)
hostile_urls = st.one_of(
    st.builds(
        lambda scheme, authority, segments, tail: (
            scheme + authority + "/" + "/".join(segments) + tail
        ),
        st.sampled_from(SCHEMES),
        st.one_of(st.sampled_from(AUTHORITIES), hostile_text),
        st.lists(_segment, max_size=4),
        st.sampled_from(("", "/", "//", "?x", "#y", "/..", "/.")),
    ),
    hostile_text,
)
NOT_TEXT = (None, 5, 2**64, 1.5, b"/x", ["/x"], {"url": "/x"}, True)


# -- checks ----------------------------------------------------------------------
def one_line(message: str) -> None:
    """A refusal reads as one line (an operator's log, the CLI's stderr)."""
    assert message and "\n" not in message and "\r" not in message, repr(message[:300])


def named(value: object, message: str) -> bool:
    """Whether ``message`` names ``value``: its repr, or the start of it (long
    input is shown cut short)."""
    return repr(value)[:60] in message


def error_names() -> set[str]:
    """Names of every SlatelakeError class defined so far (the Lambda's answer
    carries the class name, not the class)."""
    seen: set[str] = set()
    todo: list[type] = [SlatelakeError]
    while todo:
        cls = todo.pop()
        if cls.__name__ not in seen:
            seen.add(cls.__name__)
            todo += cls.__subclasses__()
    return seen


def file_snapshot(*roots: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``roots``: (size, mtime in ns). Equal before and after
    means nothing was written, deleted or added there."""
    out = {}
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.is_file():
                stat = path.stat()
                out[str(path)] = (stat.st_size, stat.st_mtime_ns)
    return out


def bucket_snapshot(bucket: str) -> dict[str, tuple[str, int, str]]:
    """Every object in ``bucket``: (ETag, size, LastModified)."""
    import boto3

    s3 = boto3.client("s3")
    out = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for obj in page.get("Contents", []):
            out[obj["Key"]] = (obj["ETag"], obj["Size"], obj["LastModified"].isoformat())
    return out


@dataclass
class PristineFiles:
    """A file lake built once by ``make(url, data_path)``; ``restore`` puts it
    back byte for byte at the same paths (the catalog names its absolute data
    path)."""

    root: Path  # holds lake/ and data/
    saved: Path

    @property
    def url(self) -> str:
        return (self.root / "lake").as_uri()

    @property
    def data(self) -> str:
        return f"{self.root / 'data'}/"

    def snapshot(self) -> dict[str, Any]:
        return file_snapshot(self.root)

    def restore(self) -> None:
        shutil.rmtree(self.root)
        shutil.copytree(self.saved, self.root, symlinks=True)

    @classmethod
    def build(cls, base: Path, make: Callable[[str, str], None]) -> PristineFiles:
        lake = cls(base / "pristine", base / "saved")
        lake.root.mkdir()
        make(lake.url, lake.data)
        shutil.copytree(lake.root, lake.saved, symlinks=True)
        return lake


@dataclass
class PristineBucket:
    """An S3 lake on moto built once; ``restore`` rewrites the bucket as it was."""

    bucket: str
    objects: dict[str, bytes]

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/lake"

    @property
    def data(self) -> str:
        return f"s3://{self.bucket}/data/"

    def snapshot(self) -> dict[str, Any]:
        return bucket_snapshot(self.bucket)

    def restore(self) -> None:
        import boto3

        s3 = boto3.client("s3")
        for key in bucket_snapshot(self.bucket):
            s3.delete_object(Bucket=self.bucket, Key=key)
        for key, body in self.objects.items():
            s3.put_object(Bucket=self.bucket, Key=key, Body=body)

    @classmethod
    def build(cls, bucket: str, make: Callable[[str, str], None]) -> PristineBucket:
        import boto3

        lake = cls(bucket, {})
        make(lake.url, lake.data)
        s3 = boto3.client("s3")
        for key in bucket_snapshot(bucket):
            lake.objects[key] = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        return lake
