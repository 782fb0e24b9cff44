"""Hostile imports are refused before anything is written.

Each catalog is written by stock DuckLake, then corrupted with plain SQL the
way the attack did it (``import_corpus``). A refusal must name the table and
the row, and leave the lake root absent and every file (a victim outside the
data path included) untouched.
"""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest

from slatelake.ducklake import transfer
from slatelake.errors import NotFoundError
from tests.ducklake.import_corpus import files_of, refused, stock, upload


# -- refused before anything is written ---------------------------------------------------
@pytest.mark.parametrize("spelling", ["absolute", "dotdot", "file_url"])
def test_import_refuses_a_data_file_outside_its_data_path_and_leaves_the_victim_alone(
    tmp_path: Path, spelling: str
) -> None:
    victim = tmp_path / "victim.parquet"
    victim.write_bytes(b"PAR1 someone else's file")
    path, relative = {
        "absolute": (str(victim), "false"),
        "dotdot": ("../../../../victim.parquet", "true"),
        "file_url": (victim.as_uri(), "false"),
    }[spelling]
    catalog, data = stock(
        tmp_path / "src",
        f"UPDATE ducklake_data_file SET path = '{path}', path_is_relative = {relative} "
        "WHERE data_file_id = (SELECT min(data_file_id) FROM ducklake_data_file)",
    )
    before = files_of(tmp_path)
    message = refused(catalog, (tmp_path / "lake").as_uri())
    assert "ducklake_data_file row data_file_id=" in message
    assert f"resolves to {victim}, outside the data path" in message
    assert "nothing was written" in message
    assert not (tmp_path / "lake").exists()
    assert files_of(tmp_path) == before


def test_import_refuses_a_file_scheduled_for_deletion_outside_the_data_path(
    tmp_path: Path,
) -> None:
    victim = tmp_path / "victim.parquet"
    victim.write_bytes(b"PAR1 someone else's file")
    catalog, _ = stock(
        tmp_path / "src",
        "INSERT INTO ducklake_files_scheduled_for_deletion VALUES "
        f"(999, '{victim}', false, TIMESTAMPTZ '2020-01-01 00:00:00+00')",
    )
    message = refused(catalog, (tmp_path / "lake").as_uri())
    assert "ducklake_files_scheduled_for_deletion row data_file_id=999" in message
    assert "the first cleanup would delete it" in message
    assert not (tmp_path / "lake").exists() and victim.exists()


def test_import_refuses_a_table_path_outside_the_data_path(tmp_path: Path) -> None:
    catalog, _ = stock(
        tmp_path / "src",
        f"UPDATE ducklake_table SET path = '{tmp_path}/elsewhere/', path_is_relative = false "
        "WHERE table_name = 'm'",
    )
    message = refused(catalog, (tmp_path / "lake").as_uri())
    assert "ducklake_table row table_id=" in message and "new files would be written" in message
    assert not (tmp_path / "lake").exists()


@pytest.mark.parametrize(
    ("corruption", "named"),
    [
        (  # the attack: every open then raised a raw traceback
            "UPDATE ducklake_schema SET schema_name = '..' WHERE schema_name = 'main'",
            ["schema_name '..'", "no live schema is named 'main'"],
        ),
        (
            "UPDATE ducklake_schema SET schema_name = '..' WHERE schema_name = 's1'",
            ["ducklake_schema row schema_id=", "schema_name '..'"],
        ),
        ("UPDATE ducklake_table SET table_name = '' WHERE table_name = 'm'", ["the name is empty"]),
        (
            "UPDATE ducklake_table SET table_name = 'a' || chr(10) || 'b' WHERE table_name = 'm'",
            ["table_name 'a\\nb'", "control character U+000A"],
        ),
        (
            "UPDATE ducklake_column SET column_name = '.' WHERE column_name = 'v'",
            ["ducklake_column row column_id=", "column_name '.'"],
        ),
        (
            "UPDATE ducklake_table SET table_name = 't', schema_id = 1 WHERE table_name = 'm'",
            ["a second live object of that name"],
        ),
    ],
)
def test_import_refuses_illegal_names_naming_the_row(
    tmp_path: Path, corruption: str, named: list[str]
) -> None:
    catalog, _ = stock(tmp_path / "src", corruption)
    message = refused(catalog, (tmp_path / "lake").as_uri())
    for text in named:
        assert text in message
    assert not (tmp_path / "lake").exists()


