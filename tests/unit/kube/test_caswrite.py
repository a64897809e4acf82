"""The compare-and-swap write path: each write onto the version decided from, awaited until the
informer shows a version none of our writes replaced; a Conflict awaits the version the server
has. Against a server that keeps versions and refuses stale ones, on a fake clock."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import pytest

from nodeagent.kube.caswrite import CasWriter
from nodeagent.kube.errors import Conflict, NotFound
from nodeagent.kube.expectations import EXPECTATION_TTL
from nodeagent.kube.resources import NODEMAINTENANCES, Obj, Resource
from nodeagent.kube.store import Store
from tests.faketime import FakeClock


class VersionedServer:
    """Objects by name with a resourceVersion; a patch at any other version is a 409."""

    def __init__(self) -> None:
        self.versions = itertools.count(1)
        self.objects: dict[str, Obj] = {}
        self.bodies: list[tuple[str, Mapping[str, Any]]] = []

    def put(self, name: str) -> Obj:
        obj = {"metadata": {"name": name, "resourceVersion": str(next(self.versions))}}
        self.objects[name] = obj
        return obj

    async def patch(
        self, resource: Resource, name: str, body: Mapping[str, Any], namespace: str | None = None
    ) -> Obj:
        self.bodies.append(("patch", body))
        return self._write(name, body)

    async def patch_status(
        self, resource: Resource, name: str, body: Mapping[str, Any], namespace: str | None = None
    ) -> Obj:
        self.bodies.append(("status", body))
        return self._write(name, body)

    def _write(self, name: str, body: Mapping[str, Any]) -> Obj:
        current = self.objects.get(name)
        if current is None:
            raise NotFound("gone", status=404, reason="NotFound")
        if body["metadata"]["resourceVersion"] != current["metadata"]["resourceVersion"]:
            raise Conflict("the object has been modified", status=409, reason="Conflict")
        return self.put(name)


def writer() -> tuple[CasWriter, VersionedServer, Store, FakeClock]:
    server, cache, clock = VersionedServer(), Store(), FakeClock()
    return CasWriter(server, NODEMAINTENANCES, cache, clock), server, cache, clock


def informer_brings(w: CasWriter, cache: Store, obj: Obj) -> None:
    cache.upsert(obj)
    w.seen(obj)


async def test_a_write_goes_onto_its_version_and_waits_for_the_informer_to_show_it() -> None:
    w, server, cache, _ = writer()
    informer_brings(w, cache, server.put("m"))  # version 1
    answer = await w.patch("m", {"status": {"phase": "x"}}, "1", status=True)
    assert server.bodies == [
        ("status", {"status": {"phase": "x"}, "metadata": {"resourceVersion": "1"}})
    ]
    assert w.left("m") == EXPECTATION_TTL
    informer_brings(w, cache, {"metadata": {"name": "m", "resourceVersion": "1"}})  # a resync
    assert w.left("m") is not None
    informer_brings(w, cache, answer)
    assert w.left("m") is None


async def test_writes_in_a_row_wait_for_the_last() -> None:
    w, server, cache, _ = writer()
    informer_brings(w, cache, server.put("m"))
    first = await w.patch("m", {"metadata": {"labels": {"a": "b"}}}, "1")
    second = await w.patch("m", {"status": {}}, "2", status=True)
    assert server.bodies[0][1] == {"metadata": {"labels": {"a": "b"}, "resourceVersion": "1"}}
    informer_brings(w, cache, first)
    assert w.left("m") is not None  # the first one's version: our second write replaced it
    informer_brings(w, cache, second)
    assert w.longest(["m", "other"]) is None


async def test_a_conflict_waits_for_the_version_the_server_has() -> None:
    w, server, cache, _ = writer()
    informer_brings(w, cache, server.put("m"))
    someone_elses = server.put("m")  # version 2, not in the cache yet
    with pytest.raises(Conflict):
        await w.patch("m", {"status": {}}, "1", status=True)
    assert w.left("m") is not None  # deciding again on version 1 is refused again
    informer_brings(w, cache, someone_elses)
    assert w.left("m") is None
    await w.patch("m", {"status": {}}, "2", status=True)  # onto what the cache now shows


async def test_a_conflict_decided_on_a_cache_already_past_it_waits_for_nothing() -> None:
    w, server, cache, _ = writer()
    server.put("m")
    informer_brings(w, cache, server.put("m"))  # the cache has version 2
    with pytest.raises(Conflict):
        await w.patch("m", {"status": {}}, "1", status=True)  # a decision taken before that
    assert w.left("m") is None


async def test_a_lost_event_holds_the_key_for_the_ttl_at_most() -> None:
    w, server, cache, clock = writer()
    informer_brings(w, cache, server.put("m"))
    await w.patch("m", {"status": {}}, "1", status=True)
    clock.advance(EXPECTATION_TTL - 1)
    assert w.left("m") == pytest.approx(1.0)
    clock.advance(1)
    assert w.left("m") is None


async def test_a_deleted_object_is_awaited_no_more() -> None:
    w, server, cache, _ = writer()
    informer_brings(w, cache, server.put("m"))
    await w.patch("m", {"status": {}}, "1", status=True)
    w.gone("m")
    assert w.left("m") is None
    del server.objects["m"]
    with pytest.raises(NotFound):
        await w.patch("m", {"status": {}}, "2", status=True)
    assert w.left("m") is None  # nothing will come for it
