"""The shape issue 43 asked for stays: the session is composed, not a chain
of subclasses; frames are inspected only where DuckDB's replacement scans
need the caller's; maintenance changes its records through one retry helper.
Every file is parsed, never imported."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.fast

PACKAGE = Path(__file__).resolve().parents[1] / "layers" / "slatelake" / "slatelake"
SESSION_LAYER = (
    "ducklake/session.py",
    "ducklake/session_cursor.py",
    "ducklake/front.py",
    "ducklake/statement_flow.py",
    "ducklake/commit_flow.py",
    "ducklake/txn_state.py",
    "ducklake/copy_view.py",
    "ducklake/copy_queries.py",
    "maintenance/session.py",
)
# DuckDB resolves a Python name in SQL from the frame that called sql/execute.
FRAME_USERS = {
    ("ducklake/connection_api.py", name)
    for name in ("sql", "query", "from_query", "execute", "executemany")
}
# DuckDB's connection API, shared by the session classes: methods over the
# host's ``_statements`` (no __init__, no flow of its own; it keeps only the
# cursors it opened, to close them with the host); and a connection's way in
# to its statement runner, shared by a session and its cursors (``front.py``).
MIXINS = {"ConnectionApi", "RunnerFront"}


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def _our_classes() -> set[str]:
    return {
        node.name
        for path in PACKAGE.rglob("*.py")
        for node in ast.walk(_tree(path))
        if isinstance(node, ast.ClassDef)
    }


def test_no_session_class_inherits_from_another_of_ours() -> None:
    ours = _our_classes()
    found = []
    for rel in SESSION_LAYER:
        for node in ast.walk(_tree(PACKAGE / rel)):
            if isinstance(node, ast.ClassDef):
                bases = {ast.unparse(b).split(".")[-1] for b in node.bases}
                found += [f"{rel}: {node.name}({b})" for b in sorted(bases & ours - MIXINS)]
    assert not found, found


def test_a_mixin_has_no_init_of_its_own() -> None:
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ClassDef) and node.name in MIXINS:
                methods = {f.name for f in node.body if isinstance(f, ast.FunctionDef)}
                assert "__init__" not in methods, f"{node.name} has an __init__"


def test_frames_are_inspected_only_for_duckdbs_replacement_scans() -> None:
    found = set()
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).as_posix()
        for func in ast.walk(_tree(path)):
            if not isinstance(func, ast.FunctionDef):
                continue
            for node in ast.walk(func):
                if isinstance(node, ast.Attribute) and node.attr == "_getframe":
                    found.add((rel, func.name))
    assert found <= FRAME_USERS, found - FRAME_USERS


def test_no_retry_closure_smuggles_its_result_out_through_a_list() -> None:
    """``result = []`` ... ``result.append(x)`` in a closure ... ``return
    result[0]``: commit_retry.commit_with_retry returns what the attempt built."""
    found = []
    for path in PACKAGE.rglob("*.py"):
        for func in ast.walk(_tree(path)):
            if not isinstance(func, ast.FunctionDef):
                continue
            empty_lists = {
                t.id
                for node in ast.walk(func)
                if isinstance(node, ast.Assign | ast.AnnAssign)
                and isinstance(node.value, ast.List)
                and not node.value.elts
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
                if isinstance(t, ast.Name)
            }
            inner = [n for n in ast.walk(func) if isinstance(n, ast.FunctionDef) and n is not func]
            for node in ast.walk(func):
                if (
                    isinstance(node, ast.Return)
                    and isinstance(node.value, ast.Subscript)
                    and isinstance(node.value.value, ast.Name)
                    and node.value.value.id in empty_lists
                    and inner
                ):
                    found.append(f"{path.relative_to(PACKAGE)}: {func.name}")
    assert not found, found
