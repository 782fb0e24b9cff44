"""How a lake's maintenance policy becomes a pass's options.

- Only an enabled lake policy plans anything; otherwise the pass runs the
  invocation's options alone (RFC 0021: nothing configured, nothing moves).
- The policy spells RFC options (``retention`` is expiry's ``older_than``,
  ``compaction`` switches merge and rewrite, ``target_file_size`` is merge's
  ``max_file_size``, ``keep`` expiry's thinning (lake-only),
  ``rewrite_delete_threshold`` rewrite's
  ``delete_threshold``, ``cleanup_grace`` and ``orphan_min_age`` the two
  deleting steps' ``older_than``, ``flush_inlined`` the flush), bound like
  any option.
- Lake-wide steps (expire, cleanup, orphans) take the longest retention,
  grace and age any enabled table resolves to, so no table loses history
  its policy keeps. Per-table steps (flush, merge, rewrite) take each
  table's own policy, one call per table, when a schema or table row exists.
- Options given at the invocation override the policy option by option
  (``MAINTENANCE_<STEP>=false`` switches a policy's step off).
- An orphan age under the floor runs only with the policy's
  ``orphan_age_floor_override`` (it becomes the pass's
  ``MAINTENANCE_ORPHAN_AGE_FLOOR_OVERRIDE``); a policy stored before the
  floor existed with a shorter age is refused at plan, naming the scope.
- ``rows`` come bound to the catalog's ids (``policy.rows_at_head``), so a
  table's row follows it through a rename and ends at its drop; ``plan``
  itself matches them to ``tables`` by their current names.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from slatelake.maintenance.options import (
    ORPHAN_AGE_FLOOR_S,
    ORPHAN_OVERRIDE,
    PREFIX,
    MaintenanceOptions,
    StepConfig,
    bind,
)
from slatelake.maintenance.policy import (
    AUTO,
    FIELDS,
    LAKE,
    Policy,
    PolicyRow,
    check_policy_floor,
    lake_enabled,
    resolve,
)

TableName = tuple[str, str]
PER_TABLE_STEPS = ("flush_inlined_data", "merge_adjacent_files", "rewrite_data_files")
WIDEST = ("retention", "cleanup_grace", "orphan_min_age")  # lake-wide: the longest wins
# A parameter given at the invocation drops the policy's that DuckLake refuses beside it.
EXCLUSIVE = {
    "expire_snapshots": (("versions", "older_than"), ("older_than", "versions")),
    "cleanup_old_files": (("cleanup_all", "older_than"),),
    "delete_orphaned_files": (("cleanup_all", "older_than"),),
}


@dataclass
class Plan:
    """The options a pass runs: ``options`` lake-wide; ``per_table`` for
    flush, merge and rewrite, table by table, when policies differ by table;
    ``policy`` the lake's resolved policy (None: no enabled policy applied)."""

    options: MaintenanceOptions
    per_table: dict[str, dict[TableName, StepConfig]] = field(default_factory=dict)
    policy: Policy | None = None


def _interval(seconds: object) -> str:
    return f"{round(_number(seconds) * 1_000_000)} microseconds"


