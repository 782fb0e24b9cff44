"""The architecture map names every module, so a newcomer finds each one's
job there (a new module without a line in the map fails here)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "layers" / "slatelake" / "slatelake"
MAP = ROOT / "docs" / "architecture.md"


def _modules() -> list[str]:
    found = [p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py")]
    found += [p.relative_to(ROOT).as_posix() for p in (ROOT / "functions").rglob("*.py")]
    return sorted(m for m in found if "__pycache__" not in m)


def test_every_module_is_named_in_the_architecture_map() -> None:
    text = MAP.read_text()
    missing = [m for m in _modules() if f"`{m}`" not in text]
    assert not missing, f"add a line for each to docs/architecture.md: {missing}"


def test_the_map_is_a_map() -> None:
    """A page a newcomer reads: design arguments live in docs/decisions/."""
    assert len(MAP.read_text().splitlines()) <= 330
