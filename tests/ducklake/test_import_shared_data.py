"""Shared data is explicit: an import copies its files or borrows them, and an
export says it shares the lake's.

A borrowing import records every file the source catalog still reads, and
a DELETE plus a full pass in the new lake deletes none of them; a copying
import reads its own copies, and the same pass never touches the source.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

import slatelake
from slatelake.catalog.borrowed import BORROWED_KEY
from slatelake.catalog.lake import Lake
from slatelake.ducklake import transfer
from slatelake.errors import MisconfigurationError, NotFoundError
from slatelake.maintenance import history
from slatelake.maintenance.borrowed import borrowed_at_head, borrowed_files, release_borrowed
from tests.ducklake.import_corpus import (
    COUNTS,
    delete_everything_and_pass,
    files_of,
    lake_counts,
    stock,
    stock_counts,
    upload,
)


# -- borrowed: the files stay shared, and the new lake knows it ---------------------------
def test_import_records_every_file_it_shares_as_borrowed(tmp_path: Path) -> None:
    catalog, data = stock(tmp_path / "src")
    url = (tmp_path / "lake").as_uri()
    report = transfer.import_catalog(catalog, url)
    on_disk = sorted(str(p) for p in data.rglob("*.parquet"))
    assert report.borrowed_files == len(on_disk) == report.files_checked
    assert report.copied_files == 0 and "release-borrowed" in (report.warning or "")
    with slatelake.connect(url, read_only=True) as s:
        borrowed = borrowed_files(s)
    assert list(borrowed.paths) == on_disk and borrowed.source == str(catalog)
    assert all(borrowed.covers(p) for p in on_disk)
    assert borrowed.covers(Path(on_disk[0]).as_uri())
    assert not borrowed.covers(str(tmp_path / "victim.parquet"))
    assert not borrowed.covers(str(data / "main" / "m" / "later.parquet"))
    assert lake_counts(url) == COUNTS


def test_borrowed_files_survive_a_delete_and_a_pass_in_the_imported_lake(
    tmp_path: Path,
) -> None:
    catalog, data = stock(tmp_path / "src")
    before = files_of(data)
    url = (tmp_path / "lake").as_uri()
    transfer.import_catalog(catalog, url)
    delete_everything_and_pass(url)
    assert lake_counts(url) == {"s1.t": 0, "m": 0}
    assert files_of(data) == before
    assert stock_counts(catalog) == COUNTS


def test_release_borrowed_releases_named_paths_then_all_with_an_audit_entry(
    tmp_path: Path,
) -> None:
    catalog, data = stock(tmp_path / "src")
    url = (tmp_path / "lake").as_uri()
    transfer.import_catalog(catalog, url)
    on_disk = sorted(str(p) for p in data.rglob("*.parquet"))
    with pytest.raises(NotFoundError, match="not borrowed"):
        release_borrowed(url, [on_disk[0], str(tmp_path / "victim.parquet")])
    with Lake.open(url, read_only=True) as lake:
        assert len(borrowed_at_head(lake)) == len(on_disk)  # nothing released
    done = release_borrowed(url, [Path(on_disk[0]).as_uri()], by="tester")
    assert done.released == (on_disk[0],) and done.remaining == len(on_disk) - 1
    with Lake.open(url, read_only=True) as lake:
        left = borrowed_at_head(lake)
        entries = history.audit(lake, 10, None).items
    assert not left.covers(on_disk[0]) and left.covers(on_disk[1])
    assert entries[0].kind == "borrowed.release" and entries[0].who == "tester"
    assert entries[0].what["released"] == 1
    done = release_borrowed(url, everything=True)
    assert done.remaining == 0 and len(done.released) == len(on_disk) - 1
    with Lake.open(url, read_only=True) as lake:
        assert lake.read_sys_at_head(BORROWED_KEY) is None
    with pytest.raises(NotFoundError, match="has no borrowed files"):
        release_borrowed(url, everything=True)


def test_release_borrowed_needs_either_paths_or_all(tmp_path: Path) -> None:
    with pytest.raises(MisconfigurationError, match="either --all or the paths"):
        release_borrowed((tmp_path / "lake").as_uri())
    with pytest.raises(MisconfigurationError, match="either --all or the paths"):
        release_borrowed((tmp_path / "lake").as_uri(), ["/x"], everything=True)


# -- copied: the new lake's files are its own ---------------------------------------------
def test_import_with_copy_data_reads_the_same_rows_and_never_touches_the_source(
    tmp_path: Path,
) -> None:
    catalog, data = stock(tmp_path / "src")
    before = files_of(data)
    url, dest = (tmp_path / "lake").as_uri(), tmp_path / "copy"
    report = transfer.import_catalog(catalog, url, copy_data=str(dest))
    assert report.data_path == f"{dest}/" and report.source_data_path == f"{data}/"
    assert report.copied_files == len(before) and report.borrowed_files == 0
    assert report.copied_bytes == sum(p.stat().st_size for p in data.rglob("*.parquet"))
    assert report.warning is None
    copies = files_of(dest)
    assert sorted(copies.values()) == sorted(before.values())
    assert lake_counts(url) == COUNTS
    with slatelake.connect(url, read_only=True) as s:
        assert len(borrowed_files(s)) == 0
    delete_everything_and_pass(url)
    assert files_of(data) == before  # the source's files, byte for byte
    assert stock_counts(catalog) == COUNTS
    assert not set(copies) <= set(files_of(dest))  # the pass did delete the lake's own copies


def test_import_with_copy_data_rewrites_absolute_paths_to_the_copies(tmp_path: Path) -> None:
    catalog, data = stock(tmp_path / "src")
    first = sorted(data.rglob("*.parquet"))[0]
    con = duckdb.connect(str(catalog))
    try:
        con.execute(
            "UPDATE ducklake_data_file SET path = ?, path_is_relative = false "
            "WHERE ? LIKE '%' || path",
            [str(first), str(first)],
        )
        assert con.execute("SELECT count(*) FROM ducklake_data_file WHERE NOT path_is_relative")
    finally:
        con.close()
    url, dest = (tmp_path / "lake").as_uri(), tmp_path / "copy"
    transfer.import_catalog(catalog, url, copy_data=str(dest))
    with slatelake.connect(url, read_only=True) as s:
        absolute = s.sql(
            "SELECT path FROM __slatelake_meta.ducklake_data_file WHERE NOT path_is_relative"
        ).fetchall()
    assert absolute == [(str(dest / first.relative_to(data)),)]
    first.unlink()  # the lake reads its copy, not the source's file
    assert lake_counts(url) == COUNTS


@pytest.mark.parametrize("where", ["inside_source", "not_empty", "inside_lake"])
def test_import_with_copy_data_refuses_a_destination_that_is_not_its_own(
    tmp_path: Path, where: str
) -> None:
    catalog, data = stock(tmp_path / "src")
    dest = {
        "inside_source": data / "copy",
        "not_empty": tmp_path / "full",
        "inside_lake": tmp_path / "lake" / "data",
    }[where]
    if where == "not_empty":
        dest.mkdir()
        (dest / "someone.txt").write_text("mine")
    before = files_of(tmp_path)
    with pytest.raises(MisconfigurationError, match="overlaps|not empty"):
        transfer.import_catalog(catalog, (tmp_path / "lake").as_uri(), copy_data=str(dest))
    assert files_of(tmp_path) == before
    assert not (tmp_path / "lake").exists()


def test_export_says_it_shares_the_lakes_data_files(tmp_path: Path) -> None:
    catalog, _ = stock(tmp_path / "src")
    url = (tmp_path / "lake").as_uri()
    transfer.import_catalog(catalog, url, copy_data=str(tmp_path / "copy"))
    report = transfer.export_catalog(url, tmp_path / "out.duckdb")
    answer = report.to_dict()
    assert answer["shares_data_files"] is True
    assert "later cleanup or orphan pass in the lake may delete files" in answer["warning"]


def test_import_from_s3_borrows_its_objects_and_copies_them_on_request(
    tmp_path: Path, s3_bucket: str
) -> None:
    catalog, data = stock(tmp_path / "src")
    upload(data, s3_bucket, "data")
    where = f"s3://{s3_bucket}/data/"
    url = f"s3://{s3_bucket}/lakes/borrowing"
    report = transfer.import_catalog(catalog, url, data_path=where)
    keys = sorted(f"{where}{p.relative_to(data)}" for p in data.rglob("*.parquet"))
    with Lake.open(url, read_only=True) as lake:
        assert list(borrowed_at_head(lake).paths) == keys == sorted(keys)
    assert report.borrowed_files == len(keys)
    copied = tmp_path / "copy"
    report = transfer.import_catalog(
        catalog, f"s3://{s3_bucket}/lakes/copying", data_path=where, copy_data=str(copied)
    )
    assert report.copied_files == len(keys) and report.data_path == f"{copied}/"
    assert lake_counts(f"s3://{s3_bucket}/lakes/copying") == COUNTS


def test_borrowed_record_covers_the_paths_ducklake_names_for_a_symlinked_data_path(
    tmp_path: Path,
) -> None:
    catalog, data = stock(tmp_path / "src")
    link = tmp_path / "link"
    link.symlink_to(data.parent)
    con = duckdb.connect(str(catalog))
    try:
        con.execute(
            "UPDATE ducklake_metadata SET value = ? WHERE key = 'data_path'", [f"{link}/data/"]
        )
    finally:
        con.close()
    url = (tmp_path / "lake").as_uri()
    transfer.import_catalog(catalog, url)
    with slatelake.connect(url) as s:
        s.sql("DELETE FROM s1.t")
        s.sql("SELECT * FROM ducklake_expire_snapshots('lake', older_than => now())").fetchall()
        named = [
            r[0]
            for r in s.sql(
                "SELECT path FROM ducklake_cleanup_old_files('lake', dry_run => true, "
                "cleanup_all => true)"
            ).fetchall()
        ]
        borrowed = borrowed_files(s)
    assert named and all(borrowed.covers(p) for p in named), named
