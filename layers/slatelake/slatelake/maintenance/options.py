"""Maintenance options, derived by the RFC's one rule and validated at bind.

``MAINTENANCE_<step>`` enables a DuckLake step, where <step> is the function
name minus ``ducklake_``; ``MAINTENANCE_<step>_<parameter>`` passes one of
DuckLake's own parameters (and implies the step). The accepted parameters
per step are read from the pinned extension's ``duckdb_functions()``, so a
version bump that changes a signature fails loudly here. slatelake's own
options: INTERVAL, SWEEP_INDEXES (default true), BATCH_SIZE, COMPACT_STORE
(default false), COMPACT_STORE_SUBSPACE, COMPACT_STORE_TIMEOUT,
TABLE_BATCHES, PROGRESS. ``META_MAINTENANCE_*`` (the RFC's spelling) is an
alias. Every mistake is a MaintenanceConfigError naming the option, raised
before any work: nothing configured wrong ever runs unattended.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import duckdb

from slatelake.errors import MisconfigurationError
from slatelake.store.keys import Subspace

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
_OWN = {
    "INTERVAL",
    "SWEEP_INDEXES",
    "BATCH_SIZE",
    "COMPACT_STORE",
    "COMPACT_STORE_SUBSPACE",
    "COMPACT_STORE_TIMEOUT",
    "TABLE_BATCHES",
    "PROGRESS",
}
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}
_UNITS = {
    "s": 1,
    "sec": 1,
    "second": 1,
    "seconds": 1,
    "m": 60,
    "min": 60,
    "minute": 60,
    "minutes": 60,
    "h": 3600,
    "hour": 3600,
    "hours": 3600,
    "d": 86400,
    "day": 86400,
    "days": 86400,
}


class MaintenanceConfigError(MisconfigurationError):
    """A maintenance option is wrong; the message names it. CLI exit status 2."""


@dataclass(frozen=True)
class StepConfig:
    enabled: bool = False
    params: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class MaintenanceOptions:
    steps: dict[str, StepConfig]
    interval_s: float | None = None
    sweep_indexes: bool = True
    batch_size: int = DEFAULT_BATCH_SIZE
    compact_store: bool = False
    compact_store_subspace: Subspace | None = None
    compact_store_timeout_s: float | None = None
    table_batches: bool = False
    progress: bool = False

    def configured(self, step: str) -> bool:
        return self.steps.get(step, StepConfig()).enabled


def ducklake_signatures(con: duckdb.DuckDBPyConnection) -> dict[str, set[str]]:
    """Named parameters per maintenance step, from the loaded extension."""
    out: dict[str, set[str]] = {step: set() for step in DUCKLAKE_STEPS}
    rows = con.execute(
        "SELECT function_name, parameters FROM duckdb_functions() WHERE function_name IN ("
        + ", ".join(f"'ducklake_{s}'" for s in DUCKLAKE_STEPS)
        + ")"
    ).fetchall()
    found = set()
    for name, params in rows:
        step = name.removeprefix("ducklake_")
        found.add(step)
        out[step] |= {p for p in params if not re.fullmatch(r"col\d+", p)} - _SCOPE_PARAMS
    missing = sorted(set(DUCKLAKE_STEPS) - found)
    if missing:
        raise MaintenanceConfigError(
            f"the pinned DuckLake extension lacks {', '.join('ducklake_' + m for m in missing)}; "
            "this slatelake build needs the DuckLake version it pins"
        )
    return out


def parse_bool(option: str, value: str) -> bool:
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise MaintenanceConfigError(f"{option}={value!r}: expected true or false")


def parse_seconds(option: str, value: str) -> float:
    """Seconds from '30', '30s', '5m', '2 hours', '1d'; must be positive."""
    text = str(value).strip().lower()
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([a-z]*)", text)
    if not m or (m.group(2) and m.group(2) not in _UNITS):
        raise MaintenanceConfigError(
            f"{option}={value!r}: expected a duration such as 30s, 5m, 2h or 1d"
        )
    seconds = float(m.group(1)) * _UNITS.get(m.group(2) or "s", 1)
    if seconds <= 0:
        raise MaintenanceConfigError(f"{option}={value!r}: must be positive")
    return seconds


def parse_positive_int(option: str, value: str) -> int:
    try:
        number = int(str(value).strip())
    except ValueError:
        raise MaintenanceConfigError(f"{option}={value!r}: expected a positive integer") from None
    if number <= 0:
        raise MaintenanceConfigError(f"{option}={value!r}: must be positive")
    return number


def _canonical(key: str) -> str:
    upper = key.strip().upper()
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


def parse_options(raw: Mapping[str, str], signatures: Mapping[str, set[str]]) -> MaintenanceOptions:
    """Validate every option (bind time) and build the pass configuration."""
    enabled: dict[str, bool | None] = {step: None for step in DUCKLAKE_STEPS}
    params: dict[str, dict[str, str]] = {step: {} for step in DUCKLAKE_STEPS}
    own: dict[str, tuple[str, str]] = {}
    for key, value in raw.items():
        option = _canonical(key)
        if not option.startswith(PREFIX):
            raise MaintenanceConfigError(
                f"unknown option {key!r}: maintenance options start with {PREFIX}"
            )
        rest = option[len(PREFIX) :]
        if rest in _OWN:
            own[rest] = (option, value)
            continue
        split = _split_step(rest)
        if split is None:
            raise MaintenanceConfigError(
                f"unknown option {option}; steps are "
                + ", ".join(PREFIX + s.upper() for s in DUCKLAKE_STEPS)
                + " and slatelake's own are "
                + ", ".join(PREFIX + o for o in sorted(_OWN))
            )
        step, param = split
        if not param:
            enabled[step] = parse_bool(option, value)
            continue
        accepted = signatures.get(step, set())
        if param not in accepted:
            raise MaintenanceConfigError(
                f"unknown option {option}: ducklake_{step} on this DuckLake pin has no "
                f"parameter {param!r} (it takes {', '.join(sorted(accepted)) or 'none'})"
            )
        params[step][param] = str(value)
    steps: dict[str, StepConfig] = {}
    for step in DUCKLAKE_STEPS:
        if enabled[step] is False and params[step]:
            given = ", ".join(f"{PREFIX}{step.upper()}_{p.upper()}" for p in params[step])
            raise MaintenanceConfigError(
                f"{PREFIX}{step.upper()} is false but its parameter {given} is given; "
                "drop the parameter or enable the step"
            )
        steps[step] = StepConfig(bool(enabled[step]) or bool(params[step]), params[step])

    def opt(name: str) -> tuple[str, str] | None:
        return own.get(name)

    for switch, dependents in (
        ("COMPACT_STORE", ("COMPACT_STORE_SUBSPACE", "COMPACT_STORE_TIMEOUT")),
        ("SWEEP_INDEXES", ("BATCH_SIZE",)),
    ):
        given = [own[d][0] for d in dependents if d in own]
        if switch in own and given and not parse_bool(*own[switch]):
            raise MaintenanceConfigError(
                f"{own[switch][0]} is false but its parameter {', '.join(given)} is given; "
                "drop the parameter or enable the step"
            )

    subspace = None
    if opt("COMPACT_STORE_SUBSPACE"):
        option, value = own["COMPACT_STORE_SUBSPACE"]
        try:
            subspace = Subspace.from_label(str(value))
        except ValueError as exc:
            raise MaintenanceConfigError(f"{option}={value!r}: {exc}") from None
    return MaintenanceOptions(
        steps=steps,
        interval_s=parse_seconds(*own["INTERVAL"]) if opt("INTERVAL") else None,
        sweep_indexes=parse_bool(*own["SWEEP_INDEXES"]) if opt("SWEEP_INDEXES") else True,
        batch_size=(
            parse_positive_int(*own["BATCH_SIZE"]) if opt("BATCH_SIZE") else DEFAULT_BATCH_SIZE
        ),
        compact_store=(parse_bool(*own["COMPACT_STORE"]) if opt("COMPACT_STORE") else False)
        or subspace is not None
        or opt("COMPACT_STORE_TIMEOUT") is not None,
        compact_store_subspace=subspace,
        compact_store_timeout_s=(
            parse_seconds(*own["COMPACT_STORE_TIMEOUT"]) if opt("COMPACT_STORE_TIMEOUT") else None
        ),
        table_batches=parse_bool(*own["TABLE_BATCHES"]) if opt("TABLE_BATCHES") else False,
        progress=parse_bool(*own["PROGRESS"]) if opt("PROGRESS") else False,
    )
