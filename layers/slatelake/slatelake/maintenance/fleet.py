"""The fleet registry: the lakes one deployed stack maintains, kept as an
object in a bucket so they change without a redeploy (``FleetLakes`` needs one).

Under a URL (``s3://bucket[/prefix]``, ``file:///abs/dir``, ``memory://name``,
parsed as lake URLs are): ``slatelake-fleet/registry-<generation:020d>``
objects, JSON ``{"format": 1, "lakes": [{"url", "added_at", "added_by"}]}``.
The pass lease's rules (``flight.py``), on create-if-absent alone: each change
creates the next generation, which one writer wins; the newest wins and is
never deleted; a writer that created g lists again and counts as written only
if g is still the newest (a slow one that re-created a collected generation
loses); whoever wrote the newest collects the older ones, best effort. A lost
race re-reads and re-applies, ``ATTEMPTS`` times, then ConflictError. Lake
URLs are canonical (``LakeLocation.parse``, what ``api.canonical_lake`` calls
without DuckDB), so two spellings of one lake are one entry.

Every store call goes through ``ObjectClient``, which bounds it. A body that
does not decode is CorruptionError naming the object; a newer format,
FormatError. Knows nothing of DuckLake: a lake here is a URL, not opened.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from slatelake.errors import (
    AmbiguousWriteError,
    Backoff,
    ConflictError,
    CorruptionError,
    FormatError,
    MisconfigurationError,
    NotFoundError,
    SlatelakeError,
    retry,
)
from slatelake.store.location import LakeLocation, show_input
from slatelake.store.objects import ObjectClient, object_url

__all__ = ["ATTEMPTS", "MAX_LAKES", "FleetChange", "FleetEntry", "FleetRegistry"]

log = logging.getLogger("slatelake.maintenance")
REGISTRY_DIR = "slatelake-fleet"
FORMAT = 1
MAX_LAKES = 1000  # a Step Functions Map over more wants its own design
ATTEMPTS = 5  # lost races per change before ConflictError
_RELIST_ATTEMPTS = 10  # a newest generation collected between LIST and GET
_BACKOFF = Backoff(first_s=0.02, factor=2.0, cap_s=0.5, jitter=0.5)
_NAME = "registry-"


@dataclass(frozen=True)
class FleetEntry:
    """One registered lake: its canonical URL, when (epoch seconds) and by
    whom it was added (None when the caller did not say)."""

    url: str
    added_at: int
    added_by: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"url": self.url, "added_at": self.added_at, "added_by": self.added_by}


@dataclass(frozen=True)
class FleetChange:
    """What ``add`` or ``remove`` did. ``changed`` is False when the registry
    already said so (nothing was written; ``generation`` is then the one
    read, None when no registry exists); ``lakes`` is the count after."""

    action: str  # "add" | "remove"
    url: str
    changed: bool
    generation: int | None
    lakes: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "url": self.url,
            "changed": self.changed,
            "generation": self.generation,
            "lakes": self.lakes,
        }


# A change: the lakes read -> the lakes to write, or None when nothing changes.
Apply = Callable[[list[FleetEntry]], list[FleetEntry] | None]


def _canonical_lake(url: str) -> str:
    """The lake URL as slatelake spells it; MisconfigurationError naming the input."""
    return LakeLocation.parse(url).url


def _who(by: object) -> str | None:
    """Who made a change: text or None (anything else would make the body
    unreadable to every later reader)."""
    if by is None or isinstance(by, str):
        return by
    raise MisconfigurationError(f"by={show_input(by)}: expected text naming who adds the lake")


class FleetRegistry:
    """The fleet registry under ``url``. Constructing it parses the URL and
    reads nothing; ``client`` replaces the store client (tests interleave a
    rival writer through it)."""

    def __init__(self, url: str, client: ObjectClient | None = None) -> None:
        self.location = LakeLocation.parse(url, what="fleet registry URL")
        self.url = self.location.url
        self.prefix = self.location.path(REGISTRY_DIR) + "/"
        self._client = client

    @property
    def client(self) -> ObjectClient:
        """The store client, made at first use (a parse-only registry needs
        no S3 settings)."""
        if self._client is None:
            self._client = ObjectClient(self.location)
        return self._client

    @property
    def where(self) -> str:
        """Where the registry's objects live, as a user looks them up."""
        return object_url(self.location, self.prefix)

    # -- reading -------------------------------------------------------------
    def _path(self, generation: int) -> str:
        return f"{self.prefix}{_NAME}{generation:020d}"

    def _generations(self) -> list[int]:
        out = []
        for info in self.client.list(self.prefix):
            name = info.path[len(self.prefix) :]
            digits = name[len(_NAME) :]
            if name.startswith(_NAME) and digits.isascii() and digits.isdigit():
                out.append(int(digits))
        return sorted(out)

    def _read(self) -> tuple[int, list[FleetEntry]]:
        """The newest generation (0 when none was ever written) and its lakes."""
        for _ in range(_RELIST_ATTEMPTS):  # a vanished newest is an answer: list again
            generations = self._generations()
            if not generations:
                return 0, []
            raw = self.client.get(self._path(generations[-1]))
            if raw is not None:
                return generations[-1], self._decode(generations[-1], raw)
        raise ConflictError(
            f"the fleet registry {self.where} changed {_RELIST_ATTEMPTS} times while being "
            "read; retry"
        )

    def _decode(self, generation: int, raw: bytes) -> list[FleetEntry]:
        where = object_url(self.location, self._path(generation))
        try:
            doc = json.loads(raw)
            version = doc["format"]
            if isinstance(version, int) and version > FORMAT:
                raise FormatError(
                    f"fleet registry {where} has format {version}, newer than this slatelake "
                    f"reads ({FORMAT}); upgrade slatelake"
                )
            if version != FORMAT:
                raise ValueError(f"format {version!r}")
            lakes = [
                FleetEntry(str(e["url"]), int(e["added_at"]), _text_or_none(e["added_by"]))
                for e in doc["lakes"]
            ]
            if not all(e.url for e in lakes):
                raise ValueError("an empty lake URL")
        except FormatError:
            raise
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CorruptionError(
                f"fleet registry {where} does not decode ({type(exc).__name__}: "
                f"{show_input(str(exc))}); it was written outside slatelake. Delete that object: "
                "the registry then reads as the generation before it if one is left (writers "
                "collect older generations, so usually none is, and it reads empty): add the "
                "lakes again with `slatelake fleet add`"
            ) from None
        return sorted(lakes, key=_url)

    def lakes(self) -> list[FleetEntry]:
        """The registered lakes, sorted by URL; empty when no registry was ever
        written."""
        return self._read()[1]

    # -- writing -------------------------------------------------------------
    def add(self, lake_url: str, by: str | None = None) -> FleetChange:
        """Register a lake (canonical spelling); a present one changes nothing.
        MisconfigurationError past ``MAX_LAKES``."""
        url = _canonical_lake(lake_url)
        entry = FleetEntry(url, int(time.time()), _who(by))

        def apply(lakes: list[FleetEntry]) -> list[FleetEntry] | None:
            if any(e.url == url for e in lakes):
                return None
            if len(lakes) >= MAX_LAKES:
                raise MisconfigurationError(
                    f"fleet registry {self.where} holds {len(lakes)} lakes, the most it "
                    f"takes ({MAX_LAKES}); {show_input(lake_url)} was not added. Remove lakes "
                    "or use another registry for more"
                )
            return [*lakes, entry]

        return self._change("add", url, apply)

    def remove(self, lake_url: str, by: str | None = None) -> FleetChange:
        """Unregister a lake; NotFoundError naming it when it is not registered.
        ``by`` is who asked (kept in the log line; the registry keeps no
        history of removals)."""
        url = _canonical_lake(lake_url)

        def apply(lakes: list[FleetEntry]) -> list[FleetEntry] | None:
            if not any(e.url == url for e in lakes):
                spelled = "" if lake_url == url else f" ({url})"
                raise NotFoundError(
                    f"lake {show_input(lake_url)}{spelled} is not in the fleet registry "
                    f"{self.url}; `slatelake fleet list {self.url}` lists the lakes it holds"
                )
            log.info("fleet registry %s: removing %s (by %s)", self.url, url, by)
            return [e for e in lakes if e.url != url]

        return self._change("remove", url, apply)

    def _change(self, action: str, url: str, apply: Apply) -> FleetChange:
        """Read, ``apply`` (the lakes after, or None when nothing changes),
        write the next generation; a lost race does it all again."""

        def attempt() -> FleetChange:
            generation, lakes = self._read()
            after = apply(lakes)
            if after is None:
                return FleetChange(action, url, False, generation or None, len(lakes))
            self._write(generation + 1, after)
            return FleetChange(action, url, True, generation + 1, len(after))

        def give_up(exc: BaseException, attempts: int) -> ConflictError:
            return ConflictError(
                f"fleet registry {self.where}: {action} {url} lost the race to other writers "
                f"{attempts} times; nothing of it was written: retry"
            )

        return retry(
            attempt, attempts=ATTEMPTS, backoff=_BACKOFF, on=ConflictError, give_up=give_up
        )

    def _write(self, generation: int, lakes: list[FleetEntry]) -> None:
        """Create ``generation``, check it is the newest, collect older ones;
        ConflictError when another writer's generation won."""
        path = self._path(generation)
        doc = {"format": FORMAT, "lakes": [e.to_dict() for e in sorted(lakes, key=_url)]}
        body = json.dumps(doc, separators=(",", ":")).encode()
        try:
            created = self.client.put_if_absent(path, body)
        except AmbiguousWriteError as exc:
            created = self._landed(path, body, exc)
        if not created:
            raise ConflictError(f"generation {generation} was written first by another writer")
        try:
            generations = self._generations()
        except SlatelakeError as exc:
            raise AmbiguousWriteError(
                f"fleet registry {self.where}: generation {generation} was written but the "
                f"check that it is the newest failed ({exc}); `slatelake fleet list "
                f"{self.url}` shows whether the change stands (adding or removing again is safe)"
            ) from None
        if not generations or generations[-1] != generation:  # re-created below a newer one
            self._collect([generation])
            raise ConflictError(f"generation {generation} is not the newest")
        self._collect(generations[:-1])

    def _landed(self, path: str, body: bytes, exc: AmbiguousWriteError) -> bool:
        """Whether a create whose answer was lost landed: read it back."""
        try:
            raw = self.client.get(path)
        except SlatelakeError:
            raw = None
        if raw == body:
            return True
        if raw is not None:
            return False  # another writer's: a lost race
        raise AmbiguousWriteError(
            f"{exc}; `slatelake fleet list {self.url}` shows whether the change stands "
            "(adding or removing again is safe)"
        ) from None

    def _collect(self, generations: list[int]) -> None:
        """Delete generations below the newest, best effort: the next writer
        collects what this one could not."""
        for generation in generations:
            try:
                self.client.delete(self._path(generation))
            except SlatelakeError as exc:
                log.warning("fleet registry generation %d not collected: %s", generation, exc)
                return


def _url(entry: FleetEntry) -> str:
    return entry.url


def _text_or_none(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise TypeError(f"added_by {value!r} is not text")
