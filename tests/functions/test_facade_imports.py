"""The Lambda calls slatelake's facade and nothing below it.

Every module under functions/ may import ``slatelake`` and use only the names
it exports (``slatelake.__all__``: ``open``, ``connect``, the errors, the
request and report types, ``store_deadline``), plus ``slatelake.durations``.
Powertools settings come from the environment the template sets, never from
the code.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import slatelake
from tests.functions.conftest import ROOT

SOURCES = sorted((ROOT / "functions").rglob("*.py"))
ALLOWED_MODULES = {"slatelake", "slatelake.durations"}
EXPORTS = {"slatelake": set(slatelake.__all__)}


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def _problems(path: Path) -> list[str]:
    """Imports of slatelake other than the facade, and names used from
    ``slatelake`` that it does not export."""
    out: list[str] = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "slatelake" and alias.name not in ALLOWED_MODULES:
                    out.append(f"line {node.lineno}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "slatelake":
            if node.module == "slatelake":
                out += [
                    f"line {node.lineno}: from slatelake import {a.name} (not exported)"
                    for a in node.names
                    if a.name not in EXPORTS["slatelake"]
                ]
            elif node.module not in ALLOWED_MODULES:
                out += [
                    f"line {node.lineno}: from {node.module} import {a.name}" for a in node.names
                ]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            module = node.value.id
            if module in EXPORTS and node.attr not in EXPORTS[module]:
                out.append(f"line {node.lineno}: {module}.{node.attr} (not exported)")
    return out


def test_the_lambda_sources_are_found() -> None:
    names = {p.name for p in SOURCES}
    assert {"app.py", "invocation.py", "registry.py", "telemetry.py"} <= names


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_the_lambda_imports_only_the_facade_and_its_exports(path: Path) -> None:
    assert _problems(path) == []


def test_the_import_check_refuses_an_internal_module(tmp_path: Path) -> None:
    """The check above can fail: a handler reaching below the facade is named."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import slatelake.store.db\n"
        "from slatelake.catalog.lake import Lake\n"
        "from slatelake.maintenance import run_pass\n"
        "from slatelake import maintenance\n"
        "slatelake.maintenance.run\n"
        "from slatelake.durations import parse_duration\n"
        "from slatelake import PassRequest\n"
    )
    lines = sorted(int(p.split(":")[0].removeprefix("line ")) for p in _problems(bad))
    assert lines == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_powertools_service_and_namespace_come_from_the_environment(path: Path) -> None:
    """Logger(...) and Metrics(...) name no service or namespace: the
    template's POWERTOOLS_SERVICE_NAME / POWERTOOLS_METRICS_NAMESPACE hold."""
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("Logger", "Metrics"):
            assert not {k.arg for k in node.keywords} & {"service", "namespace"}, node.lineno
