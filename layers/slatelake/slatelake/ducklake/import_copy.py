"""``import --copy-data DEST``: the imported lake gets data files of its own.

Without a copy, the new lake and the source catalog share one set of files:
a DELETE and a pass in either deletes what the other still reads. With one,
every data and delete file the (already checked, ``import_check``) catalog
names is copied to the same place under DEST, byte for byte, and DEST
becomes the lake's data path: the catalog's relative paths name the copies
unchanged, an absolute path inside the old data path is rewritten to its
copy, and a relative file path with a ``.`` or ``..`` segment is written out
absolute (a copy has only the directories that hold files, and the file
system walks ``..`` through real ones). Files scheduled for deletion are not
copied and their rows are dropped: no retained snapshot reads them, and the
new lake never had them.

DEST must be a data path of its own: not overlapping the lake root or the
source data path, and empty (its orphan step would take anything already
there for its own). Each file is read whole and written once with
put-if-absent (never over a file), so a file is bounded by memory; a copy
that stops part way leaves the lake root untouched and DEST to delete.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass

from slatelake.catalog import registry
from slatelake.catalog.rows import Row
from slatelake.ducklake.guard import check_overlap, data_location, ducklake_data_path
from slatelake.ducklake.import_paths import DATA_FILE, DELETE_FILE, SCHEDULED, CheckedCatalog
from slatelake.errors import MisconfigurationError, NotFoundError
from slatelake.store.location import LakeLocation, show_input
from slatelake.store.objects import ObjectClient

log = logging.getLogger("slatelake.transfer")
_ID_COLUMN = {DATA_FILE: "data_file_id", DELETE_FILE: "delete_file_id"}
_DIRECTORIES = ("ducklake_schema", "ducklake_table")


@dataclass(frozen=True)
class CopyPlan:
    """Where the copies go: the source data path and DEST, each as DuckLake
    spells it and as a store location."""

    source_path: str
    source: LakeLocation
    target_path: str
    target: LakeLocation

    def target_key(self, source_key: str) -> str:
        if source_key == self.source.root:  # a schema path that is the data path itself
            return self.target.root
        rest = source_key[len(_prefix(self.source)) :]
        return _prefix(self.target) + rest

    def target_named(self, source_key: str) -> str:
        """A copy as DuckLake names it (a local path, or an object URL)."""
        key = self.target_key(source_key)
        if self.target.scheme == "file":
            return "/" + key
        return f"{self.target.scheme}://{self.target.bucket}/{key}"


@dataclass(frozen=True)
class CopyReport:
    files: int
    bytes: int
    seconds: float


def _prefix(location: LakeLocation) -> str:
    return location.root + "/" if location.root else ""


def plan_copy(checked: CheckedCatalog, dest: str, lake_url: str) -> CopyPlan:
    """DEST checked: a data path, apart from the lake root and the source's
    files, and empty. Nothing is written."""
    target_path = ducklake_data_path(dest)
    target = data_location(target_path)
    check_overlap(lake_url, target_path)
    if target.contains(checked.location) or checked.location.contains(target):
        raise MisconfigurationError(
            f"--copy-data {show_input(dest)} overlaps the source data path "
            f"{checked.data_path!r}; copies must go to a data path of their own"
        )
    found = next(iter(ObjectClient(target).list(_prefix(target))), None)
    if found is not None:
        raise MisconfigurationError(
            f"--copy-data {show_input(dest)} is not empty (it holds {found.path}); the new "
            "lake's orphan step would take its files for its own: choose an empty data path"
        )
    return CopyPlan(checked.data_path, checked.location, target_path, target)


def copy_files(plan: CopyPlan, checked: CheckedCatalog) -> CopyReport:
    """Copy every data and delete file to DEST; a file already there is an error."""
    started = time.perf_counter()
    source, target = ObjectClient(plan.source), ObjectClient(plan.target)
    copied = total = 0
    for f in checked.files:
        data = source.get(f.key)
        if data is None:
            raise NotFoundError(f"{f.path} vanished while importing; nothing more was copied")
        if len(data) != f.size:
            raise MisconfigurationError(
                f"{f.path} holds {len(data)} bytes while copying, not {f.size}; is another "
                "process writing the source data path?"
            )
        if not target.put_if_absent(plan.target_key(f.key), data):
            raise MisconfigurationError(
                f"{plan.target_named(f.key)} appeared while copying; is another process "
                "writing the copy's data path?"
            )
        copied, total = copied + 1, total + len(data)
    log.info("import: copied %d files (%d bytes) to %s", copied, total, plan.target_path)
    return CopyReport(copied, total, time.perf_counter() - started)


def rewrite_rows(
    plan: CopyPlan, checked: CheckedCatalog, spec: registry.TableSpec, rows: Iterator[Row]
) -> Iterator[Row]:
    """``spec``'s rows as the copied lake keeps them (see the module text)."""
    if spec.name == SCHEDULED:
        return
    if spec.name in _DIRECTORIES:
        yield from _rewrite_directories(plan, checked, spec, rows)
        return
    if spec.name not in _ID_COLUMN:
        yield from rows
        return
    named = {f.row_id: plan.target_named(f.key) for f in checked.files if f.table == spec.name}
    rid, path, rel = (spec.index(c) for c in (_ID_COLUMN[spec.name], "path", "path_is_relative"))
    for row in rows:
        dotted = bool(row[rel]) and any(p in (".", "..") for p in str(row[path]).split("/"))
        if not row[rel] or dotted:
            row = _with(row, {path: named[row[rid]], rel: False})
        yield row


def _rewrite_directories(
    plan: CopyPlan, checked: CheckedCatalog, spec: registry.TableSpec, rows: Iterator[Row]
) -> Iterator[Row]:
    """An absolute schema or table path (inside the old data path, as
    ``import_check`` made sure) moves to the same place under DEST."""
    rid, path = spec.index(spec.key[0]), spec.index("path")
    for row in rows:
        key = checked.directories.get((spec.name, row[rid], str(row[path])))
        if key is not None:
            row = _with(row, {path: plan.target_named(key) + "/"})
        yield row


def _with(row: Row, values: dict[int, object]) -> Row:
    return tuple(values.get(i, v) for i, v in enumerate(row))


__all__ = ["CopyPlan", "CopyReport", "copy_files", "plan_copy", "rewrite_rows"]
