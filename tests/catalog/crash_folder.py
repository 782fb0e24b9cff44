"""A folder that dies (os._exit) at the Nth time it reaches a crash boundary."""

from __future__ import annotations

import os
import sys

from slatelake.catalog.folder import Folder
from slatelake.store.location import LakeLocation


def main(url: str, boundary: str, nth: int, batch_ops: int) -> None:
    seen = 0

    def fault(at: str) -> None:
        nonlocal seen
        if at == boundary:
            seen += 1
            if seen == nth:
                os._exit(9)

    folder = Folder(LakeLocation.parse(url), margin_s=0, batch_ops=batch_ops, fault=fault)
    folder.fold_once()
    folder.close()
    os._exit(0)  # the boundary was never reached


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
