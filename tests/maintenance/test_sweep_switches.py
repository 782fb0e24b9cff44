"""One switch per sweep: index entries, file statistics and inlined tables are
each turned off on their own, and the RFC's one switch still turns off all three."""

from __future__ import annotations

from pathlib import Path

import pytest

from slatelake.catalog.changes import RowChanges
from slatelake.catalog.lake import Lake
from slatelake.catalog.state import CatalogState
from slatelake.catalog.sweep import SweepRequest, sweep
from slatelake.maintenance.options import MaintenanceConfigError, parse_options
from tests.catalog.index_rows import (
    add_table,
    create_index,
    drop_index,
    fold,
    new_lake,
    store_index_keys,
)
from tests.catalog.synthetic import commit_changes


def _damaged_lake(url: str) -> tuple[Lake, CatalogState]:
    """A lake holding one of each orphan: a dropped index's entries, statistics
    of a file absent everywhere, and the inlined table of an absent table."""
    lake, state = new_lake(url)
    t = add_table(lake, state, "t")
    lake.commit(state, commit_changes(state, t), mints_snapshot=True)
    drop_index(lake, state, create_index(lake, state, t, 1, 20))
    damage = RowChanges().insert(
        "ducklake_file_column_stats",
        *[(9_000, 77, c, 1, 1, 0, "1", "2", False, None) for c in (1, 2)],
    )
    gone = "ducklake_inlined_data_77_1"
    damage.created_inline[gone] = [(c, "BIGINT") for c in ("row_id", "begin_snapshot", "a")]
    damage.insert(gone, (0, 1, 5)).insert("ducklake_inlined_data_tables", (77, gone, 1))
    lake.commit(state, damage, mints_snapshot=False)
    fold(url)
    return lake, state


def _orphans(url: str, state: CatalogState) -> dict[str, int]:
    return {
        "index_entries": len(store_index_keys(url)),
        "file_stats": sum(1 for r in state.rows("ducklake_file_column_stats") if r[0] == 9_000),
        "inlined_tables": len(state.inline_ddl()),
    }


@pytest.mark.parametrize("only", ["index_entries", "file_stats", "inlined_tables"])
def test_each_sweep_reclaims_only_its_own_orphans(tmp_path: Path, only: str) -> None:
    url = (tmp_path / "lake").as_uri()
    lake, state = _damaged_lake(url)
    with lake:
        before = _orphans(url, state)
        assert all(before.values()), before
        switches = {name: name == only for name in before}
        report = sweep(lake, SweepRequest(**switches, pace_s=0), state)
        fold(url)
        after = _orphans(url, state)
    assert after[only] == 0
    assert {k: v for k, v in after.items() if k != only} == {
        k: v for k, v in before.items() if k != only
    }
    reclaimed = {
        "index_entries": report.index_entries_reclaimed,
        "file_stats": report.file_column_stats_reclaimed,
        "inlined_tables": report.inlined_tables_reclaimed,
    }
    assert reclaimed == {
        "index_entries": 20 if only == "index_entries" else 0,
        "file_stats": 2 if only == "file_stats" else 0,
        "inlined_tables": 1 if only == "inlined_tables" else 0,
    }


def test_the_rfc_switch_alone_turns_off_all_three_sweeps(
    signatures: dict[str, dict[str, str]],
) -> None:
    off = parse_options({"MAINTENANCE_SWEEP_INDEXES": "false"}, signatures)
    assert (off.sweep_indexes, off.sweep_file_stats, off.sweep_inlined_tables) == (
        False,
        False,
        False,
    )
    default = parse_options({}, signatures)
    assert (default.sweep_indexes, default.sweep_file_stats, default.sweep_inlined_tables) == (
        True,
        True,
        True,
    )


def test_a_sweep_switch_given_on_its_own_overrides_the_rfc_switch(
    signatures: dict[str, dict[str, str]],
) -> None:
    options = parse_options(
        {"MAINTENANCE_SWEEP_INDEXES": "false", "MAINTENANCE_SWEEP_INLINED_TABLES": "true"},
        signatures,
    )
    assert (options.sweep_indexes, options.sweep_file_stats, options.sweep_inlined_tables) == (
        False,
        False,
        True,
    )
    only_stats_off = parse_options({"MAINTENANCE_SWEEP_FILE_STATS": "no"}, signatures)
    assert (only_stats_off.sweep_indexes, only_stats_off.sweep_file_stats) == (True, False)
    # A batch size is fine while one sweep is on, refused when none is.
    parse_options(
        {
            "MAINTENANCE_SWEEP_INDEXES": "false",
            "MAINTENANCE_SWEEP_FILE_STATS": "true",
            "MAINTENANCE_BATCH_SIZE": "10",
        },
        signatures,
    )
    with pytest.raises(MaintenanceConfigError, match="every sweep is off .*BATCH_SIZE is given"):
        parse_options(
            {"MAINTENANCE_SWEEP_INDEXES": "false", "MAINTENANCE_BATCH_SIZE": "10"}, signatures
        )
