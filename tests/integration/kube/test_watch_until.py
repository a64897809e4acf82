"""`informer.watch_until` against both API servers: one object, listed and watched until a
predicate holds, listed again when its watch expires (410 Gone), and told of a deletion."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from nodeagent.kube.client import KubeClient
from nodeagent.kube.informer import watch_until
from nodeagent.kube.resources import Obj, Resource
from tests.clusters import TestCluster
from tests.integration.kube.test_informer import GoneCounter
from tests.until import until

CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", namespaced=True)
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)


@pytest.fixture
async def namespace(kube: KubeClient) -> str:
    await kube.create(NAMESPACES, {"metadata": {"name": "test"}})
    return "test"


class Counting(GoneCounter):
    """The waiter's client: counts its lists, and (GoneCounter) the watches that ended in
    Gone; `stale` makes the first list report a resourceVersion from before the server's
    history."""

    def __init__(self, kube: KubeClient, *, stale: bool = False) -> None:
        super().__init__(kube)
        self.stale = stale
        self.lists = 0
        self.listed = asyncio.Event()

    async def list(self, resource: Resource, namespace: str | None = None, **kw: Any) -> Obj:
        listed = await self.kube.list(resource, namespace, **kw)
        self.lists += 1
        if self.stale and self.lists == 1:
            listed["metadata"]["resourceVersion"] = "1"
        self.listed.set()
        return listed

    async def until_listed(self, times: int) -> None:
        await until(lambda: self.lists >= times, changed=self.listed)


def configmap(value: str) -> Obj:
    return {"metadata": {"name": "cm", "namespace": "test"}, "data": {"v": value}}


def has(value: str) -> Any:
    return lambda obj: obj is not None and obj["data"]["v"] == value


async def test_waits_for_the_object_to_exist_and_satisfy_the_predicate(
    kube: KubeClient, namespace: str
) -> None:
    client = Counting(kube)
    waiting = asyncio.create_task(
        watch_until(client, CONFIGMAPS, "cm", has("2"), namespace=namespace)
    )
    await client.until_listed(1)
    await kube.create(CONFIGMAPS, configmap("1"))
    await kube.patch(CONFIGMAPS, "cm", {"data": {"v": "2"}}, namespace)
    async with asyncio.timeout(20):
        obj = await waiting
    assert obj is not None and obj["data"] == {"v": "2"}
    assert client.lists == 1  # the watch told the rest
    # what already holds is answered by the list alone
    assert await watch_until(client, CONFIGMAPS, "cm", has("2"), namespace=namespace) is not None
    assert client.lists == 2


async def test_an_expired_watch_is_followed_by_a_new_list(
    backend: TestCluster, kube: KubeClient, namespace: str
) -> None:
    await kube.create(CONFIGMAPS, configmap("0"))
    if backend.sim is not None:
        backend.sim.store.compact()  # forget the history (sim-only fault injection)
    # on kube-apiserver, resourceVersion 1 is older than any watch cache
    client = Counting(kube, stale=True)
    waiting = asyncio.create_task(
        watch_until(client, CONFIGMAPS, "cm", has("1"), namespace=namespace)
    )
    await client.until_listed(2)
    await kube.patch(CONFIGMAPS, "cm", {"data": {"v": "1"}}, namespace)
    async with asyncio.timeout(20):
        obj = await waiting
    assert obj is not None and obj["data"] == {"v": "1"}
    assert (client.gone, client.lists) == (1, 2)


async def test_a_deletion_is_told_as_no_object(kube: KubeClient, namespace: str) -> None:
    await kube.create(CONFIGMAPS, configmap("0"))
    client = Counting(kube)
    gone = asyncio.create_task(
        watch_until(client, CONFIGMAPS, "cm", lambda obj: obj is None, namespace=namespace)
    )
    recreated = asyncio.create_task(
        watch_until(client, CONFIGMAPS, "cm", has("1"), namespace=namespace)
    )
    await client.until_listed(2)
    await kube.delete(CONFIGMAPS, "cm", namespace)
    async with asyncio.timeout(20):
        assert await gone is None
    assert not recreated.done()  # a deletion does not satisfy it: it waits on
    await kube.create(CONFIGMAPS, configmap("1"))
    async with asyncio.timeout(20):
        obj = await recreated
    assert obj is not None and obj["data"] == {"v": "1"}
    assert client.lists == 2
