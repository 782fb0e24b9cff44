"""moto's S3 server as the tests run it: ``python tests/moto_server.py -H HOST -p PORT``.

The same server as ``python -m moto.server``, less three costs moto pays on
every request that no real object store has (on this machine, creating a
lake on it took 236 ms before and 140 ms after; a session's first six
statements 1.16 s and 0.86 s):

- moto lists its own package directory (an ``isdir`` per service, ~200) to
  route each request; the list never changes while the server runs, so it
  is read once;
- werkzeug logs every request line (to a stream the tests discard);
- the response's headers and body leave in separate small writes with
  Nagle's algorithm on, so the second can wait for the client's delayed ACK.

Nothing of S3's behaviour changes: requests are parsed, routed and answered
by moto's own code (conditional puts included), with one correction: moto
checks a conditional write's precondition (``If-None-Match: *``,
``If-Match``) and then writes, two steps its request threads interleave, so
two racing PUTs of one new key could both be answered 200 where S3 lets one
win (the soak forked its commit log that way: two committers each won slot
393). Object writes are serialized here, which makes each atomic, as on S3.
``SLATELAKE_MOTO_SWITCH_INTERVAL`` (seconds) sets the server's thread switch
interval, so that a test can make such interleavings common.

With ``SLATELAKE_MOTO_HANDLERS=1`` in its environment (tests/functions/state_machines.py
starts it so), the server also runs slatelake's real Lambda handler: an invoke
of a Lambda function whose name starts with ``slatelake-local-`` runs
``functions/maintenance/app.py``'s ``handler`` in a child process, the way
Lambda's Python runtime would (``lambda_child``), instead of moto's Docker
container; every other function stays moto's. Step Functions' tasks reach
that invoke over this server's own loopback address. Nothing else changes.
"""

from __future__ import annotations

import atexit
import base64
import functools
import json
import logging
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from moto import backends
from moto.moto_server.werkzeug_app import MotoRequestHandler
from moto.s3.responses import S3Response
from moto.server import main

_MODULES = tuple(backends.list_of_moto_modules())
backends.list_of_moto_modules = lambda: _MODULES
MotoRequestHandler.disable_nagle_algorithm = True
logging.getLogger("werkzeug").setLevel(logging.WARNING)

_object_writes = threading.Lock()


def _atomic(handler: Any) -> Any:
    """One object write (a PUT, a part, a multipart completion) at a time."""

    @functools.wraps(handler)
    def serialized(self: S3Response, *args: Any, **kwargs: Any) -> Any:
        with _object_writes:
            return handler(self, *args, **kwargs)

    return serialized


S3Response._key_response_put = _atomic(S3Response._key_response_put)  # type: ignore[method-assign]
S3Response._key_response_post = _atomic(S3Response._key_response_post)  # type: ignore[method-assign]

ROOT = Path(__file__).resolve().parents[1]
HANDLER_PREFIX = "slatelake-local-"  # the Lambda functions the real handler answers
LOG_TAIL_BYTES = 4096  # Lambda's LogType=Tail returns the last 4 KB of the log

# The child: Lambda's Python runtime, in short. The handler's stdout (Powertools'
# log lines and EMF documents) goes to stderr, the function's log; the answer
# leaves on the real stdout, as JSON, once. argv: the handler ("app.handler"),
# the function's name, its ARN, memory, timeout (s), the request id.
CHILD = r"""
import json, os, sys, time, traceback
answer = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
handler_spec, name, arn, memory, timeout, request_id = sys.argv[1:7]
started = time.monotonic()

class Context:
    function_name = name
    function_version = "$LATEST"
    invoked_function_arn = arn
    memory_limit_in_mb = int(memory)
    aws_request_id = request_id
    log_group_name = "/aws/lambda/" + name
    log_stream_name = "local"

    def get_remaining_time_in_millis(self):
        return int((float(timeout) - (time.monotonic() - started)) * 1000)

event = json.load(sys.stdin)
try:
    module, _, attr = handler_spec.rpartition(".")
    result = getattr(__import__(module), attr)(event, Context())
    answer.write(json.dumps(result))
    code = 0
except Exception as exc:
    answer.write(json.dumps({
        "errorMessage": str(exc),
        "errorType": type(exc).__name__,
        "requestId": request_id,
        "stackTrace": traceback.format_tb(exc.__traceback__),
    }))
    code = 1
answer.flush()
sys.stdout.flush()
os._exit(code)
"""

_children: set[subprocess.Popen[bytes]] = set()
_children_lock = threading.Lock()


