"""Run history and the audit log, kept on the lake beyond the 16-pass window.

Each kept item is a sys record of its own (``sys·0x09·id`` for a pass's
report, ``sys·0x0B·id`` for an audit entry), and an index record per log
(``sys/run_history``, ``sys/audit_log``) lists the ids, oldest first. An item
is written in the same change set as what it records (a pass's status record,
a policy or hold change), so history never claims what did not land, and the
change set also drops the oldest items beyond the bound: the newest
``KEEP_RUNS`` passes and ``KEEP_AUDIT`` audit entries. Ids are microseconds
since the epoch, made strictly increasing, so newest first is descending id
and ``before`` pages by keyset. Reading a page loads no catalog and reads
the unfolded log once, for the index and its items together.

A pass's entry is written twice under one id: ``running`` when it takes its
lease, then how it ended (``run_writes`` rewrites an id still in the index).
Every finished run is audited as ``run.<trigger>`` with its counters
(``run_audit_writes``), in the change set that records how it ended.
A policy or hold change whose caller names no one is audited as made by
the OS user (``caller``), as the CLI records it, never as nobody.
"""

from __future__ import annotations

import getpass
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Generic, TypeVar

from slatelake.catalog.lake import Lake
from slatelake.errors import CorruptionError, MisconfigurationError
from slatelake.maintenance.report import PassReport
from slatelake.store import values
from slatelake.store.keys import Subspace, encode_key
from slatelake.store.location import show_input

RUNS_INDEX = encode_key(Subspace.SYS, 0x08)
AUDIT_INDEX = encode_key(Subspace.SYS, 0x0A)
_RUN_KIND, _AUDIT_KIND = 0x09, 0x0B
_INDEX_KIND = 0x08
KEEP_RUNS = 1000
KEEP_AUDIT = 1000
MAX_PAGE = 1000
T = TypeVar("T")
Read = Callable[[bytes], bytes | None]


def caller() -> str | None:
    """Who is calling, for the audit log: the OS user (``getpass.getuser``,
    as the CLI's ``caller`` reads it), or None when the uid has no name (a
    bare container)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid
        return None


def who(by: str | None) -> str | None:
    """``by`` when the caller names someone, else ``caller()``: a change made
    from Python is audited under the same name the CLI would give it."""
    return by if by is not None else caller()


def run_key(run_id: int) -> bytes:
    return encode_key(Subspace.SYS, _RUN_KIND, run_id)


def audit_key(audit_id: int) -> bytes:
    return encode_key(Subspace.SYS, _AUDIT_KIND, audit_id)


@dataclass(frozen=True)
class AuditEntry:
    """Who changed what, when: ``kind`` is ``policy.set``, ``policy.unset``,
    ``hold.protect``, ``hold.unprotect``, ``borrowed.release``, or a finished
    run: ``run.manual``, ``run.scheduled``, ``run.threshold``."""

    id: int  # µs since the epoch, strictly increasing
    kind: str
    who: str | None
    what: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> AuditEntry:
        return cls(int(doc["id"]), str(doc["kind"]), doc.get("who"), dict(doc.get("what") or {}))


@dataclass(frozen=True)
class Page(Generic[T]):
    """Newest first; ``next_before`` continues the listing (None: no more)."""

    items: list[T]
    next_before: int | None


# -- writing: the puts and deletes a change set carries -----------------------
def _ids(raw: bytes | None, what: str) -> list[int]:
    if raw is None:
        return []
    ids = values.unframe(raw, _INDEX_KIND, what)
    if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
        raise CorruptionError(f"{what} is not a list of ids")
    return ids


def _append(
    read: Read,
    index_key: bytes,
    what: str,
    key_of: Callable[[int], bytes],
    encode: Callable[[int], bytes],
    keep: int,
) -> tuple[list[tuple[bytes, bytes]], list[bytes], int]:
    """(puts, deletes, id) that add one item to a log and trim it to ``keep``.
    An index that does not decode is started afresh (its items stay as
    orphans); losing history never blocks the change it records."""
    try:
        ids = _ids(read(index_key), what)
    except CorruptionError:
        ids = []
    now = time.time_ns() // 1000
    new_id = max(now, ids[-1] + 1) if ids else now
    ids.append(new_id)
    dropped, ids = ids[:-keep], ids[-keep:]
    puts = [(key_of(new_id), encode(new_id)), (index_key, values.frame(_INDEX_KIND, ids))]
    return puts, [key_of(i) for i in dropped], new_id


def run_ids(read: Read) -> list[int]:
    """The run history's ids, oldest first (none when the index does not decode)."""
    try:
        return _ids(read(RUNS_INDEX), "sys/run_history")
    except CorruptionError:
        return []


def read_run(read: Read, run_id: int) -> PassReport | None:
    """One kept entry (None: gone, or it does not decode)."""
    raw = read(run_key(run_id))
    if raw is None:
        return None
    try:
        return _decode_run(raw, run_id)
    except (CorruptionError, KeyError, TypeError, ValueError, AttributeError):
        return None


