"""Verbs for the store work (census, compact-store / index); registered by main."""

from __future__ import annotations

from typing import Any


def register(sub: Any) -> None:
    """Adds no verbs until the work lands."""
