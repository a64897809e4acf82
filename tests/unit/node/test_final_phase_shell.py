"""The final phase's I/O on a fake clock: when it acts, what it asks, and deletes answered 404
or 409 (the pod is gone already, or replaced) change nothing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable
from typing import Any

import pytest

from nodeagent.kube.errors import Conflict, NotFound
from nodeagent.kube.resources import Resource
from nodeagent.model.final_phase import FinalPhase
from nodeagent.node.final_phase import run_final_phase

Obj = dict[str, Any]

pytestmark = pytest.mark.fake_time


def pod(name: str, priority: int = 0) -> Obj:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
        "spec": {"nodeName": "node-1", "priority": priority, "terminationGracePeriodSeconds": 60},
        "status": {"phase": "Running"},
    }


class FakeClient:
    """Pods of node-1; `answers` says how a delete of a pod is answered (404, 409 or gone)."""

    def __init__(self, pods: list[Obj], answers: dict[str, int]) -> None:
        self.pods = {p["metadata"]["name"]: p for p in pods}
        self.answers = answers
        self.deletes: list[tuple[float, str, int | None, str | None]] = []
        self.changed = asyncio.Queue[Obj]()

    async def list(self, resource: Resource, namespace: str | None = None, **_: Any) -> Obj:
        return {"items": list(self.pods.values()), "metadata": {"resourceVersion": "1"}}

    async def watch(
        self, resource: Resource, namespace: str | None = None, **_: Any
    ) -> AsyncGenerator[Obj, None]:
        while True:
            yield await self.changed.get()

    async def delete(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        grace_period_seconds: int | None = None,
        uid: str | None = None,
        resource_version: str | None = None,
    ) -> Obj:
        now = asyncio.get_running_loop().time()
        self.deletes.append((now, name, grace_period_seconds, uid))
        answer = self.answers.get(name)
        if answer == 404:
            raise NotFound("gone", status=404)
        if answer == 409:
            raise Conflict("uid precondition failed", status=409)
        gone = self.pods.pop(name)
        await self.changed.put({"type": "DELETED", "object": gone})
        return gone


async def direct(_: str, call: Awaitable[Any]) -> Any:
    return await call


async def test_deletes_in_order_and_404_409_mean_gone() -> None:
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    phase = FinalPhase(deadline=t0 + 100, grace_period=30, critical_grace_period=10)
    client = FakeClient(
        [pod("a"), pod("gone"), pod("replaced"), pod("crit", 2000000000)],
        {"gone": 404, "replaced": 409},
    )
    task = asyncio.create_task(run_final_phase(client, "node-1", phase, loop.time, direct))
    async with asyncio.timeout(200):
        await task
    deletes = [(round(t - t0, 3), name, grace) for t, name, grace, _ in client.deletes]
    # nothing before the phase; the others at its start, with the capped grace
    assert sorted(deletes[:3]) == [(70.0, "a", 20), (70.0, "gone", 20), (70.0, "replaced", 20)]
    # 404 and 409 were not retried; the ones still listed keep the critical pod waiting until
    # its group's time (their deletes were answered, the phase does not ask twice)
    assert deletes[3:] == [(90.0, "crit", 10)]
    assert all(uid == f"uid-{name}" for _, name, _, uid in client.deletes)
    assert loop.time() - t0 <= 100


async def test_the_critical_pods_go_once_the_others_are_gone() -> None:
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    phase = FinalPhase(deadline=t0 + 100, grace_period=30, critical_grace_period=10)
    client = FakeClient([pod("a"), pod("crit", 2000001000)], {})
    async with asyncio.timeout(200):
        await run_final_phase(client, "node-1", phase, loop.time, direct)
    assert [(round(t - t0, 3), n, g) for t, n, g, _ in client.deletes] == [
        (70.0, "a", 20),
        (70.0, "crit", 10),
    ]
