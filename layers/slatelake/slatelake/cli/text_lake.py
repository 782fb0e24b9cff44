"""Text layouts of the lake verbs' reports: a new lake, folds (a turn, and
the holder's folds and image events), images, the log, transfers, borrowed
files released, equality indexes.

``cli/output.py`` picks one of these for a verb without ``--json``.
"""

from __future__ import annotations

from typing import Any

from slatelake.cli import documents
from slatelake.cli.text import print_table


def created(shown: Any) -> None:
    """``init``: the lake, and its DuckLake snapshot when it has a catalog."""
    lake, (data_path, snapshot) = shown.lake, shown.report
    if snapshot is None:
        print(f"created lake {lake} (no DuckLake catalog until a session gives a data path)")
    else:
        print(f"created lake {lake} with data path {data_path} (snapshot {snapshot})")


def fold_turn(turn: Any) -> None:
    """One holder turn that folded (a skipped one is said on stderr by ``fold``)."""
    image = f"; image of slot {turn.image['seq']}" if turn.image else ""
    merges = ""
    if turn.merges_completed or turn.merges_pending or turn.merges_failed:
        merges = (
            f"; store merges: {turn.merges_completed} completed, "
            f"{turn.merges_pending} pending, {turn.merges_failed} failed"
        )
    stopped = f"; stopped early: {turn.reason}" if turn.status == "partial" else ""
    print(
        f"folded {turn.slots_folded} slots ({turn.operations} operations) in "
        f"{turn.seconds:.3f}s; fold cursor {turn.fold_seq}, head {turn.head_snapshot_id}; "
        f"truncated {turn.truncated}{image}{merges}{stopped}",
        flush=True,
    )


def folded(report: Any) -> None:
    """One of the resident holder's folds."""
    print(
        f"folded {report.slots} slots ({report.operations} operations, "
        f"{report.batches} batches) in {report.seconds:.3f}s; fold cursor {report.fold_seq}, "
        f"head {report.head.snapshot_id}/{report.head.batch_seq}; "
        f"truncated {report.truncated}",
        flush=True,
    )


def image_event(event: dict[str, Any]) -> None:
    """The holder wrote an image, or collected old ones."""
    if "image" in event:
        image = event["image"]
        print(
            f"image of slot {image['seq']}, {image['bytes']} bytes, "
            f"in {image['seconds']:.2f}s: {image['path']}",
            flush=True,
        )
    else:
        gone = event["images_collected"]
        print(f"collected {len(gone)} old image(s): {', '.join(gone)}", flush=True)


def image_written(result: Any) -> None:
    info = result.info
    if result.written and info is not None:
        print(
            f"image of slot {info.seq} (head {result.head.snapshot_id}/{result.head.batch_seq}), "
            f"{info.size} bytes, written in {result.seconds:.2f}s: {info.url}"
        )
    else:
        where = f" ({info.url})" if info is not None else ""
        print(f"no image written: {result.reason}{where}")


def attach(newest: Any) -> None:
    """The ATTACH statement that opens the newest image in stock DuckDB."""
    print(newest.attach, flush=True)


def log_summary(shown: Any) -> None:
    for key, value in documents.log_summary(shown).items():
        if key == "head":  # the --json document's {snapshot_id, batch_seq}, in words
            value = f"snapshot {value['snapshot_id']}, slot {value['batch_seq']}"
        print(f"{key:>16}: {value}")


def exported(report: Any) -> None:
    from slatelake import admin

    print(
        f"exported {report.lake} at snapshot {report.snapshot_id} to {report.path} "
        f"({len(report.tables)} tables, {report.rows} rows, {report.bytes} bytes, "
        f"{report.seconds:.2f}s)"
    )
    print(f"data path: {report.data_path}")
    print(f"read it with stock DuckDB: {admin.attach_statement(report.path)}")
    print(f"note: {report.warning}")


def imported(report: Any) -> None:
    print(
        f"imported {report.source} ({report.kind}) into {report.lake} at snapshot "
        f"{report.snapshot_id}: {_counted(len(report.lake_tables), 'table')}, "
        f"{_counted(report.lake_rows, 'row')} ({len(report.tables)} metadata tables, "
        f"{report.rows} metadata rows, {report.keys} stored keys, {report.seconds:.2f}s); "
        f"data path {report.data_path}"
    )
    for name, rows in sorted(report.lake_tables.items()):
        print(f"  {name}: {_counted(rows, 'row')}")
    if report.copied_files:
        print(
            f"copied {report.copied_files} files ({report.copied_bytes} bytes) from "
            f"{report.source_data_path}; the lake's files are its own"
        )
    if report.warning:
        print(f"note: {report.warning}")


def released(done: Any) -> None:
    print(
        f"released {len(done.released)} borrowed files of {done.lake}; {done.remaining} "
        "remain borrowed (cleanup and orphan steps may now delete the released ones)"
    )


INDEX_COLUMNS = ("name", "index_id", "schema", "table", "column", "kind")


def index_created(info: Any) -> None:
    print(f"created index {info.name} ({info.kind})")


def index_dropped(info: Any) -> None:
    print(f"dropped index {info.name}; the sweep reclaims its entries")


def indexes(infos: Any) -> None:
    print_table(INDEX_COLUMNS, [[getattr(i, c) for c in INDEX_COLUMNS] for i in infos])


def rows(found: Any) -> None:
    """A lookup's rows under the table's column names."""
    print_table(found.columns, found.rows)


def _counted(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")
