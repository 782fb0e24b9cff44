"""What a user imports from ``slatelake``: every error they catch, ``retry``,
``connect`` typed as returning a ``Session``, a package marked typed, and
duckdb left unimported until a session is opened (the Lambda's cold start)."""

from __future__ import annotations

import inspect
import subprocess
import sys
import typing
from pathlib import Path

import pytest

import slatelake
from slatelake import errors

PACKAGE = Path(slatelake.__file__).parent


def _error_classes() -> set[type]:
    found = set()
    for module in (errors,):
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, errors.SlatelakeError):
                found.add(value)
    return found


def test_every_slatelake_error_is_importable_from_the_top_level() -> None:
    missing = sorted(
        c.__name__ for c in _error_classes() if getattr(slatelake, c.__name__, None) is not c
    )
    assert not missing, f"not exported from slatelake: {missing}"
    assert set(slatelake.__all__) >= {c.__name__ for c in _error_classes()}


def test_no_error_class_is_defined_outside_the_errors_module() -> None:
    """One error model: a class a caller catches lives in slatelake.errors."""
    strays = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for line in path.read_text().splitlines():
            is_error = "Error(" in line or "Exception(" in line
            if line.startswith("class ") and is_error and path.name != "errors.py":
                strays.append(f"{path.relative_to(PACKAGE)}: {line}")
    assert not strays, "\n".join(strays)


def test_retry_reruns_a_conflict_and_nothing_else() -> None:
    calls = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise slatelake.ConflictError("lost a race")
        return "done"

    assert slatelake.retry(flaky, attempts=5, backoff_s=0.0) == "done"
    assert len(calls) == 3

    def broken() -> None:
        calls.append(1)
        raise slatelake.MisconfigurationError("bad option")

    calls.clear()
    with pytest.raises(slatelake.MisconfigurationError):
        slatelake.retry(broken, attempts=5, backoff_s=0.0)
    assert len(calls) == 1


def test_connect_is_typed_to_return_a_session() -> None:
    import duckdb

    names = vars(slatelake) | {"Session": slatelake.Session, "duckdb": duckdb}
    hints = typing.get_type_hints(slatelake.connect, names)
    assert hints["return"] is slatelake.Session
    assert hasattr(slatelake.Session, "sql") and hasattr(slatelake.Session, "maintenance")


def test_the_package_is_marked_typed() -> None:
    assert (PACKAGE / "py.typed").is_file()
    pyproject = (PACKAGE.parents[2] / "pyproject.toml").read_text()
    assert 'slatelake = ["py.typed"]' in pyproject  # shipped with the package


def test_public_names_have_docstrings() -> None:
    undocumented = [n for n in ("connect", "retry") if not inspect.getdoc(getattr(slatelake, n))]
    for name in ("sql", "execute", "executemany", "register", "transaction", "maintenance"):
        if not inspect.getdoc(getattr(slatelake.Session, name)):
            undocumented.append(f"Session.{name}")
    assert not undocumented


def test_importing_slatelake_leaves_duckdb_unimported() -> None:
    code = "import sys, slatelake; slatelake.retry; print('duckdb' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
