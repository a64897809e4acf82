"""A real KubeClient (official client underneath) talking to the simulated cluster."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Callable

import pytest

from nodeagent.kube.client import KubeClient, load_api_client
from nodeagent.kube.resources import Resource
from nodeagent.sim.cluster import SimCluster


class RequestCounter:
    """The client's request hook: counts (verb, resource plural, status)."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, str, int]] = Counter()

    def __call__(self, verb: str, resource: Resource, status: int) -> None:
        self.counts[(verb, resource.plural, status)] += 1

    def total(self, verb: str, plural: str) -> int:
        return sum(n for (v, p, _), n in self.counts.items() if v == verb and p == plural)


@pytest.fixture
def requests() -> RequestCounter:
    return RequestCounter()


async def make_client(sim: SimCluster, hook: RequestCounter | None = None) -> KubeClient:
    assert sim.kubeconfig is not None
    return KubeClient(load_api_client(str(sim.kubeconfig)), max_workers=4, on_request=hook)


@pytest.fixture
async def kube(sim: SimCluster, requests: RequestCounter) -> AsyncIterator[KubeClient]:
    client = await make_client(sim, requests)
    async with client:
        yield client


async def eventually(cond: Callable[[], object], within: float = 10.0) -> None:
    """Poll: informer and handler state changes after the store's, with no hook to wait on."""
    async with asyncio.timeout(within):
        while not cond():  # noqa: ASYNC110
            await asyncio.sleep(0.02)