@pytest.mark.parametrize(
    ("corruption", "named"),
    [
        (  # the attack: reads then failed with a cast error
            "UPDATE ducklake_data_file SET file_size_bytes = -5 WHERE data_file_id = "
            "(SELECT min(data_file_id) FROM ducklake_data_file)",
            "file_size_bytes is -5, below zero",
        ),
        ("UPDATE ducklake_data_file SET record_count = -1", "record_count is -1"),
        ("UPDATE ducklake_delete_file SET delete_count = -3", "delete_count is -3"),
        ("UPDATE ducklake_table_stats SET next_row_id = -1", "next_row_id is -1"),
        (
            "UPDATE ducklake_data_file SET begin_snapshot = 999",
            "snapshot range [999, None) is not within the catalog's snapshots",
        ),
    ],
)
def test_import_refuses_negative_sizes_counts_and_bad_snapshot_ranges(
    tmp_path: Path, corruption: str, named: str
) -> None:
    catalog, _ = stock(tmp_path / "src", corruption)
    message = refused(catalog, (tmp_path / "lake").as_uri())
    assert named in message and " row " in message
    assert not (tmp_path / "lake").exists()


@pytest.mark.parametrize(
    ("corruption", "named"),
    [
        (  # the attack: its data silently disappeared
            "UPDATE ducklake_data_file SET table_id = 9999",
            "ducklake_data_file row data_file_id=",
        ),
        ("UPDATE ducklake_delete_file SET data_file_id = 9999", "data_file_id 9999 names no row"),
        ("UPDATE ducklake_table SET schema_id = 77 WHERE table_name = 'm'", "schema_id 77"),
        ("UPDATE ducklake_file_column_stats SET data_file_id = 4242", "data_file_id 4242"),
    ],
)
def test_import_refuses_a_dangling_id_naming_the_row(
    tmp_path: Path, corruption: str, named: str
) -> None:
    catalog, _ = stock(tmp_path / "src", corruption)
    message = refused(catalog, (tmp_path / "lake").as_uri())
    assert named in message and "names no row of" in message
    assert not (tmp_path / "lake").exists()


def test_import_refuses_a_missing_or_resized_data_file(tmp_path: Path) -> None:
    catalog, data = stock(tmp_path / "src")
    files = sorted(data.rglob("*.parquet"))
    files[0].unlink()
    files[1].write_bytes(files[1].read_bytes() + b"tail")
    with pytest.raises(NotFoundError) as err:
        transfer.import_catalog(catalog, (tmp_path / "lake").as_uri())
    assert f"file {files[0]} does not exist" in str(err.value)
    assert f"file {files[1]} holds" in str(err.value)
    assert not (tmp_path / "lake").exists()


def test_import_checks_a_sqlite_catalog_the_same_way(tmp_path: Path) -> None:
    catalog, _ = stock(
        tmp_path / "src",
        "UPDATE ducklake_data_file SET file_size_bytes = -5",
        sqlite=True,
    )
    message = refused(catalog, (tmp_path / "lake").as_uri())
    assert "file_size_bytes is -5" in message
    assert not (tmp_path / "lake").exists()


def test_import_refuses_a_data_path_given_where_the_files_are_not(tmp_path: Path) -> None:
    catalog, _ = stock(tmp_path / "src")
    (tmp_path / "empty").mkdir()
    with pytest.raises(NotFoundError, match="does not exist"):
        transfer.import_catalog(
            catalog, (tmp_path / "lake").as_uri(), data_path=str(tmp_path / "empty")
        )
    assert not (tmp_path / "lake").exists()


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("../../../outside.parquet", "'..' segment"),
        ("./f.parquet", "'.' or '..' segment"),
        ("s3://other-bucket/data/f.parquet", "not in the data path's bucket"),
        ("/etc/passwd", "not in the data path's bucket"),
    ],
)
def test_import_from_s3_refuses_keys_outside_or_spelled_ambiguously(
    tmp_path: Path, s3_bucket: str, path: str, why: str
) -> None:
    relative = "false" if path.startswith(("s3://", "/")) else "true"
    catalog, data = stock(
        tmp_path / "src",
        f"UPDATE ducklake_data_file SET path = '{path}', path_is_relative = {relative} "
        "WHERE data_file_id = (SELECT min(data_file_id) FROM ducklake_data_file)",
    )
    upload(data, s3_bucket, "data")
    url = f"s3://{s3_bucket}/lakes/x"
    message = refused(catalog, url, data_path=f"s3://{s3_bucket}/data/")
    assert "ducklake_data_file row data_file_id=" in message and why in message
    assert boto3.client("s3").list_objects_v2(Bucket=s3_bucket, Prefix="lakes/")["KeyCount"] == 0
