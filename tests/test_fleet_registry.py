"""The fleet registry (maintenance/fleet.py): the lakes a stack maintains, kept
as create-if-absent generations in a bucket. On real stores (local files,
memory, moto's S3); a rival writer is interleaved through the real client."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from slatelake import (
    ConflictError,
    CorruptionError,
    FormatError,
    MisconfigurationError,
    NotFoundError,
    show_input,
)
from slatelake.maintenance.fleet import ATTEMPTS, MAX_LAKES, FleetRegistry
from slatelake.store.location import LakeLocation
from slatelake.store.objects import ObjectClient
from tests.conftest import subprocess_env

pytestmark = pytest.mark.fast


@pytest.fixture(params=["file", "memory"])
def registry_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "file":
        return (tmp_path / "fleet").as_uri()
    return f"memory://fleet-{uuid.uuid4().hex}"


def _objects(registry: FleetRegistry) -> list[str]:
    return [o.path.rsplit("/", 1)[-1] for o in registry.client.list(registry.prefix)]


def _put(registry: FleetRegistry, generation: int, body: bytes) -> None:
    assert registry.client.put_if_absent(registry._path(generation), body)


def test_add_list_remove_round_trip_and_only_the_newest_generation_stays(
    registry_url: str,
) -> None:
    registry = FleetRegistry(registry_url)
    assert registry.lakes() == []
    first = registry.add("s3://bucket/b-lake", by="ops")
    assert (first.action, first.changed, first.generation, first.lakes) == ("add", True, 1, 1)
    second = registry.add("memory://a-lake")
    assert (second.changed, second.generation, second.lakes) == (True, 2, 2)
    lakes = registry.lakes()
    assert [e.url for e in lakes] == ["memory://a-lake", "s3://bucket/b-lake"]  # by URL
    assert lakes[1].added_by == "ops" and lakes[0].added_by is None
    assert lakes[1].added_at > 1_700_000_000
    gone = registry.remove("s3://bucket/b-lake")
    assert (gone.action, gone.changed, gone.generation, gone.lakes) == ("remove", True, 3, 1)
    assert [e.url for e in FleetRegistry(registry_url).lakes()] == ["memory://a-lake"]
    assert _objects(registry) == [f"registry-{3:020d}"]  # the writer collected the older ones


def test_the_body_is_the_documented_json(tmp_path: Path) -> None:
    registry = FleetRegistry((tmp_path / "fleet").as_uri())
    registry.add("s3://bucket/lake", by="ops")
    obj = tmp_path / "fleet" / "slatelake-fleet" / f"registry-{1:020d}"
    doc = json.loads(obj.read_bytes())
    assert doc["format"] == 1
    assert [set(e) for e in doc["lakes"]] == [{"url", "added_at", "added_by"}]
    assert doc["lakes"][0]["url"] == "s3://bucket/lake"


@pytest.mark.parametrize(
    ("spelling", "other"),
    [
        ("s3://bucket/lake", "s3://bucket/lake/"),
        ("file:///srv/lakes/one", "file:///srv/lakes/sub/../one"),
        ("memory://lake", "memory://lake/"),
    ],
)
def test_two_spellings_of_one_lake_are_one_entry(
    registry_url: str, spelling: str, other: str
) -> None:
    registry = FleetRegistry(registry_url)
    assert registry.add(spelling).changed
    again = registry.add(other)
    assert (again.changed, again.generation, again.lakes) == (False, 1, 1)
    assert len(registry.lakes()) == 1
    assert registry.remove(other).changed  # removed by its other spelling
    assert registry.lakes() == []


@pytest.mark.parametrize(
    "bad", ["'; DROP TABLE lakes; --", "s3://", "../x", "", "s3://b/a/../c", "s3://b/x\n"]
)
def test_a_malformed_lake_url_is_refused_naming_it_and_nothing_is_written(
    registry_url: str, bad: str
) -> None:
    registry = FleetRegistry(registry_url)
    for verb in (registry.add, registry.remove):
        with pytest.raises(MisconfigurationError) as refused:
            verb(bad)
        assert show_input(bad) in str(refused.value)
    assert _objects(registry) == []


@pytest.mark.parametrize("bad", ["relative/fleet", "s3://", "ftp://host/x", "", "s3://B/x"])
def test_a_malformed_registry_url_is_refused_naming_it(bad: str) -> None:
    with pytest.raises(MisconfigurationError) as refused:
        FleetRegistry(bad)
    assert f"fleet registry URL {show_input(bad)}" in str(refused.value)


def test_removing_an_absent_lake_names_it_and_the_list_command(registry_url: str) -> None:
    registry = FleetRegistry(registry_url)
    registry.add("s3://bucket/kept")
    with pytest.raises(NotFoundError) as missing:
        registry.remove("s3://bucket/never-added/")
    text = str(missing.value)
    assert show_input("s3://bucket/never-added/") in text
    assert f"slatelake fleet list {registry.url}" in text
    assert [e.url for e in registry.lakes()] == ["s3://bucket/kept"]


def test_the_registry_holds_at_most_max_lakes(registry_url: str) -> None:
    registry = FleetRegistry(registry_url)
    full = [
        {"url": f"s3://bucket/lake-{n:04d}", "added_at": 1_800_000_000, "added_by": None}
        for n in range(MAX_LAKES)
    ]
    _put(registry, 1, json.dumps({"format": 1, "lakes": full}).encode())
    with pytest.raises(MisconfigurationError) as refused:
        registry.add("s3://bucket/one-more")
    assert str(MAX_LAKES) in str(refused.value) and "'s3://bucket/one-more'" in str(refused.value)
    assert not registry.add("s3://bucket/lake-0007").changed  # a present one is no addition
    registry.remove("s3://bucket/lake-0007")
    assert registry.add("s3://bucket/one-more").lakes == MAX_LAKES


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[]",
        b'{"lakes": []}',
        b'{"format": 1}',
        b'{"format": 1, "lakes": [{"url": "s3://b/x"}]}',
        b'{"format": 1, "lakes": [{"url": "", "added_at": 1, "added_by": null}]}',
        b'{"format": 1, "lakes": [{"url": "s3://b/x", "added_at": 1, "added_by": 7}]}',
        b'{"format": "1", "lakes": []}',
    ],
)
def test_a_body_that_does_not_decode_is_corruption_naming_the_object_and_the_fix(
    registry_url: str, body: bytes
) -> None:
    registry = FleetRegistry(registry_url)
    _put(registry, 4, body)
    for read in (registry.lakes, lambda: registry.add("s3://bucket/lake")):
        with pytest.raises(CorruptionError) as damaged:
            read()
        text = str(damaged.value)
        assert f"slatelake-fleet/registry-{4:020d}" in text
        assert "Delete that object" in text
    assert _objects(registry) == [f"registry-{4:020d}"]  # nothing written over it


def test_a_newer_format_asks_for_an_upgrade(registry_url: str) -> None:
    registry = FleetRegistry(registry_url)
    _put(registry, 1, b'{"format": 2, "lakes": []}')
    with pytest.raises(FormatError, match="upgrade slatelake"):
        registry.lakes()


class _RivalClient(ObjectClient):
    """The real store, where ``rival`` runs before each of the first ``times``
    conditional PUTs: another writer's change landing between our read and
    our write."""

    def __init__(self, location: LakeLocation, rival: Callable[[], None], times: int) -> None:
        super().__init__(location)
        self.rival, self.times = rival, times

    def put_if_absent(self, path: str, data: bytes) -> bool:
        if self.times > 0:
            self.times -= 1
            self.rival()
        return super().put_if_absent(path, data)


def test_a_lost_race_re_reads_and_re_applies_the_change(registry_url: str) -> None:
    rival = FleetRegistry(registry_url)
    location = LakeLocation.parse(registry_url)
    client = _RivalClient(location, lambda: rival.add("s3://bucket/rivals"), times=1)
    change = FleetRegistry(registry_url, client=client).add("s3://bucket/ours")
    assert (change.changed, change.generation, change.lakes) == (True, 2, 2)
    assert [e.url for e in rival.lakes()] == ["s3://bucket/ours", "s3://bucket/rivals"]


def test_a_slow_writer_that_recreates_a_collected_generation_does_not_win(
    registry_url: str,
) -> None:
    """We read generation 1; before our write the rival writes 2 and 3 and
    collects 1 and 2, so our create of generation 2 succeeds. It is not the
    newest: we must not report it written, and the change lands on top of 3."""
    rival = FleetRegistry(registry_url)
    rival.add("s3://bucket/first")
    location = LakeLocation.parse(registry_url)

    def two_changes() -> None:
        rival.add("s3://bucket/second")
        rival.add("s3://bucket/third")

    slow = FleetRegistry(registry_url, client=_RivalClient(location, two_changes, times=1))
    change = slow.add("s3://bucket/slow")
    assert (change.changed, change.generation, change.lakes) == (True, 4, 4)
    assert len(rival.lakes()) == 4
    assert _objects(rival) == [f"registry-{4:020d}"]


def test_losing_every_attempt_raises_a_conflict_saying_retry(registry_url: str) -> None:
    rival = FleetRegistry(registry_url)
    location = LakeLocation.parse(registry_url)
    count = iter(range(100))
    client = _RivalClient(
        location, lambda: rival.add(f"s3://bucket/rival-{next(count)}"), times=ATTEMPTS
    )
    with pytest.raises(ConflictError) as lost:
        FleetRegistry(registry_url, client=client).add("s3://bucket/ours")
    assert "retry" in str(lost.value) and "s3://bucket/ours" in str(lost.value)
    assert lost.value.retryable
    assert [e.url for e in rival.lakes()] == [f"s3://bucket/rival-{n}" for n in range(ATTEMPTS)]


# A writer process: ready, wait for the other, add 20 lakes (retrying a
# conflict, as its message says), print how many conflicts it met.
WRITER = r"""
import json, pathlib, sys, time
from slatelake import ConflictError
from slatelake.maintenance.fleet import FleetRegistry
url, name, rendezvous = sys.argv[1:4]
registry = FleetRegistry(url)
pathlib.Path(rendezvous, name).touch()
while len(list(pathlib.Path(rendezvous).iterdir())) < 2:
    time.sleep(0.001)
