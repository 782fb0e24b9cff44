"""A writer process for the orphan race: transactions of two INSERT batches
into its own table, a pause between them (a write whose first files wait
uncommitted longer than any clock allowance), until its time is up; prints
the rows it got acknowledged.

python -m tests.maintenance.writer_proc URL TABLE SECONDS ROWS
"""

from __future__ import annotations

import sys
import time

import slatelake

PAUSE_S = 1.5


def main(url: str, table: str, seconds: float, rows: int) -> None:
    acknowledged = 0
    with slatelake.connect(url) as session:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            with session.transaction():
                for _ in range(2):
                    session.sql(
                        f"INSERT INTO {table} SELECT i, repeat('x', 20) FROM range(?) r(i)", [rows]
                    )
                    time.sleep(PAUSE_S)
            acknowledged += 2 * rows
    print(acknowledged)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]))
