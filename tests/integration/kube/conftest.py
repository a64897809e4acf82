"""Real KubeClients (official client underneath) talking to either cluster backend."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable

import pytest

from nodeagent.kube.client import KubeClient
from nodeagent.kube.resources import Resource
from tests.clusters import TestCluster


class RequestCounter:
    """The client's request hook: counts (verb, resource plural, status)."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, str, int]] = Counter()
        self._changed = asyncio.Event()

    def __call__(self, verb: str, resource: Resource, status: int) -> None:
        self.counts[(verb, resource.plural, status)] += 1
        self._changed.set()

    def total(self, verb: str, plural: str) -> int:
        return sum(n for (v, p, _), n in self.counts.items() if v == verb and p == plural)

    async def until(self, cond: Callable[[], bool], timeout: float = 10) -> None:
        """Wait until `cond` holds, re-checking after every request counted."""
        async with asyncio.timeout(timeout):
            while not cond():
                self._changed.clear()
                await self._changed.wait()


@pytest.fixture
def requests() -> RequestCounter:
    return RequestCounter()


@pytest.fixture
def kube(backend: TestCluster) -> KubeClient:
    """The admin's client: what the test does to the cluster."""
    return backend.client(max_workers=4)
