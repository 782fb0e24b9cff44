"""Maintenance policies kept on the lake: lake > schema > table, field by field.

A policy row sets some fields at one scope; resolving a table reads its
table row, then its schema's, then the lake's, then the defaults, one field
at a time. Nothing is destructive until a person enables the lake's policy
(double opt-in: ``enabled`` defaults to false and the lake's value gates
every scope). All rows are one sys record, ``sys/maintenance_policy``,
changed through the log under the commit lock, so two writers never lose
each other's change (each builds on the head it locked). How a policy turns
into a pass's options is ``policy_plan.py``.

Schema and table rows are keyed by DuckLake's ``schema_id`` / ``table_id``
(``policy_keys.py``): a rename keeps the policy, a drop ends it (a table
re-created under the old name starts from its schema's or the lake's).
Rows written before the ids were kept (name only) are read by name and
rewritten with ids by the next ``policy set``/``unset`` (migrate on write);
a row whose object is gone is left out when read and dropped when written.

Every field value from outside is parsed to its type within a stated range
(a typed refusal naming the field, never a traceback); ``orphan_min_age``
under the orphan age floor needs ``orphan_age_floor_override`` at the same
scope or wider (options.ORPHAN_AGE_FLOOR_S says why). ``cron``, the lake's
cadence for scheduled passes (``cadence.py``: the subset, the per-lake
stagger, when a tick is due), is set on the lake's row only.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from slatelake.ducklake.session import Session
from slatelake.durations import format_duration, parse_duration
from slatelake.errors import (
    CorruptionError,
    MaintenanceConfigError,
    MisconfigurationError,
    NotFoundError,
)
from slatelake.log.changeset import ChangeSet
from slatelake.maintenance import history
from slatelake.maintenance.cadence import parse_cron
from slatelake.maintenance.commit_retry import Built, commit_with_retry
from slatelake.maintenance.options import ORPHAN_AGE_FLOOR_S, orphan_floor_refusal
from slatelake.maintenance.policy_keys import LiveNames, live_names
from slatelake.maintenance.thinning import parse_keep
from slatelake.store import values
from slatelake.store.keys import Subspace, encode_key
from slatelake.store.location import show_input

POLICY_KEY = encode_key(Subspace.SYS, 0x07)
POLICY_LABEL = "sys/maintenance_policy"
_POLICY_KIND = 0x07
LAKE, SCHEMA, TABLE = "lake", "schema", "table"
DEFAULT_SCHEMA = "main"
AUTO = "auto"
NO_CRON = ""  # the cron field's default: no cadence, every scheduled tick runs
NO_KEEP = ""  # the keep field's default: no thinning
# Fields only the lake's own row may set: they are about the whole lake's passes.
LAKE_ONLY = ("cron", "keep")
ATTEMPTS = 3
DAY_S = 86400.0
_SIZE = re.compile(r"(\d{1,20}(?:\.\d{1,9})?)\s*([KMGT]?i?B)?", re.IGNORECASE | re.ASCII)
# A plain decimal: no sign, no exponent (so neither -0 nor 1e-400 spells a fraction).
_PLAIN = re.compile(r"(\d{1,20}(?:\.\d{1,20})?|\.\d{1,20})", re.ASCII)
# small_file_min_count: a file count a table can reach, and a threshold that means something.
MAX_COUNT = 1_000_000
_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}
_UNITS |= {"KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}

Value = bool | int | float | str


def _bad(name: str, text: object, expected: str) -> MisconfigurationError:
    return MisconfigurationError(f"policy {name}={show_input(text)}: expected {expected}")


def _text(text: object) -> str | None:
    """The text a value spells (a number as JSON prints it), or None for a
    value of no field's type (a list, an object, None)."""
    if isinstance(text, str):
        return text.strip(" \t\r\n")
    if isinstance(text, int | float) and not isinstance(text, bool):
        return repr(text)
    return None


def _bool(name: str, text: object) -> bool:
    if isinstance(text, bool):
        return text
    spelled = (_text(text) or "").lower()
    if spelled in ("true", "on", "yes", "1"):
        return True
    if spelled in ("false", "off", "no", "0"):
        return False
    raise _bad(name, text, "true or false")


def _duration(name: str, text: object) -> float:
    spelled = _text(text)
    if isinstance(text, float) and math.isfinite(text) and abs(text) < 1e16:
        spelled = f"{text:.9f}"  # stored seconds such as 1e-05 read without an exponent
    if isinstance(text, bool) or spelled is None:
        raise _bad(name, text, "a duration such as 7d, 12h or 90m")
    return parse_duration(f"policy {name}", spelled, allow_zero=True)


