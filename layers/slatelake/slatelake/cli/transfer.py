"""Transfer verbs: ``export`` (a lake to a stock DuckLake catalog file) and
``import`` (a stock DuckLake catalog file to a new lake).

Both check LAKE (and ``--data-path``) at argument parsing, exit 2, before
any file or lake is touched; a refusal later (an existing target, a file
that is not a DuckLake catalog) exits 1 naming it. ``--json`` prints one
object with the counts.
"""

from __future__ import annotations

import argparse
from typing import Any

from slatelake.cli.arguments import data_path, lake_url, lake_verb
from slatelake.cli.common import print_json


def _local_file(what: str) -> Any:
    """An argparse converter: a local file path, refused (exit 2) when it is a
    URL or holds NUL or text that is not UTF-8."""

    def convert(text: str) -> str:
        from slatelake import MisconfigurationError, admin

        try:
            admin.check_local_file(text, what)
        except MisconfigurationError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return text

    return convert


def _cmd_export(args: argparse.Namespace) -> int:
    from slatelake import admin

    report = admin.export_catalog(args.lake, args.file)
    if args.json:
        print_json(report.to_dict())
        return 0
    print(
        f"exported {args.lake} at snapshot {report.snapshot_id} to {report.path} "
        f"({len(report.tables)} tables, {report.rows} rows, {report.bytes} bytes, "
        f"{report.seconds:.2f}s)"
    )
    print(f"data path: {report.data_path}")
    print(f"read it with stock DuckDB: {admin.attach_statement(report.path)}")
    return 0


def _cmd_import(args: argparse.Namespace) -> int:
    from slatelake import admin

    report = admin.import_catalog(args.catalog, args.lake, data_path=args.data_path)
    if args.json:
        print_json(report.to_dict())
        return 0
    print(
        f"imported {report.source} ({report.kind}) into {report.lake} at snapshot "
        f"{report.snapshot_id} ({len(report.tables)} tables, {report.rows} rows, "
        f"{report.keys} stored keys, {report.seconds:.2f}s); data path {report.data_path}"
    )
    return 0


def register(sub: Any) -> None:
    p = lake_verb(
        sub,
        "export",
        _cmd_export,
        "Write the lake at its head as a stock DuckLake catalog in a new DuckDB file: every "
        "ducklake_* table, every retained snapshot, the data files where they are (the "
        "catalog's data path: a local one as a plain absolute path, an s3:// one as is). "
        "Plain DuckDB with the ducklake extension attaches 'ducklake:FILE' and reads or "
        "writes it. An existing FILE is refused, never replaced; a failure leaves no file. "
        "Equality indexes are slatelake's own and are not exported.",
    )
    p.add_argument(
        "file",
        metavar="FILE",
        type=_local_file("export target"),
        help="the DuckDB file to create (a local path)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object with the counts")
    p = sub.add_parser(
        "import",
        help="Lay down a new lake from a stock DuckLake catalog file.",
        description="Lay down a new lake from a stock DuckLake 1.0 catalog in a DuckDB file, "
        "or a SQLite file (read with the pinned duckdb-extension-sqlite-scanner wheel). "
        "Every row, snapshot and file reference is kept; the data files stay where the "
        "catalog's data path says (or --data-path, if they moved). LAKE must be an empty "
        "root. A table slatelake does not know or a catalog version it does not support is "
        "refused, naming it.",
    )
    p.set_defaults(func=_cmd_import)
    p.add_argument(
        "catalog",
        metavar="CATALOG",
        type=_local_file("catalog"),
        help="the DuckLake catalog file (DuckDB or SQLite)",
    )
    p.add_argument("lake", metavar="LAKE", type=lake_url, help="lake URL of the new lake")
    p.add_argument(
        "--data-path",
        metavar="PATH",
        type=data_path,
        help="where the data files are now (absolute path or s3:// URL), replacing the "
        "catalog's data path; must not overlap LAKE",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object with the counts")
