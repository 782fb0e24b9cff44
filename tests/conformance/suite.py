"""Where DuckLake's test files are, and which of them a run takes.

The suite root (``SLATELAKE_CONFORMANCE_ROOT``, default ``../shared/conformance``
beside the repository) holds ``ducklake/test/sql/...`` and the file lists
(``selected.txt`` and others: one suite path per line). A selection names suite
paths or directory prefixes, with or without ``test/sql/`` and ``.test``:
``transaction`` is every listed file under ``test/sql/transaction/``. A name that
matches nothing is refused, naming it, rather than selecting nothing.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

ROOT_ENV = "SLATELAKE_CONFORMANCE_ROOT"
REPO = Path(__file__).resolve().parents[2]
DEFAULT_LIST = "selected.txt"


class SelectionError(Exception):
    """The suite is missing, or a list or a selected name does not exist."""


@dataclass(frozen=True)
class Suite:
    root: Path

    @classmethod
    def locate(cls) -> Suite:
        value = os.environ.get(ROOT_ENV)
        if value:
            return cls(Path(value).resolve())
        return cls((REPO.parent / "shared" / "conformance").resolve())

    @property
    def files_dir(self) -> Path:
        return self.root / "ducklake"

    def present(self) -> bool:
        return self.files_dir.is_dir()

    def path(self, name: str) -> Path:
        return self.files_dir / name

    def listed(self, list_file: Path | None = None) -> list[str]:
        """The suite paths a list file names (default: the suite's selected.txt)."""
        if not self.present():
            raise SelectionError(
                f"no DuckLake test suite at {self.root} (expected {self.files_dir}); "
                f"set {ROOT_ENV} to the directory holding ducklake/ and selected.txt"
            )
        source = list_file if list_file is not None else self.root / DEFAULT_LIST
        if not source.is_file():
            raise SelectionError(f"file list {source} does not exist")
        lines = (ln.strip() for ln in source.read_text().splitlines())
        return [ln for ln in lines if ln and not ln.startswith("#")]

    def select(self, names: list[str], patterns: Iterable[str]) -> list[str]:
        """The listed files matching any pattern, in list order; files the list
        lacks may be named by their full path."""
        chosen: list[str] = []
        for raw in patterns:
            pattern = normalized(raw)
            if not pattern:
                continue
            found = [n for n in names if _matches(n, pattern)]
            if not found:
                for candidate in (pattern, pattern + ".test"):
                    if self.path(candidate).is_file():
                        found = [candidate]
                        break
            if not found:
                raise SelectionError(
                    f"--files {raw!r} matches no listed file (looked for {pattern!r} "
                    f"under {self.files_dir})"
                )
            chosen.extend(n for n in found if n not in chosen)
        order = {n: k for k, n in enumerate(names)}
        return sorted(chosen, key=lambda n: order.get(n, len(order)))


def normalized(pattern: str) -> str:
    """``transaction`` -> ``test/sql/transaction``; a path is kept as it is."""
    text = pattern.strip().removeprefix("./").removeprefix("ducklake/").rstrip("/")
    if text and not text.startswith("test/"):
        text = "test/sql/" + text
    return text


def _matches(name: str, pattern: str) -> bool:
    return name in (pattern, pattern + ".test") or name.startswith(pattern + "/")
