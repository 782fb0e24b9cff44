"""The capture check (``SLATELAKE_VERIFY_CAPTURE=1``), the net under the
fast capture that the bridge and maintenance tests run with: after a commit,
every metadata table DuckLake holds must equal the committed base. A net
that never fires proves nothing, so each kind of difference is made here by
hand in the base and must be named."""

from __future__ import annotations

from pathlib import Path

import pytest

from slatelake.ducklake.session import BASE_DB, Session
from slatelake.errors import CorruptionError


@pytest.fixture
def session(tmp_path: Path) -> Session:
    s = Session((tmp_path / "lake").as_uri(), data_path=f"{tmp_path / 'data'}/")
    s.sql("CREATE TABLE t (id INTEGER, v VARCHAR)")
    s.sql("INSERT INTO t VALUES (1, 'inlined')")
    s.capture.verify(s.state)  # in step after honest commits
    yield s
    s.close()


@pytest.mark.parametrize(
    "tamper, table",
    [
        # one value of one row changed: same count, another hash
        ("UPDATE {db}.ducklake_table SET table_name = 'u'", "ducklake_table"),
        ("UPDATE {db}.ducklake_snapshot SET next_file_id = next_file_id + 1", "ducklake_snapshot"),
        # a row gone
        ("DELETE FROM {db}.ducklake_column WHERE column_name = 'v'", "ducklake_column"),
        # an inlined row's value changed
        ("UPDATE {db}.ducklake_inlined_data_1_1 SET v = 'other'", "ducklake_inlined_data_1_1"),
    ],
    ids=["value", "counter", "row", "inlined-value"],
)
def test_the_capture_check_names_a_table_that_differs_from_the_base(
    session: Session, tamper: str, table: str
) -> None:
    session.con.execute(tamper.format(db=BASE_DB))
    with pytest.raises(CorruptionError, match=f"capture check: {table} in DuckDB differs"):
        session.capture.verify(session.state)


def test_the_capture_check_names_an_inlined_table_on_one_side_only(session: Session) -> None:
    session.con.execute(f"DROP TABLE {BASE_DB}.ducklake_inlined_data_1_1")
    session.state.list_inline_names()
    with pytest.raises(CorruptionError, match="ducklake_inlined_data_1_1 exists on one side only"):
        session.capture.verify(session.state)
