"""Maintenance options, derived by the RFC's one rule and validated at bind.

``MAINTENANCE_<step>`` enables a DuckLake step, where <step> is the function
name minus ``ducklake_``; ``MAINTENANCE_<step>_<parameter>`` passes one of
DuckLake's own parameters (and implies the step). The accepted parameters
per step, and their types, are read from the pinned extension's
``duckdb_functions()``, so a version bump that changes a signature fails
loudly here. slatelake's own options: INTERVAL, SWEEP_INDEXES,
SWEEP_FILE_STATS, SWEEP_INLINED_TABLES (one switch per sweep; the last two
default to SWEEP_INDEXES, which defaults to true, so the RFC's one switch
still turns off all three), BATCH_SIZE, COMPACT_STORE (default false), COMPACT_STORE_SUBSPACE,
COMPACT_STORE_TIMEOUT, TABLE_BATCHES, PROGRESS, ORPHAN_AGE_FLOOR_OVERRIDE, and
EXPIRE_SNAPSHOTS_KEEP (thinning rules such as ``hourly:24,daily:30``, read by
expiry beside DuckLake's own parameters: thinning.py), and BUDGET_BYTES and
BUDGET_REQUESTS (positive whole numbers: bytes read plus written, and
object-store requests, that bound a pass by pricing.py's estimate; it stops
between tables and leaves the rest pending).
``META_MAINTENANCE_*`` (the
RFC's spelling) is an alias; two spellings of one option that disagree are
refused, naming both.

Every value is parsed once (``option_values``) to the type DuckLake declares
(a real bool, an integer in range, a finite number, an interval or a UTC
instant, a list of snapshot ids), so the steps render typed SQL and never
re-read text. Booleans read exactly DuckDB's own spellings, numbers ASCII
digits. Every
mistake is a MaintenanceConfigError naming the option on one line, raised
before any work (``bind`` checks on a bare DuckDB, before a lake is opened):
nothing configured wrong ever runs unattended, and nothing DuckLake would
reject mid-pass gets past bind.

Two floors guard against values that parse but hurt. ``INTERVAL`` is held
to ``MIN_INTERVAL_S``..``MAX_INTERVAL_S`` (a pass every millisecond fills
the log with slots and never lets the lake rest). The orphan step deletes
files no snapshot references, and a write in flight has written files no
snapshot references yet: an orphan age under ``ORPHAN_AGE_FLOOR_S``
(``DELETE_ORPHANED_FILES_OLDER_THAN`` as a window, or as an instant less
than that before now) and ``DELETE_ORPHANED_FILES_CLEANUP_ALL=true`` (any
age) are refused unless ``MAINTENANCE_ORPHAN_AGE_FLOOR_OVERRIDE=true`` says
the caller knows no write is in flight. A dry run deletes nothing and is
never refused for it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import duckdb

from slatelake.ducklake.sql import run
from slatelake.durations import format_duration
from slatelake.errors import MaintenanceConfigError
from slatelake.maintenance.option_values import (
    WS,
    Casts,
    Instant,
    Interval,
    Value,
    param_parser,
    parse_bool,
    parse_positive_int,
    parse_seconds,
    parse_subspace,
    seconds_between,
)
from slatelake.maintenance.thinning import parse_keep
from slatelake.store.keys import Subspace
from slatelake.store.location import show_input

PREFIX = "MAINTENANCE_"
ALIAS_PREFIX = "META_MAINTENANCE_"
DUCKLAKE_STEPS = (
    "expire_snapshots",
    "flush_inlined_data",
    "merge_adjacent_files",
    "rewrite_data_files",
    "cleanup_old_files",
    "delete_orphaned_files",
)
STEPS = (
    *DUCKLAKE_STEPS,
    "sweep_indexes",
    "sweep_file_stats",
    "sweep_inlined_tables",
    "compact_store",
)
# Parameters the pass owns (it scopes calls to a table itself) or positional ones.
_SCOPE_PARAMS = {"table_name", "schema_name", "schema"}
DEFAULT_BATCH_SIZE = 65_536
SWEEPS = ("SWEEP_INDEXES", "SWEEP_FILE_STATS", "SWEEP_INLINED_TABLES")
_OWN_BOOLS = (*SWEEPS, "COMPACT_STORE", "TABLE_BATCHES", "PROGRESS", "ORPHAN_AGE_FLOOR_OVERRIDE")
# The scheduler's interval: at least 10 s (each pass writes slots, takes the
# pass lease and the commit lock), at most 7 days (a longer gap is a typo for
# "never"; leave MAINTENANCE_INTERVAL unset for that).
MIN_INTERVAL_S = 10.0
MAX_INTERVAL_S = 7 * 86400.0
# The youngest file the orphan step may delete without the override: one hour.
# A file younger than that may belong to a write still in flight (its Parquet
# written, its commit not yet landed), which the orphan step cannot tell from
# an orphan.
ORPHAN_AGE_FLOOR_S = 3600.0
ORPHAN_OVERRIDE = "ORPHAN_AGE_FLOOR_OVERRIDE"
# A pass's budget, by pricing.py's estimate: bytes read plus written, and requests.
BUDGETS = ("BUDGET_BYTES", "BUDGET_REQUESTS")
_OWN = {
    *_OWN_BOOLS,
    *BUDGETS,
    "INTERVAL",
    "BATCH_SIZE",
    "COMPACT_STORE_SUBSPACE",
    "COMPACT_STORE_TIMEOUT",
}


@dataclass(frozen=True)
class StepConfig:
    enabled: bool = False
    params: dict[str, Value] = field(default_factory=dict)
    # MAINTENANCE_<STEP> as given (None: not given), so a lake policy's step
    # can be switched off by an invocation, not only on.
    switch: bool | None = None


@dataclass(frozen=True)
class MaintenanceOptions:
    steps: dict[str, StepConfig]
    interval_s: float | None = None
    sweep_indexes: bool = True
    sweep_file_stats: bool = True
    sweep_inlined_tables: bool = True
    batch_size: int = DEFAULT_BATCH_SIZE
    compact_store: bool = False
    compact_store_subspace: Subspace | None = None
    compact_store_timeout_s: float | None = None
    table_batches: bool = False
    progress: bool = False
    # MAINTENANCE_ORPHAN_AGE_FLOOR_OVERRIDE: orphan ages under ORPHAN_AGE_FLOOR_S
    # (and CLEANUP_ALL) were allowed at bind.
    orphan_age_floor_override: bool = False
    # Set by a deployed schedule (the Lambda): on a lake whose policy is not
    # enabled, the steps that expire or delete are skipped (double opt-in).
    deletes_need_policy: bool = False
    # MAINTENANCE_BUDGET_BYTES / _REQUESTS (None: unbounded): the pass stops
    # between tables when its estimate (pricing.py) would exceed either.
    budget_bytes: int | None = None
    budget_requests: int | None = None

    @property
    def budgeted(self) -> bool:
        return self.budget_bytes is not None or self.budget_requests is not None

    def configured(self, step: str) -> bool:
        return self.steps.get(step, StepConfig()).enabled


def ducklake_signatures(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, str]]:
    """Named parameters per maintenance step and their DuckDB types, from the
    loaded extension."""
    out: dict[str, dict[str, str]] = {step: {} for step in DUCKLAKE_STEPS}
    rows = run(
        con,
        "SELECT function_name, parameters, parameter_types FROM duckdb_functions() "
        "WHERE list_contains(?, function_name)",
        [[f"ducklake_{s}" for s in DUCKLAKE_STEPS]],
    ).fetchall()
    found = set()
    for name, params, types in rows:
        step = name.removeprefix("ducklake_")
        found.add(step)
        for param, type_ in zip(params, types, strict=True):
            if re.fullmatch(r"col\d+", param) or param in _SCOPE_PARAMS:
                continue
            if out[step].setdefault(param, type_) != type_:
                raise MaintenanceConfigError(
                    f"the pinned DuckLake extension declares {name}'s {param} as both "
                    f"{out[step][param]} and {type_}; this slatelake build needs the DuckLake "
                    "version it pins"
                )
    missing = sorted(set(DUCKLAKE_STEPS) - found)
    if missing:
        raise MaintenanceConfigError(
            f"the pinned DuckLake extension lacks {', '.join('ducklake_' + m for m in missing)}; "
            "this slatelake build needs the DuckLake version it pins"
        )
    return out


# -- values ------------------------------------------------------------------
def _own_parser(name: str) -> Callable[[str, Any], Any]:
    if name in _OWN_BOOLS:
        return parse_bool
    if name == "INTERVAL":
        return seconds_between(
            MIN_INTERVAL_S, MAX_INTERVAL_S, "each pass writes to the lake; unset it for no schedule"
        )
    if name == "COMPACT_STORE_TIMEOUT":
        return parse_seconds
    if name in ("BATCH_SIZE", *BUDGETS):
        return parse_positive_int
    return parse_subspace


# -- names ---------------------------------------------------------------------
def _canonical(key: str) -> str:
    upper = key.strip(WS).upper()
    if upper.startswith(ALIAS_PREFIX):
        return PREFIX + upper[len(ALIAS_PREFIX) :]
    return upper


def _split_step(rest: str) -> tuple[str, str] | None:
    """'EXPIRE_SNAPSHOTS_OLDER_THAN' -> ('expire_snapshots', 'older_than')."""
    lower = rest.lower()
    for step in sorted(DUCKLAKE_STEPS, key=len, reverse=True):
        if lower == step:
            return step, ""
        if lower.startswith(step + "_"):
            return step, lower[len(step) + 1 :]
    return None


def _option_name(key: object) -> str:
    """An option's name: ASCII text (a non-ASCII letter such as 'ﬂ' or 'ı' would
    upper-case into another option's name), without NUL."""
    if isinstance(key, str) and "\x00" in key:
        raise MaintenanceConfigError(f"option {show_input(key)} contains a NUL byte; remove it")
    if not isinstance(key, str) or not key.isascii():
        raise MaintenanceConfigError(
            f"unknown option {show_input(key)}: option names are ASCII text such as "
            f"{PREFIX}FLUSH_INLINED_DATA"
        )
    return key


