"""The pass session a warm Lambda container keeps for its next invocation.

A container reused for the same lake and data path keeps its catalog in
DuckDB and only replays the slots committed since (one LIST when the head
did not move); one that idled past its reader lease reopens from the newest
catalog image. The options are not part of the session (each pass is given
its own), so a change of options reuses it too. Anything else gets a fresh
session and the previous one is closed, as is one whose pass raised.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os

from aws_lambda_powertools import Logger

import slatelake
from slatelake import MEMORY_LIMIT_ENV

logger = Logger(child=True)  # the handler's logger: its keys and correlation id


class WarmSession:
    """At most one open session, for one (lake, data path)."""

    def __init__(self) -> None:
        self.key: str | None = None
        self.session: slatelake.Session | None = None
        atexit.register(self.release)  # container shutdown

    def get(self, lake: str, data_path: str | None) -> slatelake.Session:
        """The kept session refreshed if it is this lake's and still sound,
        else a new one (the kept one closed)."""
        key = json.dumps([lake, data_path])
        if self.session is not None and self.key == key:
            try:
                if self.session.rewound():  # restored from a backup: reopen
                    raise slatelake.StaleViewError(
                        "the lake's log no longer holds this session's newest slot"
                    )
                self.session.refresh()
                logger.info("warm session reused", extra={"last_seq": self.session.last_seq})
                return self.session
            except Exception as exc:
                logger.warning(
                    "warm session dropped", extra={"error": f"{type(exc).__name__}: {exc}"}
                )
        self.release()
        default_memory_limit()
        self.session = slatelake.connect(lake, data_path=data_path)
        self.key = key
        return self.session

    def release(self) -> None:
        """Close the kept session (at shutdown, before another lake's, after a failure)."""
        session, self.session, self.key = self.session, None, None
        if session is not None:
            with contextlib.suppress(Exception):
                session.close()


def default_memory_limit() -> None:
    """Unless set, DuckDB's memory limit is half the function's memory.

    DuckDB's own default, 80% of memory, leaves Python, SlateDB and the answer
    little room, and DuckLake's per-snapshot cache grows a warm container's
    session to that limit before anything is evicted."""
    size = os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "")
    if not os.environ.get(MEMORY_LIMIT_ENV) and size.isdigit() and int(size) > 0:
        os.environ[MEMORY_LIMIT_ENV] = f"{int(size) // 2}MiB"
