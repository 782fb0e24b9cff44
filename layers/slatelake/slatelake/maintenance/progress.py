"""Progress lines with RSS, written at once so they survive a later crash."""

from __future__ import annotations

import resource
import sys
import time
from collections.abc import Callable
from typing import TextIO

# A structured receiver: the message and its numbers (elapsed_s, rss_mb, hwm_mb).
Sink = Callable[[str, dict[str, float]], None]


def rss_mb() -> tuple[float, float]:
    """(current RSS, process high-water) in MB; current from /proc where available."""
    high = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
        current = pages * resource.getpagesize() / (1 << 20)
    except (OSError, ValueError, IndexError):
        current = high
    return current, high


class Progress:
    """Printed to ``stream`` when MAINTENANCE_PROGRESS is on; always handed to
    ``sink`` when one is given (the Lambda logs every line)."""

    def __init__(
        self, enabled: bool, stream: TextIO | None = None, sink: Sink | None = None
    ) -> None:
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.sink = sink
        self.high_water = 0.0
        self._t0 = time.monotonic()

    def __call__(self, message: str) -> None:
        current, high = rss_mb()
        self.high_water = max(self.high_water, high)
        elapsed = time.monotonic() - self._t0
        if self.enabled:
            print(
                f"maintenance +{elapsed:7.2f}s rss={current:.0f}MB hwm={high:.0f}MB {message}",
                file=self.stream,
                flush=True,
            )
        if self.sink is not None:
            self.sink(
                message,
                {
                    "elapsed_s": round(elapsed, 3),
                    "rss_mb": round(current, 1),
                    "hwm_mb": round(high, 1),
                },
            )
