"""Maintenance options: the derivation rule, the pinned signatures, bind errors."""

from __future__ import annotations

import duckdb
import pytest

from slatelake.maintenance.options import (
    DUCKLAKE_STEPS,
    MaintenanceConfigError,
    parse_options,
)
from slatelake.store.keys import Subspace

pytestmark = pytest.mark.fast


def test_signatures_of_the_pinned_extension(signatures: dict[str, dict[str, str]]) -> None:
    # A DuckLake bump that changes any name or type must fail here, loudly.
    tz = "TIMESTAMP WITH TIME ZONE"
    assert signatures == {
        "expire_snapshots": {"dry_run": "BOOLEAN", "versions": "UBIGINT[]", "older_than": tz},
        "flush_inlined_data": {},
        "merge_adjacent_files": {
            "max_compacted_files": "UBIGINT",
            "max_file_size": "UBIGINT",
            "min_file_size": "UBIGINT",
        },
        "rewrite_data_files": {"delete_threshold": "DOUBLE"},
        "cleanup_old_files": {"dry_run": "BOOLEAN", "cleanup_all": "BOOLEAN", "older_than": tz},
        "delete_orphaned_files": {"dry_run": "BOOLEAN", "cleanup_all": "BOOLEAN", "older_than": tz},
    }


def test_nothing_configured_configures_no_ducklake_step(signatures) -> None:  # noqa: ANN001
    opts = parse_options({}, signatures)
    assert not any(opts.configured(s) for s in DUCKLAKE_STEPS)
    assert opts.sweep_indexes and not opts.compact_store and opts.interval_s is None


def test_derivation_rule_enables_and_parameterizes(signatures) -> None:  # noqa: ANN001
    from slatelake.maintenance.option_values import Interval

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
    assert opts.steps["expire_snapshots"].params == {"older_than": Interval("7 days", 604800.0)}
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
            "every sweep is off",
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


# Spellings to hold against DuckDB's own BOOLEAN cast: what it reads, what it refuses.
BOOLEAN_SPELLINGS = (
    *("true", "TRUE", "True", "t", "T", "yes", "YES", "y", "Y", "1"),
    *("false", "FALSE", "f", "F", "no", "NO", "n", "N", "0"),
    *(" true", "true ", "\t1\n", " f "),
    *("on", "off", "2", "-1", "01", "1.0", "tru", "ye", "nope", "", " ", "null", "+1"),
)


def test_booleans_are_read_exactly_as_duckdb_casts_them(signatures) -> None:  # noqa: ANN001
    # The real DuckDB decides: a spelling it casts (trimmed) is that boolean;
    # one it refuses is refused at bind, naming the option.
    con = duckdb.connect()
    try:
        for spelling in BOOLEAN_SPELLINGS:
            cast = con.execute("SELECT TRY_CAST(trim(?, ' \t\n\r') AS BOOLEAN)", [spelling])
            expected = cast.fetchone()[0]
            for option, step, param in (
                ("MAINTENANCE_EXPIRE_SNAPSHOTS_DRY_RUN", "expire_snapshots", "dry_run"),
                ("MAINTENANCE_CLEANUP_OLD_FILES_CLEANUP_ALL", "cleanup_old_files", "cleanup_all"),
            ):
                if expected is None:
                    with pytest.raises(MaintenanceConfigError, match=option):
                        parse_options({option: spelling}, signatures)
                    continue
                value = parse_options({option: spelling}, signatures).steps[step].params[param]
                assert value is expected, (option, spelling)
            if expected is not None:  # slatelake's own switches read the same set
                opts = parse_options({"MAINTENANCE_TABLE_BATCHES": spelling}, signatures)
                assert opts.table_batches is expected, spelling
    finally:
        con.close()


