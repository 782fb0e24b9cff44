"""Data-file requests DuckDB's httpfs got no answer to, from DuckDB's own log.

DuckLake's file cleanup and orphan deletion absorb a failed request: with
every HEAD of the data path answered 503, ``ducklake_delete_orphaned_files``
returns no rows, the same as a data path holding no orphan, so a pass would
say "deleted 0 files" about files it never saw. DuckDB logs each HTTP request
it makes (log type ``HTTP``: method, URL, the response's status, or the
transport's failure), so a step can watch its call and name what failed.

An object counts as failed when no request for it was answered: a 5xx, a
refusal (401, 403) or a dropped connection on every try. One answered
request clears it, so a refused HEAD that httpfs follows with a ranged GET
that succeeds is not a failure, and a 404 is an answer (the object is gone).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import duckdb

from slatelake.ducklake.sql import literal, run

LOG_TYPE = "HTTP"
_STATUS = re.compile(r"_(\d{3})$")  # DuckDB spells a status as ServiceUnavailable_503
_REFUSED = frozenset({401, 403})


@dataclass(frozen=True)
class FailedRequest:
    """The last try of a request for one object that no try got answered."""

    method: str
    url: str  # without its query string
    status: int | None  # None: no response (a dropped or refused connection)
    reason: str
    tries: int

    @property
    def refused(self) -> bool:
        return self.status in _REFUSED

    def __str__(self) -> str:
        answer = f"{self.status} {self.reason}" if self.status else self.reason
        tries = f", {self.tries} tries" if self.tries > 1 else ""
        return f"{self.method} {self.url}: {answer}{tries}"


def _status(text: str | None) -> int | None:
    found = _STATUS.search(text or "")
    return int(found.group(1)) if found else None


def _answered(status: int | None) -> bool:
    return status is not None and (status < 400 or status == 404)


class RequestWatch:
    """Gathers the ``HTTP`` log's entries before anything truncates the log
    (``harvest``), and says which objects were never answered (``failed``)."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        self._tries: dict[str, list[tuple[str, int | None, str]]] = {}
        self._mark = 0  # the newest entry taken: an untruncated log is read once

    def harvest(self) -> None:
        rows = run(
            self.con,
            "SELECT context_id, request.type, request.url, response.status, response.reason "
            f"FROM duckdb_logs_parsed({literal(LOG_TYPE)}) WHERE context_id > ?",
            [self._mark],
        ).fetchall()
        for context, method, url, status, reason in rows:
            self._mark = max(self._mark, int(context))
            key = str(url).split("?", 1)[0]
            self._tries.setdefault(key, []).append((str(method), _status(status), reason or ""))

    @property
    def objects(self) -> list[str]:
        """Every object a logged request was for (answered or not)."""
        return sorted(self._tries)

    def failed(self) -> list[FailedRequest]:
        out = []
        for url, tries in self._tries.items():
            if any(_answered(status) for _, status, _ in tries):
                continue
            method, status, reason = tries[-1]
            out.append(FailedRequest(method, url, status, reason, len(tries)))
        return out
