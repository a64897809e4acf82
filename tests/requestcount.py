"""A KubeClient request hook that counts, and wakes waiters on every request."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable

from nodeagent.kube.resources import Resource
from tests.until import until


class RequestCounter:
    """The client's request hook: counts (verb, resource plural, status); status 0 when no
    response arrived."""

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
        await until(cond, changed=self._changed, timeout=timeout)
