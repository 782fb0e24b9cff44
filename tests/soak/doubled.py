"""The soak reader's check that a time-travel read sees each id once, and what
it records when one does not: enough to tell, after the lake is gone (moto
keeps it in memory), whether the reader's copy of the catalog or the lake
itself held the overlap, and which files and snapshots made it.

A doubled read yields a one-line sample (counts, the same read again, the
same read on a fresh session, file rows that differ between the two copies)
and, for the first few, a JSON file beside the reader's figures: the
duplicated ids' spread, which files served them (DuckLake's ``filename``,
``rowid`` and ``snapshot_id`` virtual columns), those files' catalog rows,
the delete files on them, and every retained snapshot (with its changes)
from the first that began one of those files to the read's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DETAILS = 3  # detail files a reader writes at most

_FILES = """
    SELECT 'data', f.data_file_id, f.begin_snapshot, f.end_snapshot
    FROM {meta}.ducklake_data_file f JOIN {meta}.ducklake_table t
      ON f.table_id = t.table_id AND t.table_name = $name AND t.end_snapshot IS NULL
    WHERE f.begin_snapshot <= $snap AND coalesce(f.end_snapshot > $snap, true)
    UNION ALL
    SELECT 'delete', f.delete_file_id, f.begin_snapshot, f.data_file_id
    FROM {meta}.ducklake_delete_file f JOIN {meta}.ducklake_table t
      ON f.table_id = t.table_id AND t.table_name = $name AND t.end_snapshot IS NULL
    WHERE f.begin_snapshot <= $snap AND coalesce(f.end_snapshot > $snap, true)
"""

_SERVED = """
    WITH r AS (SELECT id, filename, rowid, snapshot_id FROM {table} AT (VERSION => {snap})),
         d AS (SELECT id FROM r GROUP BY id HAVING count(*) > 1)
    SELECT filename, count(*), min(r.id), max(r.id), min(rowid), max(rowid),
           min(snapshot_id), max(snapshot_id)
    FROM r JOIN d USING (id) GROUP BY filename ORDER BY filename
