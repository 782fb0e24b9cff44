"""Reader pins, the maintenance half: list them, and the files they keep.

Pins live in the readers' leases (``readers/<id>``, log/leases.py), written
by ``session.pin()`` (ducklake/reader_pins.py). Expiry leaves pinned
snapshots out (expiry_choice.py) and the commit path refuses any commit that
would end one; this module lets the delete boundary keep every file a pinned
snapshot reads, whatever the grace says, and lets people see who pins what.
Listing reads the leases only (one LIST and a GET per reader): no store, no
catalog, and nothing written (a lapsed lease is left for a reader to prune).
"""

from __future__ import annotations

from dataclasses import dataclass

from slatelake.ducklake.catalog_files import files_at
from slatelake.ducklake.session import Session
from slatelake.errors import CorruptionError
from slatelake.log.leases import LeaseBook, now_us, pinned
from slatelake.store.location import LakeLocation


@dataclass(frozen=True)
class ReaderPin:
    """One pin, as its lease says it."""

    reader_id: str
    snapshot_id: int
    onward: bool  # every snapshot from ``snapshot_id`` on
    owner: str
    pinned_at_us: int
    lease_expires_at_us: int

    def age_s(self, at_us: int | None = None) -> float:
        return max(0, (now_us() if at_us is None else at_us) - self.pinned_at_us) / 1e6

    def to_dict(self) -> dict[str, object]:
        return {
            "reader_id": self.reader_id,
            "snapshot_id": self.snapshot_id,
            "onward": self.onward,
            "owner": self.owner,
            "pinned_at_us": self.pinned_at_us,
            "age_s": round(self.age_s(), 3),
            "lease_expires_at_us": self.lease_expires_at_us,
        }


def reader_pins(location: LakeLocation) -> list[ReaderPin]:
    """Every live pin, oldest snapshot first."""
    out = [
        ReaderPin(
            lease.reader_id,
            pin.snapshot_id,
            pin.onward,
            pin.owner,
            pin.since_us,
            lease.expires_at_us,
        )
        for lease in LeaseBook(location).live(prune=False)
        for pin in lease.pins
    ]
    return sorted(out, key=lambda p: (p.snapshot_id, p.pinned_at_us, p.reader_id))


def pinned_files(session: Session) -> list[str]:
    """Every file a live pin keeps: what its snapshots read at the session's
    head (an onward pin: its snapshot and every later one), and what its
    reader recorded it read them through (``pins/<id>``: files a merge has
    since replaced, which a query planned before the merge still reads).
    CorruptionError when a reader's record does not decode."""
    book = session.lake.lease.book
    leases = [lease for lease in book.live(prune=False) if lease.pins]
    if not leases:
        return []
    exact, onward = pinned(leases)
    files: dict[str, None] = {}
    for lease in leases:
        try:
            files.update(dict.fromkeys(book.pin_files(lease.reader_id) or ()))
        except ValueError as exc:
            raise CorruptionError(
                f"{exc}; nothing is deleted while what it keeps is unknown (the record is "
                f"{book.pins_prefix}{lease.reader_id}; it goes when that reader closes)"
            ) from None
    con = session.con.cursor()
    try:
        for snapshot in sorted(exact):
            files.update(dict.fromkeys(files_at(con, snapshot)))
        if onward is not None:
            files.update(dict.fromkeys(files_at(con, onward, onward=True)))
    finally:
        con.close()
    return list(files)


__all__ = ["ReaderPin", "pinned_files", "reader_pins"]
