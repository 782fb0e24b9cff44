"""The one place SQL text is built from values: identifiers and literals.

Every name or value that reaches SQL text (an alias, a data path, a table
name, an option, a credential) goes through ``ident`` or ``literal`` (or is
bound as a parameter). Both refuse a NUL byte, which DuckDB's parser would
read as the end of the statement, so nothing after it could hide.
"""

from __future__ import annotations

from slatelake.errors import MisconfigurationError


def _checked(value: str, what: str) -> str:
    if not isinstance(value, str):
        raise MisconfigurationError(f"{what} {value!r}: expected text")
    if "\x00" in value:
        raise MisconfigurationError(f"{what} {value!r}: contains a NUL byte")
    return value


def ident(name: str) -> str:
    """A double-quoted SQL identifier."""
    return '"' + _checked(name, "SQL identifier").replace('"', '""') + '"'


def literal(value: str) -> str:
    """A single-quoted SQL string literal."""
    return "'" + _checked(value, "SQL string").replace("'", "''") + "'"
