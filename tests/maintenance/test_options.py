"""Maintenance options: the derivation rule, the pinned signatures, bind errors."""

from __future__ import annotations

import pytest

from slatelake.ducklake import extensions
from slatelake.maintenance.options import (
    DUCKLAKE_STEPS,
    MaintenanceConfigError,
    ducklake_signatures,
    parse_options,
)
from slatelake.store.keys import Subspace


@pytest.fixture(scope="module")
def signatures() -> dict[str, set[str]]:
    con = extensions.connect()
    try:
        return ducklake_signatures(con)
    finally:
        con.close()


def test_signatures_of_the_pinned_extension(signatures: dict[str, set[str]]) -> None:
    # A DuckLake bump that changes any of these must fail here, loudly.
    assert signatures == {
        "expire_snapshots": {"dry_run", "versions", "older_than"},
        "flush_inlined_data": set(),
        "merge_adjacent_files": {"max_compacted_files", "max_file_size", "min_file_size"},
        "rewrite_data_files": {"delete_threshold"},
        "cleanup_old_files": {"dry_run", "cleanup_all", "older_than"},
        "delete_orphaned_files": {"dry_run", "cleanup_all", "older_than"},
    }


def test_nothing_configured_configures_no_ducklake_step(signatures) -> None:  # noqa: ANN001
    opts = parse_options({}, signatures)
    assert not any(opts.configured(s) for s in DUCKLAKE_STEPS)
    assert opts.sweep_indexes and not opts.compact_store and opts.interval_s is None


def test_derivation_rule_enables_and_parameterizes(signatures) -> None:  # noqa: ANN001
    opts = parse_options(
        {
            "MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN": "7 days",
            "MAINTENANCE_CLEANUP_OLD_FILES_CLEANUP_ALL": "true",
            "META_MAINTENANCE_FLUSH_INLINED_DATA": "true",  # the RFC's spelling
            "maintenance_interval": "5m",
            "MAINTENANCE_COMPACT_STORE_SUBSPACE": "history",
        },
        signatures,
    )
    assert opts.steps["expire_snapshots"].params == {"older_than": "7 days"}
    assert opts.configured("expire_snapshots") and opts.configured("cleanup_old_files")
    assert opts.configured("flush_inlined_data") and not opts.configured("merge_adjacent_files")
    assert opts.interval_s == 300
    assert opts.compact_store and opts.compact_store_subspace is Subspace.HISTORY


@pytest.mark.parametrize(
    ("raw", "names"),
    [
        ({"MAINTENANCE_EXPIRE_SNAPSHOT": "true"}, "MAINTENANCE_EXPIRE_SNAPSHOT"),
        ({"MAINTENANCE_MERGE_ADJACENT_FILES_TARGET_SIZE": "1"}, "no parameter 'target_size'"),
        (
            {"MAINTENANCE_REWRITE_DATA_FILES_MAX_COMPACTED_FILES": "10"},
            "ducklake_rewrite_data_files on this DuckLake pin has no parameter "
            "'max_compacted_files'",
        ),
        ({"MAINTENANCE_INTERVAL": "0"}, "MAINTENANCE_INTERVAL='0': must be positive"),
        ({"MAINTENANCE_INTERVAL": "-5m"}, "MAINTENANCE_INTERVAL"),
        ({"MAINTENANCE_BATCH_SIZE": "0"}, "MAINTENANCE_BATCH_SIZE='0': must be positive"),
        ({"MAINTENANCE_COMPACT_STORE_TIMEOUT": "0s"}, "MAINTENANCE_COMPACT_STORE_TIMEOUT"),
        ({"MAINTENANCE_COMPACT_STORE_SUBSPACE": "curent"}, "unknown subspace 'curent'"),
        (
            {
                "MAINTENANCE_CLEANUP_OLD_FILES": "false",
                "MAINTENANCE_CLEANUP_OLD_FILES_OLDER_THAN": "1 day",
            },
            "MAINTENANCE_CLEANUP_OLD_FILES is false but its parameter",
        ),
        (
            {"MAINTENANCE_COMPACT_STORE": "false", "MAINTENANCE_COMPACT_STORE_TIMEOUT": "60"},
            "MAINTENANCE_COMPACT_STORE is false but its parameter",
        ),
        (
            {"MAINTENANCE_SWEEP_INDEXES": "no", "MAINTENANCE_BATCH_SIZE": "10"},
            "MAINTENANCE_SWEEP_INDEXES is false but its parameter",
        ),
        ({"MAINTENANCE_PROGRESS": "maybe"}, "MAINTENANCE_PROGRESS='maybe': expected true or false"),
        ({"VACUUM": "true"}, "unknown option 'VACUUM'"),
    ],
)
def test_misconfiguration_fails_at_bind_naming_the_option(
    signatures: dict[str, set[str]], raw: dict[str, str], names: str
) -> None:
    with pytest.raises(MaintenanceConfigError, match=names.replace("(", r"\(").replace(")", r"\)")):
        parse_options(raw, signatures)


def test_values_pass_through_unvalidated(signatures) -> None:  # noqa: ANN001
    opts = parse_options(
        {
            "MAINTENANCE_REWRITE_DATA_FILES_DELETE_THRESHOLD": "not-a-number",
            "MAINTENANCE_EXPIRE_SNAPSHOTS_VERSIONS": "[2,3]",
        },
        signatures,
    )
    assert opts.steps["rewrite_data_files"].params == {"delete_threshold": "not-a-number"}
    assert opts.steps["expire_snapshots"].params == {"versions": "[2,3]"}
