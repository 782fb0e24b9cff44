"""fsck: check a lake's catalog against its files and its own records.

Read-only over the lake's data and catalog. What it checks:

- every data and delete file the catalog references (live, or kept by a
  snapshot not yet expired) exists, with the size the catalog recorded
  (``missing_file``, ``size_mismatch``: a truncated or rewritten file);
- no file is scheduled for deletion twice (``scheduled_twice``) or while a
  file row still references it (``scheduled_while_referenced``: cleanup
  would delete a file a snapshot reads);
- no column statistics outlive their data file (``stranded_stats``) and no
  inlined-data table outlives its table (``stranded_inlined_table``); the
  pass's sweeps reclaim both, so after a full pass there are none;
- the newest catalog image covers no slot beyond the log's head
  (``image_ahead``: an image no commit produced).

Sizes come from DuckDB's ``read_blob`` (a stat, a HEAD on S3), never a read.
The only write is the result's summary (``sys/fsck``, one head-preserving
commit), so that orphan deletion can refuse to run while the last fsck
found referenced files missing (``orphans_blocked``): deleting "orphans"
then could remove files a repair would bring back. A clean fsck lifts it.
``repair_plan`` says, per finding, what would fix it; nothing is repaired.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import PurePosixPath
from typing import Any

import duckdb

from slatelake.ducklake.catalog_files import path_resolver
from slatelake.ducklake.commit_flow import META_DB
from slatelake.ducklake.guard import data_location
from slatelake.ducklake.session import Session
from slatelake.ducklake.sql import ident
from slatelake.errors import CorruptionError, SlatelakeError
from slatelake.log.changeset import ChangeSet
from slatelake.log.images import ImageBook
from slatelake.maintenance import reclaim
from slatelake.store.keys import Subspace, encode_key
from slatelake.store.location import LakeLocation
from slatelake.store.objects import ObjectClient, object_url

FSCK_KEY = encode_key(Subspace.SYS, 0x21)
# Kinds that make a file-deleting step unsafe until repaired.
BLOCKS_ORPHANS = ("missing_file", "size_mismatch")
KINDS = (
    "missing_file",
    "size_mismatch",
    "scheduled_twice",
    "scheduled_while_referenced",
    "stranded_stats",
    "stranded_inlined_table",
    "image_ahead",
)
SHOWN = 50  # findings kept per kind in a report (all are counted)
_REPAIRS = {
    "missing_file": "restore the file from a backup, or delete the snapshots that read it "
    "(expire them) and rewrite the table; orphan deletion stays refused until fsck is clean",
    "size_mismatch": "restore the file from a backup (it was truncated or overwritten)",
    "scheduled_twice": "none needed for safety: cleanup deletes it once; the duplicate row "
    "goes with it",
    "scheduled_while_referenced": "remove the path from ducklake_files_scheduled_for_deletion "
    "before the next cleanup (cleanup's fail-safe refuses it meanwhile)",
    "stranded_stats": "run a pass (its sweep_file_stats step reclaims them)",
    "stranded_inlined_table": "run a pass (its sweep_inlined_tables step reclaims them)",
    "image_ahead": "delete that image object: opens fall back to the newest image at or "
    "below the log's head",
}


@dataclass(frozen=True)
class Finding:
    """One problem: its ``kind`` (``KINDS``), what it concerns, and how."""

    kind: str
    subject: str
    detail: str


@dataclass
class FsckReport:
    """What fsck found. ``counts`` by kind (every finding counted; at most
    ``SHOWN`` per kind kept in ``findings``)."""

    lake: str
    checked_at: int = field(default_factory=lambda: time.time_ns() // 1000)
    files_checked: int = 0
    findings: list[Finding] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    recorded: bool = False  # the summary reached sys/fsck

    @property
    def ok(self) -> bool:
        return not self.counts

    @property
    def orphans_blocked(self) -> bool:
        return any(self.counts.get(k) for k in BLOCKS_ORPHANS)

    def repair_plan(self) -> list[dict[str, str]]:
        return [
            {"kind": f.kind, "subject": f.subject, "repair": _REPAIRS[f.kind]}
            for f in self.findings
        ]

    def to_dict(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["ok"] = self.ok
        doc["orphans_blocked"] = self.orphans_blocked
        return doc


def fsck(session: Session, record: bool = True) -> FsckReport:
    """Check the lake at the session's head; ``record``: keep the summary in
    ``sys/fsck`` (a read-only session records nothing)."""
    t0 = time.monotonic()
    session.refresh()
    report = FsckReport(session.url)
    found: list[Finding] = []
    con = session.con.cursor()
    try:
        recorded = _referenced(con)
        report.files_checked = len(recorded)
        found += _files(session, con, recorded)
        found += _scheduled(con, set(recorded))
        found += _stranded(con)
    finally:
        con.close()
    found += _images(session)
    report.counts = dict(Counter(f.kind for f in found))
    kept: Counter[str] = Counter()
    for f in found:
        kept[f.kind] += 1
        if kept[f.kind] <= SHOWN:
            report.findings.append(f)
    report.seconds = round(time.monotonic() - t0, 3)
    if record and not session.read_only:
        report.recorded = _record(session, report)
    return report


def last_result(session: Session) -> dict[str, Any] | None:
    """The summary the last recorded fsck left (None: none recorded)."""
    raw = session.lake.read_sys(session.state, FSCK_KEY)
    if raw is None:
        return None
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise CorruptionError(f"sys/fsck does not decode ({exc}); run `slatelake fsck`") from None
    return doc if isinstance(doc, dict) else None


def orphans_refused(session: Session) -> str | None:
    """Why orphan deletion must not run now (None: it may): the last fsck
    found referenced files missing or changed."""
    last = last_result(session)
    if not last or not last.get("orphans_blocked"):
        return None
    counts = last.get("counts") or {}
    what = ", ".join(f"{counts[k]} {k}" for k in BLOCKS_ORPHANS if counts.get(k))
    return (
        f"the last fsck found referenced files missing or changed ({what}); deleting orphans "
        "now could remove files a repair brings back. Repair them and run `slatelake fsck` "
        "again (a clean result lifts this)"
    )


# -- the checks ----------------------------------------------------------------------
def _referenced(con: Any) -> dict[str, int]:
    """Every data and delete file the catalog references, by full path, with
    the size it recorded."""
    full = path_resolver(con)
    recorded: dict[str, int] = {}
    for table in ("ducklake_data_file", "ducklake_delete_file"):
        rows = con.execute(
            f"SELECT table_id, path, path_is_relative, file_size_bytes "
            f"FROM {ident(META_DB)}.{ident(table)}"
        ).fetchall()
        for table_id, path, relative, size in rows:
            recorded[full(table_id, path, relative)] = int(size or 0)
    return recorded


def _files(session: Session, con: Any, recorded: dict[str, int]) -> list[Finding]:
    sizes = _sizes(session, con, recorded)
    out = []
    for path, size in sorted(recorded.items()):
        if path not in sizes:
            out.append(Finding("missing_file", path, "the catalog references it; it is absent"))
        elif size and sizes[path] != size:
            out.append(
                Finding(
                    "size_mismatch",
                    path,
                    f"the catalog recorded {size} bytes; the file has {sizes[path]}",
                )
            )
    return out


def _sizes(session: Session, con: Any, paths: dict[str, int]) -> dict[str, int]:
    """The sizes of the files that exist among ``paths``: one listing of the
    data path (a missing object is simply not listed), and DuckDB's stat or
    HEAD, one file at a time, for a file outside it (an S3 HEAD that finds
    nothing raises, so each is asked alone)."""
    (root,) = con.execute(
        f"SELECT value FROM {ident(META_DB)}.ducklake_metadata "
        "WHERE key = 'data_path' AND scope IS NULL"
    ).fetchone() or ("",)
    sizes: dict[str, int] = {}
    outside = list(paths)
    if root:
        where = data_location(str(root))
        for info in ObjectClient(where).list(where.path("") + "/" if where.root else ""):
            sizes[_spelled(where, info.path)] = info.size
        outside = [p for p in paths if not p.startswith(str(root))]
    for path in outside:
        try:
            sizes.update(reclaim.file_sizes(session, [path]))
        except duckdb.Error:
            continue  # not there (or not readable): reported missing
    return sizes


def _spelled(where: LakeLocation, path: str) -> str:
    """An object's path as DuckLake spells a file there (a local path, or a URL)."""
    return str(PurePosixPath("/", path)) if where.scheme == "file" else object_url(where, path)