def lambda_child(fn: Any, event: bytes) -> tuple[bytes, str | None, str]:
    """Run ``fn``'s handler (its ``Handler``, from functions/maintenance/) on
    ``event`` in a child process with the function's environment and timeout:
    (payload, function error or None, the function's log). A handler that
    raised answers Lambda's error document (``Unhandled``); one that outlives
    the function's timeout is killed and answers ``Sandbox.Timedout``."""
    request_id = str(uuid.uuid4())
    # The function sees its own configuration only, as on Lambda: nothing of
    # the deployment's kind leaks in from whoever started this server.
    own = ("SLATELAKE_", "MAINTENANCE_", "AWS_", "POWERTOOLS_")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(own)},
        "AWS_LAMBDA_FUNCTION_NAME": fn.function_name,
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(fn.memory_size),
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "AWS_LAMBDA_FUNCTION_TIMEOUT": str(fn.timeout),
        "AWS_REGION": fn.region,
        "AWS_DEFAULT_REGION": fn.region,
        "AWS_EXECUTION_ENV": "AWS_Lambda_python3.12",
        **{str(k): str(v) for k, v in fn.environment_vars.items()},
    }
    code_dirs = (ROOT / "functions" / "maintenance", ROOT / "layers" / "slatelake")
    env["PYTHONPATH"] = os.pathsep.join(
        [*map(str, code_dirs), *filter(None, [env.get("PYTHONPATH")])]
    )
    args = [fn.handler or "app.handler", fn.function_name, fn.function_arn]
    args += [str(fn.memory_size), str(fn.timeout), request_id]
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, *args],
        env=env,
        cwd=code_dirs[0],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    with _children_lock:
        _children.add(proc)
    t0 = time.monotonic()
    try:
        out, err = proc.communicate(event, timeout=float(fn.timeout))
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        took = time.monotonic() - t0
        message = f"RequestId: {request_id} Error: Task timed out after {took:.2f} seconds"
        doc = {"errorType": "Sandbox.Timedout", "errorMessage": message}
        return json.dumps(doc).encode(), "Unhandled", err.decode(errors="replace")
    finally:
        with _children_lock:
            _children.discard(proc)
    log = err.decode(errors="replace")
    if proc.returncode == 0:
        return out, None, log
    if proc.returncode == 1 and out:
        return out, "Unhandled", log
    doc = {
        "errorType": "Runtime.ExitError",
        "errorMessage": f"RequestId: {request_id} Error: Runtime exited with {proc.returncode}",
    }
    return json.dumps(doc).encode(), "Unhandled", log


def _kill_children() -> None:
    with _children_lock:
        for proc in list(_children):
            proc.kill()


def run_handlers_in_children() -> None:
    """Route the invoke of every ``slatelake-local-*`` function to ``lambda_child``,
    and Step Functions' task clients to this server's loopback address."""
    from moto.awslambda.models import LambdaFunction
    from moto.stepfunctions.parser.asl.utils import boto_client

    moto_invoke = LambdaFunction.invoke

    def invoke(self: Any, body: Any, request_headers: Any, response_headers: Any) -> Any:
        if not self.function_name.startswith(HANDLER_PREFIX):
            return moto_invoke(self, body, request_headers, response_headers)
        event = body.encode() if isinstance(body, str) else (body or b"{}")
        payload, error, log = lambda_child(self, event)
        if error:
            response_headers["x-amz-function-error"] = error
        tail = log.encode()[-LOG_TAIL_BYTES:]
        response_headers["x-amz-log-result"] = base64.b64encode(tail).decode()
        response_headers["x-amz-executed-version"] = "$LATEST"
        return payload

    LambdaFunction.invoke = invoke

    def loopback_client(region: str, service: str, state_credentials: Any = None) -> Any:
        """moto's ``boto_client_for``, on 127.0.0.1 (moto's says ``localhost``)."""
        import boto3
        from botocore.config import Config
        from moto.settings import moto_server_port

        return boto3.client(
            service,
            region_name=region,
            aws_access_key_id="ak",
            aws_secret_access_key="sk",
            endpoint_url=f"http://127.0.0.1:{moto_server_port()}",
            config=Config(
                parameter_validation=False,
                retries={"max_attempts": 0, "total_max_attempts": 1},
                connect_timeout=60,
                read_timeout=99999999,
            ),
        )

    # Every task integration imports moto's function by name, once, after this.
    boto_client.boto_client_for = loopback_client
    atexit.register(_kill_children)
    # moto's ASL parser takes ~2 s to import on the first CreateStateMachine;
    # imported now, beside the test's own setup (the import lock orders the two).
    threading.Thread(target=_import_asl_parser, daemon=True).start()


def _import_asl_parser() -> None:
    import moto.stepfunctions.parser.models  # noqa: F401


if __name__ == "__main__":
    if interval := os.environ.get("SLATELAKE_MOTO_SWITCH_INTERVAL"):
        sys.setswitchinterval(float(interval))
    if os.environ.get("SLATELAKE_MOTO_HANDLERS") == "1":
        os.environ.pop("MOTO_PORT", None)  # moto's own clients reach this server's port
        run_handlers_in_children()
    main(sys.argv[1:])
