"""The base's rows of a few small tables, kept in Python between captures.

DuckLake updates its per-table statistics in place, a few rows per table.
Capture diffs them for the tables a change names against the base's rows;
reading those from the base would make the base database apply what it
lags (``DuckState.settle``) at every write. So the rows are read whole once
per version of the base and then advanced by each of the session's own
captured changes, while nothing else moves the base.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from slatelake.catalog.changes import RowChanges
from slatelake.catalog.rows import Row
from slatelake.ducklake.duck_state import Version


class KeptRows:
    def __init__(self) -> None:
        self._rows: dict[str, Counter[Row]] = {}  # per table, as multisets
        self._version: Version | None = None  # the base's version they are of

    def rows(
        self, table: str, version: Version | None, read: Callable[[], list[Row]]
    ) -> Counter[Row]:
        """The base's rows of ``table`` at ``version``: kept, else ``read`` whole."""
        if self._version != version:
            self._rows, self._version = {}, version
        rows = self._rows.get(table)
        if rows is None:
            rows = self._rows[table] = Counter(read())
        return rows

    def advance(
        self, changes: RowChanges, captured_at: Version | None, version: Version, alone: bool
    ) -> None:
        """A capture made at ``captured_at`` landed and the base is now at
        ``version``: the kept rows advance by its changes if nothing but that
        commit moved the base (``alone``: no one else's change set rode
        along, and the version moved by one step); else they go."""
        at = captured_at
        if not alone or at is None or self._version != at or version != (at[0], at[1] + 1):
            self._rows, self._version = {}, None
            return
        for table, rows in self._rows.items():
            rows.subtract(changes.deleted.get(table, ()))
            rows.update(changes.inserted.get(table, ()))
            if any(n < 0 for n in rows.values()):  # not what the base held: read it again
                self._rows, self._version = {}, None
                return
            rows += Counter()  # drop the zero counts
        self._version = version
