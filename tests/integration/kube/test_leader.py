"""Leader election between real clients over the simulated API server's Leases."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest

from nodeagent.kube.client import KubeClient
from nodeagent.kube.errors import AlreadyExists, Unreachable
from nodeagent.kube.leader import LeaderElector
from nodeagent.kube.resources import LEASES, Resource
from nodeagent.sim.cluster import SimCluster

from .conftest import make_client

Obj = dict[str, Any]
TIMING: dict[str, float] = {"lease_duration": 2.0, "renew_deadline": 1.2, "retry_period": 0.2}


class Severable:
    """A client whose connection can be cut, like a node falling off the network."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.cut = False

    def _check(self) -> None:
        if self.cut:
            raise Unreachable("network cut by the test")

    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> Obj:
        self._check()
        return await self.client.get(resource, name, namespace)

    async def create(
        self, resource: Resource, body: Mapping[str, Any], namespace: str | None = None
    ) -> Obj:
        self._check()
        return await self.client.create(resource, body, namespace)

    async def replace(
        self, resource: Resource, body: Mapping[str, Any], namespace: str | None = None
    ) -> Obj:
        self._check()
        return await self.client.replace(resource, body, namespace)


class Agent:
    def __init__(self, client: Severable, identity: str) -> None:
        self.client = client
        self.elector = LeaderElector(client, "kube-system", "nodeagent-leader", identity, **TIMING)
        self.leading = asyncio.Event()
        self.stopped = asyncio.Event()
        self.terms = 0
        self.task: asyncio.Task[None] | None = None

    async def lead(self) -> None:
        self.terms += 1
        self.leading.set()
        self.stopped.clear()
        try:
            await asyncio.Event().wait()
        finally:
            self.leading.clear()
            self.stopped.set()

    def start(self) -> None:
        self.task = asyncio.create_task(self.elector.run(self.lead))

    async def kill(self) -> None:
        assert self.task is not None
        self.task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await self.task


@pytest.fixture
async def agents(sim: SimCluster) -> AsyncIterator[tuple[Agent, Agent]]:
    ns = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
    clients = [await make_client(sim), await make_client(sim)]
    try:
        with contextlib.suppress(AlreadyExists):  # the simulated cluster may have it already
            await clients[0].create(ns, {"metadata": {"name": "kube-system"}})
        a = Agent(Severable(clients[0]), "agent-a")
        b = Agent(Severable(clients[1]), "agent-b")
        yield a, b
        for agent in (a, b):
            if agent.task is not None and not agent.task.done():
                await agent.kill()
    finally:
        for c in clients:
            await c.close()


async def holder(sim: SimCluster) -> str:
    rt = sim.store.resource("coordination.k8s.io", "v1", "leases")
    lease = sim.store.find(rt, "kube-system", "nodeagent-leader")
    return "" if lease is None else str(lease["spec"].get("holderIdentity") or "")


async def test_killing_the_leader_hands_over(sim: SimCluster, agents: tuple[Agent, Agent]) -> None:
    a, b = agents
    a.start()
    await asyncio.wait_for(a.leading.wait(), 5)
    b.start()
    await asyncio.sleep(1.0)
    assert a.elector.is_leader and not b.elector.is_leader
    assert b.terms == 0
    assert await holder(sim) == "agent-a"

    loop = asyncio.get_running_loop()
    t0 = loop.time()
    await a.kill()
    assert a.stopped.is_set() and not a.elector.is_leader
    await asyncio.wait_for(b.leading.wait(), 5)
    # Released on the way out, so well under the 2 s lease duration.
    assert loop.time() - t0 < 1.0
    assert await holder(sim) == "agent-b"
    lease = await b.client.client.get(LEASES, "nodeagent-leader", "kube-system")
    assert lease["spec"]["leaseTransitions"] == 1


async def test_cut_off_leader_steps_down_before_successor_takes_over(
    sim: SimCluster, agents: tuple[Agent, Agent]
) -> None:
    a, b = agents
    a.start()
    await asyncio.wait_for(a.leading.wait(), 5)
    b.start()
    await asyncio.sleep(0.5)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    a.client.cut = True  # a can neither renew nor release: a crash, as far as b can tell
    await asyncio.wait_for(a.stopped.wait(), 5)
    stepped_down = loop.time() - t0
    await asyncio.wait_for(b.leading.wait(), 5)
    took_over = loop.time() - t0
    assert stepped_down < took_over, "two leaders at once"
    assert took_over >= 2.0 - 0.3  # b waited for the lease to expire
    assert await holder(sim) == "agent-b"
    a.client.cut = False
    await asyncio.sleep(1.0)
    assert b.elector.is_leader and not a.elector.is_leader and not a.leading.is_set()


async def test_leadership_survives_injected_api_errors(
    sim: SimCluster, agents: tuple[Agent, Agent]
) -> None:
    a, _ = agents
    a.start()
    await asyncio.wait_for(a.leading.wait(), 5)
    # Two failed renewals (of ~6 possible before the deadline) must not cost leadership.
    sim.faults.error_burst(500, 1, verb="update", resource="leases")
    sim.faults.error_burst(409, 1, verb="update", resource="leases")
    await asyncio.sleep(1.5)
    assert a.elector.is_leader and a.terms == 1
    assert not sim.faults.bursts