def _scheduled(con: Any, referenced: set[str]) -> list[Finding]:
    (root,) = con.execute(
        f"SELECT value FROM {ident(META_DB)}.ducklake_metadata "
        "WHERE key = 'data_path' AND scope IS NULL"
    ).fetchone() or ("",)
    rows = con.execute(
        f"SELECT path, path_is_relative FROM {ident(META_DB)}.ducklake_files_scheduled_for_deletion"
    ).fetchall()
    scheduled = Counter(f"{root}{p}" if rel else str(p) for p, rel in rows)
    out = [
        Finding("scheduled_twice", p, f"scheduled for deletion {n} times")
        for p, n in sorted(scheduled.items())
        if n > 1
    ]
    out += [
        Finding("scheduled_while_referenced", p, "scheduled for deletion, yet a file row reads it")
        for p in sorted(set(scheduled) & referenced)
    ]
    return out


def _stranded(con: Any) -> list[Finding]:
    stats = con.execute(
        f"SELECT s.table_id, count(*) FROM {ident(META_DB)}.ducklake_file_column_stats s "
        f"WHERE NOT EXISTS (SELECT 1 FROM {ident(META_DB)}.ducklake_data_file f "
        "WHERE f.data_file_id = s.data_file_id) GROUP BY s.table_id ORDER BY 1"
    ).fetchall()
    out = [
        Finding("stranded_stats", f"table {t}", f"{n} column statistics of absent data files")
        for t, n in stats
    ]
    inlined = con.execute(
        f"SELECT i.table_id, i.table_name FROM {ident(META_DB)}.ducklake_inlined_data_tables i "
        f"WHERE NOT EXISTS (SELECT 1 FROM {ident(META_DB)}.ducklake_table t "
        "WHERE t.table_id = i.table_id) ORDER BY 1, 2"
    ).fetchall()
    out += [
        Finding("stranded_inlined_table", str(name), f"inlined data of absent table {t}")
        for t, name in inlined
    ]
    return out


def _images(session: Session) -> list[Finding]:
    head = session.state.head.batch_seq
    try:
        newest = ImageBook(session.lake.location, client=session.lake.log.client).newest()
    except SlatelakeError as exc:
        return [Finding("image_ahead", "images/", f"the images could not be listed ({exc})")]
    if newest is None or head is None or newest.seq <= head:
        return []
    return [
        Finding(
            "image_ahead",
            newest.name,
            f"covers slot {newest.seq}, beyond the log's head {head}",
        )
    ]


def _record(session: Session, report: FsckReport) -> bool:
    """Keep the summary (one head-preserving commit); False when it could not."""
    doc = {
        "checked_at": report.checked_at,
        "counts": report.counts,
        "orphans_blocked": report.orphans_blocked,
        "files_checked": report.files_checked,
    }
    try:
        session.commit_change_set(
            ChangeSet(
                base=session.state.head,
                puts=((FSCK_KEY, json.dumps(doc).encode()),),
                tables=("sys/fsck",),
                changes_made="fsck",
            )
        )
    except SlatelakeError:
        return False
    return True
