"""Lake verbs: ``init``, ``fold``, ``hold``, ``log``, ``demo``; ``sql`` (cli/sql.py) is
registered among them, after ``init``."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from contextlib import nullcontext
from typing import Any

from slatelake import SlatelakeError, admin
from slatelake.cli import sql
from slatelake.cli.arguments import data_path
from slatelake.cli.common import Handler, add_lake_command, parse_kv, print_report

# After SIGTERM/SIGINT, how long the store writer gets to shut down.
STOP_GRACE_S = 5.0


def _cmd_init(args: argparse.Namespace) -> int:
    snapshot = admin.create(args.lake, args.data_path)
    if snapshot is None:
        print(f"created lake {args.lake} (no DuckLake catalog until a session gives a data path)")
    else:
        print(f"created lake {args.lake} with data path {args.data_path} (snapshot {snapshot})")
    return 0


def _print_fold(report, as_json: bool) -> None:  # noqa: ANN001
    doc = {
        "slots": report.slots,
        "change_sets": report.change_sets,
        "operations": report.operations,
        "batches": report.batches,
        "seconds": round(report.seconds, 3),
        "fold_seq": report.fold_seq,
        "head": {"snapshot_id": report.head.snapshot_id, "batch_seq": report.head.batch_seq},
        "truncated": report.truncated,
    }
    if as_json:
        print(json.dumps(doc), flush=True)
    else:
        print(
            f"folded {report.slots} slots ({report.operations} operations, "
            f"{report.batches} batches) in {report.seconds:.3f}s; fold cursor {report.fold_seq}, "
            f"head {report.head.snapshot_id}/{report.head.batch_seq}; "
            f"truncated {report.truncated}",
            flush=True,
        )


def _cmd_fold(args: argparse.Namespace) -> int:
    """One holder's turn (``maintenance.fold_turn``), what cron runs where
    nothing is resident; skipped (exit 0, said on stderr) while a live holder
    holds the lake."""
    from slatelake import maintenance
    from slatelake.cli.arguments import deadline_of

    request = maintenance.FoldRequest(
        image=bool(args.image), compact=args.compact, margin_s=args.margin
    )
    turn = maintenance.fold_turn(
        args.lake,
        request,
        deadline=deadline_of(args.deadline),
        on_progress=lambda message, fields: None,
    )
    doc = {"slots": turn.slots_folded, **turn.to_dict()}
    if args.json:
        print(json.dumps(doc), flush=True)
    elif turn.status == "skipped":
        print(f"slatelake fold: skipped: {turn.reason}", file=sys.stderr, flush=True)
    else:
        image = f"; image of slot {turn.image['seq']}" if turn.image else ""
        merges = ""
        if turn.merges_completed or turn.merges_pending or turn.merges_failed:
            merges = (
                f"; store merges: {turn.merges_completed} completed, "
                f"{turn.merges_pending} pending, {turn.merges_failed} failed"
            )
        print(
            f"folded {turn.slots_folded} slots ({turn.operations} operations) in "
            f"{turn.seconds:.3f}s; fold cursor {turn.fold_seq}, head {turn.head_snapshot_id}; "
            f"truncated {turn.truncated}{image}{merges}"
            + (f"; stopped early: {turn.reason}" if turn.status == "partial" else ""),
            flush=True,
        )
    return 0


class HoldStopped(KeyboardInterrupt):
    """SIGTERM or SIGINT reached the holder: whatever the main thread was
    doing (a fold, a store call, a wait) is abandoned. A second signal during
    the shutdown that follows forces the exit (status 130, via ``main``)."""


def _raise_stopped(stop: threading.Event) -> Any:
    def handler(signum: int, frame: Any) -> None:
        stop.set()
        raise HoldStopped(signal.Signals(signum).name)

    return handler


def _cmd_hold(args: argparse.Namespace) -> int:
    from slatelake import maintenance

    options = parse_kv(getattr(args, "option", None))
    images = admin.image_cadence(
        args.lake,
        every_slots=0 if args.no_images else args.image_every_slots,
        max_age_s=0.0 if args.no_images else args.image_max_age,
        grace_s=args.image_grace,
        on_event=lambda event: _print_image_event(event, args.json),
        on_error=lambda why: print(f"slatelake hold: {why}", file=sys.stderr, flush=True),
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
            print(
                "waiting for the holder lease"
                + (f" ({held.describe()})" if held else "")
                + "; that holder folds meanwhile",
                flush=True,
            )
            while not lease.try_acquire():
                stop.wait(max(args.poll, 1.0))
        lease.start_heartbeat()
        folder = admin.folder(args.lake, args.margin, folded_before=lease.folded)
        if options:
            import slatelake

            session = slatelake.connect(
                args.lake, options=options, on_pass=lambda r: print_report(r, args.json)
            )
            if session.scheduler is None:
                session.close()
                session = None
                print("no MAINTENANCE_INTERVAL given: no maintenance is scheduled", flush=True)
        print(
            f"holding {args.lake}: folding every {args.poll}s"
            + (f", maintenance every {session.options.interval_s:g}s" if session else "")
            + _image_words(images)
            + "; Ctrl-C stops",
            flush=True,
        )
        admin.hold(
            folder,
            args.poll,
            stop,
            images,
            on_fold=lambda report: _print_fold(report, args.json),
            on_retry=_say_retry,
            lease=lease,
        )
    except HoldStopped as exc:
        signalled = str(exc)
    except BaseException:
        failed = True
        raise
    finally:
        # After a signal or a failure the writer's close and the lease's
        # release share STOP_GRACE_S; a store that does not answer is
        # abandoned (the log keeps every unflushed slot, so nothing is lost;
        # the lease expires on its own), and the error that ended the holder
        # stays the one reported.
        ending = signalled is not None or failed
        if session is not None:
            session.close()  # a pass in flight stops at its next safe point
        ends_at = time.monotonic() + STOP_GRACE_S
        if folder is not None:
            grace = maintenance.store_deadline(ends_at)
            with grace if ending else nullcontext():
                try:
                    folder.close()
                except SlatelakeError as exc:
                    if not ending:
                        raise
                    print(f"slatelake hold: shutdown: {exc}", file=sys.stderr, flush=True)
        if lease is not None:  # the next holder (a fold turn) need not wait out its TTL
            _release(lease, max(0.5, ends_at - time.monotonic()) if ending else None)
    print(f"stopped ({signalled})" if signalled else "stopped", flush=True)
    return 0


def _release(lease: Any, within_s: float | None) -> None:
    """Release the holder lease; after a signal or a failure only within
    ``within_s`` (a hanging store must not hold the exit: the lease then
    expires on its own)."""
    if within_s is None:
        lease.release()
        return
    releasing = threading.Thread(target=lease.release, name="slatelake-release", daemon=True)
    releasing.start()
    releasing.join(within_s)
    if releasing.is_alive():
        print(
            "slatelake hold: the holder lease was not released (the store did not answer); "
            "it expires on its own",
            file=sys.stderr,
            flush=True,
        )


def _say_retry(failures: int, exc: BaseException, wait_s: float) -> None:
    print(
        f"slatelake hold: fold failed ({type(exc).__name__}: {exc}); "
        f"retry {failures} of {admin.HOLD_RETRIES} in {wait_s:g}s",
        file=sys.stderr,
        flush=True,
    )


def _print_image_event(event: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(event), flush=True)
    elif "image" in event:
        image = event["image"]
        print(
            f"image of slot {image['seq']}, {image['bytes']} bytes, "
            f"in {image['seconds']:.2f}s: {image['path']}",
            flush=True,
        )
    else:
        gone = event["images_collected"]
        print(f"collected {len(gone)} old image(s): {', '.join(gone)}", flush=True)


def _image_words(images: Any) -> str:
    if not images.enabled:
        return ", no catalog images"
    when = []
    if images.every_slots:
        when.append(f"{images.every_slots} slots")
    if images.max_age_s:
        when.append(f"{images.max_age_s:g}s")
    return f", a catalog image every {' or '.join(when)}"


def _cmd_log(args: argparse.Namespace) -> int:
    summary = admin.log_summary(args.lake)
    doc = {
        "lake": args.lake,
        "head": {"snapshot_id": summary.head.snapshot_id, "batch_seq": summary.head.batch_seq},
        "last_slot": summary.last_slot,
        "fold_cursor": summary.fold_cursor,
        "unfolded_slots": summary.unfolded_slots,
        "retained_slots": summary.retained_slots,
        "retained_bytes": summary.retained_bytes,
        "catalog_rows": summary.catalog_rows,
    }
    if args.json:
        print(json.dumps(doc))
    else:
        for key, value in doc.items():
            print(f"{key:>16}: {value}")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    admin.run_demo(args.dir, commits=args.commits)
    return 0


def _image_options(p: argparse.ArgumentParser) -> None:
    from slatelake.admin import DEFAULT_EVERY_SLOTS, DEFAULT_GRACE_S, DEFAULT_MAX_AGE_S
    from slatelake.cli.arguments import wait_seconds

    p.add_argument(
        "--image-every-slots",
        type=_slot_count,
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
        metavar="SEC",
        help="also write one when the newest image is older than SEC and something was "
        f"folded since (default {DEFAULT_MAX_AGE_S:g}; 0: never by age)",
    )
    p.add_argument(
        "--image-grace",
        type=wait_seconds,
        default=DEFAULT_GRACE_S,
        metavar="SEC",
        help="delete an image older than the newest two only once a newer one has existed "
        f"this long (default {DEFAULT_GRACE_S:g}; a reader may still be downloading it)",
    )
    p.add_argument(
        "--no-images",
        action="store_true",
        help="write and collect no catalog images; truncation still stops at the newest "
        "existing image",
    )


def _slot_count(text: str) -> int:
    from slatelake.maintenance import show_input

    if not (text.isascii() and text.isdigit()) or len(text) > 12:
        raise argparse.ArgumentTypeError(
            f"{show_input(text)}: expected a count of slots, 0 or more"
        )
    return int(text)


def register(sub: Any) -> None:
    def add(name: str, func: Handler, help_: str) -> argparse.ArgumentParser:
        return add_lake_command(sub, name, func, help_)

    p = add(
        "init",
        _cmd_init,
        "Create a lake. With --data-path it is a DuckLake at once "
        "(DuckLake's initial snapshot); without, the substrate only.",
    )
    p.add_argument(
        "--data-path",
        metavar="PATH",
        type=data_path,
        help="where DuckLake writes Parquet (absolute path or s3:// URL); must not "
        "overlap the lake root",
    )
    sql.register(sub)
    for name, func, help_ in (
        (
            "fold",
            _cmd_fold,
            "Be the lake's holder once: fold every unfolded commit-log slot into the store, "
            "flush, truncate what no reader needs, and exit (what cron runs where no "
            "`slatelake hold` is resident). Takes the holder lease first: while a live holder "
            "holds the lake it does nothing and says so (exit 0).",
        ),
        (
            "hold",
            _cmd_hold,
            "Be the lake's holder: fold continuously and run SlateDB's "
            "compactor (which executes submitted store merges). Takes the holder lease first, "
            "waiting while another holder (a fold turn, the fold function) has it; "
            "exits with status 3 when a newer one fences it, and 1 naming the error when "
            "the store keeps failing (a transient failure is retried 3 times). SIGTERM or "
            "SIGINT stops it at once, even mid-fold; a second one skips the shutdown.",
        ),
    ):
        p = add(name, func, help_)
        p.add_argument(
            "--margin",
            type=float,
            default=30.0,
            metavar="SEC",
            help="keep folded slots at least this long before truncating (default 30)",
        )
        p.add_argument("--json", action="store_true", help="print fold reports as JSON lines")
        if name == "fold":
            from slatelake.cli.arguments import add_deadline

            p.add_argument(
                "--image",
                action="store_true",
                help="also write a catalog image of the fold cursor (when something was folded "
                "since the newest image), so opens replay nothing and truncation may go to it",
            )
            p.add_argument(
                "--compact",
                action="store_true",
                help="keep the store writer open until every submitted store merge finishes "
                "(SlateDB's compactor executes them) or the deadline nears; one still "
                "running is reported pending and the next holder finishes it",
            )
            add_deadline(
                p,
                "stop folding and waiting by then (90s, 5m; default: no limit); "
                "everything done is durable, the next fold goes on",
            )
        if name == "hold":
            p.add_argument(
                "--poll",
                type=float,
                default=1.0,
                metavar="SEC",
                help="seconds between looks at the log (default 1)",
            )
            p.add_argument(
                "--option",
                action="append",
                metavar="KEY=VALUE",
                help="MAINTENANCE_* options; with MAINTENANCE_INTERVAL a scheduler thread runs "
                "the maintenance pass at that cadence (a pass in flight completes on SIGTERM)",
            )
            _image_options(p)
    p = sub.add_parser(
        "demo",
        help="Run the substrate end to end on a local lake.",
        description="Create a local lake in DIR (replacing it), race two "
        "committers into it, fold, and print each step.",
    )
    p.set_defaults(func=_cmd_demo)
    p.add_argument(
        "dir",
        metavar="DIR",
        nargs="?",
        default="demo-lake",
        help="directory for the lake (default ./demo-lake; replaced)",
    )
    p.add_argument(
        "--commits", type=int, default=20, help="inserts per racing session (default 20)"
    )
    p = add("log", _cmd_log, "Show the head, the fold cursor and the retained commit log.")
    p.add_argument("--json", action="store_true", help="print one JSON object")
