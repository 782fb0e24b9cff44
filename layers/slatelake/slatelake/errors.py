"""Typed failures, grouped by domain, shared by every layer.

Each class says whether retrying can help (``retryable``). Messages name the
thing that failed and, where there is one, the fix. Only ``ConflictError``
carries the wording DuckLake's own retry loop treats as a retryable conflict.
"""

from __future__ import annotations


class SlatelakeError(Exception):
    """Base of every error slatelake raises on purpose."""

    retryable = False


class ConflictError(SlatelakeError):
    """Another commit won the race for the same log slot or the same keys.

    The message contains "conflict" (DuckLake's retry logic matches on
    "Transaction conflict"); the caller re-materializes and re-runs.
    """

    retryable = True

    def __init__(self, detail: str) -> None:
        super().__init__(f"Transaction conflict - {detail}")


class CorruptionError(SlatelakeError):
    """Stored bytes are not what slatelake wrote: bad framing, holes, damage."""


class FormatError(CorruptionError):
    """The lake was written by a newer (unknown) slatelake format."""


class FencedError(SlatelakeError):
    """A newer folder took over the SlateDB writer; this one must stop."""


class ReadOnlyError(SlatelakeError):
    """A write was attempted through a read-only handle."""


class MisconfigurationError(SlatelakeError):
    """An input (URL, option, path) is invalid; the message names it."""


class NotFoundError(SlatelakeError):
    """The lake (or an object it needs) does not exist."""


class StoreError(SlatelakeError):
    """The object store (or SlateDB over it) refused or failed an operation."""


class StoreUnavailableError(StoreError):
    """The store did not answer usably: a 5xx, a refused or reset connection.

    Transient by nature, so retryable; the store clients already retried it
    (bounded) before this was raised, so a caller retries only a few times."""

    retryable = True


class StoreTimeoutError(StoreUnavailableError):
    """A store call got no answer within its deadline (``SLATELAKE_STORE_TIMEOUT_S``,
    or the caller's own deadline, whichever came first). The call was cancelled."""


class PermissionDeniedError(StoreError):
    """The store refused the credentials (403, 401, an expired token, EACCES).

    Terminal: retrying with the same credentials cannot help."""


class UnsupportedError(SlatelakeError):
    """The request is valid but this build cannot serve it."""


class OperationLimitError(SlatelakeError):
    """A change set holds more operations than the configured cap allows.

    Raised before anything is written. Callers that can split their work
    (expiry batches) halve and retry; others report it.
    """

    def __init__(self, operations: int, limit: int) -> None:
        self.operations = operations
        self.limit = limit
        super().__init__(
            f"change set has {operations} operations, over the limit of {limit}; "
            "split the work into smaller batches or raise SLATELAKE_MAX_CHANGESET_OPS"
        )