def test_parameter_values_are_typed_at_bind(signatures) -> None:  # noqa: ANN001
    from slatelake.maintenance.option_values import Instant, Interval, Versions

    opts = parse_options(
        {
            "MAINTENANCE_EXPIRE_SNAPSHOTS_DRY_RUN": "1",
            "MAINTENANCE_EXPIRE_SNAPSHOTS_VERSIONS": "[3, 2,3]",
            "MAINTENANCE_MERGE_ADJACENT_FILES_MAX_COMPACTED_FILES": " 10 ",
            "MAINTENANCE_MERGE_ADJACENT_FILES_MIN_FILE_SIZE": "0",
            "MAINTENANCE_REWRITE_DATA_FILES_DELETE_THRESHOLD": "0.25",
            "MAINTENANCE_CLEANUP_OLD_FILES_OLDER_THAN": "1 hour 30 minutes",
            "MAINTENANCE_DELETE_ORPHANED_FILES_OLDER_THAN": "2024-01-01T10:00:00+09:00",
        },
        signatures,
    )
    expire = opts.steps["expire_snapshots"].params
    assert expire["dry_run"] is True
    # A list spelled as a string stays a list of exactly the named versions.
    assert expire["versions"] == Versions((2, 3)) and expire["versions"].text == "[2,3]"
    merge = opts.steps["merge_adjacent_files"].params
    assert merge == {"max_compacted_files": 10, "min_file_size": 0}
    assert type(merge["max_compacted_files"]) is int
    assert opts.steps["rewrite_data_files"].params == {"delete_threshold": 0.25}
    assert opts.steps["cleanup_old_files"].params["older_than"] == Interval("01:30:00", 5400.0)
    # A point in time is pinned to UTC at bind, whatever zone the host runs in.
    orphans = opts.steps["delete_orphaned_files"].params["older_than"]
    assert orphans == Instant("2024-01-01 01:00:00+00")


def test_a_timestamp_without_an_offset_is_read_as_utc(signatures) -> None:  # noqa: ANN001
    from slatelake.maintenance.option_values import Instant

    raw = {"MAINTENANCE_CLEANUP_OLD_FILES_OLDER_THAN": "2024-03-10 02:30"}
    opts = parse_options(raw, signatures)
    assert opts.steps["cleanup_old_files"].params["older_than"] == Instant("2024-03-10 02:30:00+00")


