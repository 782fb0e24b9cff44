"""Names a package exports but imports only when first asked for.

The facade and ``slatelake.maintenance`` export their verbs and types from
the modules that define them; importing each at package import would load
DuckDB for a Lambda cold start or a ``--help`` that never needs it. A
package keeps a table of name -> (module, attribute) and hands this module's
``attribute`` its ``__getattr__`` (PEP 562).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_getattr(
    package: str, table: Mapping[str, tuple[str, str]], namespace: dict[str, Any]
) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports ``table``'s names on first use
    and keeps each in ``namespace`` (the package's globals), so the next
    lookup is an ordinary one."""

    def attribute(name: str) -> Any:
        found = table.get(name)
        if found is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(found[0]), found[1])
        namespace[name] = value
        return value

    return attribute
