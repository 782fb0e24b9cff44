"""The pairs of changes slatelake refuses after DuckLake accepted them."""

from __future__ import annotations

import pytest

from slatelake.ducklake.refused_commit import table_changes, unsafe_rebase
from slatelake.log.changeset import ChangeSet, Head

pytestmark = pytest.mark.fast


def _theirs(changes_made: str, mints: bool = True) -> ChangeSet:
    return ChangeSet(base=Head(1, 1), mints_snapshot=mints, changes_made=changes_made)


def test_changes_made_text_parses_per_table() -> None:
    parsed = table_changes('created_table:"main"."t",deleted_from_table:3,inlined_insert:3,x:12')
    assert parsed == {3: {"deleted_from_table", "inlined_insert"}, 12: {"x"}}


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        ("deleted_from_table:3", "flushed_inlined:3"),
        ("deleted_from_table:3", "inline_flush:3"),
        ("deleted_from_table:3", "deleted_from_table:3"),
        ("deleted_from_table:3", "inlined_delete:3"),
        ("inlined_delete:3", "deleted_from_table:3"),
        ("inlined_delete:3", "merge_adjacent:3"),
        ("inlined_delete:3", "rewrite_delete:3"),
        ("merge_adjacent:3", "inlined_delete:3"),
        ("rewrite_delete:3", "inserted_into_table:3"),
        ("inline_flush:3", "inlined_insert:3"),
        ("merge_adjacent:3", "inserted_into_table:4"),  # any snapshot: DuckLake retries it
        ("flushed_inlined:3", "created_table:9"),
    ],
)
def test_row_removing_pairs_on_one_table_are_refused(ours: str, theirs: str) -> None:
    why = unsafe_rebase(ours, [_theirs("inserted_into_table:9"), _theirs(theirs)])
    assert why is not None and 'table with index "3"' in why


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        ("inserted_into_table:3", "inserted_into_table:3"),  # appends: DuckLake's rules hold
        ("inlined_insert:3", "inlined_insert:3,inserted_into_table:3"),
        ("deleted_from_table:3", "deleted_from_table:4"),  # another table
        ("deleted_from_table:3", "merge_adjacent:3"),  # DuckLake refuses this one itself
    ],
)
def test_other_pairs_are_left_to_ducklake(ours: str, theirs: str) -> None:
    assert unsafe_rebase(ours, [_theirs(theirs)]) is None


def test_head_preserving_records_never_refuse_a_commit() -> None:
    assert unsafe_rebase("merge_adjacent:3", [_theirs("deleted_from_table:3", mints=False)]) is None
