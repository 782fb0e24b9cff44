"""The DATA_PATH overlap guard (RFC 0021): refuse before anything is written.

A lake root and a data path overlap when they are on the same object store
(same scheme and bucket) and one contains the other by path component.
Sibling prefixes that share text (``lake`` and ``lakehouse``), other buckets
and other store kinds do not overlap. Both sides are compared after
``LakeLocation.parse`` normalized them (``.``, ``..``, symlinks), so no
spelling of a nested location slips past.
"""

from __future__ import annotations

from slatelake.errors import MisconfigurationError
from slatelake.store.location import LakeLocation


def data_location(data_path: str) -> LakeLocation:
    """Parse a DuckLake DATA_PATH (URL or absolute local path) as a location."""
    if "://" not in data_path and not data_path.startswith("/"):
        raise MisconfigurationError(
            f"data path {data_path!r}: use an absolute path or a URL such as s3://bucket/data"
        )
    return LakeLocation.parse(data_path)


def ducklake_data_path(data_path: str) -> str:
    """The DATA_PATH to hand DuckLake: the normalized location, a plain absolute
    path for local data (DuckLake 1.5.5 compares ``file://`` data paths wrongly
    against the files it lists, so its orphan step would delete live files)."""
    loc = data_location(data_path)
    if loc.scheme == "file":
        return "/" + loc.root + "/"
    return loc.url.rstrip("/") + "/"


def check_overlap(lake_url: str, data_path: str) -> None:
    lake = LakeLocation.parse(lake_url)
    data = data_location(data_path)
    if lake.contains(data) or data.contains(lake):
        raise MisconfigurationError(
            f"data path {data_path!r} overlaps the lake root {lake_url!r}: one contains the "
            "other, so cleanup could delete catalog objects; put data beside the lake, "
            "e.g. s3://bucket/data next to s3://bucket/lake"
        )
