"""One sqllogictest file, parsed the way DuckDB's runner reads it.

A record starts at a line that is neither empty nor a comment (``#``). A
statement's SQL runs to an empty line, a comment line or ``----``; expected
rows and expected error text run to the next empty line. ``skipif``/``onlyif``
naming a system and ``mode skip``/``unskip`` are resolved here, as DuckDB
resolves them while reading; a condition on a loop variable (``skipif i>25``)
stays on its record. ``require`` lines and directives this runner cannot honour
(``load``, ``restart``, ``unzip`` ...) are collected for the interpreter to turn
into a skip. A file this parser cannot read raises ``ScriptError``. Knows
nothing of DuckDB or slatelake.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

SORTS = {"nosort": "nosort", "rowsort": "rowsort", "sort": "rowsort", "valuesort": "valuesort"}
# Directives whose effect this runner cannot reproduce: the file is skipped, naming it.
BLOCKING = {"load", "restart", "reconnect", "unzip", "set"}
_CONDITION = re.compile(r"^(\w+)\s*(==|=|!=|<>|<=|>=|<|>)\s*(\S+)$")


class ScriptError(Exception):
    """The file uses syntax this parser does not know (a line names it)."""


@dataclass(frozen=True)
class Condition:
    """``skipif``/``onlyif`` on a loop variable: equality compares text, order compares numbers."""

    variable: str
    op: str
    value: str
    skip_if: bool

    def allows(self, loop_vars: Mapping[str, str]) -> bool:
        if self.variable not in loop_vars:
            raise ScriptError(f"condition on {self.variable!r}, which is not a loop variable here")
        current = loop_vars[self.variable]
        if self.op in ("=", "=="):
            holds = current == self.value
        elif self.op in ("!=", "<>"):
            holds = current != self.value
        else:
            a, b = int(current), int(self.value)
            holds = {"<": a < b, ">": a > b, "<=": a <= b, ">=": a >= b}[self.op]
        return holds != self.skip_if


@dataclass(frozen=True)
class Statement:
    line: int
    expect: str  # ok | error | maybe
    sql: str
    connection: str | None
    error: str  # expected error text; "" accepts any error
    conditions: tuple[Condition, ...] = ()


@dataclass(frozen=True)
class Query:
    line: int
    sql: str
    columns: int
    sort: str  # nosort | rowsort | valuesort
    connection: str | None
    label: str | None
    expected: tuple[str, ...]
    conditions: tuple[Condition, ...] = ()


@dataclass(frozen=True)
class Loop:
    line: int
    variable: str
    values: tuple[str, ...]
    concurrent: bool
    body: tuple[Record, ...]


@dataclass(frozen=True)
class Directive:
    """``test-env``, ``sleep`` and ``halt``: run in order with the records."""

    line: int
    name: str
    args: tuple[str, ...]


Record = Statement | Query | Loop | Directive


@dataclass(frozen=True)
class Script:
    path: Path
    records: tuple[Record, ...]
    requires: tuple[tuple[str, ...], ...]  # ``require NAME [ARG]``
    require_env: tuple[tuple[str, ...], ...]  # ``require-env NAME [VALUE]``
    blockers: tuple[str, ...]  # directives this runner cannot honour, with their line


@dataclass
class _OpenLoop:
    line: int
    variable: str
    values: tuple[str, ...]
    concurrent: bool
    body: list[Record]


def parse(path: Path) -> Script:
    """Read ``path`` into records; loops nest, skipped records are dropped."""
    lines = [ln.replace("\r", "") for ln in path.read_text().split("\n")]
    top: list[Record] = []
    stack: list[_OpenLoop] = []
    requires: list[tuple[str, ...]] = []
    require_env: list[tuple[str, ...]] = []
    blockers: list[str] = []
    skip_level = 0
    i = 0

    def emit(record: Record) -> None:
        (stack[-1].body if stack else top).append(record)

    while True:
        i = _next_record(lines, i)
        if i >= len(lines):
            break
        tokens = lines[i].split()
        lineno = i + 1
        # skipif/onlyif lines stack on the record that follows them
        conditions: list[Condition] = []
        skipped = False
        while tokens[0] in ("skipif", "onlyif"):
            if len(tokens) < 2:
                raise ScriptError(f"line {lineno}: {tokens[0]} needs a parameter")
            skip_if = tokens[0] == "skipif"
            spec = "".join(tokens[1:])
            cond = _CONDITION.match(spec)
            if cond:
                conditions.append(Condition(*cond.groups(), skip_if=skip_if))
            elif (tokens[1].lower() == "duckdb") == skip_if:
                skipped = True
            i += 1
            if i >= len(lines) or not lines[i].strip():
                raise ScriptError(f"line {lineno}: {tokens[0]} is not followed by a record")
            tokens = lines[i].split()
            lineno = i + 1
        head, args = tokens[0], tuple(tokens[1:])
        if head in ("statement", "query"):
            record, i = _read_record(lines, i, head, args, tuple(conditions))
            if not skipped and skip_level == 0:
                emit(record)
            continue
        i += 1
        if skipped or (skip_level and head != "mode"):
            if head in ("loop", "foreach", "concurrentloop", "concurrentforeach", "endloop"):
                raise ScriptError(f"line {lineno}: a skipped {head} is not supported")
            continue
        if head == "mode":
            if args == ("skip",):
                skip_level += 1
            elif args == ("unskip",):
                skip_level -= 1
            continue  # output modes only change what DuckDB's runner prints
        if head in ("loop", "concurrentloop"):
            if len(args) != 3:
                raise ScriptError(f"line {lineno}: loop needs NAME START END")
            values = tuple(str(k) for k in range(int(args[1]), int(args[2])))
            stack.append(_OpenLoop(lineno, args[0], values, head == "concurrentloop", []))
        elif head in ("foreach", "concurrentforeach"):
            if len(args) < 2 or any(a.startswith("<") for a in args[1:]):
                raise ScriptError(f"line {lineno}: foreach needs NAME and plain values")
            stack.append(_OpenLoop(lineno, args[0], args[1:], head == "concurrentforeach", []))
        elif head == "endloop":
            if not stack:
                raise ScriptError(f"line {lineno}: endloop without a loop")
            done = stack.pop()
            emit(Loop(done.line, done.variable, done.values, done.concurrent, tuple(done.body)))
        elif head == "require":
            requires.append(args)
        elif head == "require-env":
            require_env.append(args)
        elif head in ("test-env", "sleep", "halt"):
            emit(Directive(lineno, head, args))
        elif head in ("hash-threshold", "tags"):
            continue
        elif head in BLOCKING:
            blockers.append(f"{head} (line {lineno})")
        else:
            raise ScriptError(f"line {lineno}: unknown directive {head!r}")
    if stack:
        raise ScriptError(f"line {stack[-1].line}: loop without endloop")
    return Script(path, tuple(top), tuple(requires), tuple(require_env), tuple(blockers))


def _next_record(lines: list[str], i: int) -> int:
    while i < len(lines) and _empty_or_comment(lines[i]):
        i += 1
    return i


def _empty_or_comment(line: str) -> bool:
    return not line.strip() or line.startswith("#")


def _read_record(
    lines: list[str], i: int, head: str, args: tuple[str, ...], conditions: tuple[Condition, ...]
) -> tuple[Record, int]:
    """A statement or query starting at line ``i``; returns it and the line after it."""
    lineno = i + 1
    i += 1
    sql: list[str] = []
    while i < len(lines) and not _empty_or_comment(lines[i]) and lines[i] != "----":
        sql.append(lines[i])
        i += 1
    block: list[str] | None = None
    if i < len(lines) and lines[i] == "----":
        i += 1
        block = []
        while i < len(lines) and lines[i] != "":
            block.append(lines[i])
            i += 1
    text = "\n".join(sql)
    if not text.strip():
        raise ScriptError(f"line {lineno}: {head} without SQL")
    if head == "statement":
        if not args or args[0] not in ("ok", "error", "maybe"):
            raise ScriptError(f"line {lineno}: statement must be ok, error or maybe")
        if block is not None and args[0] == "ok":
            raise ScriptError(f"line {lineno}: statement ok cannot expect an error")
        connection = args[1] if len(args) > 1 else None
        error = "\n".join(block or [])
        return Statement(lineno, args[0], text, connection, error, conditions), i
    if not args or any(c not in "TIR" for c in args[0]):
        raise ScriptError(f"line {lineno}: query needs column types made of T, I and R")
    sort, connection = "nosort", None
    if len(args) > 1:
        if args[1] in SORTS:
            sort = SORTS[args[1]]
        else:
            connection = args[1]  # DuckDB's runner: an unknown sort mode names a connection
    label = args[2] if len(args) > 2 else None
    expected = tuple(block or ())
    return Query(lineno, text, len(args[0]), sort, connection, label, expected, conditions), i
