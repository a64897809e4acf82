"""Informer against the simulated API server: dropped watches and expired resourceVersions
must neither lose nor duplicate an event that matters."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from typing import Any

import pytest

from nodeagent.kube.client import KubeClient
from nodeagent.kube.informer import Informer
from nodeagent.kube.ratelimit import JitteredBackoff
from nodeagent.kube.resources import PODS, Resource
from nodeagent.sim.cluster import SimCluster

from .conftest import RequestCounter, eventually

Obj = dict[str, Any]
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", namespaced=True)


class Recorder:
    """Replays handler calls into a state and checks each call makes sense against it."""

    def __init__(self) -> None:
        self.state: dict[str, Obj] = {}
        self.seen: list[tuple[str, str, str]] = []

    def on_add(self, obj: Obj) -> None:
        name = obj["metadata"]["name"]
        assert name not in self.state, f"duplicate add for {name}"
        self.state[name] = obj
        self.seen.append(("add", name, obj["metadata"]["resourceVersion"]))

    def on_update(self, old: Obj, new: Obj) -> None:
        name = new["metadata"]["name"]
        assert name in self.state, f"update for unknown {name}"
        assert old["metadata"]["resourceVersion"] == self.state[name]["metadata"]["resourceVersion"]
        assert new["metadata"]["resourceVersion"] != old["metadata"]["resourceVersion"]
        self.state[name] = new
        self.seen.append(("update", name, new["metadata"]["resourceVersion"]))

    def on_delete(self, obj: Obj) -> None:
        name = obj["metadata"]["name"]
        assert name in self.state, f"delete for unknown {name}"
        del self.state[name]
        self.seen.append(("delete", name, obj["metadata"]["resourceVersion"]))

    def versions(self) -> dict[str, str]:
        return {n: o["metadata"]["resourceVersion"] for n, o in self.state.items()}


def sim_versions(sim: SimCluster) -> dict[str, str]:
    rt = sim.store.resource("", "v1", "configmaps")
    return {
        o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in sim.store.list(rt, "test")
    }


@pytest.fixture
async def namespace(kube: KubeClient) -> str:
    ns = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
    await kube.create(ns, {"metadata": {"name": "test"}})
    return "test"


@pytest.fixture
async def informer(kube: KubeClient, namespace: str) -> AsyncIterator[tuple[Informer, Recorder]]:
    inf = Informer(
        kube,
        CONFIGMAPS,
        namespace=namespace,
        backoff=JitteredBackoff(base=0.05, cap=0.2, rng=random.Random(0)),
    )
    rec = Recorder()
    inf.add_handler(rec.on_add, rec.on_update, rec.on_delete)
    task = asyncio.create_task(inf.run())
    await asyncio.wait_for(inf.wait_synced(), 10)
    yield inf, rec
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def converged(sim: SimCluster, rec: Recorder) -> None:
    await eventually(lambda: rec.versions() == sim_versions(sim))


async def test_survives_dropped_watches(
    sim: SimCluster,
    kube: KubeClient,
    requests: RequestCounter,
    informer: tuple[Informer, Recorder],
) -> None:
    inf, rec = informer
    rng = random.Random(42)
    names = [f"cm-{i}" for i in range(8)]
    for step in range(120):
        name = rng.choice(names)
        if name in sim_versions(sim) and rng.random() < 0.25:
            await kube.delete(CONFIGMAPS, name, "test")
        elif name in sim_versions(sim):
            await kube.patch(CONFIGMAPS, name, {"data": {"step": str(step)}}, "test")
        else:
            await kube.create(CONFIGMAPS, {"metadata": {"name": name, "namespace": "test"}})
        if step % 10 == 0:
            sim.store.drop_watches()
    await converged(sim, rec)
    assert requests.total("list", "configmaps") == 1  # resumed every time, never relisted
    assert requests.total("watch", "configmaps") >= 12
    assert len(rec.seen) == len(set(rec.seen)), "an event was delivered twice"
    assert inf.has_synced


async def test_forced_410_relists_without_losing_or_duplicating(
    sim: SimCluster,
    kube: KubeClient,
    requests: RequestCounter,
    informer: tuple[Informer, Recorder],
) -> None:
    _, rec = informer
    for i in range(6):
        await kube.create(
            CONFIGMAPS, {"metadata": {"name": f"cm-{i}", "namespace": "test"}, "data": {"v": "0"}}
        )
    await converged(sim, rec)
    before = dict(rec.versions())
    rec.seen.clear()

    # In one loop turn, so the informer cannot see any of it: end its watch, change things
    # behind its back, forget the history. Its next watch must get 410 Gone.
    rt = sim.store.resource("", "v1", "configmaps")
    sim.store.drop_watches()
    sim.store.mutate(rt, "test", "cm-0", lambda o: o.__setitem__("data", {"v": "1"}))
    sim.store.delete(rt, "test", "cm-1")
    sim.store.create(rt, "test", {"metadata": {"name": "cm-new"}, "data": {}})
    sim.store.delete(rt, "test", "cm-2")
    sim.store.create(rt, "test", {"metadata": {"name": "cm-2"}, "data": {"recreated": "yes"}})
    sim.store.compact()

    await converged(sim, rec)
    after = sim_versions(sim)
    assert requests.counts[("watch", "configmaps", 410)] >= 1
    assert requests.total("list", "configmaps") == 2
    assert sorted((kind, name) for kind, name, _ in rec.seen) == [
        ("add", "cm-2"),
        ("add", "cm-new"),
        ("delete", "cm-1"),
        ("delete", "cm-2"),
        ("update", "cm-0"),
    ]
    # Objects that did not change produced no event at all.
    assert {n for n in before if before[n] == after.get(n)} == {"cm-3", "cm-4", "cm-5"}

    # And it keeps watching normally afterwards.
    await kube.patch(CONFIGMAPS, "cm-5", {"data": {"v": "2"}}, "test")
    await converged(sim, rec)
    assert rec.seen[-1][:2] == ("update", "cm-5")


async def test_field_selector_and_indexes(sim: SimCluster, kube: KubeClient) -> None:
    def by_node(pod: Obj) -> list[str]:
        node = (pod.get("spec") or {}).get("nodeName")
        return [node] if node else []

    inf = Informer(kube, PODS, field_selector="spec.nodeName=node-1", indexers={"node": by_node})
    task = asyncio.create_task(inf.run())
    try:
        await asyncio.wait_for(inf.wait_synced(), 10)
        spec = {"containers": [{"name": "c", "image": "busybox"}]}
        for name, node in [("on-1", "node-1"), ("on-2", "node-2")]:
            await kube.create(PODS, {"metadata": {"name": name, "namespace": "default"},
                                     "spec": {**spec, "nodeName": node}})  # fmt: skip
        await eventually(lambda: inf.store.get("default/on-1") is not None)
        await asyncio.sleep(0.3)
        assert inf.store.get("default/on-2") is None
        assert [p["metadata"]["name"] for p in inf.store.by_index("node", "node-1")] == ["on-1"]
        await kube.delete(PODS, "on-1", "default", grace_period_seconds=0)
        await eventually(lambda: inf.store.get("default/on-1") is None)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
