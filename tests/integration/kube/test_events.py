"""Event recording against the simulated API server."""

from __future__ import annotations

from nodeagent.kube.client import KubeClient
from nodeagent.kube.events import EventRecorder
from nodeagent.kube.resources import EVENTS, NODES
from nodeagent.sim.cluster import SimCluster


async def test_repeated_events_aggregate(sim: SimCluster, kube: KubeClient) -> None:
    node = await kube.get(NODES, "node-1")
    recorder = EventRecorder(kube, host="node-1", instance="nodeagent-node-1")
    for _ in range(3):
        await recorder.normal(node, "Cordoned", "cordoned for maintenance m1")
    await recorder.warning(node, "DrainStalled", "pod shop/web-0 blocked by a PDB")

    listed = await kube.list(EVENTS, "default")
    ours = {
        e["reason"]: e
        for e in listed["items"]
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


async def test_failures_do_not_reach_the_caller(sim: SimCluster, kube: KubeClient) -> None:
    node = await kube.get(NODES, "node-1")
    recorder = EventRecorder(kube)
    sim.faults.error_burst(500, 1, verb="create", resource="events")
    await recorder.normal(node, "Flaky", "first try fails")  # logged, not raised
    await recorder.normal(node, "Flaky", "first try fails")
    listed = await kube.list(EVENTS, "default")
    flaky = [e for e in listed["items"] if e["reason"] == "Flaky"]
    assert len(flaky) == 1 and flaky[0]["count"] == 1
