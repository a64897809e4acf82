"""Informer against both API servers: dropped watches and expired resourceVersions must neither
lose nor duplicate an event that matters.

The informer reaches the server through a TCP proxy the test controls (tests/netproxy.py):
cutting its connections drops its watches on either backend. An expired resourceVersion is the
simulated server's history compaction there, and a second kube-apiserver instance (whose watch
cache starts after the changes) behind the proxy on the real control plane."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from nodeagent.kube.client import KubeClient
from nodeagent.kube.errors import Gone, TooManyRequests
from nodeagent.kube.informer import Informer
from nodeagent.kube.resources import PODS, Resource
from nodeagent.model.backoff import JitteredBackoff
from tests.clusters import CONTROLLERS_ACCOUNT, TestCluster
from tests.netproxy import TcpProxy, kubeconfig_on_port, proxy_to
from tests.realserver import another_apiserver
from tests.until import until

from .conftest import RequestCounter

Obj = dict[str, Any]
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", namespaced=True)
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)


class Recorder:
    """Replays handler calls into a state and checks each call makes sense against it."""

    def __init__(self) -> None:
        self.state: dict[str, Obj] = {}
        self.seen: list[tuple[str, str, str]] = []
        self.changed = asyncio.Event()

    def on_add(self, obj: Obj) -> None:
        name = obj["metadata"]["name"]
        assert name not in self.state, f"duplicate add for {name}"
        self.state[name] = obj
        self.seen.append(("add", name, obj["metadata"]["resourceVersion"]))
        self.changed.set()

    def on_update(self, old: Obj, new: Obj) -> None:
        name = new["metadata"]["name"]
        assert name in self.state, f"update for unknown {name}"
        assert old["metadata"]["resourceVersion"] == self.state[name]["metadata"]["resourceVersion"]
        assert new["metadata"]["resourceVersion"] != old["metadata"]["resourceVersion"]
        self.state[name] = new
        self.seen.append(("update", name, new["metadata"]["resourceVersion"]))
        self.changed.set()

    def on_delete(self, obj: Obj) -> None:
        name = obj["metadata"]["name"]
        assert name in self.state, f"delete for unknown {name}"
        del self.state[name]
        self.seen.append(("delete", name, obj["metadata"]["resourceVersion"]))
        self.changed.set()

    def versions(self) -> dict[str, str]:
        return {n: o["metadata"]["resourceVersion"] for n, o in self.state.items()}

    async def until(self, cond: Callable[[], bool], timeout: float = 20) -> None:
        await until(cond, changed=self.changed, timeout=timeout)


class GoneCounter:
    """The informer's client, counting watches ended by Gone: an HTTP 410 at the open, or (as
    kube-apiserver answers) an ERROR event with code 410 in an HTTP 200 stream."""

    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube
        self.gone = 0

    async def list(self, resource: Resource, namespace: str | None = None, **kw: Any) -> Obj:
        return await self.kube.list(resource, namespace, **kw)

    async def watch(
        self, resource: Resource, namespace: str | None = None, **kw: Any
    ) -> AsyncGenerator[Obj, None]:
        try:
            async with contextlib.aclosing(self.kube.watch(resource, namespace, **kw)) as events:
                async for event in events:
                    yield event
        except Gone:
            self.gone += 1
            raise


async def server_versions(kube: KubeClient) -> dict[str, str]:
    """What the server holds now (a list is a consistent read)."""
    listed = await kube.list(CONFIGMAPS, "test")
    return {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in listed["items"]}


@dataclass
class Watched:
    informer: Informer
    recorder: Recorder
    proxy: TcpProxy
    client: GoneCounter


@pytest.fixture
async def namespace(kube: KubeClient) -> str:
    await kube.create(NAMESPACES, {"metadata": {"name": "test"}})
    return "test"


@pytest.fixture
async def informer(
    backend: TestCluster, namespace: str, requests: RequestCounter, tmp_path: Path
) -> AsyncIterator[Watched]:
    """An informer of the test namespace's ConfigMaps, reaching the server through a proxy;
    its requests are counted."""
    async with proxy_to(backend.kubeconfig) as proxy:
        kubeconfig = proxy.kubeconfig(backend.kubeconfig, tmp_path / "via-proxy.kubeconfig")
        client = GoneCounter(backend.client(kubeconfig, max_workers=4, on_request=requests))
        inf = Informer(
            client,
            CONFIGMAPS,
            namespace=namespace,
            backoff=JitteredBackoff(base=0.05, cap=0.2, rng=random.Random(0)),
        )
        rec = Recorder()
        inf.add_handler(rec.on_add, rec.on_update, rec.on_delete)
        task = asyncio.create_task(inf.run())
        async with asyncio.timeout(10):
            await inf.wait_synced()
        yield Watched(inf, rec, proxy, client)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def converged(kube: KubeClient, rec: Recorder) -> dict[str, str]:
    truth = await server_versions(kube)
    await rec.until(lambda: rec.versions() == truth)
    return truth


async def test_survives_dropped_watches(
    kube: KubeClient, requests: RequestCounter, informer: Watched
) -> None:
    inf, rec = informer.informer, informer.recorder
    rng = random.Random(42)
    names = [f"cm-{i}" for i in range(8)]
    exists: set[str] = set()
    cut_at = 0  # watches opened when the proxy last cut them
    for step in range(120):
        name = rng.choice(names)
        if name in exists and rng.random() < 0.25:
            await kube.delete(CONFIGMAPS, name, "test")
            exists.discard(name)
        elif name in exists:
            await kube.patch(CONFIGMAPS, name, {"data": {"step": str(step)}}, "test")
        else:
            await kube.create(CONFIGMAPS, {"metadata": {"name": name, "namespace": "test"}})
            exists.add(name)
        if step % 10 == 0:
            # drop a watch, once the informer has reopened one since the last drop
            def reopened(since: int = cut_at) -> bool:
                return requests.total("watch", "configmaps") > since

            await requests.until(reopened)
            cut_at = requests.total("watch", "configmaps")
            informer.proxy.cut()
    await converged(kube, rec)
    assert requests.total("list", "configmaps") == 1  # resumed every time, never relisted
    assert requests.total("watch", "configmaps") >= 12
    assert len(rec.seen) == len(set(rec.seen)), "an event was delivered twice"
    assert inf.has_synced


async def test_forced_410_relists_without_losing_or_duplicating(
    backend: TestCluster,
    kube: KubeClient,
    requests: RequestCounter,
    informer: Watched,
    tmp_path: Path,
) -> None:
    rec, proxy = informer.recorder, informer.proxy
    for i in range(6):
        await kube.create(
            CONFIGMAPS, {"metadata": {"name": f"cm-{i}", "namespace": "test"}, "data": {"v": "0"}}
        )
    before = await converged(kube, rec)
    rec.seen.clear()

    # Cut the informer off (its next watch waits in the proxy), change things behind its back,
    # and make its resourceVersion expire. Its next watch must get 410 Gone.
    proxy.hold()
    proxy.cut()
    await kube.patch(CONFIGMAPS, "cm-0", {"data": {"v": "1"}}, "test")
    await kube.delete(CONFIGMAPS, "cm-1", "test")
    await kube.create(CONFIGMAPS, {"metadata": {"name": "cm-new", "namespace": "test"}, "data": {}})
    await kube.delete(CONFIGMAPS, "cm-2", "test")
    await kube.create(
        CONFIGMAPS,
        {"metadata": {"name": "cm-2", "namespace": "test"}, "data": {"recreated": "yes"}},
    )
    async with contextlib.AsyncExitStack() as stack:
        if backend.sim is not None:
            backend.sim.store.compact()  # forget the history (sim-only fault injection)
        else:
            # another instance of the API server, whose watch cache starts after the changes
            port = await stack.enter_async_context(
                another_apiserver(tmp_path / "controlplane", backend.kubeconfig)
            )
            await watch_cache_ready(backend, port, tmp_path)
            proxy.upstream_port = port
        proxy.resume()

        after = await converged(kube, rec)
        assert informer.client.gone >= 1
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
        await converged(kube, rec)
        assert rec.seen[-1][:2] == ("update", "cm-5")


async def watch_cache_ready(backend: TestCluster, port: int, tmp_path: Path) -> None:
    """Wait until the API server on `port` serves ConfigMap watches from its watch cache (it
    answers 429 while the cache has not had its first list), so the informer meets a ready
    server: what this test counts is a 410, not a start-up refusal."""
    direct = backend.client(kubeconfig_on_port(backend.kubeconfig, tmp_path / "b.kubeconfig", port))
    delay = 0.05
    async with asyncio.timeout(30):
        while True:
            rv = (await direct.list(CONFIGMAPS, "test"))["metadata"]["resourceVersion"]
            events = direct.watch(CONFIGMAPS, "test", resource_version=rv, timeout_seconds=1)
            try:
                async with contextlib.aclosing(events):
                    async for _ in events:
                        pass
                return
            except TooManyRequests:
                await asyncio.sleep(delay)  # the server asked to come back later
                delay = min(delay * 2, 0.5)


async def test_field_selector_and_indexes(backend: TestCluster, kube: KubeClient) -> None:
    def by_node(pod: Obj) -> list[str]:
        node = (pod.get("spec") or {}).get("nodeName")
        return [node] if node else []

    # the controllers' account: node agents may read no pods
    agent = backend.client(await backend.service_account(CONTROLLERS_ACCOUNT), max_workers=4)
    inf = Informer(agent, PODS, field_selector="spec.nodeName=node-1", indexers={"node": by_node})
    changed = asyncio.Event()
    inf.add_handler(
        on_add=lambda _o: changed.set(),
        on_update=lambda _a, _b: changed.set(),
        on_delete=lambda _o: changed.set(),
    )

    async def seen(cond: Callable[[], bool]) -> None:
        await until(cond, changed=changed, timeout=10)

    task = asyncio.create_task(inf.run())
    try:
        async with asyncio.timeout(10):
            await inf.wait_synced()
        spec = {"containers": [{"name": "c", "image": "busybox"}]}
        # a watch delivers in order: once on-1 is seen, on-2 (created first) would have been too
        for name, node in [("on-2", "node-2"), ("on-1", "node-1")]:
            await kube.create(PODS, {"metadata": {"name": name, "namespace": "default"},
                                     "spec": {**spec, "nodeName": node}})  # fmt: skip
        await seen(lambda: inf.store.get("default/on-1") is not None)
        assert inf.store.get("default/on-2") is None
        assert [p["metadata"]["name"] for p in inf.store.by_index("node", "node-1")] == ["on-1"]
        await kube.delete(PODS, "on-1", "default", grace_period_seconds=0)
        await seen(lambda: inf.store.get("default/on-1") is None)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
