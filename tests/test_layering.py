"""Dependencies point one way: store <- log <- catalog <- ducklake <- maintenance.

Every module of the package is parsed (never imported) and each import,
including ones inside functions and ``TYPE_CHECKING`` blocks, resolved to the
layer it lands in. ``errors``, ``durations`` and ``lazy`` are shared by all layers
(``errors`` imports nothing of slatelake, ``durations`` only ``errors``); the facade
(the package ``__init__``, ``handle``, ``admin``, ``demo``) and ``cli`` sit on top and
may import anything; the CLI and the Lambda import only the facade. Only
``store`` imports ``slatedb``; ``store``, ``log`` and ``catalog`` never import
``duckdb``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.fast

PACKAGE = Path(__file__).resolve().parents[1] / "layers" / "slatelake" / "slatelake"
ORDER = ("store", "log", "catalog", "ducklake", "maintenance")
SHARED = {"errors", "durations", "lazy"}
TOP = {"cli", "demo", "admin", "handle", "__init__"}
RANK = {"errors": 0, "durations": 0, "lazy": 0, **{layer: i + 1 for i, layer in enumerate(ORDER)}}
TOP_RANK = len(ORDER) + 1
NO_DUCKDB = {"store", "log", "catalog"}


@dataclass(frozen=True)
class Import:
    module: str  # the importing module, e.g. slatelake.catalog.rows
    target: str  # what it imports, resolved, e.g. slatelake.store.keys or duckdb.typing
    line: int

    def __str__(self) -> str:
        return f"{self.module}:{self.line} imports {self.target}"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


KNOWN = modules()


def layer_of(name: str) -> str:
    """The layer of a slatelake module: its subpackage, or its top-level module name."""
    parts = name.split(".")
    assert parts[0] == "slatelake", name
    if len(parts) == 1:
        return "__init__"
    return parts[1]


def rank_of(name: str) -> int:
    layer = layer_of(name)
    if layer in TOP:
        return TOP_RANK
    if layer not in RANK:
        raise AssertionError(f"{name}: layer {layer!r} has no place in {ORDER}; add it here")
    return RANK[layer]


def imports_of(name: str, path: Path) -> list[Import]:
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend(Import(name, alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                package = name.split(".")
                if not is_package:
                    package = package[:-1]
                base_parts = package[: len(package) - (node.level - 1)]
                base = ".".join([*base_parts, *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                out.append(Import(name, sub if sub in KNOWN else base, node.lineno))
    return out


ALL_IMPORTS = [imp for name, path in KNOWN.items() for imp in imports_of(name, path)]


def top_package(target: str) -> str:
    return target.split(".", 1)[0]


def test_the_scan_sees_every_layer_that_exists() -> None:
    for expected in ("slatelake.errors", "slatelake.store.keys", "slatelake.log.changeset"):
        assert expected in KNOWN
    assert "slatelake.catalog.rows" in KNOWN
    assert any(i.target == "slatelake.store.keys" for i in ALL_IMPORTS)
    assert any(top_package(i.target) == "slatedb" for i in ALL_IMPORTS)


@pytest.mark.parametrize("name", sorted(KNOWN))
def test_every_module_has_a_layer(name: str) -> None:
    layer = layer_of(name)
    assert layer in TOP or layer in RANK, f"{name}: assign layer {layer!r} a place in {ORDER}"


def test_no_module_imports_a_layer_above_its_own() -> None:
    upward = [
        str(imp)
        for imp in ALL_IMPORTS
        if top_package(imp.target) == "slatelake" and rank_of(imp.target) > rank_of(imp.module)
    ]
    assert not upward, "upward imports:\n" + "\n".join(upward)


def test_shared_modules_import_nothing_of_slatelake_but_errors() -> None:
    inward = [
        str(imp)
        for imp in ALL_IMPORTS
        if layer_of(imp.module) in SHARED
        and top_package(imp.target) == "slatelake"
        and (layer_of(imp.module) == "errors" or imp.target != "slatelake.errors")
    ]
    assert not inward, "\n".join(inward)


def test_only_store_imports_slatedb() -> None:
    outside = [
        str(imp)
        for imp in ALL_IMPORTS
        if top_package(imp.target) == "slatedb" and layer_of(imp.module) != "store"
    ]
    assert not outside, "slatedb outside store:\n" + "\n".join(outside)


def test_store_log_and_catalog_never_import_duckdb() -> None:
    found = [
        str(imp)
        for imp in ALL_IMPORTS
        if layer_of(imp.module) in NO_DUCKDB
        and (top_package(imp.target) == "duckdb" or top_package(imp.target).startswith("duckdb_"))
    ]
    assert not found, "duckdb below the bridge:\n" + "\n".join(found)


def _cycles_within_packages() -> list[list[str]]:
    """Groups of modules of one package that import each other, directly or
    round about (strongly connected components of more than one module)."""
    graph: dict[str, set[str]] = {name: set() for name in KNOWN}
    for imp in ALL_IMPORTS:
        if imp.target not in KNOWN or imp.target == imp.module:
            continue
        if layer_of(imp.module) == layer_of(imp.target):
            graph[imp.module].add(imp.target)
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        order[node] = low[node] = len(order)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in order:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], order[nxt])
        if low[node] == order[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for name in sorted(graph):
        if name not in order:
            visit(name)
    return groups


def test_no_package_has_an_import_cycle() -> None:
    groups = _cycles_within_packages()
    assert not groups, "modules that import each other:\n" + "\n".join(map(str, groups))


# The CLI and the Lambda reach the library through its facade only: ``slatelake``
# (``open``, sessions, the requests and reports, errors), ``slatelake.admin`` (the
# holder process, images, export and import) and the one duration grammar.
CLI_API = {"slatelake", "slatelake.admin", "slatelake.durations"}
FUNCTIONS = Path(__file__).resolve().parents[1] / "functions"


def test_the_cli_reaches_the_library_only_through_its_apis() -> None:
    beside = [
        str(imp)
        for imp in ALL_IMPORTS
        if layer_of(imp.module) == "cli"
        and top_package(imp.target) == "slatelake"
        and imp.target not in CLI_API
        and layer_of(imp.target) != "cli"
    ]
    assert not beside, "CLI imports past its APIs:\n" + "\n".join(beside)


def test_the_lambda_reaches_the_library_only_through_its_facade() -> None:
    beside = []
    for path in sorted(FUNCTIONS.rglob("*.py")):
        for imp in imports_of(path.stem, path):
            if top_package(imp.target) == "slatelake" and imp.target not in CLI_API:
                beside.append(f"{path.relative_to(FUNCTIONS)}:{imp.line} imports {imp.target}")
    assert not beside, "the Lambda imports past the facade:\n" + "\n".join(beside)
