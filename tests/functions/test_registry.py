"""The Lambda's one table of actions, and its models' delegation to the
library's request types: no lake is touched here."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

import slatelake
from tests.functions.conftest import FUNCTION_DIR, powertools_env

pytestmark = pytest.mark.fast

LAKE, DATA = "s3://lake-bucket/lake", "s3://lake-bucket/data/"
ENV = {"SLATELAKE_LAKE": LAKE, "SLATELAKE_DATA_PATH": DATA}


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    # the template's Powertools settings: the modules imported here are cached
    # for the handler's tests, whose loggers must hang under its service
    for key, value in powertools_env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.syspath_prepend(str(FUNCTION_DIR))
    yield importlib.import_module("registry")


def _refusal(registry: ModuleType, event: dict[str, Any]) -> str:
    with pytest.raises(slatelake.MisconfigurationError) as refused:
        registry.parse_event({"lake": LAKE, **event}, ENV)
    return str(refused.value)


def test_only_the_pass_its_phases_the_checks_the_fold_and_the_fleet_may_be_scheduled(
    registry: ModuleType,
) -> None:
    scheduled = {name for name, action in registry.ACTIONS.items() if action.scheduled}
    phases = {"pass_plan", "pass_batch", "pass_finish"}  # a scheduled execution's run
    fleet = "fleet_lakes"  # a fleet execution's first state
    assert scheduled == {"maintenance", "threshold", "fold", fleet, *phases}
    for name in set(registry.ACTIONS) - scheduled:
        assert f"not {name!r}" in _refusal(registry, {"trigger": "scheduled", "action": name})


def test_the_actions_that_open_a_catalog_run_on_the_warm_session(registry: ModuleType) -> None:
    warm = {name for name, action in registry.ACTIONS.items() if action.warm}
    phases = {"pass_plan", "pass_batch", "pass_finish"}
    assert warm == {"maintenance", "threshold", "backup", "fsck", *phases}


@pytest.mark.parametrize(
    ("action", "options", "request_type"),
    [
        ("runs", {"limit": 0}, "PageRequest"),
        ("audit", {"before": -1}, "PageRequest"),
        ("compact_store", {"subspace": "nope"}, "MergeRequest"),
        ("compact_store", {"require_completed": True}, "MergeRequest"),
        ("compact_store", {"timeout": "soon"}, "MergeRequest"),
        ("census", {"live": "maybe"}, "CensusRequest"),
        ("census", {"deep": True}, "CensusRequest"),
        ("fold", {"image": "sometimes"}, "FoldRequest"),
    ],
)
def test_an_option_is_refused_in_the_words_of_the_library_request_type(
    registry: ModuleType, action: str, options: dict[str, object], request_type: str
) -> None:
    """The Lambda re-implements no value check: its refusal is the request
    type's own, word for word, as the CLI's is."""
    with pytest.raises(slatelake.MisconfigurationError) as direct:
        getattr(slatelake, request_type).from_mapping(options)
    assert _refusal(registry, {"action": action, "options": options}) == str(direct.value)


def test_a_pass_event_is_read_into_the_pass_request(registry: ModuleType) -> None:
    call = registry.parse_event(
        {"lake": LAKE + "/", "operations": "flush,merge", "table": "t0", "wait_s": "90s"}, ENV
    )
    assert (call.lake, call.data_path) == (LAKE, DATA)
    assert isinstance(call.request, slatelake.PassRequest)
    assert call.request.operations == ("flush", "merge") and call.request.table == "t0"
    assert call.wait_s == 90.0 and call.request.trigger == slatelake.Trigger.MANUAL


def test_a_scheduled_envelope_reads_the_functions_own_options(registry: ModuleType) -> None:
    env = {**ENV, "MAINTENANCE_FLUSH_INLINED_DATA": "true", "OTHER": "x"}
    tick = {"detail-type": "Scheduled Event", "source": "aws.events", "detail": {}}
    call = registry.parse_event(tick, env)
    assert call.scheduled and call.request.trigger == slatelake.Trigger.SCHEDULED
    assert call.request.options == {"MAINTENANCE_FLUSH_INLINED_DATA": "true"}


@pytest.mark.parametrize(
    ("event", "words"),
    [
        ({"action": "status", "table": "t0"}, "table: for maintenance or pass_plan only"),
        ({"action": "census", "wait_s": 5}, "wait_s: for backup, maintenance or pass_plan only"),
        ({"action": "health", "options": {"live": True}}, "unknown option(s) 'live'"),
        ({"action": "policy", "options": ["live"]}, "options must be a JSON object"),
        ({"action": "backup", "options": {"META_MAINTENANCE_INTERVAL": "1h"}}, "no meaning"),
    ],
)
def test_a_key_the_action_does_not_take_is_refused_not_ignored(
    registry: ModuleType, event: dict[str, Any], words: str
) -> None:
    assert words in _refusal(registry, event)
