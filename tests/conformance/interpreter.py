"""Running one test file against a backend, the way DuckDB's runner runs it.

A file ends in one of four states: ``pass``; ``fail`` (the first statement or
query that did not do what the file expects, with its line, SQL and what
differed); ``skip`` (the file needs something this machine or runner lacks: an
extension, an environment variable, ``load``/``restart``); ``unsupported``
(the slatelake backend met a statement it cannot map onto a session, see
``backends.Unsupported``). A crash of the runner itself is a ``fail`` whose
reason starts with "harness error", never a pass.

``concurrentloop`` runs its iterations in threads, each on a connection of its
own (a cursor on stock, a session of its own on slatelake), as DuckDB's runner
does; the first failing iteration stops the others at their next record.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
import traceback
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tests.conformance.backends import BACKENDS, Unsupported
from tests.conformance.script import (
    Directive,
    Loop,
    Query,
    Record,
    Script,
    ScriptError,
    Statement,
    parse,
)
from tests.conformance.values import compare

PASS, FAIL, SKIP, UNSUPPORTED = "pass", "fail", "skip", "unsupported"
STATUSES = (PASS, FAIL, SKIP, UNSUPPORTED)
# ``require`` parameters this runner satisfies: the wheels' extensions and build facts.
PRESENT = {
    "ducklake",
    "parquet",
    "icu",
    "json",
    "httpfs",
    "core_functions",
    "notwindows",
    "notmingw",
    "64bit",
    "noalternativeverify",
    "no_alternative_verify",
    "no_vector_verification",
    "nothreadsan",
    "strinline",
    "skip_reload",
}
# ``require`` parameters that can never hold here, and why.
NEVER = {
    "no_extension_autoloading": "parquet is built into the Python duckdb, so it cannot be missing",
}


@dataclass
class FileResult:
    """One file's outcome, as the JSON report records it."""

    file: str
    status: str
    error: str = ""  # first line: why it failed, was skipped or is unsupported
    line: int = 0  # the failing record's line in the file
    sql: str = ""
    detail: str = ""  # the full mismatch or traceback
    seconds: float = 0.0
    records: int = 0  # statements and queries run

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class Failure(Exception):
    """A record did not do what the file expects."""

    def __init__(self, line: int, sql: str, detail: str) -> None:
        super().__init__(detail)
        self.line = line
        self.sql = sql
        self.detail = detail


class _Halt(Exception):
    """``halt``: the rest of the file is not run."""


@dataclass(frozen=True)
class _Scope:
    loop_vars: Mapping[str, str]
    connection: str | None  # the default connection: None is the main one


def skip_reason(script: Script) -> str | None:
    """Why this runner cannot run the file at all, or None."""
    for args in script.requires:
        name = args[0].lower() if args else ""
        if name in NEVER:
            return f"require {name}: {NEVER[name]}"
        if name not in PRESENT:
            return f"require {name}: not available here"
    for args in script.require_env:
        value = os.environ.get(args[0]) if args else None
        if value is None or (len(args) > 1 and value != args[1]):
            return f"require-env {' '.join(args)}: not set"
    if script.blockers:
        return f"needs {', '.join(script.blockers)}, which this runner does not implement"
    return None


def run_file(path: Path, name: str, backend: str, workdir: Path, txn: str = "api") -> FileResult:
    """Run the file at ``path`` (reported as ``name``) with scratch space in ``workdir``."""
    started = time.perf_counter()
    result = FileResult(name, PASS)
    interpreter: Interpreter | None = None
    try:
        script = parse(path)
        reason = skip_reason(script)
        if reason is not None:
            result.status, result.error = SKIP, reason
        else:
            runner = BACKENDS[backend](workdir, txn)
            try:
                interpreter = Interpreter(script, runner, workdir / "test")
                interpreter.run()
            finally:
                runner.close()
    except ScriptError as exc:
        result.status, result.error = SKIP, f"cannot read the file: {exc}"
    except Unsupported as exc:
        result.status, result.error = UNSUPPORTED, str(exc)
    except Failure as exc:
        result.status, result.error = FAIL, exc.detail.split("\n")[0][:400]
        result.line, result.sql, result.detail = exc.line, exc.sql, exc.detail
    except Exception as exc:
        result.status = FAIL
        result.error = f"harness error: {type(exc).__name__}: {exc}".split("\n")[0][:400]
        result.detail = traceback.format_exc()
    result.records = interpreter.records if interpreter else 0
    result.seconds = round(time.perf_counter() - started, 2)
    return result


