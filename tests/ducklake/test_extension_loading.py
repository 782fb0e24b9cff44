"""Loading the wheels' extensions: DuckDB checks each file's signature once
per process, and no database can load an unchecked extension afterwards."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest

from slatelake.ducklake import extensions
from slatelake.errors import MisconfigurationError

SIGNATURE_REFUSED = "signature is either missing or invalid"


def _flip_a_byte(path: Path, at: int = 4096) -> None:
    with path.open("r+b") as f:
        f.seek(at)
        byte = f.read(1)
        f.seek(at)
        f.write(bytes([byte[0] ^ 0xFF]))


@pytest.fixture
def httpfs_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The httpfs wheel's file copied to a path of its own, which every later
    connect loads instead of the wheel's."""
    real = extensions.extension_path("httpfs")
    copy = tmp_path / "httpfs.duckdb_extension"
    shutil.copyfile(real, copy)
    wheel_path = extensions.extension_path
    monkeypatch.setattr(
        extensions, "extension_path", lambda name: copy if name == "httpfs" else wheel_path(name)
    )
    return copy


def test_a_later_database_cannot_load_an_unsigned_extension(tmp_path: Path) -> None:
    tampered = tmp_path / "tampered.duckdb_extension"
    shutil.copyfile(extensions.extension_path("httpfs"), tampered)
    _flip_a_byte(tampered)
    extensions.connect().close()  # the first database of the process checks the files
    con = extensions.connect()
    try:
        assert con.execute("SELECT current_setting('allow_unsigned_extensions')").fetchone() == (
            False,
        )
        with pytest.raises(duckdb.IOException, match=SIGNATURE_REFUSED):
            con.execute(f"LOAD '{tampered}'")
        with pytest.raises(duckdb.InvalidInputException, match="while database is running"):
            con.execute("SET GLOBAL allow_unsigned_extensions = true")
    finally:
        con.close()


def test_an_extension_file_changed_in_place_is_checked_again(httpfs_copy: Path) -> None:
    extensions.connect().close()  # checked and remembered
    extensions.connect().close()  # loaded as checked
    _flip_a_byte(httpfs_copy)  # same path and size; the inode's mtime moves
    with pytest.raises(duckdb.IOException, match=SIGNATURE_REFUSED):
        extensions.connect()


def test_a_tampered_extension_never_checked_is_refused(httpfs_copy: Path) -> None:
    _flip_a_byte(httpfs_copy)
    with pytest.raises(duckdb.IOException, match=SIGNATURE_REFUSED):
        extensions.connect()


def test_the_memory_limit_setting_bounds_each_new_database(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(extensions.MEMORY_LIMIT_ENV, "300MiB")
    con = extensions.connect()
    try:
        assert con.execute("SELECT current_setting('memory_limit')").fetchone()[0] == "300.0 MiB"
    finally:
        con.close()


@pytest.mark.parametrize(
    "value", ["40%", "0MB", "lots", "-1MB", "1e3MB", "1GB'; SET threads = 1; --", "512 MiB x"]
)
def test_a_bad_memory_limit_is_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(extensions.MEMORY_LIMIT_ENV, value)
    with pytest.raises(MisconfigurationError, match=extensions.MEMORY_LIMIT_ENV):
        extensions.connect()


@pytest.mark.parametrize(("deadline", "seconds"), [("4.2", 5), ("90s", 90), ("0.2", 1)])
def test_httpfs_requests_get_the_store_deadline_and_a_callers_connection_keeps_its_own(
    monkeypatch: pytest.MonkeyPatch, deadline: str, seconds: int
) -> None:
    monkeypatch.setenv("SLATELAKE_STORE_TIMEOUT_S", deadline)
    ours = extensions.connect()
    theirs = duckdb.connect(config={"autoinstall_known_extensions": False})
    try:
        extensions.prepare(theirs)  # httpfs loaded, so its setting exists
        theirs.execute("SET http_timeout = 77")
        extensions.prepare(theirs)  # as a session given this connection does
        timeout = "SELECT current_setting('http_timeout')"
        assert ours.execute(timeout).fetchone()[0] == seconds
        assert theirs.execute(timeout).fetchone()[0] == 77
    finally:
        ours.close()
        theirs.close()
