"""``python -m tests.conformance``: see ``tests.conformance.cli``."""

from tests.conformance.cli import main

raise SystemExit(main())
