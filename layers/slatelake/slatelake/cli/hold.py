"""``slatelake hold``: be the lake's holder until a signal stops it.

The resident holder takes the holder lease (waiting while another holder
has it), takes the store's writer, folds every ``--poll``, writes catalog
images on its cadence and, with ``--option MAINTENANCE_INTERVAL=...``, runs
the maintenance pass on a scheduler thread. Holder plumbing (the lease, the
folder, the image cadence, the fold loop) is ``slatelake.admin``'s: the lake
handle has no verb for a process that keeps the writer. Its reports print
through ``cli/output.py``; the lines about its own life (waiting, holding,
retrying, stopped) are said here.

SIGTERM or SIGINT stops it at once, even mid-fold: the writer's close and
the lease's release then share ``STOP_GRACE_S``, and a store that does not
answer is abandoned (the log keeps every unflushed slot, so nothing is lost;
the lease expires on its own).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from slatelake import SlatelakeError
from slatelake.cli import output
from slatelake.cli.arguments import (
    DURATION_WORDS,
    add_json,
    add_margin,
    count,
    lake_verb,
    timeout_seconds,
    wait_seconds,
)
from slatelake.cli.common import parse_kv

# After SIGTERM/SIGINT, how long the store writer and the lease get to shut down.
STOP_GRACE_S = 5.0
DEFAULT_POLL_S = 1.0


class HoldStopped(KeyboardInterrupt):
    """SIGTERM or SIGINT reached the holder: whatever the main thread was
    doing (a fold, a store call, a wait) is abandoned. A second signal during
    the shutdown that follows forces the exit (status 130, via ``main``)."""


def _raise_stopped(stop: threading.Event) -> Any:
    def handler(signum: int, frame: Any) -> None:
        stop.set()
        raise HoldStopped(signal.Signals(signum).name)

    return handler


def _say(message: str) -> None:
    print(message, flush=True)


def _warn(message: str) -> None:
    print(f"slatelake hold: {message}", file=sys.stderr, flush=True)


def _cmd_hold(args: argparse.Namespace) -> int:
    import slatelake
    from slatelake import admin

    options = parse_kv(getattr(args, "option", None))
    images = admin.image_cadence(
        args.lake,
        every_slots=0 if args.no_images else args.image_every_slots,
        max_age_s=0.0 if args.no_images else args.image_max_age,
        grace_s=args.image_grace,
        on_event=lambda event: output.emit(output.IMAGE_EVENT, event, args.json),
        on_error=_warn,
    )
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _raise_stopped(stop))
    folder = session = lease = None
    signalled: str | None = None
    failed = False
    try:
        lease = admin.holder_lease(args.lake)
        if not lease.try_acquire():
            held = lease.current()
            _say(
                "waiting for the holder lease"
                + (f" ({held.describe()})" if held else "")
                + "; that holder folds meanwhile"
            )
            while not lease.try_acquire():
                stop.wait(max(args.poll, 1.0))
        lease.start_heartbeat()
        folder = admin.folder(args.lake, args.margin, folded_before=lease.folded)
        if options:
            # slatelake.connect, not lake.connect(): the handle's takes no on_pass
            session = slatelake.connect(
                args.lake,
                options=options,
                on_pass=lambda report: output.emit(output.PASS, report, args.json),
            )
            if session.scheduler is None:
                session.close()
                session = None
                _say("no MAINTENANCE_INTERVAL given: no maintenance is scheduled")
        _say(
            f"holding {args.lake}: folding every {args.poll:g}s"
            + (f", maintenance every {session.options.interval_s:g}s" if session else "")
            + _image_words(images)
            + "; Ctrl-C stops"
        )
        admin.hold(
            folder,
            args.poll,
            stop,
            images,
            on_fold=lambda report: output.emit(output.FOLDED, report, args.json),
            on_retry=_say_retry,
            lease=lease,
        )
    except HoldStopped as exc:
        signalled = str(exc)
    except BaseException:
        failed = True
        raise
    finally:
        ending = signalled is not None or failed
        if session is not None:
            session.close()  # a pass in flight stops at its next safe point
        ends_at = time.monotonic() + STOP_GRACE_S
        if folder is not None:
            _close(folder, ends_at if ending else None)
        if lease is not None:  # the next holder (a fold turn) need not wait out its TTL
            _within(lease.release, "the holder lease was not released", ends_at if ending else None)
    _say(f"stopped ({signalled})" if signalled else "stopped")
    return 0


def _close(folder: Any, ends_at: float | None) -> None:
    """Close the store writer; after a signal or a failure only until
    ``ends_at``, and an error then is said, not raised (the one that ended
    the holder stays the one reported)."""
    if ends_at is None:
        folder.close()
        return
    errors: list[BaseException] = []

    def close() -> None:
        try:
            folder.close()
        except SlatelakeError as exc:
            errors.append(exc)

    _within(close, "the store writer was not closed", ends_at)
    for exc in errors:
        _warn(f"shutdown: {exc}")


def _within(call: Callable[[], None], unanswered: str, ends_at: float | None) -> None:
    """Run ``call``; with ``ends_at`` on a thread abandoned at that time (a
    hanging store must not hold the exit: what it held expires on its own)."""
    if ends_at is None:
        call()
        return
    worker = threading.Thread(target=call, name="slatelake-shutdown", daemon=True)
    worker.start()
    worker.join(max(0.5, ends_at - time.monotonic()))
    if worker.is_alive():
        _warn(f"{unanswered} (the store did not answer); it expires on its own")


def _say_retry(failures: int, exc: BaseException, wait_s: float) -> None:
    from slatelake import admin

    _warn(
        f"fold failed ({type(exc).__name__}: {exc}); "
        f"retry {failures} of {admin.HOLD_RETRIES} in {wait_s:g}s"
    )


def _image_words(images: Any) -> str:
    if not images.enabled:
        return ", no catalog images"
    when = []
    if images.every_slots:
        when.append(f"{images.every_slots} slots")
    if images.max_age_s:
        when.append(f"{images.max_age_s:g}s")
    return f", a catalog image every {' or '.join(when)}"


def _image_options(p: argparse.ArgumentParser) -> None:
    from slatelake.admin import DEFAULT_EVERY_SLOTS, DEFAULT_GRACE_S, DEFAULT_MAX_AGE_S

    p.add_argument(
        "--image-every-slots",
        type=count("slots"),
        default=DEFAULT_EVERY_SLOTS,
        metavar="N",
        help="write a catalog image once N slots were folded since the newest one "
        f"(default {DEFAULT_EVERY_SLOTS}; 0: never by count). Opens replay the slots after "
        "the newest image, and the log keeps them until a newer image",
    )
    p.add_argument(
        "--image-max-age",
        type=wait_seconds,
        default=DEFAULT_MAX_AGE_S,
        metavar="DURATION",
        help="also write one when the newest image is older than DURATION and something was "
        f"folded since (default {DEFAULT_MAX_AGE_S:g}s; 0: never by age); {DURATION_WORDS}",
    )
    p.add_argument(
        "--image-grace",
        type=wait_seconds,
        default=DEFAULT_GRACE_S,
        metavar="DURATION",
        help="delete an image older than the newest two only once a newer one has existed "
        f"this long (default {DEFAULT_GRACE_S:g}s; a reader may still be downloading it); "
        + DURATION_WORDS,
    )
    p.add_argument(
        "--no-images",
        action="store_true",
        help="write and collect no catalog images; truncation still stops at the newest "
        "existing image",
    )


def register(sub: Any) -> None:
    p = lake_verb(
        sub,
        "hold",
        _cmd_hold,
        "Be the lake's holder: fold continuously and run SlateDB's "
        "compactor (which executes submitted store merges). Takes the holder lease first, "
        "waiting while another holder (a fold turn, the fold function) has it; "
        "exits with status 3 when a newer one fences it, and 1 naming the error when "
        "the store keeps failing (a transient failure is retried 3 times). SIGTERM or "
        "SIGINT stops it at once, even mid-fold; a second one skips the shutdown.",
    )
    add_margin(p)
    add_json(p, "print fold reports as JSON lines")
    p.add_argument(
        "--poll",
        type=timeout_seconds,
        default=DEFAULT_POLL_S,
        metavar="DURATION",
        help=f"how long between looks at the log (default {DEFAULT_POLL_S:g}s); " + DURATION_WORDS,
    )
    p.add_argument(
        "--option",
        action="append",
        metavar="KEY=VALUE",
        help="MAINTENANCE_* options; with MAINTENANCE_INTERVAL a scheduler thread runs "
        "the maintenance pass at that cadence (a pass in flight completes on SIGTERM)",
    )
    _image_options(p)
