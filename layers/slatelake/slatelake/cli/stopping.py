"""Stopping a verb on SIGTERM or SIGINT: the first signal asks, the second ends it.

The first signal sets a ``threading.Event`` the library already honours (a
pass checks it at every step, table and batch boundary, as it checks its
deadline), so the work ends cleanly: the status is recorded and the pass
lease released, and the verb exits ``128 + signal`` (130 for SIGINT, 143
for SIGTERM). A second signal exits at once with the same status, even in
the middle of a native call: what it held (a lease, a commit lock) then
lapses at its expiry, ``SLATELAKE_PASS_LEASE_TTL_S`` (60 s) at most after
the last heartbeat.

Python runs signal handlers only in the main thread and only between
bytecodes, so a main thread busy in DuckDB or SlateDB would not see either
signal until that call returns. The handlers here therefore do nothing; the
signal numbers reach a watcher thread through ``signal.set_wakeup_fd``,
which the interpreter writes from its C-level handler as the signal arrives.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM)
_WAKE = 0  # the byte that ends the watcher (no signal has number 0)


@dataclass
class SignalStop:
    """What the signals asked: ``event`` is set by the first one, ``signum``
    names it (None: no signal came)."""

    verb: str
    event: threading.Event = field(default_factory=threading.Event)
    signum: int | None = None

    @property
    def exit_status(self) -> int | None:
        """``128 + signal`` once a signal came, the shell's convention."""
        return None if self.signum is None else 128 + self.signum

    @property
    def name(self) -> str:
        return "" if self.signum is None else signal.Signals(self.signum).name

    def _arrived(self, signum: int) -> None:
        if self.signum is None:
            self.signum = signum
            self.event.set()
            _say(
                f"slatelake {self.verb}: {self.name}: stopping at the next step boundary and "
                "releasing the lease; signal again to exit at once"
            )
            return
        _say(
            f"slatelake {self.verb}: {signal.Signals(signum).name} again: exiting now; "
            "the lease lapses at its expiry"
        )
        os._exit(128 + self.signum)


def _say(message: str) -> None:
    with contextlib.suppress(Exception):
        print(message, file=sys.stderr, flush=True)


def _ignore(signum: int, frame: FrameType | None) -> None:
    """The Python-level handler: the watcher thread does the work."""


@contextlib.contextmanager
def stop_on_signals(verb: str) -> Iterator[SignalStop]:
    """Within the block, SIGTERM and SIGINT go to the returned ``SignalStop``
    (from the main thread only: elsewhere nothing is installed and the
    signals keep their handlers)."""
    stop = SignalStop(verb)
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    previous = {sig: signal.getsignal(sig) for sig in SIGNALS}
    old_wakeup = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    watcher = threading.Thread(
        target=_watch, args=(read_fd, stop), name="slatelake-signals", daemon=True
    )
    watcher.start()
    try:
        for sig in SIGNALS:
            signal.signal(sig, _ignore)
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        signal.set_wakeup_fd(old_wakeup)
        with contextlib.suppress(OSError):
            os.write(write_fd, bytes([_WAKE]))
        watcher.join(1.0)
        os.close(write_fd)
        if not watcher.is_alive():
            os.close(read_fd)


def _watch(read_fd: int, stop: SignalStop) -> None:
    while True:
        try:
            data = os.read(read_fd, 64)
        except OSError:
            return
        for signum in data:
            if signum == _WAKE:
                return
            if signum in SIGNALS:
                stop._arrived(signum)
        if not data:
            return