def _count(name: str, text: object) -> int:
    spelled = _text(text) or ""
    number = int(spelled) if re.fullmatch(r"\d{1,7}", spelled, re.ASCII) else 0
    if isinstance(text, bool) or not 1 <= number <= MAX_COUNT:
        raise _bad(name, text, f"a whole number from 1 to {MAX_COUNT}")
    return number


def _fraction(name: str, text: object) -> float:
    if isinstance(text, float) and math.isfinite(text):
        value = text + 0.0  # a stored or JSON number; -0.0 reads as 0.0
    else:
        spelled = _text(text) or ""
        value = float(spelled) if _PLAIN.fullmatch(spelled) else math.nan
    if isinstance(text, bool) or not 0.0 <= value <= 1.0:
        raise _bad(name, text, "a fraction from 0 to 1 (e.g. 0.2)")
    return value


def _keep(name: str, text: object) -> str:
    """Thinning rules (thinning.py), kept in canonical order; '' or 'none': none."""
    if isinstance(text, str) and text.strip(" \t").lower() in ("", "none"):
        return NO_KEEP
    return parse_keep(f"policy {name}", text).text


def _show_keep(value: Value) -> str:
    return str(value) or "none (retention alone decides)"


def _cron(name: str, text: object) -> str:
    """A cron, parsed by the one cron parser (``cadence.parse_cron``) and kept
    as its five fields spelled with one space between them."""
    return parse_cron(text, f"policy {name}").text


def _size(name: str, text: object) -> int | str:
    spelled = _text(text) or ""
    if spelled.lower() == AUTO:
        return AUTO
    match = _SIZE.fullmatch(spelled)
    if isinstance(text, bool) or match is None:
        raise _bad(name, text, "auto or a size such as 128MB or 1GiB")
    number = float(match.group(1)) * _UNITS[(match.group(2) or "").upper()]
    if not 1 <= number < 2**63:
        raise _bad(name, text, "a size from 1 byte to 8EiB")
    return int(number)


@dataclass(frozen=True)
class FieldSpec:
    name: str
    default: Value
    parse: Callable[[str, object], Value]
    show: Callable[[Value], str] = str


def _show_bool(value: Value) -> str:
    return "true" if value else "false"


def _show_duration(value: Value) -> str:
    return format_duration(float(value))


def _show_cron(value: Value) -> str:
    return str(value) or "none (every scheduled tick runs)"


FIELDS: dict[str, FieldSpec] = {
    spec.name: spec
    for spec in (
        FieldSpec("enabled", False, _bool, _show_bool),
        FieldSpec("retention", 7 * DAY_S, _duration, _show_duration),
        FieldSpec("compaction", True, _bool, _show_bool),
        FieldSpec("target_file_size", AUTO, _size),
        FieldSpec("small_file_min_count", 12, _count),
        FieldSpec("rewrite_delete_threshold", 0.2, _fraction),
        FieldSpec("cleanup_grace", DAY_S, _duration, _show_duration),
        FieldSpec("orphan_min_age", DAY_S, _duration, _show_duration),
        FieldSpec("orphan_age_floor_override", False, _bool, _show_bool),
        FieldSpec("flush_inlined", True, _bool, _show_bool),
        # the lake's cadence: scheduled passes run only at these times ("": every tick)
        FieldSpec("cron", NO_CRON, _cron, _show_cron),
        # thinning beside retention: the newest per hour/day/... is kept
        FieldSpec("keep", NO_KEEP, _keep, _show_keep),
    )
}


def parse_fields(given: Mapping[str, object]) -> dict[str, Value]:
    """Policy fields from outside (CLI flags, an event), each parsed to its
    type; an unknown field is refused naming the known ones."""
    out: dict[str, Value] = {}
    for name, text in given.items():
        spec = FIELDS.get(name)
        if spec is None:
            raise MaintenanceConfigError(
                f"unknown policy field {show_input(name)}; fields: {', '.join(FIELDS)}"
            )
        try:
            out[name] = spec.parse(name, text)
        except MisconfigurationError as exc:  # a refused value is a usage error (CLI exit 2)
            raise MaintenanceConfigError(str(exc)) from None
    return out