def _target(option: str, key: str, signatures: Mapping[str, Mapping[str, str]]) -> tuple:
    """What a canonical option sets: ('own', NAME), ('step', step) or ('param', step, param)."""
    if not option.startswith(PREFIX):
        raise MaintenanceConfigError(
            f"unknown option {key!r}: maintenance options start with {PREFIX}"
        )
    rest = option[len(PREFIX) :]
    if rest in _OWN:
        return ("own", rest)
    split = _split_step(rest)
    if split is None:
        raise MaintenanceConfigError(
            f"unknown option {show_input(key)}; steps are "
            + ", ".join(PREFIX + s.upper() for s in DUCKLAKE_STEPS)
            + " and slatelake's own are "
            + ", ".join(PREFIX + o for o in sorted(_OWN))
        )
    step, param = split
    if not param:
        return ("step", step)
    if (step, param) == ("expire_snapshots", "keep"):
        return ("param", step, param)  # thinning: slatelake's own (thinning.py)
    accepted = signatures.get(step, {})
    if param not in accepted:
        raise MaintenanceConfigError(
            f"unknown option {show_input(key)}: ducklake_{step} on this DuckLake pin has no "
            f"parameter {param!r} (it takes {', '.join(sorted(accepted)) or 'none'})"
        )
    return ("param", step, param)