def _message(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _error_matches(message: str, expected: str) -> bool:
    if expected in message:
        return True
    for prefix, want in (("<REGEX>:", True), ("<!REGEX>:", False)):
        if expected.startswith(prefix):
            found = re.search(expected[len(prefix) :], message, re.DOTALL) is not None
            return found == want
    return False


class Interpreter:
    def __init__(self, script: Script, backend: Any, test_dir: Path) -> None:
        self.script = script
        self.backend = backend
        self.test_dir = test_dir
        test_dir.mkdir(parents=True, exist_ok=True)
        self.env: dict[str, str] = {}
        self.labels: dict[str, str] = {}
        self.records = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()  # a concurrent iteration failed: the others stop

    def run(self) -> None:
        with contextlib.suppress(_Halt):
            self._block(self.script.records, _Scope({}, None))

    def _block(self, records: tuple[Record, ...], scope: _Scope) -> None:
        for record in records:
            if self._stop.is_set():
                return
            if isinstance(record, Directive):
                self._directive(record, scope)
            elif isinstance(record, Loop):
                self._loop(record, scope)
            elif not all(c.allows(scope.loop_vars) for c in record.conditions):
                continue
            elif isinstance(record, Statement):
                self._statement(record, scope)
            else:
                self._query(record, scope)

    def _substitute(self, text: str, loop_vars: Mapping[str, str]) -> str:
        for name, value in loop_vars.items():
            names, values = name.split(","), value.split(",")
            if len(names) != len(values):
                raise ScriptError(f"foreach {name}: value {value!r} has another shape")
            for n, v in zip(names, values, strict=True):
                text = text.replace("${" + n + "}", v)
        for name, value in self.env.items():
            text = text.replace("${" + name + "}", value).replace("{" + name + "}", value)
        test_dir = str(self.test_dir)
        return text.replace("__TEST_DIR__", test_dir).replace("{TEST_DIR}", test_dir)

    def _directive(self, directive: Directive, scope: _Scope) -> None:
        if directive.name == "halt":
            raise _Halt
        if directive.name == "sleep":
            amount = float(directive.args[0])
            unit = directive.args[1] if len(directive.args) > 1 else "seconds"
            scale = {"milli": 1e-3, "micro": 1e-6, "nano": 1e-9}
            time.sleep(amount * next((s for p, s in scale.items() if unit.startswith(p)), 1.0))
            return
        if len(directive.args) < 2:
            raise ScriptError(f"line {directive.line}: test-env needs NAME VALUE")
        value = " ".join(directive.args[1:]).replace("{UUID}", str(uuid.uuid4()))
        self.env[directive.args[0]] = self._substitute(value, scope.loop_vars)

    def _loop(self, loop: Loop, scope: _Scope) -> None:
        if not loop.concurrent:
            for value in loop.values:
                inner = _Scope({**scope.loop_vars, loop.variable: value}, scope.connection)
                self._block(loop.body, inner)
            return
        failures: dict[int, BaseException] = {}

        def iteration(k: int, value: str) -> None:
            inner = _Scope({**scope.loop_vars, loop.variable: value}, f"loop{loop.line}-{k}")
            try:
                self._block(loop.body, inner)
            except BaseException as exc:  # reported after every thread has ended
                failures[k] = exc
                self._stop.set()
            finally:
                try:
                    self.backend.release(inner.connection)
                except Exception as exc:
                    failures.setdefault(k, exc)

        threads = [
            threading.Thread(target=iteration, args=(k, v), name=f"slt-loop-{k}")
            for k, v in enumerate(loop.values)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if failures:
            raise failures[min(failures)]

    def _run(self, connection: str | None, scope: _Scope, sql: str) -> Any:
        with self._lock:
            self.records += 1
        return self.backend.execute(connection or scope.connection, sql)

    def _statement(self, st: Statement, scope: _Scope) -> None:
        sql = self._substitute(st.sql, scope.loop_vars)
        expected = self._substitute(st.error, scope.loop_vars)
        raised: Exception | None = None
        try:
            self._run(st.connection, scope, sql)
        except Unsupported:
            raise
        except Exception as exc:
            raised = exc
        if raised is None:
            if st.expect == "error":
                wanted = f" ({expected!r})" if expected else ""
                raise Failure(st.line, sql, f"statement succeeded, expected an error{wanted}")
            return
        message = _message(raised)
        if st.expect == "ok":
            raise Failure(st.line, sql, f"statement failed: {message}")
        if "INTERNAL Error" in message:
            raise Failure(st.line, sql, f"an internal error is never expected: {message}")
        if expected and not _error_matches(message, expected):
            raise Failure(st.line, sql, f"wrong error: expected {expected!r}, got {message}")

    def _query(self, query: Query, scope: _Scope) -> None:
        sql = self._substitute(query.sql, scope.loop_vars)
        expected = [self._substitute(line, scope.loop_vars) for line in query.expected]
        try:
            outcome = self._run(query.connection, scope, sql)
        except Unsupported:
            raise
        except Exception as exc:
            raise Failure(query.line, sql, f"query failed: {_message(exc)}") from None
        types = [typ for _, typ in outcome.columns]
        with self._lock:
            diff = compare(
                query.columns, query.sort, expected, types, outcome.rows, query.label, self.labels
            )
        if diff is not None:
            raise Failure(query.line, sql, f"wrong result: {diff}")
