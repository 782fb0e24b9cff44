"""Transfer verbs: ``export`` (a lake to a stock DuckLake catalog file),
``import`` (a stock DuckLake catalog file to a new lake) and
``release-borrowed`` (files an import borrowed, given back to cleanup).

All check LAKE (and ``--data-path``, ``--copy-data``) at argument parsing,
exit 2, before any file or lake is touched; a refusal later (an existing
target, a file that is not a DuckLake catalog, a catalog that breaks
DuckLake's rules, a path that is not borrowed) exits 1 naming it. ``--json``
prints one object. Both ``export`` and a borrowing ``import`` say that the
two catalogs share data files, and what that means for later cleanups.
"""

from __future__ import annotations

import argparse
from typing import Any

from slatelake.cli import output
from slatelake.cli.arguments import add_json, add_lake, data_path, lake_verb, open_lake
from slatelake.cli.common import caller


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
    output.emit(output.EXPORTED, open_lake(args).export(args.file), args.json)
    return 0


def _cmd_import(args: argparse.Namespace) -> int:
    from slatelake import admin  # the lake does not exist yet: no handle verb makes it so

    report = admin.import_catalog(
        args.catalog, args.lake, data_path=args.data_path, copy_data=args.copy_data
    )
    output.emit(output.IMPORTED, report, args.json)
    return 0


def _cmd_release_borrowed(args: argparse.Namespace) -> int:
    done = open_lake(args).borrowed.release(args.paths or None, everything=args.all, by=caller())
    output.emit(output.RELEASED, done, args.json)
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
        "Equality indexes are slatelake's own and are not exported. The export shares the "
        "lake's data files: a later cleanup or orphan pass in the lake may delete files it "
        "references, so copy them to keep it readable.",
    )
    p.add_argument(
        "file",
        metavar="FILE",
        type=_local_file("export target"),
        help="the DuckDB file to create (a local path)",
    )
    add_json(p, "print one JSON object with the counts")
    p = sub.add_parser(
        "import",
        help="Lay down a new lake from a stock DuckLake catalog file.",
        description="Lay down a new lake from a stock DuckLake 1.0 catalog in a DuckDB file, "
        "or a SQLite file (read with the pinned duckdb-extension-sqlite-scanner wheel). "
        "Every row, snapshot and file reference is kept. First the catalog is checked "
        "against DuckLake's rules (every file inside the data path and present with its "
        "size, no negative size or count, no dangling id, legal names), and refused, "
        "naming each bad row, before anything is written. With --copy-data the files are "
        "copied to a data path of the lake's own; without it they stay where the catalog's "
        "data path says (or --data-path, if they moved) and are recorded as borrowed: no "
        "cleanup or orphan step of the new lake deletes them until `slatelake "
        "release-borrowed` releases them. LAKE must be an empty root. A table slatelake "
        "does not know or a catalog version it does not support is refused, naming it.",
    )
    p.set_defaults(func=_cmd_import)
    p.add_argument(
        "catalog",
        metavar="CATALOG",
        type=_local_file("catalog"),
        help="the DuckLake catalog file (DuckDB or SQLite)",
    )
    add_lake(p, "lake URL of the new lake")
    p.add_argument(
        "--data-path",
        metavar="PATH",
        type=data_path,
        help="where the data files are now (absolute path or s3:// URL), replacing the "
        "catalog's data path; must not overlap LAKE",
    )
    p.add_argument(
        "--copy-data",
        metavar="DEST",
        type=data_path,
        help="copy every data and delete file to DEST (an empty absolute path or s3:// URL "
        "apart from LAKE and the source's data path), which becomes the lake's data path; "
        "the source catalog's files are then never touched by the new lake",
    )
    add_json(p, "print one JSON object with the counts")
    p = lake_verb(
        sub,
        "release-borrowed",
        _cmd_release_borrowed,
        "Release data files an import borrowed from its source catalog: cleanup and orphan "
        "steps may then delete them. Release them only once the source catalog no longer "
        "reads them (it was dropped, or its files were copied). A path that is not borrowed "
        "is refused and nothing is released. The release is in the audit log.",
    )
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--all", action="store_true", help="release every borrowed file")
    what.add_argument(
        "paths",
        metavar="PATH",
        nargs="*",
        default=[],
        help="a borrowed file, as the import recorded it (an absolute local path or s3:// URL)",
    )
    add_json(p, "print what was released as JSON")
