"""What a statement is: its types, whether it may write, whether it calls
one of DuckLake's maintenance functions.

DuckDB's own parser says what a statement is (``duckdb.extract_statements``
gives each one's ``StatementType``) and its tokenizer which names it uses
(``duckdb.tokenize``): a word in a comment or a string constant names
nothing. A write runs in a transaction of its own (statement_flow.py);
DuckLake's maintenance functions run with the commit lock held from the start.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import duckdb

from slatelake.errors import ConflictError

ST = duckdb.StatementType
# Statements that cannot change the catalog; a read-only session runs only these
# (plus CALL, checked after the fact: a CALL that changed the catalog is refused).
READ_TYPES = frozenset({ST.SELECT, ST.EXPLAIN, ST.SET, ST.VARIABLE_SET, ST.PRAGMA})
# Statements that never write the lake's catalog: not wrapped in a transaction
# under the commit lock (a change found after them still commits).
NOT_LAKE_WRITES = frozenset({ST.ATTACH, ST.DETACH, ST.LOAD})
DUCKLAKE_PREFIX = "ducklake_"
# DuckLake's maintenance functions run with the commit lock already held, on
# the head: DuckLake 1.5.5 does not redo a flush or compaction right when it
# retries, so they must never need to (refused_commit.py).
LOCK_FIRST = frozenset(
    {
        "ducklake_flush_inlined_data",
        "ducklake_merge_adjacent_files",
        "ducklake_rewrite_data_files",
        "ducklake_expire_snapshots",
        "ducklake_cleanup_old_files",
        "ducklake_delete_orphaned_files",
    }
)


# Those a session that is alone on the lake may run without taking the lock
# (``statement_flow.py``): their only effect outside the catalog is files they
# write, which a refused commit removes. Cleanup and orphan deletion delete
# files before their commit, so they always take it.
MAY_GO_ALONE = LOCK_FIRST - {"ducklake_cleanup_old_files", "ducklake_delete_orphaned_files"}


@dataclass(frozen=True)
class Name:
    """An identifier as the statement spells it, unquoted."""

    text: str
    called: bool  # followed by "(": a function (or table function) called by name


def tokens(query: str) -> list[tuple[int, Any]]:
    """DuckDB's tokens of ``query``: (character offset, token type); comments
    are left out. Empty when DuckDB cannot tokenize it (its parser then
    refuses it itself). DuckDB counts offsets in UTF-8 bytes; these count
    characters, so they index ``query``."""
    try:
        found = duckdb.tokenize(query)
    except duckdb.Error:
        return []
    if query.isascii():
        return found
    at_byte: dict[int, int] = {}
    offset = 0
    for i, char in enumerate(query):
        at_byte[offset] = i
        offset += len(char.encode())
    return [(at_byte.get(start, len(query)), kind) for start, kind in found]


def names(query: str) -> list[Name]:
    """The identifiers of ``query``, in order, per DuckDB's tokenizer (comments
    and string constants name nothing)."""
    tokens_ = tokens(query)
    kinds = duckdb.token_type
    out = []
    for at, (start, kind) in enumerate(tokens_):
        if kind != kinds.identifier:
            continue
        after = tokens_[at + 1] if at + 1 < len(tokens_) else None
        called = after is not None and after[1] == kinds.operator
        called = called and query.startswith("(", after[0])
        out.append(Name(_token(query, start, '"'), called))
    return out


def _first_keyword(query: str) -> str:
    """The statement's first word when it is a keyword (upper case), else ''."""
    first = tokens(query)[:1]
    if not first or first[0][1] != duckdb.token_type.keyword:
        return ""
    bare = _BARE.match(query, first[0][0])
    return bare.group(0).upper() if bare else ""


def is_maintenance_call(query: str) -> bool:
    """True for a call of one of DuckLake's maintenance functions (or CHECKPOINT)."""
    if _first_keyword(query) == "CHECKPOINT":
        return True
    return any(n.called and n.text.lower() in LOCK_FIRST for n in names(query))


def maintenance_may_go_alone(query: str) -> bool:
    """True for a call of DuckLake's maintenance functions that calls only
    ``MAY_GO_ALONE`` ones (not CHECKPOINT, which runs cleanup too)."""
    if _first_keyword(query) == "CHECKPOINT":
        return False
    called = {n.text.lower() for n in names(query) if n.called} & LOCK_FIRST
    return bool(called) and called <= MAY_GO_ALONE


def names_ducklake(query: str) -> bool:
    """Whether the statement names one of DuckLake's functions or metadata
    tables (``ducklake_*``): a read that calls one can still change the
    catalog (``SELECT * FROM ducklake_expire_snapshots(...)``)."""
    return any(n.text.lower().startswith(DUCKLAKE_PREFIX) for n in names(query))


def described(query: str, types: set[Any]) -> str:
    """How a failed statement is named in its error: the DuckLake function it
    calls (a maintenance step), or its statement types."""
    for n in names(query):
        if n.called and n.text.lower().startswith(DUCKLAKE_PREFIX):
            return n.text
    return " ".join(sorted(t.name for t in types - {ST.CALL})) or "statement"


def names_any(query: str, names: frozenset[str], strings: bool) -> str | None:
    """The first of ``names`` (lower case) the statement names as an
    identifier, quoted or not, in any case (DuckDB resolves catalog names
    case-insensitively), or with ``strings`` inside a string constant as one
    part of a dotted or comma-separated list (``SET search_path = 'x.main'``).
    Comments and other strings name nothing. None: none named."""
    kinds = duckdb.token_type
    for start, kind in tokens(query):
        if kind == kinds.identifier:
            parts = [_token(query, start, '"')]
        elif strings and kind == kinds.string_const:
            parts = re.split(r"[.,]", _token(query, start, "'"))
        else:
            continue
        for part in parts:
            name = part.strip().strip('"')
            if name.lower() in names:
                return name
    return None


_BARE = re.compile(r"[^\s\"'.,;()\[\]{}=<>!|+*/%:-]+")


def _token(query: str, start: int, quote: str) -> str:
    """The text of the identifier or string token at ``start``, unquoted (a
    doubled quote inside is one)."""
    if query.startswith(quote, start):
        out, at = [], start + 1
        while at < len(query):
            if query[at] == quote:
                if query.startswith(quote * 2, at):
                    out.append(quote)
                    at += 2
                    continue
                break
            out.append(query[at])
            at += 1
        return "".join(out)
    bare = _BARE.match(query, start)
    return bare.group(0) if bare else ""


def parse(query: str) -> list[Any]:
    """DuckDB's statements of ``query``; what DuckDB cannot parse raises
    DuckDB's own ParserException, as DuckDB would."""
    return duckdb.extract_statements(query)


def refused(exc: duckdb.Error) -> Exception:
    """DuckLake's refusal of a COMMIT: a conflict by its rules is ConflictError
    with DuckLake's own wording; anything else is raised as DuckDB raised it."""
    text = str(exc)
    marker = "transaction conflict - "
    at = text.lower().rfind(marker)
    if at >= 0:  # DuckLake's cause, as DuckLake words it
        return ConflictError(f"{text[at + len(marker) :]}; nothing was committed")
    if "conflict" in text.lower():
        return ConflictError(f"DuckLake refused the commit: {text}")
    return exc
