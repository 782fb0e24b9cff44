"""No SQL, command output, error or log shows a configured credential.

The environment holds a recognizable fake secret key and session token (moto
accepts any). Every command a user or the Lambda runs against an S3 lake is
run, including SQL written to dig for them: ``duckdb_settings()``,
``current_setting``, ``duckdb_secrets()`` (and its unredacted form),
``which_secret``, failing statements; then the CLI's ``--json`` outputs and the
library's log records at DEBUG. None may contain either value. The key id is
not a secret (DuckDB shows it in ``duckdb_secrets()`` by design).
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest

import slatelake
from slatelake.ducklake import extensions
from tests.conftest import subprocess_env

SECRET = f"FakeSecretKey{uuid.uuid4().hex}"
TOKEN = f"FakeSessionToken{uuid.uuid4().hex}"
PROBES = (
    "SELECT name, value FROM duckdb_settings()",
    "SELECT * FROM duckdb_secrets()",
    "SELECT * FROM which_secret('s3://any-bucket/x', 's3')",
)
PROGRESS = {"MAINTENANCE_PROGRESS": "true"}  # the pass's progress lines, on stderr
# DuckDB refuses current_setting() of an httpfs option that holds no value
# ("not in the catalog"); before the fix it answered the secret.
CURRENT = (
    "SELECT current_setting('s3_secret_access_key') AS k, current_setting('s3_session_token') AS t"
)


@pytest.fixture
def credentials(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_SESSION_TOKEN", TOKEN)
    yield


@pytest.fixture
def lake(credentials: None, s3_bucket: str) -> tuple[str, str]:
    run = uuid.uuid4().hex[:8]
    return f"s3://{s3_bucket}/lakes/{run}", f"s3://{s3_bucket}/data/{run}/"


def _leaks(text: str) -> list[str]:
    return [name for name, value in (("secret", SECRET), ("token", TOKEN)) if value in text]


def test_sql_cannot_read_the_credentials_from_settings_or_secrets(credentials: None) -> None:
    con = extensions.connect()
    try:
        outputs = [repr(con.execute(q).fetchall()) for q in PROBES]
        try:
            outputs.append(repr(con.execute(CURRENT).fetchall()))
        except Exception as exc:
            outputs.append(str(exc))
        settings = dict(con.execute("SELECT name, value FROM duckdb_settings()").fetchall())
        (secret,) = con.execute("SELECT secret_string FROM duckdb_secrets()").fetchone()
        with pytest.raises(Exception, match="unredacted") as refused:
            con.execute("SELECT * FROM duckdb_secrets(redact := false)")
        con.execute("RESET s3_secret_access_key")  # a reset does not bring the value back
        again = con.execute("SELECT current_setting('s3_secret_access_key')").fetchone()
    finally:
        con.close()
    assert settings["s3_secret_access_key"] in (None, "")
    assert settings["s3_session_token"] in (None, "")
    assert "secret=redacted" in secret and "session_token=redacted" in secret
    assert again in ((None,), ("",))
    assert not _leaks("\n".join([*outputs, str(refused.value), repr(settings)]))


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "slatelake.cli", *args],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_no_command_output_shows_a_configured_credential(lake: tuple[str, str]) -> None:
    url, data = lake
    runs = [
        _cli("init", url, "--data-path", data),
        _cli("sql", url, "-c", "CREATE TABLE t AS SELECT range AS id FROM range(3000)"),
        _cli("sql", url, "--read-only", "--json", *[a for q in PROBES for a in ("-c", q)]),
        _cli("sql", url, "--read-only", *[a for q in PROBES for a in ("-c", q)]),
        _cli("sql", url, "--read-only", "--json", "-c", CURRENT),
        _cli("sql", url, "--read-only", "-c", "SELECT * FROM duckdb_secrets(redact := false)"),
        _cli("sql", url, "-c", "SELECT * FROM read_parquet('s3://no-such-bucket-zz/x.parquet')"),
        _cli(
            "maintain",
            url,
            "--json",
            "--option",
            "MAINTENANCE_DELETE_ORPHANED_FILES_CLEANUP_ALL=true",
            "--option",
            "MAINTENANCE_ORPHAN_AGE_FLOOR_OVERRIDE=true",
            "--option",
            "MAINTENANCE_PROGRESS=true",
        ),
        _cli("status", url, "--json"),
        _cli("log", url, "--json"),
        _cli("index", "list", url, "--json"),
    ]
    # current_setting: refused (1) or NULL (0), either is fine
    expected = [(0,), (0,), (0,), (0,), (0, 1), (1,), (1,), (0,), (0,), (0,), (0,)]
    for run, codes in zip(runs, expected, strict=True):
        assert run.returncode in codes, (run.args[3:], run.returncode, run.stderr[-2000:])
    rows = json.loads(runs[2].stdout.splitlines()[0])  # duckdb_settings() as JSON
    assert {"name": "s3_secret_access_key", "value": None} in rows
    assert "unredacted" in runs[5].stderr
    assert "step delete_orphaned_files" in runs[7].stderr  # the pass's progress lines
    for run in runs:
        assert not _leaks(run.stdout + run.stderr), run.args


def test_no_log_record_shows_a_configured_credential(
    lake: tuple[str, str], caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    url, data = lake
    caplog.set_level(logging.DEBUG)
    options = {
        "MAINTENANCE_DELETE_ORPHANED_FILES_CLEANUP_ALL": "true",
        "MAINTENANCE_ORPHAN_AGE_FLOOR_OVERRIDE": "true",
        **PROGRESS,
    }
    with slatelake.connect(url, data_path=data, options=options) as session:
        session.sql("CREATE TABLE t AS SELECT range AS id FROM range(3000)")
        with pytest.raises(Exception) as failed:
            session.sql("SELECT * FROM read_parquet('s3://no-such-bucket-zz/x.parquet')")
        report = session.maintenance()
    progress = capsys.readouterr().err
    assert "step delete_orphaned_files" in progress  # the pass's own lines are read too
    text = caplog.text + progress + str(failed.value) + json.dumps(report.to_dict())
    assert not _leaks(text)
