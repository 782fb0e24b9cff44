"""The stack's ``PassShape=auto``: a scheduled tick whose lake has more
tables than ``SLATELAKE_FANOUT_ABOVE_TABLES`` hands its pass to the pass
state machine (``SLATELAKE_PASS_STATE_MACHINE``) instead of running it.

The tick has already passed the scheduled gates (switch, lease, cron); the
count is the warm session's live tables, which the pass would have opened
anyway. The execution gets the tick's own input plus the fan-out's batch
size and concurrency; its plan takes the lease, so a tick racing it skips
as ticks do. Starting an execution is one Step Functions call, bounded by
its own timeouts (the store deadline does not cover boto3).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from invocation import InvocationError

from slatelake import PassRequest, show_input

ENV_MACHINE = "SLATELAKE_PASS_STATE_MACHINE"
ENV_ABOVE = "SLATELAKE_FANOUT_ABOVE_TABLES"
ENV_BATCH = "SLATELAKE_FANOUT_BATCH_TABLES"
ENV_CONCURRENCY = "SLATELAKE_FANOUT_CONCURRENCY"
# Step Functions' StartExecution: answered within seconds, or the tick fails.
CONNECT_TIMEOUT_S, READ_TIMEOUT_S, ATTEMPTS = 5, 10, 3


@dataclass(frozen=True)
class Handoff:
    """Where a large lake's scheduled pass goes: the machine, the table
    count above which it goes there, and the fan-out's shape."""

    machine: str
    above_tables: int
    batch_tables: int
    concurrency: int

    @classmethod
    def configured(cls, env: Mapping[str, str] | None = None) -> Handoff | None:
        """The function's hand-off, or None when it has none (shape single
        or fanout)."""
        env = os.environ if env is None else env
        machine = env.get(ENV_MACHINE, "").strip()
        if not machine:
            return None
        if not machine.startswith("arn:") or ":stateMachine:" not in machine:
            raise InvocationError(
                f"the function's {ENV_MACHINE}={show_input(machine)}: expected a state machine ARN"
            )
        return cls(
            machine,
            _count(env, ENV_ABOVE, 100),
            _count(env, ENV_BATCH, 20),
            _count(env, ENV_CONCURRENCY, 4),
        )

    def start(self, lake: str, data_path: str | None, request: PassRequest) -> str:
        """Start the fanned-out pass for this tick: its execution ARN."""
        import boto3
        from botocore.config import Config

        doc: dict[str, Any] = {
            "trigger": "scheduled",
            "lake": lake,
            "data_path": data_path,
            "options": request.to_dict()["options"] or {},
            "batch_tables": self.batch_tables,
            "concurrency": self.concurrency,
        }
        config = Config(
            connect_timeout=CONNECT_TIMEOUT_S,
            read_timeout=READ_TIMEOUT_S,
            retries={"max_attempts": ATTEMPTS, "mode": "standard"},
        )
        client = boto3.client("stepfunctions", config=config)
        out = client.start_execution(stateMachineArn=self.machine, input=json.dumps(doc))
        return str(out["executionArn"])


def _count(env: Mapping[str, str], name: str, default: int) -> int:
    text = env.get(name, "").strip() or str(default)
    if not (text.isascii() and text.isdigit() and 1 <= len(text) <= 5 and int(text) >= 1):
        raise InvocationError(f"the function's {name}={show_input(text)}: expected a count >= 1")
    return int(text)
