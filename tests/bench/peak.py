"""Run a module as ``__main__`` and print this process's peak RSS at exit.

``python -m tests.bench.peak MODULE ARGS...`` runs ``python -m MODULE ARGS...``
in this process and, at exit (atexit, which the slatelake CLI runs before its
``os._exit``), prints ``BENCH_PEAK_RSS_MB <MB>`` on stderr: VmHWM, the peak
of this process's own memory. A child cannot be measured from outside with
``os.wait4`` or ``RUSAGE_SELF``: Linux carries the parent's high-water mark
over fork and exec into both (a child of a 500 MB parent reports 500 MB).
"""

from __future__ import annotations

import atexit
import runpy
import sys

MARK = "BENCH_PEAK_RSS_MB"


def _report() -> None:
    try:
        with open("/proc/self/status") as f:
            kb = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    except (OSError, StopIteration, ValueError):
        return
    print(f"{MARK} {kb / 1024:.1f}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    atexit.register(_report)
    module = sys.argv[1]
    sys.argv = [module, *sys.argv[2:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
