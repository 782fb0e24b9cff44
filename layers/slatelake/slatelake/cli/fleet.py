"""``fleet add``, ``fleet remove``, ``fleet list``: the fleet registry from a shell.

The registry is the list of lakes one deployed stack maintains, kept as
objects in a bucket (``slatelake.FleetRegistry``, maintenance/fleet.py), so a
platform team adds and removes lakes without redeploying. Each verb is one
call on it; REGISTRY and LAKE are checked before anything is read (exit 2).
The text and ``--json`` views live here until the output layer takes them.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from slatelake import MisconfigurationError
from slatelake.cli import output
from slatelake.cli.arguments import add_json, add_lake
from slatelake.cli.common import EXIT_ERROR, EXIT_USAGE, caller
from slatelake.cli.text import name, print_table, when

OBJECTS = "REGISTRY/slatelake-fleet/registry-<generation>"
ABOUT = (
    "The fleet registry: the list of lakes one deployed stack maintains, kept as objects in "
    "a bucket so lakes are added and removed without redeploying. REGISTRY is a URL, "
    "s3://bucket[/prefix], file:///abs/dir or memory://name; the list lives in "
    f"{OBJECTS} objects (JSON), each change creating the next generation with "
    "create-if-absent, so two concurrent edits never lose one. The stack's scheduled fleet "
    "execution reads the registry beside its FleetLakes template parameter. Lakes are kept "
    "in their canonical spelling (two spellings of one lake are one entry) and are not "
    "opened or checked to exist here."
)
EXIT_STATUSES = (
    f"exit status: 0 done (also when there was nothing to change); {EXIT_ERROR} an error "
    "(remove: the lake is not in the registry; the store refused; an unreadable registry "
    f"object); {EXIT_USAGE} usage: a malformed REGISTRY or LAKE"
)


@dataclass(frozen=True)
class AtRegistry:
    """A registry value and the registry it came from (canonical URL and
    where its objects live)."""

    registry: str
    where: str
    report: Any


def registry_url(text: str) -> str:
    """A fleet registry URL (parsed as a lake URL is; nothing is read); the
    text as given."""
    from slatelake import FleetRegistry

    try:
        FleetRegistry(text)
    except MisconfigurationError as exc:  # names the URL and what is wrong with it
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _open(args: argparse.Namespace) -> Any:
    from slatelake import FleetRegistry

    return FleetRegistry(args.registry)


def _lakes(n: int) -> str:
    return "1 lake" if n == 1 else f"{n} lakes"


def _change_text(shown: AtRegistry) -> None:
    change = shown.report
    if not change.changed:
        print(
            f"{change.url} is already in the fleet registry {shown.registry} "
            f"({_lakes(change.lakes)}); nothing written"
        )
        return
    done = "added" if change.action == "add" else "removed"
    to = "to" if change.action == "add" else "from"
    print(
        f"{done} {change.url} {to} the fleet registry {shown.registry} "
        f"(generation {change.generation}; {_lakes(change.lakes)})"
    )


def _change_document(shown: AtRegistry) -> dict[str, Any]:
    return {"registry": shown.registry, **shown.report.to_dict()}


def _list_text(shown: AtRegistry) -> None:
    lakes = shown.report
    print(f"fleet registry {shown.registry} ({shown.where}): {_lakes(len(lakes))}")
    if lakes:
        rows = [
            (e.url, when(e.added_at * 1_000_000, zone=True), name(e.added_by or "-")) for e in lakes
        ]
        print_table(["lake", "added", "by"], rows)


def _list_document(shown: AtRegistry) -> dict[str, Any]:
    return {
        "registry": shown.registry,
        "objects": shown.where,
        "lakes": [e.to_dict() for e in shown.report],
    }


CHANGED = output.View(_change_text, _change_document)
LISTED = output.View(_list_text, _list_document)


def _cmd_add(args: argparse.Namespace) -> int:
    registry = _open(args)
    change = registry.add(args.lake, by=caller())
    output.emit(CHANGED, AtRegistry(registry.url, registry.where, change), args.json)
    return 0


def _cmd_remove(args: argparse.Namespace) -> int:
    registry = _open(args)
    change = registry.remove(args.lake, by=caller())
    output.emit(CHANGED, AtRegistry(registry.url, registry.where, change), args.json)
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    registry = _open(args)
    output.emit(LISTED, AtRegistry(registry.url, registry.where, registry.lakes()), args.json)
    return 0


def _add_registry(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "registry",
        metavar="REGISTRY",
        type=registry_url,
        help=f"fleet registry URL (its objects: {OBJECTS})",
    )


def register(sub: Any) -> None:
    p = sub.add_parser(
        "fleet",
        help="Add, remove or list the lakes in a fleet registry.",
        description=ABOUT,
        epilog=EXIT_STATUSES,
    )
    verbs = p.add_subparsers(dest="fleet_command", required=True, metavar="VERB")
    for verb, func, summary, lake_help in (
        (
            "add",
            _cmd_add,
            "Add LAKE to the registry (a lake already there changes nothing).",
            "lake URL to add",
        ),
        (
            "remove",
            _cmd_remove,
            "Remove LAKE from the registry; an error when it is not there.",
            "lake URL to remove",
        ),
    ):
        v = verbs.add_parser(
            verb, help=summary, description=f"{summary} {ABOUT}", epilog=EXIT_STATUSES
        )
        v.set_defaults(func=func)
        _add_registry(v)
        add_lake(v, lake_help)
        add_json(v, "print the change as JSON")
    v = verbs.add_parser(
        "list",
        help="List the registry's lakes, by URL.",
        description=f"List the registry's lakes, by URL, with when and by whom each was "
        f"added; none when no registry was written yet. {ABOUT}",
        epilog=EXIT_STATUSES,
    )
    v.set_defaults(func=_cmd_list)
    _add_registry(v)
    add_json(v, "print the registry as JSON: registry, objects, lakes")