def check_scope_fields(scope: Scope, names: Iterable[str]) -> None:
    """Refuse a lake-only field (``cron``) at a schema or table scope."""
    wrong = [n for n in names if n in LAKE_ONLY]
    if wrong and scope.kind != LAKE:
        raise MaintenanceConfigError(
            f"policy {', '.join(wrong)} is the lake's own (its scheduled passes run the whole "
            f"lake): set it without --schema/--table, not for the {scope.label}"
        )


@dataclass(frozen=True)
class Scope:
    """Where a policy row applies: the lake, one schema, or one table.

    ``schema_id``/``table_id`` are DuckLake's ids and the row's identity once
    bound (``bind``); ``schema``/``table`` are the names, as of the last read
    (None ids: a scope as a person spelled it, or a row written before ids)."""

    kind: str
    schema: str | None = None
    table: str | None = None
    schema_id: int | None = None
    table_id: int | None = None

    @classmethod
    def of(cls, schema: str | None = None, table: str | None = None) -> Scope:
        """``table`` alone may be ``schema.table`` (a bare name means schema
        ``main``); with ``schema`` given, ``table`` is taken as spelled."""
        for what, text in (("schema", schema), ("table", table)):
            if text is not None and (not text or "\x00" in text):
                raise MisconfigurationError(f"policy {what} {show_input(text)}: give a name")
        if table is None:
            return cls(LAKE) if schema is None else cls(SCHEMA, schema)
        if schema is None:
            schema, dot, name = table.partition(".")
            if not dot:
                schema, name = DEFAULT_SCHEMA, table
            if not schema or not name:
                raise MisconfigurationError(
                    f"policy table {show_input(table)}: expected a name, schema-qualified or not "
                    "(orders, s1.orders)"
                )
            return cls(TABLE, schema, name)
        return cls(TABLE, schema, table)

    @property
    def key(self) -> tuple[str, object, object]:
        """What makes two rows one: the ids once bound, else the names."""
        if self.kind == TABLE and self.table_id is not None:
            return (TABLE, None, self.table_id)
        if self.kind == SCHEMA and self.schema_id is not None:
            return (SCHEMA, self.schema_id, None)
        return (self.kind, self.schema, self.table)

    def bind(self, live: LiveNames) -> Scope | None:
        """This scope keyed by the ids live now, under its current names: by
        id when it has one, else by name (a person's spelling, or a row
        written before ids). None when it names nothing live (a dropped
        table or schema: its policy ended with it)."""
        if self.kind == LAKE:
            return Scope(LAKE)
        if self.kind == SCHEMA:
            sid = (
                self.schema_id if self.schema_id is not None else live.schema_id(self.schema or "")
            )
            if sid is None or sid not in live.schemas:
                return None
            return Scope(SCHEMA, live.schemas[sid], schema_id=sid)
        tid = self.table_id
        if tid is None:
            tid = live.table_id(self.schema or "", self.table or "")
        found = None if tid is None else live.table_names(tid)
        if tid is None or found is None:
            return None
        sid, schema, table = found
        return Scope(TABLE, schema, table, schema_id=sid, table_id=tid)

    @property
    def label(self) -> str:
        if self.kind == LAKE:
            return "lake"
        if self.kind == SCHEMA:
            return f"schema {self.schema}"
        return f"table {self.schema}.{self.table}"


@dataclass(frozen=True)
class PolicyRow:
    scope: Scope
    fields: dict[str, Value]
    updated_at: int  # µs since the epoch
    updated_by: str | None

    def to_dict(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["scope"] = asdict(self.scope)
        return doc

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> PolicyRow:
        scope = Scope(**doc["scope"])
        if scope.kind not in (LAKE, SCHEMA, TABLE):
            raise ValueError(f"scope kind {scope.kind!r}")
        for key in (scope.schema_id, scope.table_id):
            if key is not None and (isinstance(key, bool) or not isinstance(key, int)):
                raise ValueError(f"scope id {key!r}")
        return cls(
            scope,
            parse_fields(dict(doc["fields"])),
            int(doc["updated_at"]),
            None if doc.get("updated_by") is None else str(doc["updated_by"]),
        )


def encode_rows(rows: Iterable[PolicyRow]) -> bytes:
    return values.frame(_POLICY_KIND, [r.to_dict() for r in rows])


def decode_rows(raw: bytes | None) -> list[PolicyRow]:
    """Every row; CorruptionError naming the record when any of it does not
    decode (a pass must not guess a policy)."""
    if raw is None:
        return []
    try:
        return [PolicyRow.from_dict(d) for d in values.unframe(raw, _POLICY_KIND, POLICY_LABEL)]
    except CorruptionError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, MisconfigurationError) as exc:
        raise CorruptionError(
            f"{POLICY_LABEL} does not decode ({type(exc).__name__}: {exc}); rewrite it with "
            "slatelake policy set/unset"
        ) from exc


