"""Event recording against either API server, as node-1's agent (the admission policy keeps
its Events to what it acts on: here its Node)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from nodeagent.kube.client import KubeClient
from nodeagent.kube.events import EventRecorder
from nodeagent.kube.resources import EVENTS, NODES
from tests.clusters import ClusterView, TestCluster
from tests.netproxy import proxy_to

Obj = dict[str, Any]


@pytest.fixture
async def view(kube: KubeClient) -> AsyncIterator[ClusterView]:
    v = ClusterView(kube, [EVENTS])
    await v.start()
    yield v
    await v.stop()


async def mark(kube: KubeClient, view: ClusterView) -> None:
    """Write an Event of our own and wait until the view has it: a watch delivers in order,
    so every write made before is in the view then."""
    node = await kube.get(NODES, "node-1")
    await EventRecorder(kube, component="test-marker").normal(node, "Marker", "the end")
    await view.until(
        lambda: any(e.get("reportingComponent") == "test-marker" for e in view.list(EVENTS))
    )


async def test_repeated_events_aggregate(
    backend: TestCluster, kube: KubeClient, view: ClusterView
) -> None:
    await backend.install_crds()  # the node's account waits for the policy, which needs them
    agent = backend.client(await backend.service_account(node="node-1"), max_workers=4)
    node = await kube.get(NODES, "node-1")
    recorder = EventRecorder(agent, host="node-1", instance="nodeagent-node-1")
    for _ in range(3):
        await recorder.normal(node, "Cordoned", "cordoned for maintenance m1")
    await recorder.warning(node, "DrainStalled", "pod shop/web-0 blocked by a PDB")
    await mark(kube, view)

    ours = {
        e["reason"]: e
        for e in view.list(EVENTS, "default")
        if e["involvedObject"].get("name") == "node-1"
        and e.get("reportingComponent") == "nodeagent"
    }
    assert set(ours) == {"Cordoned", "DrainStalled"}
    cordoned = ours["Cordoned"]
    assert cordoned["count"] == 3
    assert cordoned["type"] == "Normal"
    assert cordoned["involvedObject"]["kind"] == "Node"
    assert cordoned["involvedObject"]["uid"] == node["metadata"]["uid"]
    assert cordoned["source"] == {"component": "nodeagent", "host": "node-1"}
    assert cordoned["lastTimestamp"] >= cordoned["firstTimestamp"]
    assert ours["DrainStalled"]["count"] == 1
    assert ours["DrainStalled"]["type"] == "Warning"


async def test_failures_do_not_reach_the_caller(
    backend: TestCluster, kube: KubeClient, view: ClusterView, tmp_path: Path
) -> None:
    """The recorder reaches the server through a proxy; the first try meets a closed port."""
    node = await kube.get(NODES, "node-1")
    await backend.install_crds()
    account = await backend.service_account(node="node-1")
    async with proxy_to(account) as proxy:
        agent = backend.client(proxy.kubeconfig(account, tmp_path / "agent.kubeconfig"))
        recorder = EventRecorder(agent)
        await proxy.stop_listening()
        await recorder.normal(node, "Flaky", "first try fails")  # logged, not raised
        await proxy.start()
        await recorder.normal(node, "Flaky", "first try fails")
    await mark(kube, view)
    flaky = [e for e in view.list(EVENTS, "default") if e["reason"] == "Flaky"]
    assert len(flaky) == 1 and flaky[0]["count"] == 1
