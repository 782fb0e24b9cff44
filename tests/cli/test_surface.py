"""One CLI surface: every verb takes LAKE one way (a malformed one exits 2
naming it), every time flag reads the one duration grammar, ``--json`` prints
the report's own document (what the Lambda answers), and ``maintain`` reads
its request with the Lambda's parser."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import slatelake
from slatelake import MaintenanceConfigError, PassRequest
from slatelake.cli import build_parser, main

# Values for the positionals a verb needs beside LAKE, valid so LAKE is what fails.
SAMPLES = {
    "snapshot": "1",
    "catalog": "catalog.duckdb",
    "file": "out.duckdb",
    "registry": "memory://fleet-sample",
}
GRAMMAR = "90s, 5m, 1h30m"


def _parsers(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every (sub)command's parser, by the words that reach it."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, (*path, name))


def _is_leaf(parser: argparse.ArgumentParser) -> bool:
    return not any(isinstance(a, argparse._SubParsersAction) for a in parser._actions)


def _takes_lake(parser: argparse.ArgumentParser) -> bool:
    return any(a.dest == "lake" and not a.option_strings for a in parser._actions)


def _argv(path: tuple[str, ...], parser: argparse.ArgumentParser, lake: str) -> list[str]:
    """The verb with LAKE as given and every other required argument valid."""
    argv = list(path)
    for action in parser._actions:
        if action.option_strings:
            if action.required:
                argv += [action.option_strings[0], "x"]
        elif action.dest == "lake":
            argv.append(lake)
        elif action.nargs not in ("*", "?"):
            argv.append(SAMPLES.get(action.dest, "x"))
    for group in parser._mutually_exclusive_groups:
        if group.required:
            argv.append(next(a for a in group._group_actions if a.option_strings).option_strings[0])
    return argv


LAKE_VERBS = [
    path for path, p in _parsers(build_parser()) if _is_leaf(p) and _takes_lake(p) and path
]


def test_every_leaf_verb_but_demo_takes_a_lake() -> None:
    leaves = {path for path, p in _parsers(build_parser()) if path and _is_leaf(p)}
    assert leaves - set(LAKE_VERBS) == {("demo",), ("fleet", "list")}
    assert len(LAKE_VERBS) == 37  # a new verb taking LAKE is walked by the test below


@pytest.mark.parametrize("bad", ["s3://", "ftp://x", "relative/lake"])
def test_every_verb_refuses_a_malformed_lake_with_exit_2(
    bad: str, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # a verb that got past its LAKE would leave files here
    parser = build_parser()
    for path, sub in _parsers(parser):
        if tuple(path) not in LAKE_VERBS:
            continue
        argv = _argv(path, sub, bad)
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        err = capsys.readouterr().err
        assert exit_.value.code == 2, (argv, err)
        assert f"argument LAKE: lake URL {bad!r}" in err, (argv, err)
    assert list(tmp_path.iterdir()) == []


def _time_flags() -> Iterator[tuple[tuple[str, ...], argparse.Action]]:
    for path, parser in _parsers(build_parser()):
        for action in parser._actions:
            if action.metavar == "DURATION":
                yield path, action


def test_every_time_flag_says_it_takes_the_duration_grammar() -> None:
    flags = list(_time_flags())
    names = {(path[0], a.option_strings[0]) for path, a in flags}
    assert {("hold", "--margin"), ("hold", "--poll"), ("fold", "--margin")} <= names
    assert {("fold", "--deadline"), ("maintain", "--wait"), ("compact-store", "--timeout")} <= names
    for path, action in flags:
        assert GRAMMAR in (action.help or ""), (path, action.option_strings)
    seconds_only = [
        (path, a.option_strings)
        for path, parser in _parsers(build_parser())
        for a in parser._actions
        if a.metavar in ("SEC", "SECONDS") or a.type is float
    ]
    assert seconds_only == []


@pytest.mark.parametrize(
    ("text", "seconds"), [("90s", 90.0), ("5m", 300.0), ("1h30m", 5400.0), ("30", 30.0)]
)
def test_hold_and_fold_read_margin_and_poll_in_the_duration_grammar(
    text: str, seconds: float
) -> None:
    parser = build_parser()
    args = parser.parse_args(["hold", "file:///tmp/lake", "--margin", text, "--poll", text])
    assert (args.margin, args.poll) == (seconds, seconds)
    args = parser.parse_args(["fold", "file:///tmp/lake", "--margin", text])
    assert args.margin == seconds
    args = parser.parse_args(["hold", "file:///tmp/lake", "--image-max-age", text])
    assert args.image_max_age == seconds


def test_a_time_flag_refuses_what_the_grammar_refuses_with_exit_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for argv in (
        ["hold", "file:///tmp/lake", "--poll", "soon"],
        ["hold", "file:///tmp/lake", "--poll", "0"],  # a poll must be above zero
        ["hold", "file:///tmp/lake", "--margin", "1h30"],
        ["fold", "file:///tmp/lake", "--margin", "5 fortnights"],
    ):
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        err = capsys.readouterr().err
        assert exit_.value.code == 2, argv
        assert f"argument {argv[2]}: {argv[3]!r}" in err, err


def _lake(tmp_path: Path) -> str:
    url = (tmp_path / "lake").as_uri()
    with slatelake.connect(url, data_path=f"{tmp_path}/data/") as s:
        s.sql("CREATE TABLE t (id INTEGER)")
        s.sql("INSERT INTO t VALUES (1)")
    return url


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> object:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_json_prints_the_reports_own_document(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _lake(tmp_path)
    lake = slatelake.open(url)
    row = _json(capsys, "policy", "set", url, "--retention", "14d", "--json")
    assert row == lake.policy.show().rows[0].to_dict()
    assert _json(capsys, "policy", "show", url, "--json") == lake.policy.show().to_dict()
    assert main(["maintain", url]) == 0
    capsys.readouterr()
    window = _json(capsys, "status", url, "--json")
    assert window == [p.to_dict() for p in lake.maintenance.status()]
    census = _json(capsys, "census", url, "--objects", "--json")
    assert isinstance(census, dict)
    assert set(census) == set(lake.store.census().to_dict())


def test_maintain_refuses_a_request_in_the_lambdas_words_and_touches_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = (tmp_path / "lake").as_uri()
    with pytest.raises(MaintenanceConfigError) as refused:
        PassRequest.from_mapping({"operations": "flush,bogus"})
    assert main(["maintain", url, "--operations", "flush,bogus"]) == 2
    assert str(refused.value) in capsys.readouterr().err
    assert not (tmp_path / "lake").exists()
