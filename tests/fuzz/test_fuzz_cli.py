"""Fuzz: ``slatelake maintain``, ``index`` and ``lease`` with hostile arguments,
through ``slatelake.cli.main(argv)``, on a small lake on local files and on
moto's S3 (each built once per session, restored before each test and after
a success).

Every run ends in an exit status, never a traceback: 2 with a last stderr
line that names the bad argument (argparse's usage line may precede it), 1
with one line naming a slatelake error class, 0 on success. A run that did
not succeed leaves the lake as it was (its files and their mtimes; the
bucket's objects). The lake's pass lock is held, so a ``maintain`` that gets
past every check finds a pass running (exit 1) instead of running one.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from slatelake.cli import main
from slatelake.errors import MisconfigurationError
from slatelake.maintenance.flight import process_lock
from slatelake.store.location import LakeLocation
from tests.fuzz.hostile import (
    NASTY_STRINGS,
    PristineFiles,
    error_names,
    fuzz,
    hostile_text,
    hostile_urls,
    named,
)
from tests.fuzz.inputs import COLUMNS, INDEXES, KNOWN, TABLES, Lake, canonical

pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")
BAD_WAITS = ("nan", "inf", "-inf", "-1", "-0.5", "1e309", "", " ", "abc", "0x10", "٣", "1e400")
OK_WAITS = ("0", "-0.0", "0.01", " 0 ")
_text = st.sampled_from(NASTY_STRINGS) | hostile_text


# Examples per store: a run that opens the lake costs a second or more on moto.
EXAMPLES = {"file": 20, "s3": 6}


@pytest.fixture
def lake(pristine: Lake) -> Iterator[Lake]:
    """The fuzz lake as built, its pass lock held for the test."""
    lock = process_lock(LakeLocation.parse(pristine.url).url)
    assert lock.acquire(timeout=60)
    try:
        yield pristine
    finally:
        lock.release()


def _examples(lake: Lake, scale: float = 1.0) -> int:
    return round(EXAMPLES["file" if isinstance(lake, PristineFiles) else "s3"] * scale)


def _run(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's usage error
            code = exc.code
    return code, err.getvalue()


def _check(code: object, err: str, hostile: list[object], options: list[str] = ()) -> None:
    """The exit contract; ``hostile`` holds what the message may have to name."""
    assert code in (0, 1, 2), (code, err[-2000:])
    assert "Traceback" not in err, err[-2000:]
    if code == 0:
        return
    lines = err.rstrip("\n").split("\n")
    last = lines[-1]
    assert last.startswith("slatelake "), err[-2000:]
    if code == 1:
        assert len(lines) == 1, err[-2000:]
        assert last.split(": ")[1] in error_names(), last
        return
    assert len(lines) == 1 or lines[0].startswith("usage: "), err[-2000:]
    keys = [o.partition("=")[0] for o in options]
    names = [*hostile, *options, *keys, *(o.partition("=")[2] for o in options)]
    assert any(named(v, last) for v in names) or any(canonical(k) in last for k in keys), last


def _untouched_unless_it_succeeded(lake: Lake, before: object, code: object) -> None:
    if code != 0:
        assert lake.snapshot() == before, "a refused command changed the lake"
    elif lake.snapshot() != before:
        lake.restore()


_option_pairs = st.one_of(
    st.just([]),
    st.lists(
        st.one_of(
            st.builds(lambda k, v: f"{k}={v}", st.sampled_from(KNOWN), _text),
            st.builds(lambda k, v: f"{k}={v}", hostile_text, hostile_text),
            hostile_text,
        ),
        max_size=3,
    ),
)


@pytest.mark.parametrize(
    ("flags", "where", "named_"),
    [
        (["--wait=nan", "--option=MAINTENANCE_FLUSH_INLINED_DATA=no"], "", "'nan'"),
        (["--option=MAINTENANCE_EXPIRE_SNAPSHOTS_OLDER_THAN=\ud800"], "", "OLDER_THAN='\\ud800'"),
        ([], "s3://[x", "'s3://[x'"),
        # Created a lake inside this one before refusing the option.
        (["--data-path={data}x/", "--option=MAINTENANCE_X=1"], "{url}/new", "MAINTENANCE_X"),
    ],
    ids=["nan-wait", "surrogate-option", "bracket-url", "new-lake-bad-option"],
)
def test_maintain_arguments_that_once_crashed_or_wrote_exit_2_touching_nothing(
    lake: Lake, flags: list[str], where: str, named_: str
) -> None:
    flags = [f.format(data=lake.data) for f in flags]
    before = lake.snapshot()
    code, err = _run(["maintain", *flags, "--", where.format(url=lake.url) or lake.url])
    assert code == 2 and named_ in err.splitlines()[-1], err
    assert lake.snapshot() == before


def test_maintain_with_hostile_arguments_exits_cleanly_and_touches_nothing(lake: Lake) -> None:
    @fuzz(_examples(lake))
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        url = data.draw(st.sampled_from((lake.url, lake.url)) | hostile_urls, label="lake")
        flags, hostile = [], [url]
        if url == lake.url:
            path = data.draw(st.sampled_from((None, lake.data)) | hostile_urls, label="data")
            if path is not None:
                flags.append(f"--data-path={path}")
                hostile.append(path)
        waits = st.sampled_from((None, *OK_WAITS)) | st.sampled_from(BAD_WAITS)
        wait = data.draw(waits, label="wait")
        flags.append(f"--wait={0 if wait is None else wait}")
        hostile.append(wait)
        options = data.draw(_option_pairs, label="options")
        flags += [f"--option={option}" for option in options]
        if data.draw(st.booleans(), label="json"):
            flags.append("--json")
        before = lake.snapshot()
        code, err = _run(["maintain", *flags, "--", url])
        _check(code, err, hostile, options)
        assert code != 0, "the pass lock is held: no pass may run"
        assert lake.snapshot() == before

    run()


@pytest.mark.parametrize(
    "argv",
    [
        ["lookup", "--", "{url}", "t", "id", "abc"],  # duckdb's ConversionException
        ["lookup", "--", "{url}", "t", "ts", "not a time"],
        ["lookup", "--", "{url}", "t", "id", "\ud800"],  # RuntimeError from the binding
        ["create", "--name=\ud800", "--", "{url}", "t", "v"],  # UnicodeEncodeError
        ["list", "--", "file:///x%00"],  # ValueError: embedded null byte
        ["drop", "--", "s3://[x", "by_v"],  # ValueError: Invalid IPv6 URL
    ],
    ids=["int", "timestamp", "surrogate-value", "surrogate-name", "nul-url", "bracket-url"],
)
def test_index_arguments_that_once_raised_out_of_main_exit_2_touching_nothing(
    lake: Lake, argv: list[str]
) -> None:
    argv = [a.format(url=lake.url) for a in argv]
    before = lake.snapshot()
    code, err = _run(["index", *argv])
    _check(code, err, [a.partition("=")[2] if a[:2] == "--" else a for a in argv])
    assert code == 2, err
    assert lake.snapshot() == before


def test_index_verbs_with_hostile_names_exit_cleanly_and_a_refusal_touches_nothing(
    lake: Lake,
) -> None:
    names = st.sampled_from(NASTY_STRINGS) | hostile_text

    @fuzz(_examples(lake, 1.2))
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        verb = data.draw(st.sampled_from(("create", "drop", "list", "lookup")), label="verb")
        url = data.draw(st.sampled_from((lake.url, lake.url)) | hostile_urls, label="lake")
        flags, positionals = [], [url]
        if verb in ("create", "lookup"):
            positionals.append(data.draw(st.sampled_from(TABLES) | names, label="table"))
            positionals.append(data.draw(st.sampled_from(COLUMNS) | names, label="column"))
        if verb == "lookup":
            positionals.append(data.draw(names, label="value"))
        if verb == "drop":
            positionals.append(data.draw(st.sampled_from(INDEXES) | names, label="name"))
        if verb == "create" and data.draw(st.booleans(), label="named"):
            name = data.draw(st.sampled_from(INDEXES) | names, label="name")
            flags.append(f"--name={name}")
        before = lake.snapshot()
        code, err = _run(["index", verb, *flags, "--", *positionals])
        _check(code, err, [*positionals, *(f.partition("=")[2] for f in flags)])
        if verb in ("list", "lookup"):
            assert lake.snapshot() == before, "a read-only verb changed the lake"
        _untouched_unless_it_succeeded(lake, before, code)

    run()


def test_lease_verbs_with_a_hostile_lake_exit_cleanly_and_touch_nothing(lake: Lake) -> None:
    @fuzz(_examples(lake, 1.6))
    @given(verb=st.sampled_from(("show", "break")), url=st.none() | hostile_urls)
    @example(verb="show", url="s3://[x")  # ValueError out of main()
    @example(verb="break", url="file:///x/\ud800")  # UnicodeEncodeError
    def run(verb: str, url: str | None) -> None:
        before = lake.snapshot()
        code, err = _run(["lease", verb, "--", lake.url if url is None else url])
        _check(code, err, [url])
        if url is not None:  # another place, or none: not this lake
            assert lake.snapshot() == before
        _untouched_unless_it_succeeded(lake, before, code)

    run()


def test_a_bad_wait_is_refused_before_the_lake_is_opened(tmp_path: Path) -> None:
    missing = (tmp_path / "none").as_uri()  # opening it would be exit 1, NotFoundError
    for wait in ("nan", "inf", "-1", "1e309"):
        code, err = _run(["maintain", f"--wait={wait}", "--", missing])
        assert code == 2 and f"argument --wait: {wait!r}" in err, err


def test_connecting_with_a_bad_option_creates_no_lake(tmp_path: Path) -> None:
    import slatelake
    from slatelake.maintenance.options import MaintenanceConfigError

    with pytest.raises(MaintenanceConfigError):
        slatelake.connect(
            (tmp_path / "lake").as_uri(),
            data_path=f"{tmp_path / 'data'}/",
            options={"MAINTENANCE_VACUUM": "true"},
        )
    assert not list(tmp_path.iterdir()), "a refused session created a lake"


def test_a_session_refused_for_another_data_path_leaves_no_reader_lease(lake: Lake) -> None:
    import slatelake

    elsewhere = "s3://elsewhere/data/" if lake.url.startswith("s3") else "/elsewhere/data/"
    before = lake.snapshot()
    with pytest.raises(MisconfigurationError, match="does not match existing data path"):
        slatelake.connect(lake.url, data_path=elsewhere)
    assert lake.snapshot() == before
