"""The backup action makes a restore point when the event asks: the lake as
backed up, kept whole, restorable; a bad ``restore_point`` is refused before
anything runs."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

import slatelake
from tests.functions.conftest import FakeContext


def test_a_backup_makes_the_restore_point_it_is_asked_for(
    app: ModuleType, small_lake: str, tmp_path: Path
) -> None:
    event = {"action": "backup", "lake": small_lake}
    out = app.handler({**event, "restore_point": {"name": "nightly", "ttl": "30d"}}, FakeContext())
    assert out["ok"], out
    point = out["restore_point"]["point"]
    assert point["name"] == "nightly" and point["snapshot_id"] == out["result"]["head_snapshot_id"]
    assert point["created_by"].startswith("lambda:") and point["expires_at"] is not None
    back = (tmp_path / "back").as_uri()
    slatelake.open(small_lake).restore_points.restore("nightly", back, share_data=True)
    with slatelake.connect(back, read_only=True) as s:
        assert s.sql("SELECT id FROM t ORDER BY 1").fetchall() == [(0,), (1,), (2,)]
    out = app.handler({**event, "restore_point": True}, FakeContext())
    assert out["restore_point"]["point"]["name"].startswith("rp-")
    assert "restore_point" not in app.handler(event, FakeContext())
    assert len(slatelake.open(small_lake).restore_points.list()) == 2


@pytest.mark.parametrize(
    ("ask", "words"),
    [
        ({"name": "a/b"}, "restore point name 'a/b'"),
        ({"ttl": "soon"}, "restore_point.ttl"),
        ({"keep": 1}, "send true, or an object with name and ttl"),
        ("yes", "send true, or an object with name and ttl"),
    ],
)
def test_a_bad_restore_point_is_refused_before_the_backup_runs(
    app: ModuleType, small_lake: str, ask: object, words: str
) -> None:
    out = app.handler({"action": "backup", "lake": small_lake, "restore_point": ask}, FakeContext())
    assert not out["ok"] and words in out["error"]["message"]
    assert slatelake.open(small_lake).restore_points.list() == []
