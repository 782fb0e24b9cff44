"""The fault matrix, as data: which operation, which request it fails (the
boundary: HTTP method and key prefix), how, and what must come of it.

Outcomes (what the operation's caller sees, then what the lake holds):

- ``retried``: a client retried the failed request; the operation was
  acknowledged and its effect is there exactly once;
- ``durable``: the write landed but its answer was lost, and slatelake found
  it (re-read the slot, or the retry met its own object); acknowledged, exactly once;
- ``tolerated``: a best-effort request failed (collecting old lease records;
  a fold turn's image, lease renewals or release) and the operation went on;
  acknowledged, its effect there exactly once;
- ``never happened``: the operation raised ``error`` (a typed error) or its
  pass step failed naming it; its effect is absent;
- ``ambiguous``: it raised ``error``, an error that says the write may have
  landed; its effect is absent or there exactly once.

Every case then opens the lake fresh, checks the oracle and runs a pass that
completes (``lake.check_lake``). A transient fault fails one request
(``times=1``); a persistent one fails every matching request until the
operation ends, past every client's own retries.

``CASES`` is every combination, its outcome from the rules in ``expect``
(written from what the proxy showed each client doing) or ``OBSERVED``;
``DEFAULT`` the ones ``bash scripts/faults`` runs (a few minutes on two cores),
``QUICK`` the part of DEFAULT in the suite's default tier (``bash scripts/test``);
``SLATELAKE_FAULTS_FULL=1`` (``bash scripts/faults --full``) runs them all.
A case where slatelake misbehaves states the right outcome and carries
``bug``, naming what happens instead: it is a strict xfail until fixed.
``python -m tests.faults.matrix [--full]`` prints the cases as a table.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from tests.faults.proxy import KINDS, FaultRule

OUTCOMES = ("retried", "durable", "tolerated", "never happened", "ambiguous")
ACKNOWLEDGED = ("retried", "durable", "tolerated")
# A delay past every deadline: the store timeout the cases run with, plus one.
STORE_TIMEOUT_S = 4.0
DELAY_S = STORE_TIMEOUT_S + 1.0
FULL_ENV = "SLATELAKE_FAULTS_FULL"
_ORDINAL = {2: "nd", 3: "rd"}


@dataclass(frozen=True)
class Case:
    operation: str  # tests/faults/operations.py OPERATIONS
    method: str  # HTTP method, or LIST for a bucket listing
    prefix: str  # the key prefix under the lake root or the data path
    kind: str  # proxy.KINDS
    outcome: str  # OUTCOMES
    error: str | None = None  # the typed error class (never happened / ambiguous)
    persistent: bool = False  # fail every matching request, not just the first
    nth: int = 1  # which matching request fails first
    bug: str | None = None  # the observed outcome is a bug: strict xfail with this reason

    def __post_init__(self) -> None:
        assert self.kind in KINDS, self.kind
        assert self.outcome in OUTCOMES, self.outcome
        assert (self.error is None) == (self.outcome in ACKNOWLEDGED), self

    @property
    def boundary(self) -> str:
        return self.prefix.rstrip("/").replace("/", "_")

    @property
    def id(self) -> str:
        kind = f"{self.kind}_persistent" if self.persistent else self.kind
        nth = f"_{_ordinal(self.nth)}" if self.nth > 1 else ""
        outcome = self.outcome.replace(" ", "_")
        if self.error:
            outcome += f"_{self.error}"
        return f"{self.operation}-{self.method.lower()}{nth}-{self.boundary}-{kind}-{outcome}"

    def rule(self) -> FaultRule:
        return FaultRule(
            method=self.method,
            prefix=self.prefix,
            kind=self.kind,
            nth=self.nth,
            times=None if self.persistent else 1,
            delay_s=DELAY_S if self.kind == "delay" else 0.0,
        )


def _ordinal(n: int) -> str:
    return f"{n}{_ORDINAL.get(n, 'th')}"


def full_mode() -> bool:
    return os.environ.get(FULL_ENV, "") not in ("", "0")


# -- the boundaries each operation crosses (seen with FaultProxy(record=True)) --
# Each pass step runs alone, so its commit is the pass's first slot PUT and its
# lease the pass's first maintenance/ PUT.
BOUNDARIES: dict[str, tuple[tuple[str, str], ...]] = {
    "commit": (
        ("LIST", "commits/"),  # the statement's refresh to the log's head
        ("PUT", "data/"),  # the Parquet file, through DuckDB's httpfs
        ("PUT", "commits/"),  # the slot, create-if-absent (its lease vouches: no mark read)
    ),
    # a commit whose reader lease is about to end reads the truncation mark after its slot
    "commit_late": (("GET", "log/"),),
    # a write right after a look: its LIST runs beside the statement
    "commit_beside": (("LIST", "commits/"),),
    "fold": (
        ("GET", "commits/"),
        ("LIST", "commits/"),
        ("PUT", "store/manifest/"),  # opening the writer (fencing) and the flush
        ("PUT", "store/compacted/"),  # the flushed L0 SSTs
        ("PUT", "store/wal/"),
        ("PUT", "log/"),  # the truncation mark, raised before deleting
        ("POST", "commits/"),  # deleting folded slots
        ("LIST", "readers/"),  # the reader leases truncation honours
    ),
    # One holder's turn (maintenance/fold.py): the holder lease around the
    # fold's own boundaries (below), the image, and the backlog it measures last.
    "fold_turn": (
        ("PUT", "holder/"),  # taking the holder lease (its renewals and release after)
        ("LIST", "holder/"),  # who holds it, and the claim's check that it is the newest
        ("POST", "holder/"),  # collecting older generations (a renewal, the release)
        ("PUT", "images/"),  # the catalog image, create-if-absent
        ("LIST", "images/"),  # the newest image (the cadence), collecting, the backlog
    ),
    "pass_expire": (
        ("PUT", "maintenance/"),  # the pass lease
        ("LIST", "maintenance/"),
        ("POST", "maintenance/"),  # releasing it
        ("PUT", "commits/"),
    ),
    "pass_flush": (("PUT", "data/"), ("PUT", "commits/")),
    "pass_merge": (("GET", "data/"), ("PUT", "data/"), ("PUT", "commits/")),
    "pass_rewrite": (("GET", "data/"), ("PUT", "data/"), ("PUT", "commits/")),
    "pass_cleanup": (("POST", "data/"), ("PUT", "commits/")),
    "pass_orphans": (("LIST", "data/"), ("HEAD", "data/"), ("POST", "data/")),
    "sweep": (("GET", "store/compacted/"), ("LIST", "commits/"), ("PUT", "commits/")),
    "store_merge": (
        ("GET", "store/manifest/"),
        ("LIST", "store/compactions/"),
        ("PUT", "store/compactions/"),  # the submitted merge
    ),
}
# The turn folds and truncates through the same folder as "fold".
BOUNDARIES["fold_turn"] += BOUNDARIES["fold"]
# Boundaries whose first matching request is not the one to fail: (method,
# prefix, nth). The holder lease after it was taken: its first PUT is the
# claim, every later one a heartbeat's renewal or the release; its first two
# LISTs read who holds it and the third checks the claim, every later one
# checks a renewal or the release. A fault there leaves the lease held at
# worst until it expires.
LATER: dict[str, tuple[tuple[str, str, int], ...]] = {
    "fold_turn": (("PUT", "holder/", 2), ("LIST", "holder/", 4)),
}

_READS = ("GET", "LIST", "HEAD")
# The fold's last phase: after the batch is flushed, truncation (leases, the
# mark, deletes). A fault there stops a fold that already landed.
_TRUNCATION = {("LIST", "readers/"), ("PUT", "log/"), ("POST", "commits/")}
_FOLDS = ("fold", "fold_turn")
_LEASES = ("maintenance/", "holder/")  # the pass lease and the holder lease: one set of rules
# The fold turn's cases run with this lease TTL (SLATELAKE_PASS_LEASE_TTL_S,
# which the holder lease reads too), so a lease a failed turn left held ends
# soon; the turn after it must then take it and fold everything.
HOLDER_TTL_S = 5.0
Expectation = tuple[str, str | None, str | None]  # (outcome, error, bug)


def expect(
    operation: str, method: str, prefix: str, kind: str, persistent: bool, nth: int = 1
) -> Expectation:
    """The expected outcome by rule; ``OBSERVED`` overrides it where a case differs.

    Who retries what: obstore retries 5xx (and, for reads, dropped
    connections); SlateDB retries every failure, a 403 too, within the call's
    deadline, and a refusal it hides is found by asking the store
    (``store/refusal.py``); DuckDB's httpfs retries data-file requests; slatelake retries
    the truncation mark and resolves a failed slot PUT by re-reading the slot.
    A fault that outlasts the retries raises: a refusal (403) or
    unavailability (5xx, a drop, a delay past the deadline), or, where the
    write may have landed, an ambiguous error. A delay is past every deadline."""
    data, store = prefix == "data/", prefix.startswith("store/")
    # a single fault obstore's own retries absorb: a 5xx, or a dropped read
    retry_once = not persistent and (
        kind in ("500", "503") or (method in _READS and "drop" in kind)
    )
    if prefix == "holder/" and nth > 1:  # a renewal or the release: the lease lapses at its expiry
        if retry_once:
            return "retried", None, None
        landed_write = (method, kind) == ("PUT", "drop_after")  # read back: ours
        return ("durable" if landed_write else "tolerated"), None, None
    if operation == "commit_beside" and not persistent:
        return "retried", None, None  # a failed look counts as moved: rolled back, refreshed
    slot_write = (method, prefix) == ("PUT", "commits/")
    lease_write = method == "PUT" and prefix in _LEASES
    mark_read = operation == "commit_late" and (method, prefix) == ("GET", "log/")
    landed = operation in _FOLDS and (method, prefix) in _TRUNCATION
    failed = "ambiguous" if landed or slot_write or mark_read else "never happened"
    if prefix == "images/":  # the turn's image is best effort: image_error, never a failure
        if retry_once:
            return "retried", None, None
        if persistent and method == "LIST":  # the backlog the turn measures last lists them too
            error = "PermissionDeniedError" if kind == "403" else "StoreUnavailableError"
            return "ambiguous", error, None
        return "tolerated", None, None
    if data and method == "HEAD" and operation == "pass_orphans" and persistent and kind != "delay":
        # the only HEAD is the data path's probe, which takes any answer as leave
        # to start; DuckLake's dry run lists, and slatelake deletes what it allowed
        return "tolerated", None, None
    if data:  # httpfs retries every fault; what outlasts it is a typed error
        if kind == "403" and method in ("GET", "HEAD") and not persistent:
            return "retried", None, None  # httpfs retries a read's refusal; the oracle holds
        if kind == "403" and method == "HEAD":
            return "retried", None, None  # httpfs reads the object with a ranged GET instead
        if kind == "403" or persistent:
            # an orphan or cleanup step that DuckLake let through fails naming the
            # objects, from DuckDB's HTTP log (ducklake/request_log.py); a held
            # request fails at the store deadline (extensions.bound_http_requests), or,
            # before a call that sends requests no deadline reaches (the orphan step's
            # HEADs, a compaction's uploads), the data path is asked first and the step
            # fails before DuckDB starts it (store/reachable.py)
            error = "PermissionDeniedError" if kind == "403" else "StoreUnavailableError"
            return "never happened", error, None
        return ("durable" if kind == "drop_after" else "retried"), None, None
    if method == "POST" and prefix in _LEASES and (persistent or kind not in ("500", "503")):
        return "tolerated", None, None  # collecting old lease records is best effort
    if kind == "403":
        if store and not persistent:
            return "retried", None, None
        if mark_read:
            return "ambiguous", "AmbiguousWriteError", None
        # A refusal is definite: nothing landed (the fold's own batch aside).
        return "ambiguous" if landed else "never happened", "PermissionDeniedError", None
    if lease_write and kind == "drop_after":
        return "durable", None, None  # the claim reads its record back: ours
    if lease_write and persistent:  # withdrawing the claim fails too
        # held writes too: the release sent after the withdrawal frees it once it lands
        return "ambiguous", "AmbiguousWriteError", None
    if lease_write and kind not in ("500", "503"):
        return "never happened", "StoreUnavailableError", None  # withdrawn: created as released
    if kind == "delay":
        if slot_write:
            return "durable", None, None  # it lands late; the re-read finds it
        if mark_read and not persistent:
            return "retried", None, None
        return failed, "AmbiguousWriteError" if mark_read else "StoreUnavailableError", None
    retried = "durable" if kind == "drop_after" and method not in _READS else "retried"
    deletes = method == "POST"  # obstore's DELETE is a bulk delete of one key
    if not persistent:
        if kind in ("500", "503") or store or slot_write or method in _READS or prefix == "log/":
            return retried, None, None
        if deletes:  # slatelake sends a DELETE again (idempotent): ObjectClient.delete
            return retried, None, None
        return failed, "StoreUnavailableError", None  # obstore never retries a dropped write
    if slot_write and kind == "drop_after":
        return "durable", None, None
    return (
        failed,
        "AmbiguousWriteError" if slot_write or mark_read else "StoreUnavailableError",
        None,
    )


OBSERVED: dict[str, Expectation] = {
    # SlateDB's retried PUT of the compactions record finds the one that landed.
    "store_merge-put-store_compactions-drop_after_persistent": ("durable", None, None),
    # The held submit lands while the permission probe after its timeout waits
    # on its own held PUT; the step's next submit finds that job and adopts it.
    "store_merge-put-store_compactions-delay_persistent": ("durable", None, None),
    # A compaction's first data-file PUT is the data path probe (store/reachable.py),
    # which takes any answer, a refusal too, as leave to start; the upload after
    # it is allowed.
    "pass_merge-put-data-403": ("retried", None, None),
    "pass_rewrite-put-data-403": ("retried", None, None),
}


def _stem(case: Case) -> str:
    return case.id.rsplit("-", 1)[0]


def _all_cases() -> list[Case]:
    cases = []
    for operation, boundaries in BOUNDARIES.items():
        firsts = [(method, prefix, 1) for method, prefix in boundaries]
        for method, prefix, nth in [*firsts, *LATER.get(operation, ())]:
            for kind in KINDS:
                for persistent in (False, True):
                    probe = Case(operation, method, prefix, kind, "retried", None, persistent, nth)
                    outcome, error, bug = OBSERVED.get(_stem(probe)) or expect(
                        operation, method, prefix, kind, persistent, nth
                    )
                    cases.append(
                        Case(operation, method, prefix, kind, outcome, error, persistent, nth, bug)
                    )
    return cases


CASES = _all_cases()
# The default matrix: every operation, every kind, the boundaries where a fault
# tests a decision slatelake makes (ambiguity, refusal, fencing, leases).
DEFAULT_STEMS = (
    "commit-put-commits-drop_after",
    "commit-put-commits-403",
    "commit-put-commits-503_persistent",
    "commit-put-commits-delay",
    "commit-put-data-503_persistent",
    "commit_late-get-log-403",
    "commit_beside-list-commits-403",
    "commit-list-commits-drop_before",
    "fold-put-store_manifest-500_persistent",
    "fold-put-store_compacted-drop_after",
    "fold-put-log-403",
    "fold-post-commits-drop_after",
    "fold_turn-put-holder-503",
    "fold_turn-put-holder-drop_after",
    "fold_turn-put-holder-delay",
    "fold_turn-put_2nd-holder-403_persistent",  # the release refused: held until its TTL
    "fold_turn-put-images-403_persistent",
    "fold_turn-list-images-403_persistent",
    "fold_turn-put-log-403",
    "pass_expire-put-commits-drop_after",
    "pass_expire-put-maintenance-403",
    "pass_expire-put-maintenance-drop_after",
    "pass_expire-put-maintenance-delay",
    "pass_flush-put-data-500_persistent",
    "pass_merge-get-data-drop_before",
    "pass_rewrite-put-commits-503_persistent",
    "pass_rewrite-get-data-drop_before",
    "pass_rewrite-put-data-delay_persistent",
    "pass_cleanup-post-data-403",
    "pass_orphans-list-data-500_persistent",
    "pass_orphans-head-data-delay_persistent",
    "sweep-put-commits-drop_after",
    "store_merge-put-store_compactions-503_persistent",
)
# The suite's default tier: every outcome class, the commit, the fold (and the
# fold turn), the pass and the sweep, in the cases quickest to judge (about a third of DEFAULT's
# time); the rest of DEFAULT and the full matrix are the long tier.
QUICK_STEMS = (
    "commit-put-commits-403",
    "commit_beside-list-commits-403",
    "commit-put-commits-503_persistent",
    "commit-put-commits-delay",
    "commit-put-data-503_persistent",
    "fold-put-log-403",
    "fold_turn-put-holder-503",
    "fold_turn-put-images-403_persistent",
    "pass_expire-put-maintenance-403",
    "pass_expire-put-maintenance-drop_after",
    "pass_flush-put-data-500_persistent",
    "pass_merge-get-data-drop_before",
    "pass_rewrite-get-data-drop_before",
    "pass_cleanup-post-data-403",
    "sweep-put-commits-drop_after",
)
_BY_STEM = {_stem(c): c for c in CASES}
DEFAULT = [_BY_STEM[s] for s in DEFAULT_STEMS]
QUICK = [_BY_STEM[s] for s in QUICK_STEMS]
assert set(QUICK_STEMS) <= set(DEFAULT_STEMS)


def markdown(cases: list[Case]) -> str:
    """The cases as a markdown table (for docs/architecture.md)."""
    lines = [
        "| operation | request | fault | outcome | error | bug |",
        "|---|---|---|---|---|---|",
    ]
    for c in cases:
        kind = f"{c.kind}, persistent" if c.persistent else c.kind
        bug = "yes" if c.bug else ""
        nth = f" ({_ordinal(c.nth)} on)" if c.nth > 1 else ""
        lines.append(
            f"| {c.operation} | {c.method} `{c.prefix}`{nth} | {kind} | {c.outcome} "
            f"| {c.error or ''} | {bug} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":  # python -m tests.faults.matrix [--full]
    import sys

    print(markdown(CASES if "--full" in sys.argv else DEFAULT))
