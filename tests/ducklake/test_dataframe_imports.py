"""Our own statements bind no Python parameter, so a process that writes to a
lake and runs a pass never imports pandas, numpy or pyarrow: DuckDB's binding
imports all three (~85 MB) to convert a parameter, whether or not it is one
of theirs. In a fresh process every attempt to import one is refused and
recorded with the frames that made it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent(
    """
    import builtins, sys, traceback

    TRIED = []
    _import = builtins.__import__

    def refuse(name, *args, **kwargs):
        # DuckDB's binding imports through builtins.__import__ as Python does
        if name.split(".")[0] in ("pandas", "numpy", "pyarrow"):
            TRIED.append((name, "".join(traceback.format_stack(limit=8))))
            raise ImportError(name)
        return _import(name, *args, **kwargs)

    builtins.__import__ = refuse

    import time
    from pathlib import Path

    import slatelake
    from slatelake.demo import _ducklake_part

    root = Path(sys.argv[1])
    _ducklake_part(root, tables=2, commits=3)
    url = (root / "lake").as_uri()
    with slatelake.connect(url) as session:
        session.sql("UPDATE trips_0 SET km = km + 1 WHERE id < 50")
        session.sql("ALTER TABLE trips_1 ADD COLUMN note VARCHAR")
        # 70 columns: more catalog rows in one commit than a VALUES list holds
        wide = ", ".join(f"i AS c{n}" for n in range(70))
        session.sql(f"CREATE TABLE wide AS SELECT {wide} FROM range(3) r(i)")
        session.sql("INSERT INTO trips_1 VALUES (7, 'Oslo', 1.0, 'it''s')")
        session.sql("CALL ducklake_expire_snapshots('lake', older_than => now())")
        # inlined values of the types whose bound form a literal cannot spell
        session.sql(
            "CREATE TABLE odd (u UBIGINT, h HUGEINT, d DECIMAL(38, 10), b BLOB, g UUID, f FLOAT)"
        )
        session.sql(
            "INSERT INTO odd VALUES (18446744073709551615,"
            " '-1267650600228229401496703205376'::HUGEINT, 0.5, from_hex('00ff'),"
            " uuid(), 1.5), (NULL, NULL, NULL, NULL, NULL, NULL)"
        )
        session.sql("CALL ducklake_flush_inlined_data('lake', table_name => 'odd')")
        rows = session.sql("SELECT u, h, d, b, f FROM odd WHERE u IS NOT NULL").fetchall()
        assert rows[0][0] == 2**64 - 1 and rows[0][1] == -(2**100), rows
        assert str(rows[0][2]) == "0.5000000000" and rows[0][3] == bytes.fromhex("00ff"), rows
        at = session.state.head.snapshot_id
        session.sql(f"SELECT count(*) FROM trips_0 AT (VERSION => {at})").fetchall()
        session.maintenance()
    for name, stack in TRIED:
        print("tried to import", name, "from:", stack, sep="\\n")
    print("attempts:", len(TRIED))
    """
)


def test_statements_and_a_pass_import_no_dataframe_library(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.rstrip().endswith("attempts: 0"), done.stdout[-6000:]
