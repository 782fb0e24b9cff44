"""One holder's turn: fold the whole log, image when due, truncate, and let
SlateDB's compactor execute the store merges passes submitted.

This is the fold function's invocation (``functions/maintenance``, action
``fold``) and ``slatelake fold``: a holder for as long as one call, for lakes
with nothing resident. It takes the holder lease first and skips while a live
holder (a resident ``slatelake hold``, another fold) has it, so the two never
fence each other. Every step is durable before the next: a fold killed at any
point leaves the log as the truth and the next turn finishes the work; a
merge still running when the deadline nears stays in SlateDB's compactions
record, reported ``pending``, and the next turn's compactor picks it up.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from slatelake.catalog.folder import Folder
from slatelake.errors import MisconfigurationError, NotFoundError, SlatelakeError
from slatelake.log.leases import DEFAULT_MARGIN_S
from slatelake.maintenance import backlog as backlogs
from slatelake.maintenance.flight import LeaseRecord
from slatelake.maintenance.holder import HolderLease, ImageCadence, folded_of, take_holder
from slatelake.maintenance.option_values import parse_bool
from slatelake.store.db import compactor_poll_interval_s, store_exists
from slatelake.store.location import LakeLocation, Located, location_of, show_input
from slatelake.store.merge import FAILED, merges_in_flight, outcomes_of

log = logging.getLogger("slatelake.fold")
FOLDED, SKIPPED, PARTIAL = "folded", "skipped", "partial"
# Image cadence when nothing else is said (``slatelake hold``'s defaults).
DEFAULT_EVERY_SLOTS = 200
DEFAULT_MAX_AGE_S = 600.0
DEFAULT_GRACE_S = 900.0
MIN_MERGE_POLL_S = 0.05

Progress = Callable[[str, dict[str, Any]], None]


@dataclass(frozen=True)
class FoldRequest:
    """What one turn does. ``image``: None writes one when the cadence says
    (``every_slots`` folded since the newest image, or it is older than
    ``max_age_s``), True whenever something was folded since the newest, False
    never. ``compact``: wait for submitted store merges while time is left
    (False: close as soon as the fold is durable; a merge then waits for the
    next holder). ``margin_s``: how long a folded slot stays before truncation."""

    image: bool | None = None
    compact: bool = True
    margin_s: float = DEFAULT_MARGIN_S
    every_slots: int = DEFAULT_EVERY_SLOTS
    max_age_s: float = DEFAULT_MAX_AGE_S
    grace_s: float = DEFAULT_GRACE_S

    @classmethod
    def from_mapping(cls, doc: Mapping[str, object], **defaults: Any) -> FoldRequest:
        """``image`` (true, false, or absent: the cadence decides) and
        ``compact`` from outside input; ``defaults`` the caller's cadence."""
        if not isinstance(doc, Mapping):
            raise MisconfigurationError(f"a fold is a JSON object, not {type(doc).__name__}")
        unknown = sorted(str(k) for k in doc if k not in ("image", "compact"))
        if unknown:
            raise MisconfigurationError(
                f"unknown option(s) {', '.join(map(show_input, unknown))} for a fold; it takes "
                "image, compact"
            )
        image = doc.get("image")
        compact = doc.get("compact")
        return cls(
            image=None if image is None else parse_bool("image", image),
            compact=True if compact is None else parse_bool("compact", compact),
            **defaults,
        )

    def __post_init__(self) -> None:
        if self.every_slots < 0 or self.max_age_s < 0 or self.grace_s < 0 or self.margin_s < 0:
            raise MisconfigurationError(
                "fold: image cadence, grace and margin must not be negative "
                f"(every_slots={self.every_slots}, max_age_s={self.max_age_s:g}, "
                f"grace_s={self.grace_s:g}, margin_s={self.margin_s:g})"
            )


@dataclass
class FoldTurn:
    """What one turn did. ``status``: ``folded`` (caught up with the log and
    every merge it waited on), ``partial`` (the deadline or a lost lease cut
    it short: ``reason`` says which; the next turn goes on), ``skipped``
    (another holder is live: ``reason`` names it)."""

    lake: str
    status: str = FOLDED
    reason: str = ""
    slots_folded: int = 0
    change_sets: int = 0
    operations: int = 0
    truncated: int = 0
    fold_seq: int | None = None
    head_snapshot_id: int | None = None
    image: dict[str, Any] | None = None
    image_error: str | None = None
    images_collected: int = 0
    merges_completed: int = 0
    merges_pending: int = 0
    merges_failed: int = 0
    backlog: backlogs.Backlog | None = None
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        doc = {k: v for k, v in self.__dict__.items() if k != "backlog"}
        doc["seconds"] = round(self.seconds, 3)
        doc["backlog"] = self.backlog.to_dict() if self.backlog is not None else None
        return doc


