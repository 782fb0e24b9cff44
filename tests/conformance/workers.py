"""Child processes that run test files, one file at a time each.

A worker (``python -m tests.conformance --serve``) reads one JSON request per
line on stdin (file path, suite name, scratch directory), runs the file and
writes one result line. Starting Python, duckdb and the extensions costs about
a second, so a worker serves up to ``RECYCLE`` files before it is replaced;
leaks from one file reach at most that many others. A file that outlives its
timeout has its worker killed (by its pid) and counts as a failure, as does a
worker that dies; the next file gets a fresh worker. Each file's scratch
directory is removed once it has a result.
"""

from __future__ import annotations

import json
import os
import queue
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from tests.conformance.interpreter import FAIL, FileResult, run_file
from tests.conformance.suite import REPO

RESULT_MARK = "@@conformance-result "
RECYCLE = 25


def serve(backend: str, txn: str, requests: IO[str], out: IO[str]) -> None:
    """The worker's loop: a result line for every request line, until stdin closes."""
    for line in requests:
        if not line.strip():
            continue
        request = json.loads(line)
        result = run_file(
            Path(request["path"]), request["name"], backend, Path(request["workdir"]), txn
        )
        out.write(RESULT_MARK + json.dumps(result.to_json()) + "\n")
        out.flush()


class Worker:
    """One child process, restarted when it dies, times out or has served RECYCLE files."""

    def __init__(self, backend: str, txn: str, stderr_path: Path) -> None:
        self._command = [
            sys.executable,
            "-m",
            "tests.conformance",
            "--backend",
            backend,
            "--txn",
            txn,
            "--serve",
        ]
        self._stderr_path = stderr_path
        self._proc: subprocess.Popen[bytes] | None = None
        self._buffer = b""
        self._served = 0

    def _start(self) -> subprocess.Popen[bytes]:
        self.stop()
        with self._stderr_path.open("ab") as stderr:
            self._proc = subprocess.Popen(
                self._command,
                cwd=REPO,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
            )
        self._buffer, self._served = b"", 0
        return self._proc

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            try:
                proc.stdin.close()  # type: ignore[union-attr]
                proc.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
                proc.wait()

    def run(self, path: Path, name: str, workdir: Path, timeout: float) -> FileResult:
        proc = self._proc
        if proc is None or proc.poll() is not None or self._served >= RECYCLE:
            proc = self._start()
        self._served += 1
        started = time.monotonic()
        request = {"path": str(path), "name": name, "workdir": str(workdir)}
        try:
            proc.stdin.write((json.dumps(request) + "\n").encode())  # type: ignore[union-attr]
            proc.stdin.flush()  # type: ignore[union-attr]
            line = self._result_line(proc, started + timeout)
        except OSError:
            line = ""
        if line is None:
            proc.kill()
            proc.wait()
            self._proc = None
            return FileResult(name, FAIL, error=f"timed out after {timeout:g} s", seconds=timeout)
        if not line:
            status = proc.wait()
            self._proc = None
            tail = self._stderr_path.read_text(errors="replace")[-4000:]
            last = (tail.strip().splitlines() or ["no output"])[-1]
            return FileResult(
                name,
                FAIL,
                error=f"worker exited with status {status}: {last}"[:400],
                detail=tail,
                seconds=round(time.monotonic() - started, 2),
            )
        return FileResult(**json.loads(line[len(RESULT_MARK) :]))

    def _result_line(self, proc: subprocess.Popen[bytes], deadline: float) -> str | None:
        """The next result line; "" when the worker ended, None at the deadline."""
        fd = proc.stdout.fileno()  # type: ignore[union-attr]
        while True:
            while b"\n" in self._buffer:
                raw, _, self._buffer = self._buffer.partition(b"\n")
                text = raw.decode(errors="replace")
                if text.startswith(RESULT_MARK):
                    return text
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], remaining)
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    return ""
                self._buffer += chunk


def run_all(
    jobs: list[tuple[Path, str]],
    backend: str,
    txn: str,
    workers: int,
    timeout: float,
    on_result: Callable[[FileResult], None],
) -> list[FileResult]:
    """Run (path, name) pairs on ``workers`` processes; results in the given order."""
    scratch = Path(tempfile.mkdtemp(prefix=f"slatelake-conformance-{backend}-"))
    pending: queue.Queue[tuple[int, Path, str]] = queue.Queue()
    for k, (path, name) in enumerate(jobs):
        pending.put((k, path, name))
    results: dict[int, FileResult] = {}
    lock = threading.Lock()

    def drain(slot: int) -> None:
        worker = Worker(backend, txn, scratch / f"worker-{slot}.stderr")
        try:
            while True:
                try:
                    k, path, name = pending.get_nowait()
                except queue.Empty:
                    return
                workdir = scratch / f"{k:04d}"
                workdir.mkdir()
                try:
                    result = worker.run(path, name, workdir, timeout)
                except Exception as exc:  # the pool itself broke: say so, never drop the file
                    worker.stop()
                    error = f"harness error: {type(exc).__name__}: {exc}"
                    result = FileResult(name, FAIL, error=error[:400])
                finally:
                    shutil.rmtree(workdir, ignore_errors=True)
                with lock:
                    results[k] = result
                    on_result(result)
        finally:
            worker.stop()

    threads = [
        threading.Thread(target=drain, args=(n,), daemon=True)
        for n in range(min(workers, len(jobs)))
    ]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return [results[k] for k in range(len(jobs))]