@pytest.mark.parametrize(
    ("raw", "names"),
    [
        # integers: DuckLake's UBIGINT, and its own lower bounds
        (
            {"MAINTENANCE_MERGE_ADJACENT_FILES_MAX_COMPACTED_FILES": "-1"},
            "MAX_COMPACTED_FILES='-1'",
        ),
        (
            {"MAINTENANCE_MERGE_ADJACENT_FILES_MAX_COMPACTED_FILES": str(2**64)},
            "MAX_COMPACTED_FILES='18446744073709551616'",
        ),
        ({"MAINTENANCE_MERGE_ADJACENT_FILES_MAX_COMPACTED_FILES": "0"}, "MAX_COMPACTED_FILES='0'"),
        ({"MAINTENANCE_MERGE_ADJACENT_FILES_MAX_FILE_SIZE": "0"}, "MAX_FILE_SIZE='0'"),
        ({"MAINTENANCE_MERGE_ADJACENT_FILES_MIN_FILE_SIZE": str(2**64 - 1)}, "MIN_FILE_SIZE="),
        ({"MAINTENANCE_MERGE_ADJACENT_FILES_MAX_COMPACTED_FILES": "1.5"}, "MAX_COMPACTED_FILES"),
        ({"MAINTENANCE_MERGE_ADJACENT_FILES_MAX_COMPACTED_FILES": "1e3"}, "MAX_COMPACTED_FILES"),
        ({"MAINTENANCE_MERGE_ADJACENT_FILES_MAX_COMPACTED_FILES": "ten"}, "MAX_COMPACTED_FILES"),
        (
            {
                "MAINTENANCE_MERGE_ADJACENT_FILES_MIN_FILE_SIZE": "100",
                "MAINTENANCE_MERGE_ADJACENT_FILES_MAX_FILE_SIZE": "100",
            },
            "MIN_FILE_SIZE=100 must be below MAINTENANCE_MERGE_ADJACENT_FILES_MAX_FILE_SIZE=100",
        ),
        # doubles: finite, and delete_threshold within DuckLake's 0..1
        ({"MAINTENANCE_REWRITE_DATA_FILES_DELETE_THRESHOLD": "nan"}, "DELETE_THRESHOLD='nan'"),
        ({"MAINTENANCE_REWRITE_DATA_FILES_DELETE_THRESHOLD": "inf"}, "DELETE_THRESHOLD='inf'"),
        ({"MAINTENANCE_REWRITE_DATA_FILES_DELETE_THRESHOLD": "-inf"}, "DELETE_THRESHOLD"),
        ({"MAINTENANCE_REWRITE_DATA_FILES_DELETE_THRESHOLD": "1e999"}, "DELETE_THRESHOLD"),
        ({"MAINTENANCE_REWRITE_DATA_FILES_DELETE_THRESHOLD": "1.5"}, "between 0 and 1"),
        ({"MAINTENANCE_REWRITE_DATA_FILES_DELETE_THRESHOLD": "-0.1"}, "between 0 and 1"),
        ({"MAINTENANCE_REWRITE_DATA_FILES_DELETE_THRESHOLD": "not-a-number"}, "DELETE_THRESHOLD"),
        # older_than: an interval (not negative, bounded) or a finite timestamp
        ({"MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN": "not a timestamp"}, "OLDER_THAN='not a"),
        ({"MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN": "-1 hour"}, "OLDER_THAN='-1 hour'"),
        ({"MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN": "1 month -40 days"}, "OLDER_THAN"),
        ({"MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN": "999999 years"}, "OLDER_THAN='999999"),
        ({"MAINTENANCE_CLEANUP_OLD_FILES_OLDER_THAN": "infinity"}, "OLDER_THAN='infinity'"),
        ({"MAINTENANCE_CLEANUP_OLD_FILES_OLDER_THAN": ""}, "OLDER_THAN=''"),
        # versions: a non-empty list of snapshot ids, nothing DuckDB would round or null
        ({"MAINTENANCE_EXPIRE_SNAPSHOTS_VERSIONS": "[]"}, "VERSIONS='\\[\\]'"),
        ({"MAINTENANCE_EXPIRE_SNAPSHOTS_VERSIONS": "[-1]"}, "VERSIONS"),
        ({"MAINTENANCE_EXPIRE_SNAPSHOTS_VERSIONS": "[1.5]"}, "VERSIONS"),
        ({"MAINTENANCE_EXPIRE_SNAPSHOTS_VERSIONS": "['2']"}, "VERSIONS"),
        ({"MAINTENANCE_EXPIRE_SNAPSHOTS_VERSIONS": "2,3"}, "VERSIONS"),
        ({"MAINTENANCE_EXPIRE_SNAPSHOTS_VERSIONS": f"[{2**64}]"}, "VERSIONS"),
        # a NUL byte, in a value or in a name
        ({"MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN": "1 day\x00'; DROP"}, "NUL byte"),
        ({"MAINTENANCE_COMPACT_STORE_SUBSPACE": "history\x00"}, "NUL byte"),
        ({"MAINTENANCE_FLUSH_INLINED_DATA\x00": "true"}, "NUL byte"),
        # durations: bounded, so no timer ever overflows
        ({"MAINTENANCE_INTERVAL": "99999999999 days"}, "MAINTENANCE_INTERVAL='99999999999 days'"),
        ({"MAINTENANCE_INTERVAL": "400 days"}, "at most 7d"),
        ({"MAINTENANCE_COMPACT_STORE_TIMEOUT": "400 days"}, "at most 365d"),
        ({"MAINTENANCE_INTERVAL": "1" * 400}, "MAINTENANCE_INTERVAL"),
        ({"MAINTENANCE_COMPACT_STORE_TIMEOUT": "9999999999"}, "MAINTENANCE_COMPACT_STORE_TIMEOUT"),
        ({"MAINTENANCE_BATCH_SIZE": str(2**64)}, "MAINTENANCE_BATCH_SIZE"),
    ],
)
def test_bad_values_are_refused_at_bind_naming_the_option(
    signatures: dict[str, dict[str, str]], raw: dict[str, str], names: str
) -> None:
    with pytest.raises(MaintenanceConfigError, match=names):
        parse_options(raw, signatures)