def current(rows: Iterable[PolicyRow], live: LiveNames) -> list[PolicyRow]:
    """``rows`` as they apply now: each schema and table row under its
    object's current name, rows whose object is gone left out."""
    out = []
    for row in rows:
        scope = row.scope.bind(live)
        if scope is not None:
            out.append(replace(row, scope=scope))
    return out


def rows_at_head(session: Session) -> list[PolicyRow]:
    """The lake's policy rows at the session's head, bound to the schemas
    and tables live there (``current``): what every reader of the policy
    (a pass, ``policy show``, the threshold) resolves against."""
    rows = decode_rows(session.lake.read_sys(session.state, POLICY_KEY))
    if all(r.scope.kind == LAKE for r in rows):
        return rows  # nothing to bind: no catalog read
    return current(rows, live_names(session))


@dataclass(frozen=True)
class Policy:
    """A resolved policy: every field's value and the scope it came from
    (``default`` when no row sets it)."""

    values: dict[str, Value]
    sources: dict[str, str] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Value:
        return self.values[name]

    def to_dict(self) -> dict[str, Any]:
        return {
            name: {"value": value, "shown": FIELDS[name].show(value), "from": self.sources[name]}
            for name, value in self.values.items()
        }


def resolve(
    rows: Iterable[PolicyRow], schema: str | None = None, table: str | None = None
) -> Policy:
    """The policy of a table (or a schema, or the lake): table row over schema
    row over lake row over the defaults, field by field. The lake's
    ``enabled`` gates every scope: a table enabled in a disabled lake is off."""
    by_scope = {(r.scope.kind, r.scope.schema, r.scope.table): r for r in rows}
    chain: list[tuple[str, str | None, str | None]] = [(LAKE, None, None)]
    if schema is not None:
        chain.insert(0, (SCHEMA, schema, None))
        if table is not None:
            chain.insert(0, (TABLE, schema, table))
    values_: dict[str, Value] = {}
    sources: dict[str, str] = {}
    for name, spec in FIELDS.items():
        values_[name], sources[name] = spec.default, "default"
        for key in chain:
            row = by_scope.get(key)
            if row is not None and name in row.fields:
                values_[name], sources[name] = row.fields[name], row.scope.label
                break
    lake_on = resolve_lake_enabled(by_scope)
    if not lake_on and values_["enabled"]:
        values_["enabled"], sources["enabled"] = False, "lake (disabled)"
    return Policy(values_, sources)


def target_file_size(policy: Policy) -> int | None:
    """The target file size ``policy`` sets, in bytes; None for ``auto``
    (DuckLake's own ``target_file_size`` for the table, else its default)."""
    size = policy["target_file_size"]
    if size == AUTO:
        return None
    if isinstance(size, bool) or not isinstance(size, int):
        raise TypeError(f"target_file_size {size!r}: expected bytes or {AUTO!r}")
    return size


def target_file_sizes(
    rows: Iterable[PolicyRow], live: Callable[[], LiveNames]
) -> tuple[int | None, dict[int, int | None]]:
    """The target file size each live table's policy sets, enabled or not:
    the one definition of it, which ``health`` counts small files against
    (and the threshold trigger through health). As (the size for
    every table, by table id) so a lake-only policy costs no catalog read:
    ``(size, {})`` when only the lake's row sets one, else ``(None,
    {table id: size or None for auto})`` from the rows bound to ``live()``
    (asked only then)."""
    rows = list(rows)
    setting = [r for r in rows if "target_file_size" in r.fields]
    if not setting:
        return None, {}
    if all(r.scope.kind == LAKE for r in setting):  # every table falls through to it
        return target_file_size(resolve(rows)), {}
    names = live()
    bound = current(rows, names)
    sizes: dict[int, int | None] = {}
    for table_id in names.tables:
        found = names.table_names(table_id)
        if found is not None:
            sizes[table_id] = target_file_size(resolve(bound, found[1], found[2]))
    return None, sizes


def resolve_lake_enabled(by_scope: Mapping[tuple[str, str | None, str | None], PolicyRow]) -> bool:
    row = by_scope.get((LAKE, None, None))
    return bool(row is not None and row.fields.get("enabled", FIELDS["enabled"].default))