def _bind(
    raw: Mapping[str, object], signatures: Mapping[str, Mapping[str, str]], casts: Casts
) -> dict[tuple, Any]:
    """Each option's target -> its parsed value. Two spellings of one option
    (an alias, another case) must agree."""
    bound: dict[tuple, Any] = {}
    given: dict[tuple, tuple[str, object]] = {}
    for raw_key, value in raw.items():
        key = _option_name(raw_key)
        option = _canonical(key)
        target = _target(option, key, signatures)
        if target[0] == "own":
            parser = _own_parser(target[1])
        elif target[0] == "step":
            parser = parse_bool
        elif target == ("param", "expire_snapshots", "keep"):
            parser = parse_keep
        else:
            parser = param_parser(target[1], target[2], signatures[target[1]][target[2]], casts)
        parsed = parser(option, value)
        if target in bound and bound[target] != parsed:
            first, earlier = given[target]
            raise MaintenanceConfigError(
                f"{first!r}={show_input(earlier)} and {key!r}={show_input(value)} both set "
                f"{option} and disagree; give it once"
            )
        bound[target], given[target] = parsed, (key, value)
    return bound


def parse_options(
    raw: Mapping[str, object], signatures: Mapping[str, Mapping[str, str]]
) -> MaintenanceOptions:
    """Validate and type every option (bind time) and build the pass configuration."""
    casts = Casts()
    try:
        bound = _bind(raw, signatures, casts)
    finally:
        casts.close()
    own = {t[1]: v for t, v in bound.items() if t[0] == "own"}
    steps: dict[str, StepConfig] = {}
    for step in DUCKLAKE_STEPS:
        params = {t[2]: v for t, v in bound.items() if t[0] == "param" and t[1] == step}
        enabled = bound.get(("step", step))
        if enabled is False and params:
            given = ", ".join(f"{PREFIX}{step.upper()}_{p.upper()}" for p in params)
            raise MaintenanceConfigError(
                f"{PREFIX}{step.upper()} is false but its parameter {given} is given; "
                "drop the parameter or enable the step"
            )
        steps[step] = StepConfig(bool(enabled) or bool(params), params, enabled)
    for step in ("cleanup_old_files", "delete_orphaned_files"):
        # DuckLake refuses both at the call ("either cleanup_all OR older_than").
        params = steps[step].params
        if params.get("cleanup_all") is True and "older_than" in params:
            name = f"{PREFIX}{step.upper()}"
            raise MaintenanceConfigError(
                f"{name}_CLEANUP_ALL=true and {name}_OLDER_THAN are both given; DuckLake takes "
                "one or the other: drop one"
            )
    if not own.get(ORPHAN_OVERRIDE, False):
        check_orphan_age(steps["delete_orphaned_files"].params, time.time())
    merge = steps["merge_adjacent_files"].params
    low, high = merge.get("min_file_size"), merge.get("max_file_size")
    if isinstance(low, int | float) and isinstance(high, int | float) and low >= high:
        name = f"{PREFIX}MERGE_ADJACENT_FILES"
        raise MaintenanceConfigError(
            f"{name}_MIN_FILE_SIZE={merge['min_file_size']} must be below "
            f"{name}_MAX_FILE_SIZE={merge['max_file_size']}"
        )
    stray = [PREFIX + d for d in ("COMPACT_STORE_SUBSPACE", "COMPACT_STORE_TIMEOUT") if d in own]
    if own.get("COMPACT_STORE") is False and stray:
        raise MaintenanceConfigError(
            f"{PREFIX}COMPACT_STORE is false but its parameter {', '.join(stray)} is given; "
            "drop the parameter or enable the step"
        )
    sweeps = {name: own.get(name, own.get("SWEEP_INDEXES", True)) for name in SWEEPS}
    if "BATCH_SIZE" in own and not any(sweeps.values()):
        raise MaintenanceConfigError(
            f"every sweep is off ({', '.join(PREFIX + n for n in SWEEPS)}) but its parameter "
            f"{PREFIX}BATCH_SIZE is given; drop the parameter or enable a sweep"
        )
    subspace = own.get("COMPACT_STORE_SUBSPACE")
    return MaintenanceOptions(
        steps=steps,
        interval_s=own.get("INTERVAL"),
        sweep_indexes=sweeps["SWEEP_INDEXES"],
        sweep_file_stats=sweeps["SWEEP_FILE_STATS"],
        sweep_inlined_tables=sweeps["SWEEP_INLINED_TABLES"],
        batch_size=own.get("BATCH_SIZE", DEFAULT_BATCH_SIZE),
        compact_store=own.get("COMPACT_STORE", False)
        or subspace is not None
        or "COMPACT_STORE_TIMEOUT" in own,
        compact_store_subspace=subspace,
        compact_store_timeout_s=own.get("COMPACT_STORE_TIMEOUT"),
        table_batches=own.get("TABLE_BATCHES", False),
        progress=own.get("PROGRESS", False),
        orphan_age_floor_override=own.get(ORPHAN_OVERRIDE, False),
        budget_bytes=own.get("BUDGET_BYTES"),
        budget_requests=own.get("BUDGET_REQUESTS"),
    )


