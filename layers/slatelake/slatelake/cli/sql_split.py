"""Where a script's statements end, as DuckDB's own tokenizer sees the text.

``slatelake sql`` runs a script statement by statement and its shell runs
input once it is complete; both need the ``;`` DuckDB's parser would split
at, never one inside a string literal, a quoted identifier or a comment.
duckdb is imported only when a function runs.
"""

from __future__ import annotations

from dataclasses import dataclass

SHOWN_CHARS = 60  # of a failed statement's first line, in its error


@dataclass(frozen=True)
class Statement:
    """One statement of a script, without its ``;``, from its first token on."""

    text: str
    line: int  # the script's line where it starts

    @property
    def first_line(self) -> str:
        head, _, rest = self.text.partition("\n")
        head = head.rstrip()
        if len(head) > SHOWN_CHARS:
            return head[:SHOWN_CHARS] + "..."
        return head + (" ..." if rest.strip() else "")


def _terminators(text: str) -> tuple[bytes, list[int], list[int]]:
    """The text's UTF-8 bytes, the byte offsets of its tokens, and of the
    tokens that are a ``;`` (DuckDB's tokenizer counts offsets in bytes and
    leaves out comments; a ``;`` inside a string or identifier is in its token)."""
    import duckdb

    data = text.encode()
    starts, ends = [], []
    for offset, kind in duckdb.tokenize(text):
        starts.append(offset)
        if kind == duckdb.token_type.operator and data[offset : offset + 1] == b";":
            ends.append(offset)
    return data, starts, ends


def blank(text: str) -> bool:
    """Nothing to run: whitespace and finished comments only. An unfinished
    string or comment is not blank (it swallows the ``;`` put after it)."""
    import duckdb

    return len(duckdb.tokenize(text + "\n;")) == 1


def complete(text: str) -> bool:
    """Whether shell input is ready to run: it has a terminating ``;`` and only
    whitespace or finished comments after the last one."""
    data, _, ends = _terminators(text)
    return bool(ends) and blank(data[ends[-1] + 1 :].decode())


def split(text: str) -> list[Statement]:
    """The statements of a script, where DuckDB's parser would split them.
    Text after the last ``;`` is a statement too unless it is blank (an
    unfinished string there reaches DuckDB, which names the fault)."""
    data, starts, ends = _terminators(text)
    terminators = set(ends)
    statements: list[Statement] = []

    def add(first: int, end: int) -> None:
        line = data.count(b"\n", 0, first) + 1
        statements.append(Statement(data[first:end].decode().rstrip(), line))

    begin, first = 0, None  # after the last ';'; the first token since
    for offset in starts:
        if offset in terminators:
            if first is not None:  # not an empty statement (';;')
                add(first, offset)
            begin, first = offset + 1, None
        elif first is None:
            first = offset
    rest = data[begin:]
    if first is None and not blank(rest.decode()):  # only an unfinished string or comment
        first = begin + len(rest) - len(rest.lstrip())
    if first is not None:
        add(first, len(data))
    return statements
