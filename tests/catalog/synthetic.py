"""DuckLake-shaped row changes without DuckDB, for tests and benchmarks of the layers below DuckDB.

Each ``commit_changes`` call is what one DuckLake INSERT writes: a snapshot
and its changes row, a data file with per-column statistics, and table stats
updated in place. Shapes follow the measured churned lake in DESIGN.md
(about five column-stat rows per data file).
"""

from __future__ import annotations

import uuid

from slatelake.catalog import registry
from slatelake.catalog.changes import RowChanges
from slatelake.catalog.rows import Row, row_key
from slatelake.catalog.state import CatalogState

STATS_PER_FILE = 5
EPOCH_2026_US = 1_767_225_600_000_000  # TIMESTAMPTZ values are µs since the epoch


def genesis_changes() -> RowChanges:
    """The rows of DuckLake's initial snapshot: metadata, schema 'main', snapshot 0."""
    now = EPOCH_2026_US
    return (
        RowChanges()
        .insert(
            "ducklake_metadata", ("version", "1.0", None, None), ("data_path", "/d/", None, None)
        )
        .insert("ducklake_schema", (0, uuid.UUID(int=0), 0, None, "main", "main/", True))
        .insert("ducklake_snapshot", (0, now, 0, 1, 0))
        .insert("ducklake_snapshot_changes", (0, 'created_schema:"main"', None, None, None))
    )


def commit_changes(
    state: CatalogState, table_id: int = 1, rows: int = 10, message: str | None = None
) -> RowChanges:
    """One INSERT's worth of rows against ``state`` (ids follow the head)."""
    snap = state.head.snapshot_id + 1
    file_id = snap  # one file per snapshot keeps ids unique and never reused
    when = EPOCH_2026_US + snap * 1_000_000
    stats: list[Row] = [
        (file_id, table_id, col, 100 + col, rows, 0, str(col), str(col + rows), False, None)
        for col in range(1, STATS_PER_FILE + 1)
    ]
    stats_spec = registry.spec("ducklake_table_stats")
    current = state.get(row_key(stats_spec, (table_id, 0, 0, 0)))
    old_stats = [current] if current is not None else []
    changes = (
        RowChanges()
        .insert("ducklake_snapshot", (snap, when, 0, 2, file_id + 1))
        .insert(
            "ducklake_snapshot_changes",
            (snap, f"inserted_into_table:{table_id}", None, message, None),
        )
        .insert(
            "ducklake_data_file",
            (
                file_id,
                table_id,
                snap,
                None,
                None,
                f"t{table_id}/f{file_id}.parquet",
                True,
                "parquet",
                rows,
                1000 + rows,
                100,
                file_id * rows,
                None,
                None,
                None,
                None,
            ),
        )
        .insert("ducklake_file_column_stats", *stats)
        .insert("ducklake_table_stats", (table_id, snap * rows, snap * rows + rows, snap * 1000))
    )
    if old_stats:
        changes.delete("ducklake_table_stats", *old_stats)
    return changes


def commit_inserts(url: str, count: int, table_id: int) -> int:
    """Land ``count`` INSERT-shaped commits on a lake, re-validating after each
    lost race (what DuckLake's own retry loop does). Returns the races lost."""
    from slatelake.catalog.lake import Lake
    from slatelake.errors import ConflictError

    lost = 0
    with Lake.open(url) as lake:
        state = lake.materialize()
        done = 0
        while done < count:
            try:
                lake.commit(
                    state,
                    commit_changes(state, table_id, message=f"{table_id}:{done}"),
                    mints_snapshot=True,
                    changes_made=f"inserted_into_table:{table_id}:{done}",
                )
                done += 1
            except ConflictError:
                lost += 1
                lake.refresh(state)
    return lost
