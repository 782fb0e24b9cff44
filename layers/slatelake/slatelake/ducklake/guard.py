"""The DATA_PATH overlap guard (RFC 0021): refuse before anything is written.

A lake root and a data path overlap when they are on the same object store
(same scheme and bucket) and one contains the other by path component.
Sibling prefixes that share text (``lake`` and ``lakehouse``), other buckets
and other store kinds do not overlap. Both sides are compared after
``LakeLocation.parse`` normalized them (``.``, ``..``, symlinks), so no
spelling of a nested location slips past.

A data path is handed to DuckLake, which lists its files with a glob: a
data path holding a glob character ('*', '?', '[', ...) would let the orphan
step match, and delete, files in other directories, so it is refused.
"""

from __future__ import annotations

from slatelake.errors import MisconfigurationError
from slatelake.store.location import LakeLocation, show_input

# What DuckDB's glob reads as a pattern, and the separator it also reads as '/'.
_GLOB = frozenset("*?[]{}\\")


def data_location(data_path: str) -> LakeLocation:
    """Parse a DuckLake DATA_PATH (URL or absolute local path) as a location."""
    if not isinstance(data_path, str) or ("://" not in data_path and not data_path.startswith("/")):
        raise MisconfigurationError(
            f"data path {show_input(data_path)}: use an absolute path or a URL such as "
            "s3://bucket/data"
        )
    loc = LakeLocation.parse(data_path, what="data path", lake=False)
    glob = sorted({ch for ch in loc.root if ch in _GLOB})
    if glob:
        raise MisconfigurationError(
            f"data path {show_input(data_path)}: holds {', '.join(map(repr, glob))}, which "
            "DuckLake reads as a glob when it lists data files (its cleanup would reach other "
            "directories); choose a path without them"
        )
    return loc


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
