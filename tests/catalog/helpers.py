"""Drivers the catalog tests run in child processes."""

from __future__ import annotations

import sys

from slatelake.catalog.synthetic import commit_inserts

__all__ = ["commit_inserts"]

if __name__ == "__main__":
    print(commit_inserts(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
