"""An attribute read (and set) through an object the instance holds, by name.

A class that answers as another it holds (``LakeSession`` as its
``Session``; a ``SessionCursor`` as its session, for what they share)
declares each such attribute once: ``url = Through("session", Session)``.
A method comes back bound to the held object, so the caller calls it
directly: ``sql`` then finds the caller's Python names one frame up, as
DuckDB's replacement scans need. On the class, the held class's own
attribute (its docstring, for ``help``) when that class is given.
"""

from __future__ import annotations

from typing import Any


class Through:
    def __init__(self, holder: str, cls: type | None = None) -> None:
        self.holder = holder  # the attribute naming the held object
        self.cls = cls

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: object | None, objtype: type | None = None) -> Any:
        if obj is None:
            return self if self.cls is None else getattr(self.cls, self.name)
        return getattr(getattr(obj, self.holder), self.name)

    def __set__(self, obj: object, value: Any) -> None:
        setattr(getattr(obj, self.holder), self.name, value)