def lake_enabled(rows: Iterable[PolicyRow]) -> bool:
    return resolve_lake_enabled({(r.scope.kind, r.scope.schema, r.scope.table): r for r in rows})


# -- changing the record ------------------------------------------------------
def set_fields(
    session: Session, scope: Scope, given: Mapping[str, object], by: str | None = None
) -> PolicyRow:
    """Set ``given`` fields at ``scope`` (other fields of the row stay)."""
    parsed = parse_fields(given)
    if not parsed:
        raise MisconfigurationError("policy set needs at least one field (e.g. --retention 14d)")
    check_scope_fields(scope, parsed)
    return _change(session, scope, lambda old: {**old, **parsed}, by, require_row=False)


def unset_fields(
    session: Session, scope: Scope, names: Iterable[str] | None, by: str | None = None
) -> PolicyRow:
    """Unset ``names`` at ``scope`` (None: the whole row); they fall through
    to the wider scope again."""
    drop = None if names is None else list(names)
    for name in drop or ():
        if name not in FIELDS:
            raise MisconfigurationError(
                f"unknown policy field {show_input(name)}; fields: {', '.join(FIELDS)}"
            )

    def strip(old: dict[str, Value]) -> dict[str, Value]:
        return {} if drop is None else {k: v for k, v in old.items() if k not in drop}

    return _change(session, scope, strip, by, require_row=True)


def _change(
    session: Session,
    scope: Scope,
    edit: Callable[[dict[str, Value]], dict[str, Value]],
    by: str | None,
    require_row: bool,
) -> PolicyRow:
    def build() -> Built[PolicyRow]:
        live = live_names(session)
        # every row bound to the ids live now: a row written by name gets its
        # id here (migrate on write), a row whose object is gone is dropped
        rows = current(decode_rows(session.lake.read_sys(session.state, POLICY_KEY)), live)
        bound = scope.bind(live)
        old = None if bound is None else next((r for r in rows if r.scope.key == bound.key), None)
        if old is None and require_row:
            raise MisconfigurationError(f"no policy is set for the {scope.label}; nothing to unset")
        if bound is None:
            raise NotFoundError(
                f"no {scope.label} in {session.url}; a policy names a schema or table "
                "the lake has (check the spelling, or create it first)"
            )
        fields = edit(dict(old.fields) if old else {})
        row = PolicyRow(bound, fields, time.time_ns() // 1000, by)
        kept = [r for r in rows if r.scope.key != bound.key] + ([row] if fields else [])
        if touches_floor(old.fields if old else {}, fields):
            check_floor(kept)
        what = {"scope": asdict(bound), "fields": fields, "before": old.fields if old else {}}
        puts, deletes = history.audit_writes(
            lambda key: session.lake.read_sys(session.state, key),
            "policy.unset" if require_row else "policy.set",
            by,
            what,
        )
        change = ChangeSet(
            base=session.state.head,
            puts=((POLICY_KEY, encode_rows(kept)), *puts),
            deletes=tuple(deletes),
            tables=(POLICY_LABEL, "sys/audit_log"),
            changes_made=f"maintenance_policy: {bound.label}",
        )
        return Built(change, row)

    return commit_with_retry(session, build, attempts=ATTEMPTS)


_FLOOR_FIELDS = ("orphan_min_age", "orphan_age_floor_override")


def touches_floor(before: Mapping[str, Value], after: Mapping[str, Value]) -> bool:
    """Whether a change sets or unsets a field the orphan age floor reads."""
    return any(before.get(n) != after.get(n) for n in _FLOOR_FIELDS)


def check_floor(rows: list[PolicyRow]) -> None:
    """Refuse a policy under which some scope would delete orphans younger
    than the floor without that scope's override (resolved like any field:
    an override set on the lake covers its schemas and tables)."""
    for row in [PolicyRow(Scope(LAKE), {}, 0, None), *rows]:
        check_policy_floor(resolve(rows, row.scope.schema, row.scope.table), row.scope.label)


def check_policy_floor(policy: Policy, label: str) -> None:
    """MaintenanceConfigError when ``policy`` (resolved for ``label``) keeps
    an orphan age under the floor without its override."""
    age = float(policy["orphan_min_age"])
    if age < ORPHAN_AGE_FLOOR_S and not policy["orphan_age_floor_override"]:
        raise MaintenanceConfigError(
            orphan_floor_refusal(
                f"policy orphan_min_age={format_duration(age)} for the {label}",
                "--orphan-age-floor-override (the policy field orphan_age_floor_override)",
            )
        )
