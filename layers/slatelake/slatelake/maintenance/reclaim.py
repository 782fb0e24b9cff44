"""What a pass reclaimed, in bytes: from the catalog, and from storage.

The catalog's figure is the bytes of every data and delete file it lists
before the pass less after it (expiry drops what only expired snapshots
kept; a merge adds its new files). Storage's is the bytes of the files the
deleting steps removed, sized just before they go: DuckLake's cleanup and
orphan steps return only paths, and the catalog forgot a file's size when
it scheduled it. Sizes come from DuckDB's ``read_blob`` (a stat, or a HEAD
on S3), never from reading a file.
"""

from __future__ import annotations

from collections.abc import Iterable

from slatelake.ducklake.session import Session
from slatelake.ducklake.sql import run

CHUNK = 1000
_GLOB = frozenset("*?[{")


def file_sizes(session: Session, paths: Iterable[str]) -> dict[str, int]:
    """Sizes of the files that exist among ``paths``. A path DuckDB would
    read as a glob pattern is not sized (its bytes stay uncounted)."""
    wanted = [p for p in dict.fromkeys(paths) if not _GLOB & set(p)]
    sizes: dict[str, int] = {}
    con = session.con.cursor()
    try:
        for start in range(0, len(wanted), CHUNK):
            chunk = wanted[start : start + CHUNK]
            rows = run(con, "SELECT filename, size FROM read_blob(?)", [chunk]).fetchall()
            sizes.update({str(name): int(size) for name, size in rows})
    finally:
        con.close()
    return sizes
