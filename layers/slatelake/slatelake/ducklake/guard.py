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

A relative data path (``files/``) is what stock DuckLake takes: it stores the
text as given and DuckDB's file system reads it against the process's
current directory at every write and read (a leading ``~`` is the home
directory), so a lake reopened from another directory writes elsewhere.
``resolve_data_path`` resolves it once, at connect, to the absolute path
DuckLake would have used there; everything after (the overlap check, the
ATTACH, the catalog) sees only that. For an S3 lake it is refused: the
processes that open it (a Lambda, another machine) share no directory.
"""

from __future__ import annotations

import os
import re

from slatelake.errors import MisconfigurationError
from slatelake.store.location import LakeLocation, show_input

# What DuckDB's glob reads as a pattern, and the separator it also reads as '/'.
_GLOB = frozenset("*?[]{}\\")
# A relative spelling that starts like a URL scheme ('s3:/b/x', 's3:b'): a
# mistyped URL, which DuckDB would write as a local directory named 's3:'.
_SCHEME_LIKE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


def resolve_data_path(lake_url: str, data_path: str | None) -> str | None:
    """The data path as DuckLake would resolve it now: a URL or an absolute
    path as given; a relative one joined to the current directory (after
    DuckDB's ``~``), once, so a later reload or chdir never moves the lake's
    files and the overlap check compares the place that is written. An empty
    one is none given, as in DuckLake (the catalog's own data path is used).
    Other text is left for ``data_location`` to refuse."""
    if data_path is None or data_path == "":
        return None
    if not isinstance(data_path, str) or "://" in data_path or data_path.startswith("/"):
        return data_path
    shown = f"data path {show_input(data_path)}"
    if _SCHEME_LIKE.match(data_path):
        raise MisconfigurationError(
            f"{shown} reads as a relative local directory, yet starts like a URL scheme; "
            "spell a URL with '//' (s3://bucket/data), or put ./ before a local directory"
        )
    lake = LakeLocation.parse(lake_url)
    if lake.scheme == "s3":
        raise MisconfigurationError(
            f"{shown} is relative, and the lake {lake.url} is on S3: DuckLake would read it "
            "against this process's current directory, which a Lambda or another machine "
            "opening the lake does not share; give a URL beside the lake, e.g. "
            f"s3://{lake.bucket}/data, or an absolute path"
        )
    path = _expand_home(shown, data_path)
    if path.startswith("/"):
        return _checked(shown, path)
    try:
        here = os.getcwd()
    except OSError as exc:
        raise MisconfigurationError(
            f"{shown} is relative to the current directory, which is gone ({exc}); "
            "give an absolute path or change to an existing directory"
        ) from None
    return _checked(shown, os.path.join(here, path))


def _checked(shown: str, resolved: str) -> str:
    """``resolved`` if ``data_location`` takes it; else its refusal naming the
    spelling the caller gave as well as the path it was read as."""
    try:
        data_location(resolved)
    except MisconfigurationError as exc:
        reason = str(exc).removeprefix(f"data path {show_input(resolved)}")
        raise MisconfigurationError(f"{shown}, read as {show_input(resolved)}{reason}") from None
    return resolved


def _expand_home(shown: str, data_path: str) -> str:
    """DuckDB's ``~``: a leading ``~`` is $HOME (DuckDB joins the rest as text,
    so ``~x`` would be ``$HOME`` + ``x``, a sibling of the home directory, where
    a shell reads user x's home: refused rather than guessed)."""
    if not data_path.startswith("~"):
        return data_path
    if data_path != "~" and not data_path.startswith("~/"):
        raise MisconfigurationError(
            f"{shown}: DuckDB reads '~' followed by a name as the home directory's path "
            "with that name appended, not that user's home; spell the directory out "
            "(an absolute path, or ./ before a directory named '~...')"
        )
    home = os.environ.get("HOME", "")
    if not home.startswith("/"):
        raise MisconfigurationError(
            f"{shown}: '~' is the home directory and HOME is not set to an absolute path "
            "here; give the absolute path"
        )
    return home.rstrip("/") + data_path[1:] or "/"


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
