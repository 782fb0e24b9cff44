"""Another slatedb build keeps the generated bindings, and the store still works."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.conftest import subprocess_env

CHILD = textwrap.dedent(
    """
    import importlib.metadata, sys
    real = importlib.metadata.version
    importlib.metadata.version = lambda name: "0.18.0" if name == "slatedb" else real(name)
    from slatelake.store import _bindings
    from slatelake.store.db import open_writer
    from slatelake.store.location import LakeLocation
    writer = open_writer(LakeLocation.parse(sys.argv[1]))
    writer.write([(b"\\x03key", b"value" * 100)])
    assert writer.get(b"\\x03key") == b"value" * 100
    assert [k for k, _ in writer.scan_prefix(b"\\x03")] == [b"\\x03key"]
    writer.close()
    gen = _bindings._gen
    assert gen._UniffiFfiConverterBytes.lower == _bindings._generated_bytes_lower
    assert gen._UniffiFfiConverterSequenceTypeKeyValue.lift == _bindings._generated_kv_lift
    assert _bindings.install() is False
    print("generated bindings")
    """
)


def test_another_slatedb_build_keeps_the_generated_bindings(tmp_path: Path) -> None:
    url = (tmp_path / "lake").as_uri()
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, url],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "generated bindings"
    assert "slatedb 0.18.0 is installed, the fast paths fit 0.17.0" in proc.stderr
