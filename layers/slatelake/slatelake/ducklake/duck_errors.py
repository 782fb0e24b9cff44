"""slatelake's errors as DuckDB's: what a session's statement raises is a
``duckdb.Error``, so one ``except duckdb.Error`` catches everything a
statement can raise, as on a stock DuckDB connection.

DuckDB's own errors pass through untouched. Ours (the lake's conflicts,
corruption, store faults, refusals) are raised as a twin class that derives
from both our class and the DuckDB class with the nearest meaning, so
``except ConflictError`` and ``except duckdb.TransactionException`` both
catch a lost commit race. Twins are made here, once per class, and not in
``errors.py``: the layers below the bridge never import DuckDB, and a
process that never opens a session never pays for it.

A twin pickles as itself (a process pool sends a worker's error back), and
prints as our class does.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import duckdb

from slatelake import errors as e

# Our class -> the DuckDB class nearest in meaning; the first match in MRO order wins.
_NEAREST: dict[type[e.SlatelakeError], type[duckdb.Error]] = {
    e.ConflictError: duckdb.TransactionException,  # DuckDB's "Transaction conflict"
    e.StaleViewError: duckdb.TransactionException,
    e.FencedError: duckdb.TransactionException,
    e.ReadOnlyError: duckdb.InvalidInputException,  # DuckDB's read-only refusal
    e.MisconfigurationError: duckdb.InvalidInputException,
    e.HeldSnapshotError: duckdb.InvalidInputException,
    e.OperationLimitError: duckdb.InvalidInputException,
    e.NotFoundError: duckdb.IOException,
    e.CorruptionError: duckdb.SerializationException,
    e.StoreError: duckdb.IOException,
    e.UnsupportedError: duckdb.NotImplementedException,
}
_TWINS: dict[tuple[type[BaseException], type[duckdb.Error]], type[BaseException]] = {}
_LOCK = threading.Lock()


def nearest(cls: type[e.SlatelakeError]) -> type[duckdb.Error]:
    for base in cls.__mro__:
        if base in _NEAREST:
            return _NEAREST[base]  # type: ignore[index]
    return duckdb.Error


def twin_class(cls: type[BaseException], duck: type[duckdb.Error]) -> type[BaseException]:
    """Our ``cls`` that is also a ``duck``: made once, named as ``cls``."""
    key = (cls, duck)
    with _LOCK:
        made = _TWINS.get(key)
        if made is None:
            made = type(
                cls.__name__,
                (cls, duck),
                {
                    "__module__": cls.__module__,
                    "__qualname__": cls.__qualname__,
                    "__reduce__": _reduce,
                    "__doc__": cls.__doc__,
                    "_twin_of": (cls, duck),
                },
            )
            _TWINS[key] = made
    return made


def _reduce(self: BaseException) -> tuple[Any, ...]:
    ours, duck = type(self)._twin_of  # type: ignore[attr-defined]
    return (_rebuild, (ours, duck, self.args, dict(self.__dict__)))


def _rebuild(
    ours: type[BaseException], duck: type[duckdb.Error], args: tuple[Any, ...], state: dict
) -> BaseException:
    made = twin_class(ours, duck)
    out = made.__new__(made)
    out.args = args
    out.__dict__.update(state)
    return out


def as_duckdb(exc: e.SlatelakeError, duck: type[duckdb.Error] | None = None) -> BaseException:
    """``exc`` as its twin (the same message, attributes, cause and traceback)."""
    if isinstance(exc, duckdb.Error):
        return exc
    out = _rebuild(type(exc), duck or nearest(type(exc)), exc.args, dict(exc.__dict__))
    out.__cause__, out.__suppress_context__ = exc.__cause__, exc.__suppress_context__
    out.__context__ = exc.__context__
    return out.with_traceback(exc.__traceback__)


@contextmanager
def duckdb_errors() -> Iterator[None]:
    """Raise what the block raises as DuckDB would: ours as twins."""
    try:
        yield
    except e.SlatelakeError as exc:
        if isinstance(exc, duckdb.Error):
            raise
        raise as_duckdb(exc) from exc.__cause__


__all__ = ["as_duckdb", "duckdb_errors", "nearest", "twin_class"]
