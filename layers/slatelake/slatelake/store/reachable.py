"""Asking a data path, within a short bound, before DuckDB starts work it cannot cut short.

Some of DuckLake's maintenance calls send object requests that no deadline
of ours reaches: the orphan step HEADs file after file, each with httpfs's
retries, and a compaction uploads its new files without httpfs's
``http_timeout``; ``con.interrupt()`` stops neither. With the store holding
every such request, the step would take files x tries x deadline, or wait
each upload out. So before such a call the pass sends the data path one
request of the kind the call will send, on a key that never exists
(``refusal.probe_requests``: nothing read, nothing written). Only silence
counts: a request left unanswered twice fails the step, typed, before
DuckDB starts it. Any answer, an error too, lets the call start; what
DuckLake does with a refusal or a 5xx is bounded by httpfs's tries and
judged after the call (``ducklake/request_log.py``). An outage that begins
after the probe still waits as before.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from slatelake.errors import StoreTimeoutError, StoreUnavailableError
from slatelake.store import _bindings
from slatelake.store.location import LakeLocation
from slatelake.store.objects import TIMED_OUT, object_url, read_fault
from slatelake.store.refusal import PROBE_KEY, PROBE_TIMEOUT_S, probe_requests

# A one-off stall is the probe's own bad luck: ask once more before failing.
ATTEMPTS = 2
# The client's own request timeout, set to the same bound, can end a held
# request first, in words that do not say so ("error sending request"): a
# failure without an HTTP answer this close to the bound is that timeout.
AT_THE_BOUND = 0.9


def require_answers(location: LakeLocation, ops: Iterable[str], before: str) -> None:
    """Raise StoreUnavailableError, naming ``before`` (what was not started)
    and the request, unless the store under ``location`` answers each of
    ``ops`` (LIST, GET, HEAD, PUT) on an absent key within the probe's bound
    in one of ``ATTEMPTS`` tries. S3 only: a local file system answers, or
    fails, by itself."""
    if location.scheme != "s3":
        return
    store = location.obstore()
    key = f"{location.root}/{PROBE_KEY}" if location.root else PROBE_KEY
    limit = min(PROBE_TIMEOUT_S, _bindings.store_timeout_s())
    for op in ops:
        if not any(_answered(location, store, key, op, limit) for _ in range(ATTEMPTS)):
            raise StoreUnavailableError(
                f"{before}: not started: the data path did not answer {op} "
                f"{object_url(location, key)} in {ATTEMPTS} tries of {limit:g}s; run the pass "
                "again when the store answers"
            )


def _answered(location: LakeLocation, store: object, key: str, op: str, limit: float) -> bool:
    """Whether one probe request got an answer within ``limit``: our deadline
    or the client's own request timeout (the same bound) is silence; a 404,
    412, 403 or 5xx is an answer."""
    call = probe_requests(store, key, (op,))[0][1]
    started = time.monotonic()
    try:
        _bindings.run(call(), limit)
    except StoreTimeoutError:
        return False
    except Exception as exc:  # noqa: BLE001 - any answer, an error too
        fault = read_fault(exc, location)
        if fault.cause.startswith(TIMED_OUT):
            return False
        unanswered = fault.status is None and fault.errno is None
        return not (unanswered and time.monotonic() - started >= AT_THE_BOUND * limit)
    return True
