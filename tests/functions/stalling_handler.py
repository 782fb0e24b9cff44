"""A Lambda handler that outlives its function's timeout: the harness's
(tests/functions/state_machines.py) proof that such a child is killed and
answered as Lambda does. slatelake's own handler ends before its deadline."""

from __future__ import annotations

import time
from typing import Any


def handler(event: Any, context: Any) -> dict[str, Any]:
    time.sleep(float(event.get("sleep_s", 600)))
    return {"ok": True}