def check_orphan_age(params: Mapping[str, Value], now: float) -> None:
    """Refuse an orphan step that could delete a file of a write in flight:
    ``cleanup_all`` (any age), a window under the floor, or an instant less
    than the floor before ``now``. A dry run deletes nothing and passes."""
    if params.get("dry_run") is True:
        return
    name = f"{PREFIX}DELETE_ORPHANED_FILES"
    given: str | None = None
    if params.get("cleanup_all") is True:
        given = f"{name}_CLEANUP_ALL=true (any age)"
    older = params.get("older_than")
    if isinstance(older, Interval) and older.seconds < ORPHAN_AGE_FLOOR_S:
        given = f"{name}_OLDER_THAN (a window of {format_duration(older.seconds)})"
    if (
        isinstance(older, Instant)
        and older.epoch_s is not None
        and now - older.epoch_s < ORPHAN_AGE_FLOOR_S
    ):
        given = f"{name}_OLDER_THAN={older.utc!r} (less than the floor before now)"
    if given is not None:
        raise MaintenanceConfigError(orphan_floor_refusal(given, f"{PREFIX}{ORPHAN_OVERRIDE}=true"))


def orphan_floor_refusal(given: str, override: str) -> str:
    """The one wording of the floor's refusal (options and policy share it)."""
    return (
        f"{given} is below the orphan age floor of {format_duration(ORPHAN_AGE_FLOOR_S)}: a "
        "file younger than that may belong to a write still in flight, which the orphan step "
        "would delete; give an age of at least the floor, or, when no writer can be running, "
        f"{override}"
    )


_PINNED: dict[str, dict[str, str]] | None = None


def pinned_signatures(
    con: duckdb.DuckDBPyConnection | None = None,
) -> dict[str, dict[str, str]]:
    """The pinned DuckLake extension's maintenance signatures, read once per
    process (they are the same for every connection of this build): from
    ``con``, a connection ``extensions.connect`` made, else a bare DuckDB."""
    global _PINNED
    if _PINNED is None and con is not None:
        _PINNED = ducklake_signatures(con)
    if _PINNED is None:
        from slatelake.ducklake import extensions

        bare = extensions.connect()
        try:
            _PINNED = ducklake_signatures(bare)
        finally:
            bare.close()
    return {step: dict(params) for step, params in _PINNED.items()}


def bind(raw: Mapping[str, object]) -> MaintenanceOptions:
    """Bind ``raw`` as a session would, against the pinned DuckLake extension's
    signatures: the CLI and the Lambda call it before a lake is opened,
    created or written, so a refused option leaves no trace."""
    return parse_options(raw, pinned_signatures())
