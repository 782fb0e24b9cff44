"""Retention holds: named snapshots that expiry never removes (the catalog half; no SQL).

A hold names one snapshot; all holds live in one sys record,
``sys/retention_holds``, committed through the log like any change (under
the commit lock, so a hold and an expiry never cross; see
``ducklake/commit_flow.py``). The record is read whole: a record that does
not decode is CorruptionError, never "no holds", because expiring what a
hold protects cannot be undone.

Each hold also records the files its snapshot read when it was placed
(``sys/held_files``: hold name -> paths, as DuckLake names them), so no
cleanup or orphan step deletes one of them whatever the metadata says later
(a hand-written UPDATE of a file's end snapshot cannot unmake a hold).
"""

from __future__ import annotations

import json
import unicodedata
import zlib
from dataclasses import asdict, dataclass
from typing import Any

from slatelake.errors import CorruptionError, MisconfigurationError
from slatelake.store import values
from slatelake.store.keys import Subspace, encode_key

HOLDS_KEY = encode_key(Subspace.SYS, 0x06)
HOLDS_LABEL = "sys/retention_holds"
_HOLDS_KIND = 0x06
HELD_FILES_KEY = encode_key(Subspace.SYS, 0x12)
HELD_FILES_LABEL = "sys/held_files"
_HELD_FILES_KIND = 0x12
MAX_NAME_CHARS = 128
MAX_NOTE_CHARS = 1024


@dataclass(frozen=True)
class Hold:
    name: str
    snapshot_id: int
    note: str | None
    created_at: int  # µs since the epoch
    created_by: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> Hold:
        snapshot = doc["snapshot_id"]
        if isinstance(snapshot, bool) or not isinstance(snapshot, int) or snapshot < 0:
            raise TypeError(f"snapshot_id {snapshot!r} is not a snapshot id")
        return cls(
            name=str(doc["name"]),
            snapshot_id=snapshot,
            note=None if doc.get("note") is None else str(doc["note"]),
            created_at=int(doc["created_at"]),
            created_by=None if doc.get("created_by") is None else str(doc["created_by"]),
        )


def encode_holds(holds: list[Hold]) -> bytes:
    return values.frame(_HOLDS_KIND, [h.to_dict() for h in sorted(holds, key=lambda h: h.name)])


def decode_holds(raw: bytes | None) -> list[Hold]:
    """Every hold, by name; CorruptionError naming the record when any part
    of it does not decode (what it protects is then unknown)."""
    if raw is None:
        return []
    try:
        return [Hold.from_dict(doc) for doc in values.unframe(raw, _HOLDS_KIND, HOLDS_LABEL)]
    except CorruptionError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CorruptionError(
            f"{HOLDS_LABEL} does not decode ({type(exc).__name__}: {exc}); expiry stays off "
            "until it is rewritten (slatelake protect/unprotect rewrite it)"
        ) from exc


def encode_held_files(files: dict[str, list[str]]) -> bytes:
    """Hold name -> its snapshot's file paths, compressed (paths of one lake
    share their directories: 100k paths take a few MB before, far less after)."""
    doc = {name: sorted(set(paths)) for name, paths in sorted(files.items())}
    return values.frame(_HELD_FILES_KIND, zlib.compress(json.dumps(doc).encode(), 6))


def decode_held_files(raw: bytes | None) -> dict[str, list[str]]:
    """The recorded file sets; CorruptionError when the record does not decode
    (a delete it should stop would otherwise go through)."""
    if raw is None:
        return {}
    try:
        packed = values.unframe(raw, _HELD_FILES_KIND, HELD_FILES_LABEL)
        doc = json.loads(zlib.decompress(packed))
        if not isinstance(doc, dict):
            raise TypeError(f"expected an object, got {type(doc).__name__}")
        return {str(k): [str(p) for p in v] for k, v in doc.items()}
    except CorruptionError:
        raise
    except (TypeError, ValueError, zlib.error, AttributeError) as exc:
        raise CorruptionError(
            f"{HELD_FILES_LABEL} does not decode ({type(exc).__name__}: {exc}); cleanup and "
            "orphan deletion stay off until it is rewritten (slatelake protect/unprotect)"
        ) from exc


def held_snapshots(raw: bytes | None) -> dict[int, list[str]]:
    """Held snapshot id -> the names of the holds on it."""
    out: dict[int, list[str]] = {}
    for hold in decode_holds(raw):
        out.setdefault(hold.snapshot_id, []).append(hold.name)
    return out


def check_name(name: object) -> str:
    """A hold name as given, or MisconfigurationError: 1-128 characters, no
    control or format characters (they hide in terminals and logs)."""
    if not isinstance(name, str) or not name.strip():
        raise MisconfigurationError("a hold needs a name (--name NAME); got an empty one")
    if len(name) > MAX_NAME_CHARS:
        raise MisconfigurationError(
            f"hold name of {len(name)} characters: at most {MAX_NAME_CHARS}; choose a shorter one"
        )
    _refuse_invisible("hold name", name)
    return name


def check_note(note: object) -> str | None:
    if note is None:
        return None
    if not isinstance(note, str) or len(note) > MAX_NOTE_CHARS:
        raise MisconfigurationError(f"a hold's note is text of at most {MAX_NOTE_CHARS} characters")
    _refuse_invisible("hold note", note)
    return note


def _refuse_invisible(what: str, text: str) -> None:
    for i, ch in enumerate(text):
        if unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn"):
            raise MisconfigurationError(
                f"{what} has an invisible or control character U+{ord(ch):04X} at position {i}; "
                "use printable characters only"
            )
