"""Fuzz: a Lambda event becomes its action's validated model for the stack's
own lake, or is refused with a MisconfigurationError (InvocationError, or
the library request type's MaintenanceConfigError) naming what is wrong;
nothing else escapes.

Events are JSON of every wrong shape: lists where objects go, booleans and
NaN where numbers go, integers of any size, lake URLs spelled every way,
EventBridge envelopes with hostile details. The function's own environment
is fuzzed too (an operator's typo in an allow-list is input as well). An
accepted maintenance event's options then bind or are refused, as the
handler does next.
"""

from __future__ import annotations

import importlib
import math
import sys
from types import ModuleType
from typing import Any

import pytest
from hypothesis import example, given

from slatelake.errors import MisconfigurationError
from slatelake.maintenance.options import (
    MaintenanceConfigError,
    parse_options,
)
from slatelake.store.location import LakeLocation
from tests.fuzz.hostile import fuzz, one_line
from tests.fuzz.inputs import ENV, ROOT, STACK_LAKE, environments, events

pytestmark = [pytest.mark.fast, pytest.mark.filterwarnings("ignore:Generating overly large repr")]


def _function_module(name: str) -> ModuleType:
    """A module of the handler's, imported as Lambda imports it (its folder on the path)."""
    sys.path.insert(0, str(ROOT / "functions" / "maintenance"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(ROOT / "functions" / "maintenance"))


@pytest.fixture(scope="module")
def invocation() -> ModuleType:
    """The envelope and allow-list checks (``InvocationError``)."""
    return _function_module("invocation")


@pytest.fixture(scope="module")
def registry() -> ModuleType:
    """The event parser: the action registry and its models."""
    return _function_module("registry")


def _allowed(value: str, *urls: str) -> bool:
    """Whether ``value`` is one of the configured URLs (blank entries skipped,
    as the function skips them)."""
    configured = set()
    for url in urls:
        try:
            configured.add(LakeLocation.parse(url.strip(), lake=False).url)
        except MisconfigurationError:
            continue  # a bad entry the function did not need to read
    return value in configured


@fuzz(300)
@given(event=events, env=environments)
@example(event={"lake": "s3://[x"}, env=ENV)  # urlsplit's ValueError
@example(event={"lake": STACK_LAKE, "wait_s": math.nan}, env=ENV)  # NaN accepted as seconds
@example(event={"lake": STACK_LAKE, "wait_s": True}, env=ENV)
@example(event={"lake": STACK_LAKE, "wait_s": 10**5000}, env=ENV)
@example(event={"lake": 0}, env=ENV)  # a falsy non-text lake fell back to the stack's
@example(event={"lake": []}, env=ENV)
@example(event={"lake": STACK_LAKE, "options": {"MAINTENANCE_PROGRESS": 10**5000}}, env=ENV)
@example(event={"action": "census", "lake": STACK_LAKE, "options": {"live": 10**5000}}, env=ENV)
@example(
    event={"action": "compact_store", "lake": STACK_LAKE, "options": {"timeout": 10**5000}},
    env=ENV,
)
@example(event={"lake": STACK_LAKE, "options": {"x\nMAINTENANCE_INTERVAL": "1"}}, env=ENV)
@example(event={"lake": "s3://lake-bucket/la\tke"}, env=ENV)  # urlsplit drops the tab
def test_an_event_is_a_validated_invocation_for_the_stack_or_refused(
    registry: ModuleType,
    signatures: dict[str, dict[str, str]],
    event: Any,
    env: dict[str, str],
) -> None:
    try:
        call = registry.parse_event(event, env)
    except MisconfigurationError as exc:
        one_line(str(exc))
        return
    assert _allowed(
        call.lake, env.get("SLATELAKE_LAKE", ""), *env.get("SLATELAKE_ALLOWED_LAKES", "").split(",")
    )
    assert call.lake == LakeLocation.parse(call.lake).url
    if call.data_path is not None:
        data_urls = (
            env.get("SLATELAKE_DATA_PATH", ""),
            *env.get("SLATELAKE_ALLOWED_DATA_PATHS", "").split(","),
        )
        assert _allowed(LakeLocation.parse(call.data_path, lake=False).url, *data_urls)
    wait_s = getattr(call, "wait_s", None)
    assert wait_s is None or (type(wait_s) is float and 0 <= wait_s < math.inf)
    if call.action != "maintenance":
        return
    try:
        parse_options(call.request.options, signatures)  # the handler's bind, before the lake
    except MaintenanceConfigError as exc:
        one_line(str(exc))


@pytest.mark.parametrize(
    "event",
    [{"lake": 0}, {"lake": False}, {"lake": []}, {"lake": {"url": STACK_LAKE}}],
    ids=["zero", "false", "list", "object"],
)
def test_a_lake_that_is_not_text_is_refused_not_read_as_absent(
    invocation: ModuleType, registry: ModuleType, event: dict[str, Any]
) -> None:
    with pytest.raises(invocation.InvocationError, match="lake must be a string"):
        registry.parse_event(event, ENV)


@pytest.mark.parametrize(
    "wait_s",
    [math.nan, math.inf, -1, True, 10**5000],
    ids=["nan", "inf", "negative", "bool", "huge"],
)
def test_a_wait_that_is_not_seconds_is_refused(registry: ModuleType, wait_s: object) -> None:
    """Refused by the pass's own request type, in the words the CLI uses."""
    with pytest.raises(MisconfigurationError, match="wait_s="):
        registry.parse_event({"lake": STACK_LAKE, "wait_s": wait_s}, ENV)


@pytest.mark.parametrize(
    ("action", "options", "words"),
    [
        ("maintenance", {"MAINTENANCE_PROGRESS": 10**5000}, "too large for any option"),
        ("census", {"live": 10**5000}, "too large for any option"),
        ("compact_store", {"timeout": 10**5000}, "timeout=<a number too large"),
        ("compact_store", {"subspace": 10**5000}, "subspace <int too large to show>"),
    ],
    ids=["maintenance", "census", "timeout", "subspace"],
)
def test_an_option_too_large_to_print_is_refused_naming_it(
    registry: ModuleType,
    signatures: dict[str, dict[str, str]],
    action: str,
    options: dict[str, object],
    words: str,
) -> None:
    """Refused when the event is read, or for a pass's options when they
    bind (before the lake, as the handler does next)."""
    with pytest.raises(MisconfigurationError, match=words):
        call = registry.parse_event({"action": action, "lake": STACK_LAKE, "options": options}, ENV)
        parse_options(call.request.options, signatures)