def run_writes(read: Read, report: PassReport) -> tuple[list[tuple[bytes, bytes]], list[bytes]]:
    """Keep ``report`` in the run history (its id becomes ``report.run_id``).
    A report whose id is still in the history (its ``running`` entry)
    rewrites that entry; otherwise it is added under a new id."""

    def encode(run_id: int) -> bytes:
        report.run_id = run_id
        return values.frame(_RUN_KIND, report.to_dict())

    if report.run_id is not None and report.run_id in run_ids(read):
        return [(run_key(report.run_id), encode(report.run_id))], []
    puts, deletes, _ = _append(read, RUNS_INDEX, "sys/run_history", run_key, encode, KEEP_RUNS)
    return puts, deletes


def run_audit_writes(
    read: Read, report: PassReport
) -> tuple[list[tuple[bytes, bytes]], list[bytes]]:
    """Audit a finished run as ``run.<trigger>``: its status, scope and
    counters (every step's counts summed, the bytes reclaimed), and why it
    failed or is partial when it says."""
    what: dict[str, Any] = {
        "run_id": report.run_id,
        "status": str(report.status),
        "operations": report.operations,
        "table": report.table,
        "counts": report.totals(),
        "bytes_deleted": report.bytes_deleted,
        "catalog_bytes_reclaimed": report.catalog_bytes_reclaimed,
        "seconds": report.seconds,
    }
    reason = report.failed_reason or report.lease_lost or report.partial_reason
    if reason is not None:
        what["reason"] = reason
    return audit_writes(read, f"run.{report.trigger}", report.by, what)


def audit_writes(
    read: Read, kind: str, who: str | None, what: dict[str, Any]
) -> tuple[list[tuple[bytes, bytes]], list[bytes]]:
    """Add one audit entry."""

    def encode(audit_id: int) -> bytes:
        return values.frame(_AUDIT_KIND, AuditEntry(audit_id, kind, who, what).to_dict())

    puts, deletes, _ = _append(read, AUDIT_INDEX, "sys/audit_log", audit_key, encode, KEEP_AUDIT)
    return puts, deletes


# -- reading pages ---------------------------------------------------------------
def check_limit(value: object) -> int:
    text = str(value).strip()
    if isinstance(value, bool) or not (text.isascii() and text.isdigit()):
        raise MisconfigurationError(f"limit {show_input(value)}: expected a whole number 1-1000")
    if not 1 <= int(text) <= MAX_PAGE:
        raise MisconfigurationError(f"limit {show_input(value)}: expected 1 to {MAX_PAGE}")
    return int(text)


def check_before(value: object) -> int | None:
    if value is None:
        return None
    text = str(value).strip()
    if isinstance(value, bool) or not (text.isascii() and text.isdigit()):
        raise MisconfigurationError(
            f"before {show_input(value)}: expected an id from a previous page (digits)"
        )
    if len(text) > 19 or int(text) >= 2**63:
        raise MisconfigurationError(
            f"before {show_input(value)}: expected an id from a previous page (at most {2**63 - 1})"
        )
    return int(text)


def _page(
    lake: Lake,
    index_key: bytes,
    what: str,
    kind: int,
    decode: Callable[[bytes, int], T],
    limit: object,
    before: object,
) -> Page[T]:
    """One page at the log's head: the index and the page's items read with
    one pass over the unfolded log (``Lake.read_sys_index_at_head``), so a
    page costs one GET per unfolded slot, not two."""
    size, upper = check_limit(limit), check_before(before)

    def choose(raw: bytes | None) -> tuple[list[int], bool]:
        newer_first = [i for i in reversed(_ids(raw, what)) if upper is None or i < upper]
        return newer_first[:size], len(newer_first) > size

    def named(raw: bytes | None) -> list[bytes]:
        return [encode_key(Subspace.SYS, kind, i) for i in choose(raw)[0]]

    index, found = lake.read_sys_index_at_head(index_key, named, encode_key(Subspace.SYS, kind))
    chosen, more = choose(index)
    keys = named(index)
    items = [
        decode(raw, i)
        for i, key in zip(chosen, keys, strict=True)
        if (raw := found[key]) is not None
    ]
    return Page(items, chosen[-1] if more and chosen else None)


def _decode_run(raw: bytes, run_id: int) -> PassReport:
    report = PassReport.from_dict(values.unframe(raw, _RUN_KIND, f"run {run_id}"))
    report.run_id = run_id
    return report


def _decode_audit(raw: bytes, audit_id: int) -> AuditEntry:
    return AuditEntry.from_dict(values.unframe(raw, _AUDIT_KIND, f"audit entry {audit_id}"))


def runs(lake: Lake, limit: object = 20, before: object = None) -> Page[PassReport]:
    """Kept passes, newest first: ``limit`` of them with ids below ``before``."""
    return _page(lake, RUNS_INDEX, "sys/run_history", _RUN_KIND, _decode_run, limit, before)


def audit(lake: Lake, limit: object = 50, before: object = None) -> Page[AuditEntry]:
    """Audit entries, newest first."""
    return _page(lake, AUDIT_INDEX, "sys/audit_log", _AUDIT_KIND, _decode_audit, limit, before)