def _number(value: object) -> float:
    """A policy field parsed as a number (``policy.parse_fields`` made it one)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected a number, not {value!r}")
    return float(value)


def policy_options(values: Mapping[str, object]) -> dict[str, str]:
    """A resolved policy as ``MAINTENANCE_*`` options."""
    step = {s: PREFIX + s.upper() for s in PER_TABLE_STEPS}
    raw = {
        step["flush_inlined_data"]: "true" if values["flush_inlined"] else "false",
        f"{PREFIX}EXPIRE_SNAPSHOTS_OLDER_THAN": _interval(values["retention"]),
        f"{PREFIX}CLEANUP_OLD_FILES_OLDER_THAN": _interval(values["cleanup_grace"]),
        f"{PREFIX}DELETE_ORPHANED_FILES_OLDER_THAN": _interval(values["orphan_min_age"]),
    }
    if values.get("keep"):
        raw[f"{PREFIX}EXPIRE_SNAPSHOTS_KEEP"] = str(values["keep"])
    if values.get("orphan_age_floor_override"):
        raw[PREFIX + ORPHAN_OVERRIDE] = "true"
    if values["compaction"]:
        raw[step["merge_adjacent_files"]] = "true"
        if values["target_file_size"] != AUTO:
            raw[f"{step['merge_adjacent_files']}_MAX_FILE_SIZE"] = str(values["target_file_size"])
        raw[f"{step['rewrite_data_files']}_DELETE_THRESHOLD"] = repr(
            _number(values["rewrite_delete_threshold"])
        )
    else:
        raw[step["merge_adjacent_files"]] = "false"
        raw[step["rewrite_data_files"]] = "false"
    return raw


def overlay(policy: MaintenanceOptions, given: MaintenanceOptions) -> MaintenanceOptions:
    """``given`` over ``policy``, parameter by parameter; the invocation's own
    settings (sweeps, store merge, batches, interval) are the invocation's."""
    steps: dict[str, StepConfig] = {}
    for name, mine in policy.steps.items():
        theirs = given.steps[name]
        if theirs.switch is False:
            steps[name] = StepConfig(False, {}, False)
            continue
        params = {**mine.params, **theirs.params}
        for kept, dropped in EXCLUSIVE.get(name, ()):
            if kept in theirs.params and dropped not in theirs.params:
                params.pop(dropped, None)
        steps[name] = StepConfig(mine.enabled or theirs.enabled, params, theirs.switch)
    return replace(given, steps=steps)


class _Binder:
    """Binds each distinct policy once (binding casts through DuckDB, and most
    tables share their lake's or schema's policy)."""

    def __init__(self, given: MaintenanceOptions) -> None:
        self.given = given
        self._seen: dict[tuple[tuple[str, object], ...], MaintenanceOptions] = {}

    def __call__(self, values: Mapping[str, object]) -> MaintenanceOptions:
        key = tuple(sorted(values.items()))
        if key not in self._seen:
            self._seen[key] = overlay(bind(policy_options(values)), self.given)
        return self._seen[key]


def plan(rows: list[PolicyRow], given: MaintenanceOptions, tables: Iterable[TableName]) -> Plan:
    """The options a pass runs on a lake with ``rows`` of policy."""
    if not lake_enabled(rows):
        return Plan(given)
    lake = resolve(rows)
    binder = _Binder(given)
    by_table = {t: resolve(rows, t[0], t[1]) for t in tables}
    widest = dict(lake.values)
    check_policy_floor(lake, "lake")
    for (schema, table), policy in by_table.items():
        if policy["enabled"]:
            check_policy_floor(policy, f"table {schema}.{table}")
            for name in WIDEST:
                widest[name] = max(float(widest[name]), float(policy[name]))
    # the lake-wide orphan step runs the longest age: under the floor only
    # when every policy is, and then each of them gave the override
    widest["orphan_age_floor_override"] = float(widest["orphan_min_age"]) < ORPHAN_AGE_FLOOR_S
    options = binder(widest)
    if all(r.scope.kind == LAKE for r in rows):
        return Plan(options, policy=lake)
    per_table: dict[str, dict[TableName, StepConfig]] = {}
    steps = dict(options.steps)
    for step in PER_TABLE_STEPS:
        cfgs = {
            table: binder(dict(policy.values)).steps[step]
            if policy["enabled"]
            else given.steps[step]
            for table, policy in by_table.items()
        }
        per_table[step] = cfgs
        steps[step] = replace(steps[step], enabled=any(c.enabled for c in cfgs.values()))
    return Plan(replace(options, steps=steps), per_table, lake)


def describe(policy: Policy) -> dict[str, str]:
    """A resolved policy as its fields spelled for a report."""
    return {name: FIELDS[name].show(policy[name]) for name in FIELDS}