def fold_turn(
    url: str | LakeLocation | Located,
    request: FoldRequest | None = None,
    *,
    deadline: Callable[[], float] | None = None,
    on_progress: Progress | None = None,
    fault: Callable[[str], None] | None = None,
) -> FoldTurn:
    """One holder's turn on the lake at ``url`` (see the module doc).
    ``deadline`` returns the seconds left to work; at zero the turn stops
    between folds and before the image and the merge wait. ``fault``
    is called at each crash boundary (the folder's, then ``after_fold``,
    ``after_image``, ``after_truncate``): the fault matrix kills turns there."""
    location = location_of(url)
    request = request or FoldRequest()
    say = on_progress or (lambda message, fields: log.info("%s %s", message, fields))
    t0 = time.monotonic()
    if not store_exists(location):  # before the lease: never write under a non-lake
        raise NotFoundError(f"no slatelake lake at {location.url}; nothing to fold")
    turn = FoldTurn(location.url)
    lease, previous = take_holder(location)
    if not lease.try_acquire():
        turn.status = SKIPPED
        held = lease.current()
        turn.reason = "a live holder holds the lake" + (f" ({held.describe()})" if held else "")
        say("fold skipped", {"why": turn.reason})
        turn.backlog = backlogs.measure(location)
        turn.seconds = time.monotonic() - t0
        return turn
    lease.start_heartbeat()
    try:
        _hold_once(location, request, lease, previous, turn, deadline, say, fault)
    finally:
        lease.release()
        turn.seconds = time.monotonic() - t0
    say("fold finished", turn.to_dict())
    return turn


def _hold_once(
    location: LakeLocation,
    request: FoldRequest,
    lease: HolderLease,
    previous: LeaseRecord | None,
    turn: FoldTurn,
    deadline: Callable[[], float] | None,
    say: Progress,
    fault: Callable[[str], None] | None,
) -> None:
    crash = fault or (lambda boundary: None)

    def stop_reason() -> str | None:
        if lease.lost is not None:
            return f"the holder lease was lost: {lease.lost}"
        if deadline is not None and deadline() <= 0:
            return "the invocation deadline is near"
        return None

    # The compactor starts with the writer: what is owed is read before it opens.
    owed = {m.compaction_id for m in merges_in_flight(location)} if request.compact else set()
    folder = Folder(location, margin_s=request.margin_s, fault=fault, folded_before=lease.folded)
    try:
        say("fold start", {"fold_cursor": folder.seq, "previous_fold": folded_of(previous)})
        while True:  # until a fold finds nothing new: committers keep writing
            report = folder.fold_once(truncate=False)
            lease.note_fold(folder.flushed_seq)
            turn.slots_folded += report.slots
            turn.change_sets += report.change_sets
            turn.operations += report.operations
            if report.slots:
                say("folded", {"slots": report.slots, "fold_cursor": folder.seq})
            why = stop_reason()
            if report.slots == 0 or why is not None:
                break
        turn.fold_seq, turn.head_snapshot_id = folder.seq, folder.head.snapshot_id
        crash("after_fold")
        if why is None:
            _image(location, request, folder, turn, say)
            crash("after_image")
        turn.truncated = folder.truncate()
        crash("after_truncate")
        if turn.truncated:
            say("truncated", {"slots": turn.truncated})
        why = why or stop_reason()
        if why is None and request.compact:
            why = _execute_merges(location, owed, turn, stop_reason, say)
        else:
            turn.merges_pending = len(merges_in_flight(location))
        if why is not None:
            turn.status, turn.reason = PARTIAL, why
        turn.backlog = _backlog(location, folder.seq, say)
    except BaseException:
        with contextlib.suppress(SlatelakeError):  # the turn's own error is the one to see
            folder.close()
        raise
    folder.close()


def _backlog(location: LakeLocation, fold_seq: int, say: Progress) -> backlogs.Backlog | None:
    """The backlog after a turn whose work is durable: a failed read is said
    and leaves it unknown, never a failed turn."""
    try:
        return backlogs.measure(location, fold_seq=fold_seq)
    except SlatelakeError as exc:
        say("backlog not measured", {"error": f"{type(exc).__name__}: {exc}"})
        return None


def _image(
    location: LakeLocation, request: FoldRequest, folder: Folder, turn: FoldTurn, say: Progress
) -> None:
    """An image when the request or the cadence says; a failed one is reported
    and never fails the turn (an open falls back to an older image)."""
    if request.image is False:
        return
    events: list[dict[str, Any]] = []
    errors: list[str] = []
    forced = request.image is True
    cadence = ImageCadence(
        location,
        every_slots=1 if forced else request.every_slots,
        max_age_s=0.0 if forced else request.max_age_s,
        grace_s=request.grace_s,
        on_event=events.append,
        on_error=errors.append,
    )
    cadence.tick(folder)
    for event in events:
        if "image" in event:
            turn.image = event["image"]
            say("image written", event["image"])
        turn.images_collected += len(event.get("images_collected", ()))
    if errors:
        turn.image_error = errors[0]
        say("image failed", {"error": errors[0]})


def _execute_merges(
    location: LakeLocation,
    owed: set[str],
    turn: FoldTurn,
    stop_reason: Callable[[], str | None],
    say: Progress,
) -> str | None:
    """Keep the writer (and with it SlateDB's compactor) open until every
    merge in flight finishes or time runs out: those ``owed`` when the writer
    opened, and any submitted since. Returns why it stopped early."""
    owed = owed | {m.compaction_id for m in merges_in_flight(location)}
    if not owed:
        return None
    say("executing store merges", {"pending": len(owed)})
    cadence = max(MIN_MERGE_POLL_S, compactor_poll_interval_s() / 2)
    why: str | None = None
    while True:
        in_flight = {m.compaction_id for m in merges_in_flight(location)}
        if not in_flight:
            break
        why = stop_reason()
        if why is not None:
            break
        time.sleep(cadence)
    turn.merges_pending = len(in_flight)
    ended = outcomes_of(location, owed - in_flight)
    turn.merges_failed = sum(1 for outcome in ended.values() if outcome == FAILED)
    turn.merges_completed = len(ended) - turn.merges_failed
    say(
        "store merges",
        {"completed": turn.merges_completed, "pending": turn.merges_pending},
    )
    return why