conflicts = 0
for n in range(20):
    while True:
        try:
            registry.add(f"s3://bucket/{name}-{n:02d}", by=name)
            break
        except ConflictError:
            conflicts += 1
print(json.dumps({"conflicts": conflicts}))
"""


@pytest.mark.slow
def test_two_concurrent_writer_processes_lose_no_lake(tmp_path: Path) -> None:
    """Two processes, each adding 20 lakes at once (threads would take turns
    on the GIL, never racing): all 40 end registered."""
    url = (tmp_path / "fleet").as_uri()
    rendezvous = tmp_path / "ready"
    rendezvous.mkdir()
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, url, name, str(rendezvous)],
            env=subprocess_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b")
    ]
    for proc in writers:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        json.loads(out)
    lakes = FleetRegistry(url).lakes()
    assert [e.url for e in lakes] == sorted(
        f"s3://bucket/{w}-{n:02d}" for w in ("a", "b") for n in range(20)
    )
    assert {e.added_by for e in lakes} == {"a", "b"}
    newest = FleetRegistry(url)._generations()[-1]
    assert newest == 40  # one generation per change: no change written twice or lost


def test_the_registry_on_s3(s3_bucket: str) -> None:
    registry = FleetRegistry(f"s3://{s3_bucket}/fleet/")
    assert registry.url == f"s3://{s3_bucket}/fleet"
    assert registry.lakes() == []
    assert registry.add(f"s3://{s3_bucket}/lakes/one", by="ops").changed
    assert not registry.add(f"s3://{s3_bucket}/lakes/one/").changed
    assert registry.add(f"s3://{s3_bucket}/lakes/two").generation == 2
    assert [e.url for e in registry.lakes()] == [
        f"s3://{s3_bucket}/lakes/one",
        f"s3://{s3_bucket}/lakes/two",
    ]
    assert registry.remove(f"s3://{s3_bucket}/lakes/one").lakes == 1
    assert _objects(registry) == [f"registry-{3:020d}"]
    with pytest.raises(NotFoundError):
        registry.remove(f"s3://{s3_bucket}/lakes/one")
