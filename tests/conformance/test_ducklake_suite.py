"""DuckLake's own transaction and compaction test files pass through slatelake
sessions, as they pass on stock DuckLake (the suite's share of ``bash
scripts/conformance``).

One test per file, named by its suite path. All 50 files take about ten
minutes on two cores: they are the ``long`` tier (``bash scripts/test
--long``), except DEFAULT_TIER, a few quick files that keep transactions,
conflicts, expiry and compaction in the default run. A file known to fail today is in
KNOWN_FAILING with the defect that breaks it and the text its failure shows:
it is an xfail only while it fails that way (strict: when it passes, the test
fails until the entry is removed; another failure is a plain failure). A file
the runner cannot run on slatelake at all is in NOT_RUNNABLE with the reason;
its test checks the runner still says so, then skips.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conformance.interpreter import PASS, SKIP, UNSUPPORTED, FileResult, run_file
from tests.conformance.suite import ROOT_ENV, Suite

# Only `bash scripts/test --conformance` (which .ci/run adds when the files are
# there) and --long/--all run this module: the default suite needs no ../shared.
pytestmark = pytest.mark.conformance

CI_DIRECTORIES = ("transaction", "compaction")
SUITE = Suite.locate()


@dataclass(frozen=True)
class Known:
    defect: str  # why it fails, for the xfail reason
    error: str  # text the failure's first line holds


KNOWN_FAILING: dict[str, Known] = {}

NOT_RUNNABLE: dict[str, str] = {
    "test/sql/compaction/compaction_size_limit.test": "require tpch",
}


# Quick files covering what the long tier covers in depth: a transaction's
# writes, DuckLake's conflict rules, expiry, merges and rewrites.
DEFAULT_TIER = frozenset(
    {
        "test/sql/transaction/basic_transaction.test",
        "test/sql/transaction/transaction_conflicts.test",
        "test/sql/transaction/transaction_conflict_inlining.test",
        "test/sql/transaction/transaction_insert_update_delete.test",
        "test/sql/compaction/expire_snapshots.test",
        "test/sql/compaction/compaction_delete_conflict.test",
        "test/sql/compaction/merge_adjacent_options.test",
        "test/sql/compaction/rewrite_deletes_full_file_delete_after_flush.test",
    }
)


class KnownDefect(AssertionError):
    """The file failed the way KNOWN_FAILING says it does."""


def _files() -> list[str]:
    if not SUITE.present():
        return []
    return SUITE.select(SUITE.listed(), CI_DIRECTORIES)


def _param(name: str) -> object:
    known = KNOWN_FAILING.get(name)
    marks = (
        [pytest.mark.xfail(strict=True, raises=KnownDefect, reason=known.defect)] if known else []
    )
    if name not in DEFAULT_TIER:
        marks.append(pytest.mark.long)
    return pytest.param(name, id=name, marks=marks)


def _described(result: FileResult) -> str:
    text = f"{result.file}: {result.status}: {result.error}"
    if result.line:
        text += f"\nline {result.line}:\n{result.sql}"
    return text + (f"\n{result.detail}" if result.detail else "")


def test_the_ducklake_suite_is_present() -> None:
    assert SUITE.present(), (
        f"DuckLake's test files are not at {SUITE.files_dir}; set {ROOT_ENV} to the "
        "directory holding ducklake/ and selected.txt"
    )


def test_every_listed_exception_is_a_ci_file() -> None:
    files = set(_files())
    assert files, "no transaction or compaction file selected"
    assert set(KNOWN_FAILING) <= files and set(NOT_RUNNABLE) <= files
    assert set(DEFAULT_TIER) <= files - set(NOT_RUNNABLE)


@pytest.mark.parametrize("name", [_param(n) for n in _files()])
def test_slatelake_passes_the_ducklake_file(name: str, tmp_path: Path) -> None:
    result = run_file(SUITE.path(name), name, "slatelake", tmp_path)
    if name in NOT_RUNNABLE:
        assert result.status in (SKIP, UNSUPPORTED), (
            f"{name} now runs ({result.status}); take it out of NOT_RUNNABLE"
        )
        assert NOT_RUNNABLE[name] in result.error, _described(result)
        pytest.skip(f"{result.status}: {result.error}")
    if result.status == PASS:
        return
    known = KNOWN_FAILING.get(name)
    if known is not None and known.error in result.error:
        raise KnownDefect(_described(result))
    pytest.fail(_described(result))
