"""Drivers the catalog tests run in child processes, and helpers they share."""

from __future__ import annotations

import os
import sys

from slatelake.catalog.folder import Folder
from slatelake.store.location import LakeLocation
from tests.catalog.synthetic import commit_inserts

__all__ = ["commit_inserts", "fold_all"]


def fold_all(url: str) -> None:
    """Fold, then truncate everything no live lease pins (margin 0)."""
    folder = Folder(LakeLocation.parse(url), margin_s=0)
    try:
        folder.fold_once()
    finally:
        folder.close()


if __name__ == "__main__":
    print(commit_inserts(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
    # Every commit is in and reported. Native threads now and then abort the
    # interpreter's teardown (SIGABRT) after the work is done, the at-exit
    # defect ``slatelake.cli.run`` also steps around: leave without teardown.
    sys.stdout.flush()
    os._exit(0)
