"""The Lambda layer installs exactly what the package declares, pinned exactly.

``layers/slatelake/requirements.txt`` (what SAM builds the layer from) must
list the same runtime dependencies as ``pyproject.toml``, every one pinned
with ``==``, and DuckDB and its two extension wheels at one version: an
extension built for another DuckDB refuses to load.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parents[1]
PIN = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]+\])?==(?P<version>[^\s=<>!~,;]+)$")


def declared() -> list[str]:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return list(tomllib.load(f)["project"]["dependencies"])


def layer_requirements() -> list[str]:
    lines = (ROOT / "layers" / "slatelake" / "requirements.txt").read_text().splitlines()
    out = []
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if line:
            out.append(line)
    return out


def pins() -> dict[str, str]:
    out = {}
    for requirement in declared():
        match = PIN.match(requirement)
        assert match, requirement
        out[match["name"].lower().replace("_", "-")] = match["version"]
    return out


def test_layer_requirements_equal_the_declared_dependencies() -> None:
    assert layer_requirements() == declared()


def test_every_runtime_dependency_is_pinned_exactly() -> None:
    loose = [r for r in declared() if not PIN.match(r)]
    assert not loose, f"pin these with ==: {loose}"
    assert declared(), "no runtime dependencies declared"


def test_duckdb_and_its_extension_wheels_share_one_version() -> None:
    versions = pins()
    trio = ("duckdb", "duckdb-extension-ducklake", "duckdb-extension-httpfs")
    assert all(name in versions for name in trio), versions
    assert len({versions[name] for name in trio}) == 1, {n: versions[n] for n in trio}
