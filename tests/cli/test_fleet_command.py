"""``slatelake fleet add|remove|list``: the fleet registry from a shell. Each
verb prints one line of text or, with ``--json``, one document; a malformed
REGISTRY or LAKE exits 2 before anything is written, a lake not there to
remove exits 1 naming it, and ``--help`` says where the objects live."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slatelake.cli import main

pytestmark = pytest.mark.fast


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _exit(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int | str | None, str, str]:
    """A run argparse ends (usage errors, --help): its exit status and output."""
    with pytest.raises(SystemExit) as exit_:
        main(list(argv))
    out, err = capsys.readouterr()
    return exit_.value.code, out, err


def test_add_list_remove_print_text_and_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    registry = (tmp_path / "fleet").as_uri()
    code, out, _ = _run(capsys, "fleet", "add", registry, "s3://bucket/one")
    assert code == 0
    assert out == f"added s3://bucket/one to the fleet registry {registry} (generation 1; 1 lake)\n"
    code, out, _ = _run(capsys, "fleet", "add", registry, "s3://bucket/one/", "--json")
    assert code == 0
    assert json.loads(out) == {
        "registry": registry,
        "action": "add",
        "url": "s3://bucket/one",
        "changed": False,
        "generation": 1,
        "lakes": 1,
    }
    assert _run(capsys, "fleet", "add", registry, "s3://bucket/two")[0] == 0

    code, out, _ = _run(capsys, "fleet", "list", registry, "--json")
    assert code == 0
    doc = json.loads(out)
    assert set(doc) == {"registry", "objects", "lakes"}
    assert doc["registry"] == registry and doc["objects"].endswith("/fleet/slatelake-fleet")
    assert [e["url"] for e in doc["lakes"]] == ["s3://bucket/one", "s3://bucket/two"]
    assert all(set(e) == {"url", "added_at", "added_by"} for e in doc["lakes"])
    code, out, _ = _run(capsys, "fleet", "list", registry)
    lines = out.splitlines()
    assert lines[0].endswith(": 2 lakes") and lines[1].split() == ["lake", "added", "by"]
    assert lines[3].startswith("s3://bucket/one ") and lines[4].startswith("s3://bucket/two ")

    code, out, _ = _run(capsys, "fleet", "remove", registry, "s3://bucket/one", "--json")
    assert code == 0
    assert json.loads(out)["changed"] is True and json.loads(out)["lakes"] == 1
    code, out, _ = _run(capsys, "fleet", "remove", registry, "s3://bucket/two")
    assert (
        out
        == f"removed s3://bucket/two from the fleet registry {registry} (generation 4; 0 lakes)\n"
    )
    assert json.loads(_run(capsys, "fleet", "list", registry, "--json")[1])["lakes"] == []


def test_an_empty_registry_lists_no_lakes_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(capsys, "fleet", "list", (tmp_path / "fleet").as_uri())
    assert code == 0 and out.rstrip().endswith(": 0 lakes")
    assert list(tmp_path.iterdir()) == []


def test_removing_a_lake_not_there_exits_1_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    registry = (tmp_path / "fleet").as_uri()
    code, out, err = _run(capsys, "fleet", "remove", registry, "s3://bucket/never")
    assert (code, out) == (1, "")
    assert "NotFoundError" in err and "'s3://bucket/never'" in err
    assert f"`slatelake fleet list {registry}`" in err
    assert "Traceback" not in err


def test_an_unreadable_registry_exits_1_naming_the_object(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    objects = tmp_path / "fleet" / "slatelake-fleet"
    objects.mkdir(parents=True)
    (objects / f"registry-{1:020d}").write_bytes(b"{not json")
    code, _, err = _run(capsys, "fleet", "list", (tmp_path / "fleet").as_uri())
    assert code == 1
    assert "CorruptionError" in err and f"registry-{1:020d}" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["fleet", "add", "relative/fleet", "s3://bucket/lake"], "argument REGISTRY"),
        (["fleet", "list", "s3://"], "argument REGISTRY"),
        (["fleet", "add", "REGISTRY", "'; DROP"], 'argument LAKE: lake URL "\'; DROP"'),
        (["fleet", "remove", "REGISTRY", "../x"], "argument LAKE: lake URL '../x'"),
        (["fleet", "add", "REGISTRY", ""], "argument LAKE: lake URL ''"),
        (["fleet", "add", "REGISTRY"], "the following arguments are required: LAKE"),
    ],
)
def test_a_malformed_registry_or_lake_exits_2_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], named: str
) -> None:
    argv = [(tmp_path / "fleet").as_uri() if a == "REGISTRY" else a for a in argv]
    code, _, err = _exit(capsys, *argv)
    assert code == 2
    assert named in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("verb", [(), ("add",), ("remove",), ("list",)])
def test_help_says_what_the_registry_is_and_where_its_objects_live(
    verb: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _exit(capsys, "fleet", *verb, "--help")
    assert code == 0
    text = " ".join(out.split())  # argparse wraps lines, a path at its hyphens
    assert "REGISTRY/slatelake-fleet/registry-<generation>" in "".join(out.split())
    assert "FleetLakes" in text and "without redeploying" in text
    assert "exit status: 0" in text
