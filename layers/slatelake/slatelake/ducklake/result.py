"""The rows of a statement the session ran to completion before handing back."""

from __future__ import annotations

from typing import Any


class Result:
    """The rows of a statement that was run to completion (a possible write)."""

    def __init__(self, description: Any, rows: list[tuple[Any, ...]]) -> None:
        self.description = description
        self._rows = rows
        self._at = 0

    def fetchall(self) -> list[tuple[Any, ...]]:
        rows, self._at = self._rows[self._at :], len(self._rows)
        return rows

    def fetchone(self) -> tuple[Any, ...] | None:
        if self._at >= len(self._rows):
            return None
        self._at += 1
        return self._rows[self._at - 1]

    def fetchmany(self, size: int = 1) -> list[tuple[Any, ...]]:
        rows = self._rows[self._at : self._at + size]
        self._at += len(rows)
        return rows
