"""Lake verbs: ``init``, ``fold``, ``log``, ``demo``; ``sql`` (cli/sql.py) and
``hold`` (cli/hold.py) are registered among them, so ``--help`` lists them
in the order a lake's life uses them."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from slatelake.cli import hold, output, sql
from slatelake.cli.arguments import (
    add_deadline,
    add_json,
    add_margin,
    deadline_of,
    lake_data_path,
    lake_verb,
    open_lake,
)


def _cmd_init(args: argparse.Namespace) -> int:
    lake = open_lake(args, args.data_path)  # a relative data path resolved (open_lake)
    snapshot = lake.create(encrypted=args.encrypted)
    output.emit(output.CREATED, output.AtLake(args.lake, (lake.data_path, snapshot)))
    return 0


def _cmd_fold(args: argparse.Namespace) -> int:
    """One holder's turn (``lake.maintenance.fold``), what cron runs where
    nothing is resident; skipped (exit 0, said on stderr) while a live holder
    holds the lake."""
    from slatelake import FoldRequest

    request = FoldRequest(image=bool(args.image), compact=args.compact, margin_s=args.margin)
    turn = open_lake(args).maintenance.fold(
        request, deadline=deadline_of(args.deadline), on_progress=lambda message, fields: None
    )
    if turn.status == "skipped" and not args.json:
        print(f"slatelake fold: skipped: {turn.reason}", file=sys.stderr, flush=True)
    else:
        output.emit(output.FOLD_TURN, turn, args.json)
    return 0


def _cmd_log(args: argparse.Namespace) -> int:
    output.emit(output.LOG, output.AtLake(args.lake, open_lake(args).log_summary()), args.json)
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from slatelake import admin

    admin.run_demo(args.dir, commits=args.commits)
    return 0


def register(sub: Any) -> None:
    p = lake_verb(
        sub,
        "init",
        _cmd_init,
        "Create a lake. With --data-path it is a DuckLake at once "
        "(DuckLake's initial snapshot); without, the substrate only.",
    )
    p.add_argument(
        "--data-path",
        metavar="PATH",
        type=lake_data_path,
        help="where DuckLake writes Parquet: an absolute path, one relative to the current "
        "directory (resolved now, as DuckLake resolves it; not for an S3 lake) or an s3:// "
        "URL; must not overlap the lake root",
    )
    p.add_argument(
        "--encrypted",
        action="store_true",
        help="DuckLake's ENCRYPTED: the lake writes its Parquet files encrypted, the keys in "
        "its catalog (needs --data-path; set once, at creation)",
    )
    sql.register(sub)
    p = lake_verb(
        sub,
        "fold",
        _cmd_fold,
        "Be the lake's holder once: fold every unfolded commit-log slot into the store, "
        "flush, truncate what no reader needs, and exit (what cron runs where no "
        "`slatelake hold` is resident). Takes the holder lease first: while a live holder "
        "holds the lake it does nothing and says so (exit 0).",
    )
    add_margin(p)
    add_json(p, "print the turn's report as JSON")
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
        "stop folding and waiting by then (default: no limit); everything done is "
        "durable, the next fold goes on",
    )
    hold.register(sub)
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
    p = lake_verb(
        sub, "log", _cmd_log, "Show the head, the fold cursor and the retained commit log."
    )
    add_json(p, "print one JSON object")