@pytest.mark.parametrize(
    "raw",
    [
        {
            "MAINTENANCE_EXPIRE_SNAPSHOTS_DRY_RUN": "true",
            "META_MAINTENANCE_EXPIRE_SNAPSHOTS_DRY_RUN": "0",
        },
        {"MAINTENANCE_INTERVAL": "5m", "maintenance_interval": "10m"},
        {"MAINTENANCE_CLEANUP_OLD_FILES": "true", "Meta_Maintenance_Cleanup_Old_Files": "false"},
        {
            "MAINTENANCE_MERGE_ADJACENT_FILES_MAX_COMPACTED_FILES": "10",
            " MAINTENANCE_MERGE_ADJACENT_FILES_MAX_COMPACTED_FILES": "20",
        },
    ],
)
def test_two_spellings_of_one_option_that_disagree_are_refused_naming_both(
    signatures: dict[str, dict[str, str]], raw: dict[str, str]
) -> None:
    first, second = raw
    with pytest.raises(MaintenanceConfigError) as caught:
        parse_options(raw, signatures)
    assert repr(first) in str(caught.value) and repr(second) in str(caught.value)


def test_two_spellings_that_agree_are_one_option(signatures) -> None:  # noqa: ANN001
    opts = parse_options(
        {
            "MAINTENANCE_EXPIRE_SNAPSHOTS_DRY_RUN": "true",
            "META_MAINTENANCE_EXPIRE_SNAPSHOTS_DRY_RUN": "1",
            "MAINTENANCE_INTERVAL": "300",
            "maintenance_interval": "5m",
        },
        signatures,
    )
    assert opts.steps["expire_snapshots"].params == {"dry_run": True}
    assert opts.interval_s == 300


def test_a_duration_up_to_the_bound_is_accepted(signatures) -> None:  # noqa: ANN001
    opts = parse_options(
        {
            "MAINTENANCE_COMPACT_STORE_TIMEOUT": "365 days",
            "MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN": "0 s",
        },
        signatures,
    )
    assert opts.compact_store_timeout_s == 365 * 86400


# -- floors -----------------------------------------------------------------------
@pytest.mark.parametrize("spelled", ["0.001", "0.0000001s", "9s", "9999ms", "1ms"])
def test_an_interval_under_the_floor_is_refused_at_bind_naming_the_option(
    signatures: dict[str, dict[str, str]], spelled: str
) -> None:
    with pytest.raises(MaintenanceConfigError, match="MAINTENANCE_INTERVAL=.*at least 10s"):
        parse_options({"MAINTENANCE_INTERVAL": spelled}, signatures)


@pytest.mark.parametrize("spelled", ["8d", "2w", "365d"])
def test_an_interval_over_the_ceiling_is_refused_at_bind_naming_the_option(
    signatures: dict[str, dict[str, str]], spelled: str
) -> None:
    with pytest.raises(MaintenanceConfigError, match="MAINTENANCE_INTERVAL=.*at most 7d"):
        parse_options({"MAINTENANCE_INTERVAL": spelled}, signatures)


def test_the_interval_bounds_themselves_are_accepted(
    signatures: dict[str, dict[str, str]],
) -> None:
    from slatelake.maintenance.options import MAX_INTERVAL_S, MIN_INTERVAL_S

    for spelled, seconds in (("10s", MIN_INTERVAL_S), ("7 days", MAX_INTERVAL_S)):
        assert parse_options({"MAINTENANCE_INTERVAL": spelled}, signatures).interval_s == seconds


