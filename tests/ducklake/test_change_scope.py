"""Which tables a new snapshot names: the only narrowing capture trusts to
DuckLake's ``changes_made``, so anything unfamiliar must narrow nothing."""

from __future__ import annotations

import pytest

from slatelake.ducklake.change_scope import Scope, named_tables

pytestmark = pytest.mark.fast


def _changes(snapshot_id: int, text: str) -> tuple:
    return (snapshot_id, text, None, None, None)


def test_ids_are_read_and_quoted_names_with_commas_stay_whole() -> None:
    rows = [_changes(8, 'inserted_into_table:3,created_table:"main"."a,b",deleted_from_table:12')]
    assert named_tables(rows, snap=7) == {3, 12}


def test_an_unfamiliar_entry_narrows_nothing() -> None:
    assert named_tables([_changes(8, "inserted_into_table:3,rewrote_everything")], 7) is None
    assert named_tables([_changes(8, "inserted_into_table:three")], 7) is None


def test_no_new_snapshot_narrows_nothing() -> None:
    """Expiry and cleanup write without a snapshot: nothing names their tables."""
    assert named_tables([_changes(7, "inserted_into_table:3")], snap=7) is None
    assert named_tables([], snap=7) is None


def test_the_filter_keeps_named_tables_and_every_new_one() -> None:
    scope = Scope(snap=7, next_file=40, next_catalog=20, tables={3, 12})
    assert scope.table_filter() == "WHERE table_id IN (3, 12) OR table_id >= 20"
    assert Scope(7, 40, 20, tables=None).table_filter() == ""
