"""The one table of what an event may ask: each action's model, handler and rules.

An ``Action`` says which model parses the event's own keys (calls.py), which
handler runs it, whether a schedule may send it, and whether it runs on the
container's warm session. ``parse_event`` reads any event into the action's
model, or refuses it before the lake is touched: the envelope and the keys
every action shares first (invocation.py), then the action and its keys,
then its model. Adding an action is one row here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import actions
import passes
import phases
from calls import (
    AuditCall,
    BackupCall,
    BatchCall,
    CensusCall,
    FinishCall,
    FleetCall,
    FoldCall,
    MergeCall,
    PageCall,
    PassCall,
    PlainCall,
    PlanCall,
)
from invocation import COMMON_KEYS, Invocation, InvocationError, Turn, event_trigger, unwrap

from slatelake import Trigger, show_input

C = TypeVar("C", bound=Invocation)


@dataclass(frozen=True)
class Action(Generic[C]):
    """One action: ``model`` reads its event, ``run`` answers it (``{"result":
    ...}``, plus ``"skipped"`` when it did nothing), ``scheduled`` lets a
    schedule send it, ``warm`` hands it the container's kept session."""

    model: type[C]
    run: Callable[[C, Turn], dict[str, Any]]
    scheduled: bool = False
    warm: bool = False


ACTIONS: dict[str, Action[Any]] = {
    "maintenance": Action(PassCall, passes.maintain, scheduled=True, warm=True),
    "threshold": Action(PlainCall, actions.threshold, scheduled=True, warm=True),
    "pass_plan": Action(PlanCall, phases.plan, scheduled=True, warm=True),
    "pass_batch": Action(BatchCall, phases.batch, scheduled=True, warm=True),
    "pass_finish": Action(FinishCall, phases.finish, scheduled=True, warm=True),
    "fold": Action(FoldCall, passes.fold, scheduled=True),
    "backup": Action(BackupCall, passes.backup, warm=True),
    "compact_store": Action(MergeCall, actions.compact_store),
    "census": Action(CensusCall, actions.census),
    "fsck": Action(PlainCall, actions.fsck, warm=True),
    "fleet_lakes": Action(FleetCall, actions.fleet_lakes, scheduled=True),
    "status": Action(PlainCall, actions.status),
    "runs": Action(PageCall, actions.runs),
    "audit": Action(AuditCall, actions.audit),
    "health": Action(PlainCall, actions.health),
    "policy": Action(PlainCall, actions.policy),
}
DEFAULT_ACTION = "maintenance"
EVENT_KEYS = frozenset(COMMON_KEYS).union(*(a.model.KEYS for a in ACTIONS.values()))


def parse_event(event: Any, env: Mapping[str, str] | None = None) -> Invocation:
    """The event as its action's model, every key checked; the lake and data
    path allowed. ``env`` is the function's environment (default: this process's)."""
    env = os.environ if env is None else env
    doc = unwrap(event)
    unknown = sorted(map(str, set(doc) - EVENT_KEYS))
    if unknown:
        raise InvocationError(
            f"unknown event key(s) {', '.join(map(show_input, unknown))}; an event takes "
            + ", ".join(sorted(EVENT_KEYS))
        )
    trigger = event_trigger(doc)
    name = doc.get("action", DEFAULT_ACTION)
    action = ACTIONS.get(name) if isinstance(name, str) else None
    if action is None:
        raise InvocationError(
            f"unknown action {show_input(name)}; expected one of {', '.join(ACTIONS)}"
        )
    if trigger == Trigger.SCHEDULED and not action.scheduled:
        sent = ", ".join(n for n, a in ACTIONS.items() if a.scheduled)
        raise InvocationError(f"a scheduled event runs {sent}, not {name!r}")
    base = Invocation.common(doc, env, name, trigger)
    _refuse_keys_of_other_actions(doc, name, action)
    return action.model.from_event(base, doc, env)


def _refuse_keys_of_other_actions(doc: Mapping[str, Any], name: str, action: Action[Any]) -> None:
    """A key another action takes (``table`` on ``status``) is refused, not ignored."""
    own = set(COMMON_KEYS) | set(action.model.KEYS)
    given = sorted(k for k in doc if k not in own and doc[k] is not None)
    if given:
        takers = sorted({n for n, a in ACTIONS.items() if set(given) & set(a.model.KEYS)})
        keys = " and ".join(given)
        which = ", ".join(takers[:-1]) + f" or {takers[-1]}" if len(takers) > 1 else takers[0]
        raise InvocationError(
            f"{keys}: for {which} only; action {name!r} does not take "
            + ("them" if len(given) > 1 else "it")
        )