ORPHANS = "MAINTENANCE_DELETE_ORPHANED_FILES"
OVERRIDE = "MAINTENANCE_ORPHAN_AGE_FLOOR_OVERRIDE"


def _ago(seconds: float) -> str:
    from datetime import UTC, datetime, timedelta

    return (datetime.now(UTC) - timedelta(seconds=seconds)).strftime("%Y-%m-%d %H:%M:%S+00")


@pytest.mark.parametrize(
    "raw",
    [
        {f"{ORPHANS}_OLDER_THAN": "0 seconds"},
        {f"{ORPHANS}_OLDER_THAN": "59 minutes"},
        {f"{ORPHANS}_OLDER_THAN": "00:00:01"},
        {f"{ORPHANS}_CLEANUP_ALL": "true"},
        {"META_MAINTENANCE_DELETE_ORPHANED_FILES_CLEANUP_ALL": "1"},
        {f"{ORPHANS}_OLDER_THAN": "2999-01-01 00:00:00+00"},  # the future: every file
        {f"{ORPHANS}_OLDER_THAN": "@now"},
    ],
    ids=["zero", "59m", "1s", "cleanup-all", "alias", "future-instant", "now-instant"],
)
def test_an_orphan_age_under_the_floor_is_refused_unless_overridden(
    signatures: dict[str, dict[str, str]], raw: dict[str, str]
) -> None:
    if raw.get(f"{ORPHANS}_OLDER_THAN") == "@now":
        raw = {f"{ORPHANS}_OLDER_THAN": _ago(60)}
    with pytest.raises(MaintenanceConfigError) as refused:
        parse_options(raw, signatures)
    message = str(refused.value)
    assert "orphan age floor of 1h" in message  # the floor
    assert "write still in flight" in message  # why
    assert f"{OVERRIDE}=true" in message  # the way past it
    opts = parse_options({**raw, OVERRIDE: "true"}, signatures)
    assert opts.orphan_age_floor_override and opts.configured("delete_orphaned_files")


@pytest.mark.parametrize(
    "raw",
    [
        {f"{ORPHANS}_OLDER_THAN": "1 hour"},
        {f"{ORPHANS}_OLDER_THAN": "7 days"},
        {f"{ORPHANS}": "true"},  # DuckLake's own default age
        {f"{ORPHANS}_OLDER_THAN": "2024-01-01 00:00:00+00"},
        {f"{ORPHANS}_CLEANUP_ALL": "false"},
        {f"{ORPHANS}_CLEANUP_ALL": "true", f"{ORPHANS}_DRY_RUN": "true"},  # deletes nothing
        {f"{ORPHANS}_OLDER_THAN": "0 seconds", f"{ORPHANS}_DRY_RUN": "true"},
    ],
)
def test_an_orphan_age_at_or_over_the_floor_needs_no_override(
    signatures: dict[str, dict[str, str]], raw: dict[str, str]
) -> None:
    assert not parse_options(raw, signatures).orphan_age_floor_override


def test_an_instant_just_past_the_floor_is_accepted_and_one_just_inside_is_not(
    signatures: dict[str, dict[str, str]],
) -> None:
    from slatelake.maintenance.options import ORPHAN_AGE_FLOOR_S

    key = f"{ORPHANS}_OLDER_THAN"
    parse_options({key: _ago(ORPHAN_AGE_FLOOR_S + 120)}, signatures)
    with pytest.raises(MaintenanceConfigError, match="less than the floor before now"):
        parse_options({key: _ago(ORPHAN_AGE_FLOOR_S - 120)}, signatures)


def test_the_floor_override_is_a_boolean_option(signatures: dict[str, dict[str, str]]) -> None:
    with pytest.raises(MaintenanceConfigError, match=OVERRIDE):
        parse_options({OVERRIDE: "please"}, signatures)
    assert not parse_options({OVERRIDE: "false"}, signatures).orphan_age_floor_override
