"""DuckLake's own sqllogictest files, run against slatelake and against stock DuckLake.

The suite (DuckLake's test/sql files at the commit the pinned extension was built
from, and the file lists) lives outside the repository, read-only, at
``SLATELAKE_CONFORMANCE_ROOT`` (default ``../shared/conformance`` next to the
repository). ``bash scripts/conformance`` runs a selection of it and writes JSON;
``test_ducklake_suite.py`` runs the transaction and compaction files in CI.

Modules: ``script`` parses a test file, ``values`` renders and compares results
the way DuckDB's sqllogictest runner does, ``backends`` runs statements on stock
DuckDB or through slatelake sessions, ``interpreter`` runs one file, ``suite``
finds and selects files, ``cli`` is the command.
"""
