"""Whole agents (nodeagent.app) against the simulated cluster: leader election hands the cluster
controllers over, and a drain in progress still completes."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from nodeagent.app import Agent
from nodeagent.config import from_mapping
from nodeagent.sim.cluster import SimCluster
from tests.simutil import install_crds, pods, running, until

WORKLOAD = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 4
  selector: {matchLabels: {app: web}}
  template:
    metadata:
      labels: {app: web}
      annotations: {sim.nodeagent.io/exit-seconds: "1"}
    spec:
      containers: [{name: web, image: nginx}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: default}
spec:
  maxUnavailable: 1
  selector: {matchLabels: {app: web}}
"""

MAINTENANCE = {
    "apiVersion": "nodeagent.io/v1alpha1",
    "kind": "NodeMaintenance",
    "metadata": {"name": "drain-node-3"},
    "spec": {
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["node-3"]}]}]},
        "stage": "Drain",
        "reason": "test",
    },
}


@dataclass
class Running:
    agent: Agent
    task: asyncio.Task[None]


@pytest.fixture
async def cluster(sim: SimCluster) -> AsyncIterator[SimCluster]:
    install_crds(sim)
    store = sim.store
    for doc in yaml.safe_load_all(WORKLOAD):
        rt = store.type_of(doc["apiVersion"], doc["kind"])
        store.create(rt, "default", doc)
    await until(sim, lambda: sum(running(p) for p in pods(sim, app="web")) == 4)
    yield sim


def agent_config(sim: SimCluster, node: str) -> dict[str, object]:
    return {
        "nodeName": node,
        "kube": {"kubeconfig": str(sim.kubeconfig)},
        "shutdown": {"enabled": False, "completeAfterReboot": False},
        "staticPods": {"enabled": False},
        "leader": {"leaseDuration": 2.0, "renewDeadline": 1.5, "retryPeriod": 0.25},
        "eviction": {"backoffBase": 0.2, "backoffCap": 1.0},
        "observability": {"listen": "127.0.0.1:0"},
    }


def start(sim: SimCluster, node: str) -> Running:
    agent = Agent(from_mapping(agent_config(sim, node)), env={})
    return Running(agent, asyncio.create_task(agent.run()))


async def stop(r: Running) -> None:
    r.task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await r.task


def lease_holder(sim: SimCluster) -> str:
    rt = sim.store.resource("coordination.k8s.io", "v1", "leases")
    lease = sim.store.find(rt, "kube-system", "nodeagent-controllers")
    return "" if lease is None else str(lease["spec"].get("holderIdentity") or "")


def drained(sim: SimCluster) -> bool:
    rt = sim.store.resource("nodeagent.io", "v1alpha1", "nodemaintenances")
    nm = sim.store.find(rt, None, "drain-node-3")
    conds = ((nm or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Drained" and c["status"] == "True" for c in conds)


async def test_one_leader_hands_over_and_the_drain_completes(
    cluster: SimCluster, tmp_path: Path
) -> None:
    a, b = start(cluster, "node-1"), start(cluster, "node-2")
    try:
        await until(cluster, lambda: lease_holder(cluster) != "", timeout=10)
        leader, follower = (a, b) if lease_holder(cluster).startswith("node-1") else (b, a)
        assert leader.agent.elector is not None and follower.agent.elector is not None
        await until(cluster, lambda: bool(leader.agent.elector and leader.agent.elector.is_leader))
        assert not follower.agent.elector.is_leader

        on_node_3 = [p for p in pods(cluster, app="web") if p["spec"]["nodeName"] == "node-3"]
        nm_type = cluster.store.resource("nodeagent.io", "v1alpha1", "nodemaintenances")
        cluster.store.create(nm_type, None, MAINTENANCE)
        # the drain has begun: node-3 is cordoned by the leader's NodeMaintenance controller
        nodes = cluster.store.resource("", "v1", "nodes")
        await until(cluster, lambda: bool(
            cluster.store.get(nodes, None, "node-3")["spec"].get("unschedulable")))

        loop = asyncio.get_running_loop()
        t0 = loop.time()
        await stop(leader)
        await until(cluster, lambda: lease_holder(cluster).startswith(
            follower.agent.node_name or "?"), timeout=10)
        assert loop.time() - t0 < 2.0 + 0.5  # within the Lease duration

        await until(cluster, lambda: drained(cluster), timeout=60)
        left = [p for p in pods(cluster, app="web") if p["spec"]["nodeName"] == "node-3"]
        assert on_node_3 == [] or not left
    finally:
        for r in (a, b):
            await stop(r)
