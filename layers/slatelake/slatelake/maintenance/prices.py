"""The price table a pass's estimate is priced at: S3 requests by kind and
Lambda GB-seconds.

The defaults are list prices (AWS's public price pages, on the date
``PRICES_AS_OF`` says); a price file (JSON, any subset of ``Prices``'
fields) overrides them. A price file is outside input: an unknown key, a
value that is no non-negative finite number, or a memory size Lambda does
not offer is a MaintenanceConfigError naming the key, before any lake is
opened.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from slatelake.errors import MaintenanceConfigError
from slatelake.store.location import show_input

# The date the default prices were read from AWS's public price pages (S3
# Standard requests in us-east-1: PUT, COPY, POST, LIST $0.005 per 1,000;
# GET and all other requests $0.0004 per 1,000; DELETE free. Lambda x86:
# $0.0000166667 per GB-second). List prices, before any free tier.
PRICES_AS_OF = "2026-12-06"
# The pass function's memory (template.yaml's MaintenanceFunction), for GB-seconds.
DEFAULT_LAMBDA_MEMORY_MB = 1769
KINDS = ("LIST", "GET", "PUT", "DELETE")


@dataclass(frozen=True)
class Prices:
    """USD per 1,000 requests of each kind, and per Lambda GB-second."""

    list_per_1000: float = 0.005
    get_per_1000: float = 0.0004
    put_per_1000: float = 0.005
    delete_per_1000: float = 0.0
    lambda_gb_second: float = 0.0000166667
    lambda_memory_mb: float = DEFAULT_LAMBDA_MEMORY_MB
    as_of: str = PRICES_AS_OF
    # Where the prices came from: "default", or the price file's path.
    source: str = "default"

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_mapping(cls, doc: object, source: str = "given") -> Prices:
        """Defaults overridden by ``doc`` (outside input: every key and value checked)."""
        if not isinstance(doc, Mapping):
            raise MaintenanceConfigError(
                f"prices ({source}): expected a JSON object of prices, not {show_input(doc)}"
            )
        numbers = {f.name for f in fields(cls)} - {"as_of", "source"}
        given: dict[str, Any] = {}
        for key, value in doc.items():
            if key in ("as_of", "source"):
                if not isinstance(value, str) or not value.isascii() or len(value) > 64:
                    raise MaintenanceConfigError(
                        f"prices ({source}): key {key!r}: expected a short text, "
                        f"not {show_input(value)}"
                    )
                given[key] = value
                continue
            if key not in numbers:
                raise MaintenanceConfigError(
                    f"prices ({source}): unknown key {show_input(key)}; the keys are "
                    f"{', '.join(sorted([*numbers, 'as_of']))}"
                )
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise MaintenanceConfigError(
                    f"prices ({source}): key {key!r}: expected a number, not {show_input(value)}"
                )
            if not math.isfinite(value) or value < 0:
                raise MaintenanceConfigError(
                    f"prices ({source}): key {key!r}: {value!r} is not a non-negative finite number"
                )
            if key == "lambda_memory_mb" and not 128 <= value <= 10240:
                raise MaintenanceConfigError(
                    f"prices ({source}): key 'lambda_memory_mb': {value!r} is outside Lambda's "
                    "128 to 10240 MB"
                )
            given[key] = float(value)
        if "as_of" not in given:
            given["as_of"] = "given" if given else PRICES_AS_OF
        given.setdefault("source", source)
        return replace(cls(), **given)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Prices:
        """A JSON price file; unreadable or malformed is a MaintenanceConfigError naming it."""
        where = os.fspath(path)
        try:
            with open(where, encoding="utf-8") as fh:
                doc = json.load(fh)
        except OSError as exc:
            raise MaintenanceConfigError(f"price file {where!r}: {exc.strerror or exc}") from None
        except (ValueError, UnicodeDecodeError) as exc:
            raise MaintenanceConfigError(f"price file {where!r}: not JSON ({exc})") from None
        return cls.from_mapping(doc, source=where)


DEFAULT_PRICES = Prices()


def prices_of(value: object) -> Prices:
    """What a caller gave as ``prices``: None (the defaults), ``Prices``, a
    mapping of overrides, or the path of a JSON price file."""
    if value is None:
        return DEFAULT_PRICES
    if isinstance(value, Prices):
        return value
    if isinstance(value, str | os.PathLike):
        return Prices.from_file(value)
    return Prices.from_mapping(value)
