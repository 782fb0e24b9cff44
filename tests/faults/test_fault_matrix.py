"""The fault matrix (tests/faults/matrix.py), run: each case fails one
boundary of one operation through the proxy in front of moto, checks what
the operation's caller saw, then opens the lake fresh without faults, checks
the oracle of acknowledged commits and runs a pass that completes. After a
fold turn (``fold_turn``) the next turn, without faults, must take the holder
lease (once the faulted turn's lease, if it left one held, has expired: its
cases run with a short TTL) and fold everything.

The base lake is built once per module (per worker) and each case starts
from a copy of it at the same keys. ``SLATELAKE_FAULTS_FULL=1`` (or
``bash scripts/faults --full``) runs every combination, not just the default;
the suite's default tier runs ``matrix.QUICK``, the rest is the ``long`` tier's.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator

import boto3
import pytest

from slatelake.maintenance.delete_boundary import SKEW_ENV
from slatelake.maintenance.flight import TTL_ENV
from slatelake.maintenance.fold import FOLDED
from slatelake.store.db import COMPACTOR_POLL_ENV
from tests.faults import matrix
from tests.faults.lake import BaseLake, build_base, check_lake, copy_bucket, record, stray_file
from tests.faults.operations import COMMIT_ROWS, COMMITS, Observation, next_turn, run_operation
from tests.faults.proxy import FaultProxy

STORE_TIMEOUT_ENV = "SLATELAKE_STORE_TIMEOUT_S"

# one worker builds the shared lake once and runs every test on it (scripts/test: --dist loadgroup)
pytestmark = pytest.mark.xdist_group("fault-matrix")


def _params() -> list:
    """The default cases (in full mode every case), those beyond the quick
    ones marked ``long``: ``bash scripts/test`` runs the quick ones, ``bash
    scripts/faults`` the default matrix, ``bash scripts/test --long`` (which
    turns full mode on) and ``bash scripts/faults --full`` the rest."""
    chosen = matrix.CASES if matrix.full_mode() else matrix.DEFAULT
    default = {case.id for case in matrix.QUICK}
    return [
        pytest.param(
            case,
            id=case.id,
            marks=[
                *([pytest.mark.xfail(strict=True, reason=case.bug)] if case.bug else []),
                *([] if case.id in default else [pytest.mark.long]),
            ],
        )
        for case in chosen
    ]


@pytest.fixture(scope="module")
def faulted(moto_endpoint: str) -> Iterator[tuple[BaseLake, FaultProxy]]:
    """The base lake (built straight on moto) and a proxy in front of moto."""
    s3 = boto3.client("s3", endpoint_url=moto_endpoint)
    work, pristine = (f"faults-{uuid.uuid4().hex[:10]}" for _ in range(2))
    s3.create_bucket(Bucket=work)
    s3.create_bucket(Bucket=pristine)
    base = BaseLake(f"s3://{work}/lake", f"s3://{work}/data/", work, pristine)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(COMPACTOR_POLL_ENV, "100ms")
        build_base(base.url, base.data_path)
        stray_file(base)
        record(base)
    copy_bucket(work, pristine, moto_endpoint)
    with FaultProxy(upstream=moto_endpoint) as proxy:
        yield base, proxy


def _assert_outcome(case: matrix.Case, seen: Observation) -> None:
    assert not seen.hung, f"the operation hung: {seen.detail}"
    if case.outcome in matrix.ACKNOWLEDGED:
        assert seen.acked, f"expected {case.outcome}, but it raised {seen.error}: {seen.detail}"
        return
    assert not seen.acked, f"expected {case.error}, but it was acknowledged: {seen.detail}"
    assert case.error is not None and seen.raised(case.error), (
        f"expected {case.error}, got {seen.error}: {seen.detail}"
    )


def _assert_turn(case: matrix.Case, seen: Observation) -> None:
    """An acknowledged fold turn folded everything and said how its image went:
    a failed image is reported (``image_error``) and the turn still folds and
    truncates (maintenance/fold.py ``_image``). Where every renewal fails
    without an answer, the holder must stop once one has (it can no longer
    show that it holds: flight.py ``_forfeit``); whether that comes before
    its fold is done is timing, so such a turn may end partial, saying so,
    and the next turn folds everything (``_assert_next_turn``)."""
    turn = json.loads(seen.detail)
    if _renewals_fail(case) and turn["status"] == "partial":
        assert "the holder lease was lost" in turn["reason"], turn
        return
    assert turn["status"] == FOLDED, f"the turn did not fold everything: {turn}"
    assert turn["backlog"]["unfolded_slots"] == 0 and turn["truncated"] > 0, turn
    if case.prefix == "images/" and case.outcome == "tolerated":
        assert turn["image_error"] and turn["image"] is None, f"no image error reported: {turn}"
    else:
        assert turn["image_error"] is None and turn["image"] is not None, turn


def _renewals_fail(case: matrix.Case) -> bool:
    """Every renewal of the turn's holder lease fails without an answer (a
    refusal is an answer: the lease is kept to its expiry; a dropped answer
    is read back as ours)."""
    later_put = (case.method, case.prefix) == ("PUT", "holder/") and case.nth > 1
    return later_put and case.persistent and case.kind not in ("403", "drop_after")


def _assert_next_turn(url: str) -> float:
    """The turn after a faulted one takes the holder lease (at the latest once
    a lease the faulted one left held expired, with its late writes landed)
    and folds everything. Returns how long turns skipped before it."""
    within_s = matrix.HOLDER_TTL_S + 2 * matrix.DELAY_S
    turn, skipped, waited = next_turn(url, within_s)
    doc = turn.to_dict()
    assert turn.status == FOLDED, (
        f"the turn after the fault, after {skipped} skipped in {waited:.1f}s (the lease TTL "
        f"is {matrix.HOLDER_TTL_S:g}s): {turn.status}: {turn.reason}: {doc}"
    )
    assert turn.backlog is not None and turn.backlog.unfolded_slots == 0, doc
    assert turn.image_error is None, doc
    return waited


@pytest.mark.parametrize("case", _params())
def test_fault(
    case: matrix.Case,
    faulted: tuple[BaseLake, FaultProxy],
    moto_endpoint: str,
    monkeypatch: pytest.MonkeyPatch,
    record_property: Callable[[str, object], None],
) -> None:
    base, proxy = faulted
    # A write an earlier case's fault held lands late: before the lake is restored.
    assert proxy.settle(2 * matrix.DELAY_S), "a held request is still on its way"
    copy_bucket(base.pristine, base.bucket, moto_endpoint)
    monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
    monkeypatch.setenv(STORE_TIMEOUT_ENV, f"{matrix.STORE_TIMEOUT_S:g}")
    monkeypatch.setenv(COMPACTOR_POLL_ENV, "100ms")
    # the stray orphan was made moments ago, on this host's clock: no skew
    # allowance, so the orphan step deletes it (maintenance/delete_boundary.py)
    monkeypatch.setenv(SKEW_ENV, "0")
    turn = case.operation == "fold_turn"
    if turn:
        monkeypatch.setenv(TTL_ENV, f"{matrix.HOLDER_TTL_S:g}")
    proxy.clear()
    before = proxy.injected
    try:
        seen = run_operation(case.operation, base.url, lambda: proxy.add(case.rule()), proxy.clear)
    finally:
        proxy.clear()
    assert proxy.injected > before, f"the fault never fired: {case.operation} made no such request"
    _assert_outcome(case, seen)
    if turn:
        if seen.acked:
            _assert_turn(case, seen)
        record_property("turn", seen.detail if seen.acked else f"{seen.error}: {seen.detail}")
        record_property("next_turn_skipped_for_s", round(_assert_next_turn(base.url), 2))
        monkeypatch.delenv(TTL_ENV)  # the pass check_lake runs takes its own lease as usual
    rows = COMMIT_ROWS if case.operation in COMMITS else None
    present = {
        "retried": "once",
        "durable": "once",
        "tolerated": "once",
        "never happened": "absent",
    }.get(case.outcome, "either")
    check_lake(base, rows, present, fold=case.operation == "fold")
