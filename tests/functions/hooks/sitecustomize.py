"""Fault injection for a Lambda handler run in a child process by the test
server (tests/moto_server.py): Python imports this at start-up when a
function's environment puts this directory on PYTHONPATH. Nothing here runs
unless the function's environment names a table:

- ``SLATELAKE_TEST_CONFLICTING_TABLE=t3``: every maintenance call on main.t3
  loses its commit race (ConflictError), as a rival committer would make it;
- ``SLATELAKE_TEST_FAILING_TABLE=t5``: a table batch holding main.t5 raises
  before it starts (its Map item fails).
"""

from __future__ import annotations

import os

_CONFLICTING = os.environ.get("SLATELAKE_TEST_CONFLICTING_TABLE")
_FAILING = os.environ.get("SLATELAKE_TEST_FAILING_TABLE")

if _CONFLICTING:
    from slatelake.ducklake.session import Session
    from slatelake.errors import ConflictError

    _checked = Session.run_maintenance_unless

    def _conflicting(self, query, check):  # noqa: ANN001, ANN202
        if f"'{_CONFLICTING}'" in query:
            raise ConflictError(f"injected: another commit landed on main.{_CONFLICTING} first")
        return _checked(self, query, check)

    Session.run_maintenance_unless = _conflicting  # type: ignore[method-assign]

if _FAILING:
    from slatelake.maintenance import fanout_run

    _batch = fanout_run.run_batch

    def _failing(session, order, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        if ("main", _FAILING) in order.tables:
            raise RuntimeError(f"injected: the batch holding main.{_FAILING} crashed")
        return _batch(session, order, *args, **kwargs)

    fanout_run.run_batch = _failing
