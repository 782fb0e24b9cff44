"""What a statement is, by DuckDB's own parser and tokenizer, and the
transaction states a session moves through.

A word in a comment or a string constant names nothing: only DuckLake's
functions (and metadata tables) named as identifiers make a read run as a
write, and only a call of one of DuckLake's maintenance functions takes the
commit lock first.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from slatelake.ducklake import statements as stmt
from slatelake.ducklake.session import connect
from slatelake.ducklake.txn_state import Began, Txn, TxnState
from slatelake.errors import MisconfigurationError

pytestmark = pytest.mark.fast

ST = duckdb.StatementType


def _may_write(query: str) -> bool:
    """What the statement runner asks of a statement: may it change the catalog?"""
    types = {st.type for st in stmt.parse(query)}
    return bool(types - stmt.READ_TYPES) or stmt.names_ducklake(query)


def test_a_comment_naming_ducklake_does_not_make_a_select_a_write() -> None:
    assert not _may_write("SELECT 1 -- ducklake_flush_inlined_data('lake')")
    assert not _may_write("SELECT 1 /* ducklake_expire_snapshots( */")
    assert not _may_write("SELECT 'ducklake_expire_snapshots(' AS s")


def test_a_select_from_a_ducklake_function_may_write() -> None:
    assert _may_write("SELECT * FROM ducklake_expire_snapshots('lake', dry_run => true)")
    assert _may_write("SELECT * FROM \"ducklake_flush_inlined_data\"('lake')")
    assert _may_write("INSERT INTO t VALUES (1)")  # by its type


def test_only_a_call_of_a_maintenance_function_is_a_maintenance_call() -> None:
    assert stmt.is_maintenance_call("CALL ducklake_flush_inlined_data('lake')")
    assert stmt.is_maintenance_call("SELECT * FROM DuckLake_Merge_Adjacent_Files ('lake')")
    assert stmt.is_maintenance_call("SELECT * FROM \"ducklake_expire_snapshots\"('lake')")
    assert stmt.is_maintenance_call("-- compact first\nCHECKPOINT")
    assert not stmt.is_maintenance_call("SELECT 1 -- ducklake_flush_inlined_data('lake')")
    assert not stmt.is_maintenance_call("SELECT 'ducklake_merge_adjacent_files(' AS s")
    assert not stmt.is_maintenance_call("SELECT * FROM ducklake_table_info('lake')")
    assert not stmt.is_maintenance_call("SELECT ducklake_flush_inlined_data FROM t")  # a column


def test_a_failed_statement_is_named_by_the_ducklake_function_it_calls() -> None:
    assert (
        stmt.described("SELECT * FROM ducklake_rewrite_data_files('lake')", {ST.SELECT})
        == "ducklake_rewrite_data_files"
    )
    assert stmt.described("INSERT INTO t VALUES (1) -- ducklake_x()", {ST.INSERT}) == "INSERT"


def test_a_transaction_moves_through_its_states_and_forgets_its_maintenance_call() -> None:
    txn = Txn()
    assert txn.state is TxnState.NONE and not txn.open
    txn.note_maintenance_call()  # in autocommit: nothing to remember
    assert not txn.called_maintenance
    txn.share()  # in autocommit: nothing to share
    assert txn.began == Began()
    txn.begin(raw=False, began=Began(load=2, reached=5))
    assert txn.state is TxnState.BLOCK and not txn.state.raw
    txn.note_maintenance_call()
    txn.share()  # a cursor opened while it is open
    txn.fail()
    assert txn.state is TxnState.BLOCK_FAILED and txn.state.failed
    ended = txn.end()
    assert ended.state is TxnState.BLOCK_FAILED and ended.called_maintenance
    assert ended.began == Began(load=2, reached=5, shared=True)
    assert txn.state is TxnState.NONE and not txn.called_maintenance and txn.began == Began()
    txn.begin(raw=True, began=Began())
    txn.fail()
    assert txn.state is TxnState.RAW_FAILED and txn.state.raw
    assert txn.end().state is TxnState.RAW_FAILED


def test_a_session_reads_through_a_comment_naming_ducklake_and_keeps_its_transactions(
    tmp_path: Path,
) -> None:
    url = (tmp_path / "lake").as_uri()
    with connect(url, data_path=f"{tmp_path}/data/") as s:
        s.sql("CREATE TABLE t (id INTEGER)")
        s.sql("INSERT INTO t VALUES (1)")
        rows = s.sql("SELECT id FROM t -- ducklake_flush_inlined_data('lake')").fetchall()
        assert rows == [(1,)]
        with pytest.raises(MisconfigurationError, match="already open"), s.transaction():
            assert s.in_transaction
            with s.transaction():
                pass
        assert not s.in_transaction
        s.sql("BEGIN")
        s.sql("INSERT INTO t VALUES (2)")
        with pytest.raises(MisconfigurationError, match="already open"), s.transaction():
            pass
        s.sql("COMMIT")
        assert not s.in_transaction
        assert s.sql("SELECT id FROM t ORDER BY id").fetchall() == [(1,), (2,)]


def test_names_are_read_at_their_place_in_a_statement_with_non_ascii_text() -> None:
    # DuckDB's tokenizer counts UTF-8 bytes; the names are found all the same
    query = "SELECT '€€€ ✓', * FROM \"ducklake_flush_inlined_data\"('lake') -- ✓"
    assert stmt.is_maintenance_call(query)
    hostile = 'INSERT INTO "we""ird sch€ma"."ta ble\'s ✓" SELECT 1'
    assert not stmt.is_maintenance_call(hostile) and _may_write(hostile)
    assert stmt.names_any(
        'SELECT * FROM "€".__SLATELAKE_META.t', frozenset({"__slatelake_meta"}), False
    )