"""


def counts(session: Any, table: str, snap: int) -> tuple[int, int]:
    from slatelake.ducklake.sql import ident

    n, distinct, _ = session.sql(
        f"SELECT count(*), count(DISTINCT id), sum(length(payload)) "
        f"FROM {ident(table)} AT (VERSION => {int(snap)})"
    ).fetchone()
    return int(n), int(distinct)


def read_at(
    session: Any, lake: str, snap: int, tables: list[str], details: Path | None
) -> list[str]:
    """Every table at ``snap``, whole; a sample for each that saw an id twice,
    and a detail file under ``details`` (a path prefix) while few exist."""
    doubled = []
    for table in tables:
        n, distinct = counts(session, table, snap)
        if n != distinct:
            again = counts(session, table, snap)
            doubled.append(
                f"{table} at snapshot {snap} (head {session.state.head.snapshot_id}): {n} rows, "
                f"{distinct} ids; again {again}; a fresh session "
                f"{_fresh_counts(session, lake, table, snap)}"
            )
            if details is not None:
                _write_detail(session, table, snap, details)
    return doubled


def _files(session: Any, table: str, snap: int) -> set[tuple[Any, ...]]:
    """The table's data and delete files live at ``snap`` in DuckLake's copy
    of the catalog (kind, id, begin, end or the data file deleted from)."""
    from slatelake.ducklake.commit_flow import META_DB
    from slatelake.ducklake.sql import ident

    sql = _FILES.format(meta=ident(META_DB))
    rows = session.con.execute(sql, {"name": table, "snap": snap}).fetchall()
    return {tuple(r) for r in rows}


def _fresh_counts(session: Any, lake: str, table: str, snap: int) -> str:
    """The same read on a fresh session, and which files live at ``snap``
    this session's copy of the catalog has that the fresh one has not, and
    the reverse."""
    import slatelake

    try:
        with slatelake.connect(lake, read_only=True) as fresh:
            got = counts(fresh, table, snap)
            mine, theirs = _files(session, table, snap), _files(fresh, table, snap)
        only_mine = sorted(mine - theirs, key=str)[:6]
        only_fresh = sorted(theirs - mine, key=str)[:6]
        return f"{got}; file rows only here {only_mine}, only there {only_fresh}"
    except Exception as exc:  # noqa: BLE001 - a sample, not a verdict
        return f"failed: {type(exc).__name__}: {exc}"


def _rows(con: Any, sql: str, params: list[Any]) -> list[dict[str, Any]]:
    cur = con.execute(sql, params)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, (_plain(v) for v in row), strict=True)) for row in cur.fetchall()]


def _plain(value: Any) -> Any:
    return value if value is None or isinstance(value, int | float | str | bool) else str(value)


def _write_detail(session: Any, table: str, snap: int, details: Path) -> None:
    """What served the duplicated ids, as JSON; never raises (a diagnostic)."""
    from slatelake.ducklake.commit_flow import META_DB
    from slatelake.ducklake.sql import ident

    done = list(details.parent.glob(f"{details.name}-*.json"))
    if len(done) >= DETAILS:
        return
    out: dict[str, Any] = {"table": table, "snapshot": snap}
    try:
        meta = ident(META_DB)
        served = session.sql(_SERVED.format(table=ident(table), snap=int(snap))).fetchall()
        out["served"] = [
            dict(
                zip(
                    (
                        "file",
                        "rows",
                        "min_id",
                        "max_id",
                        "min_rowid",
                        "max_rowid",
                        "min_snap",
                        "max_snap",
                    ),
                    r,
                    strict=True,
                )
            )
            for r in served
        ]
        tid = (
            f"(SELECT table_id FROM {meta}.ducklake_table "
            "WHERE table_name = ? AND end_snapshot IS NULL)"
        )
        files = _rows(
            session.con,
            f"SELECT * FROM {meta}.ducklake_data_file WHERE table_id = {tid} "
            "AND begin_snapshot <= ? AND coalesce(end_snapshot > ?, true) ORDER BY data_file_id",
            [table, snap, snap],
        )
        served_paths = [str(s["file"]) for s in out["served"]]
        out["files"] = [f for f in files if any(p.endswith(str(f["path"])) for p in served_paths)]
        ids = [int(f["data_file_id"]) for f in out["files"]] or [-1]
        out["delete_files"] = _rows(
            session.con,
            f"SELECT * FROM {meta}.ducklake_delete_file WHERE data_file_id IN "
            f"({', '.join(str(i) for i in ids)}) ORDER BY delete_file_id",
            [],
        )
        snaps = sorted(
            {
                int(f[c])
                for f in out["files"] + out["delete_files"]
                for c in ("begin_snapshot", "end_snapshot", "partial_max")
                if f.get(c) is not None
            }
        ) or [-1]
        out["snapshots"] = _rows(
            session.con,
            f"SELECT s.snapshot_id, s.snapshot_time, c.changes_made, c.author, c.commit_message "
            f"FROM {meta}.ducklake_snapshot s LEFT JOIN {meta}.ducklake_snapshot_changes c "
            "USING (snapshot_id) WHERE s.snapshot_id BETWEEN ? AND ? ORDER BY 1 LIMIT 400",
            [snaps[0], max(snaps[-1], snap)],
        )
        out["live_files_at_snapshot"] = len(files)
    except Exception as exc:  # noqa: BLE001 - a diagnostic
        out["error"] = f"{type(exc).__name__}: {exc}"
    path = details.parent / f"{details.name}-{snap}-{table}.json"
    path.write_text(json.dumps(out, indent=1, default=str))


_TWINS = """
    SELECT a.data_file_id, [a.delete_file_id, b.delete_file_id],
           [a.begin_snapshot, b.begin_snapshot], [a.end_snapshot, b.end_snapshot],
           [a.delete_count, b.delete_count]
    FROM {meta}.ducklake_delete_file a JOIN {meta}.ducklake_delete_file b
      ON a.data_file_id = b.data_file_id AND a.delete_file_id < b.delete_file_id
     AND a.begin_snapshot < coalesce(b.end_snapshot, 9223372036854775807)
     AND b.begin_snapshot < coalesce(a.end_snapshot, 9223372036854775807)
    ORDER BY 1 LIMIT 5
"""


def twin_delete_files(session: Any, details: Path | None) -> list[str]:
    """Data files with two delete files live at some common snapshot
    (DuckLake keeps one per data file at a time: a new one replaces or ends
    the last), each a sample; the first few also a detail file with every
    retained snapshot's changes from the earliest of them on."""
    from slatelake.ducklake.commit_flow import META_DB
    from slatelake.ducklake.sql import ident

    meta = ident(META_DB)
    rows = session.con.execute(_TWINS.format(meta=meta)).fetchall()
    if not rows:
        return []
    head = session.state.head.snapshot_id
    out = [
        f"data file {r[0]} (head {head}) has delete files {r[1]} live together "
        f"(begin {r[2]}, end {r[3]}, deletes {r[4]})"
        for r in rows
    ]
    if details is not None and len(list(details.parent.glob(f"{details.name}-*.json"))) < DETAILS:
        lo = min(min(r[2]) for r in rows)
        doc: dict[str, Any] = {"head": head, "twins": out}
        try:
            doc["delete_files"] = _rows(
                session.con,
                f"SELECT * FROM {meta}.ducklake_delete_file WHERE data_file_id IN "
                f"({', '.join(str(int(r[0])) for r in rows)}) ORDER BY delete_file_id",
                [],
            )
            doc["snapshots"] = _rows(
                session.con,
                f"SELECT s.snapshot_id, s.snapshot_time, c.changes_made, c.author, "
                f"c.commit_message FROM {meta}.ducklake_snapshot s "
                f"LEFT JOIN {meta}.ducklake_snapshot_changes c USING (snapshot_id) "
                "WHERE s.snapshot_id >= ? ORDER BY 1 LIMIT 400",
                [lo],
            )
        except Exception as exc:  # noqa: BLE001 - a diagnostic
            doc["error"] = f"{type(exc).__name__}: {exc}"
        path = details.parent / f"{details.name}-head{head}.json"
        path.write_text(json.dumps(doc, indent=1, default=str))
    return out
