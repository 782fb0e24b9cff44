"""What a capture's proportional reads compare against: the head's counters,
and the tables a new snapshot's ``changes_made`` names.

DuckLake records per snapshot which tables it changed (``inserted_into_table:3``,
``created_table:"main"."t"``): the statistics it updates in place are read for
those tables only. Anything not of a known form narrows nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from slatelake.catalog.rows import Row


@dataclass
class Scope:
    """What the proportional predicates compare against: the head snapshot S,
    the next file id F and next catalog id C at S (None before the first
    snapshot), and once the new snapshot's changes are read, the tables they
    name (``tables``; None: not known, read whole)."""

    snap: int
    next_file: int | None
    next_catalog: int | None
    tables: set[int] | None = None

    def table_filter(self) -> str:
        """The rows of the tables this change touched (its ids, and any new one)."""
        if self.tables is None or self.next_catalog is None:
            return ""
        listed = ", ".join(str(int(t)) for t in sorted(self.tables))
        new = f"table_id >= {int(self.next_catalog)}"
        return f"WHERE table_id IN ({listed}) OR {new}" if listed else f"WHERE {new}"


def named_tables(rows: list[Row], snap: int) -> set[int] | None:
    """The ids in the new snapshots' ``changes_made`` (``inserted_into_table:3``;
    created objects are named, and take ids from next_catalog_id on). None when
    there is no new snapshot or an entry is not of a form known here: then
    nothing is narrowed."""
    ids: set[int] = set()
    minted = [row for row in rows if row[0] > snap]
    if not minted:
        return None  # no snapshot (expiry, cleanup): nothing names the tables
    for row in minted:
        for entry in _entries(row[1] or ""):
            kind, sep, value = entry.partition(":")
            if not sep or not kind.replace("_", "").isalpha():
                return None
            if value.isdigit():
                ids.add(int(value))
            elif not value.startswith('"'):
                return None
    return ids


def _entries(text: str) -> list[str]:
    """``changes_made`` split at commas outside double-quoted names."""
    out, current, quoted = [], [], False
    for ch in text:
        if ch == '"':
            quoted = not quoted
        if ch == "," and not quoted:
            out.append("".join(current))
            current = []
        else:
            current.append(ch)
    if current:
        out.append("".join(current))
    return out
